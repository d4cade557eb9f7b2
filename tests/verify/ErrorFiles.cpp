// Runs every tests/errors/*.tile file: the first line says which error the file must produce,
// `// expect: LINE:COL: error: MESSAGE`. Parse errors (parse_*.tile) and verifier errors
// (verify_*.tile) are checked the same way: the first error reported must match exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ir/Verifier.h"
#include "text/Text.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> error_files() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(fs::path(TESSERA_SOURCE_DIR) / "tests" / "errors"))
    if (e.path().extension() == ".tile") out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// The first error of the file: a parse error, else the first verifier error of its kernels.
std::string first_error(const std::string& text, const std::string& path) {
  try {
    auto m = parse_module(text, path);
    for (const auto& k : m->kernels) {
      auto errors = verify(*k);
      if (!errors.empty()) return errors.front().what();
    }
  } catch (const TesseraError& e) {
    return e.what();
  }
  return "(no error)";
}

class ErrorFile : public testing::TestWithParam<std::string> {};

TEST_P(ErrorFile, ReportsExpectedFirstError) {
  std::string rel = "tests/errors/" + GetParam();
  std::ifstream in(fs::path(TESSERA_SOURCE_DIR) / rel);
  ASSERT_TRUE(in) << rel;
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  const std::string tag = "// expect: ";
  ASSERT_EQ(text.rfind(tag, 0), 0u) << rel << " must start with '" << tag << "'";
  std::string expect = text.substr(tag.size(), text.find('\n') - tag.size());
  EXPECT_EQ(first_error(text, rel), rel + ":" + expect);
}

INSTANTIATE_TEST_SUITE_P(All, ErrorFile, testing::ValuesIn(error_files()),
                         [](const testing::TestParamInfo<std::string>& info) {
                           std::string n = info.param.substr(0, info.param.size() - 5);
                           std::replace_if(n.begin(), n.end(), [](char c) { return !isalnum(c); }, '_');
                           return n;
                         });

TEST(ErrorFiles, ThereAreManyVerifierFiles) {
  auto files = error_files();
  EXPECT_GE(std::count_if(files.begin(), files.end(), [](const std::string& f) { return f.rfind("verify_", 0) == 0; }), 30);
}

}  // namespace
}  // namespace tessera
