// Helpers shared by the text-format tests.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace tessera::testing {

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Files in `dir` whose name starts with `prefix` and ends with ".tile", sorted.
inline std::vector<std::filesystem::path> tile_files(const std::filesystem::path& dir,
                                                     const std::string& prefix = "") {
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::string n = e.path().filename().string();
    if (e.path().extension() == ".tile" && n.rfind(prefix, 0) == 0) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

inline std::filesystem::path source_dir() { return TESSERA_SOURCE_DIR; }

}  // namespace tessera::testing
