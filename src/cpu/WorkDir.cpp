// File helpers for building shared objects in a private work directory. The disk cache itself
// is the shared one in src/runtime/DiskCache.{h,cpp}.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cpu/CpuInternal.h"

namespace tessera::cpu {

namespace fs = std::filesystem;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  if (!in || ss.str().empty())
    throw TesseraError("cpu backend: the compiler produced no shared object at '" + path + "'");
  return ss.str();
}


std::string make_work_dir(const std::string& parent) {
  std::string tmpl = parent + "/.tmp-build-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!::mkdtemp(buf.data()))
    throw TesseraError("cpu backend: cannot create a build directory in '" + parent + "': " + std::strerror(errno));
  return buf.data();
}

void remove_tree(const std::string& dir) {
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace tessera::cpu
