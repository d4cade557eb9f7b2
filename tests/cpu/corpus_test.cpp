// Differential tests: every kernel of the text corpus (tests/text/data) on the cpu backend
// against the interpreter, with ragged sizes.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "CpuTestUtil.h"

namespace tessera::cputest {
namespace {

std::vector<std::string> corpus_files() {
  std::vector<std::string> out;
  for (auto& e : std::filesystem::directory_iterator(std::string(TESSERA_SOURCE_DIR) + "/tests/text/data"))
    if (e.path().extension() == ".tile" && e.path().stem() != "raw") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

class Corpus : public ::testing::TestWithParam<std::string> {};

TEST_P(Corpus, MatchesInterpreter) {
  std::ifstream in(GetParam());
  std::stringstream ss;
  ss << in.rdbuf();
  auto m = parse_module(ss.str(), GetParam());
  ASSERT_FALSE(m->kernels.empty());
  int tested = 0;
  for (auto& k : m->kernels) {
    bool has_ptr = false, has_view = false;
    for (const Value* p : k->params) {
      has_ptr |= p->type.is_ptr();
      has_view |= p->type.is_view();
    }
    if (has_ptr) continue;  // the interpreter cannot pass pointers
    auto b = bind_constexprs(*k, {});
    Sizes s = sizes_for(*b, {});
    // Some corpus kernels expect structured inputs (ids in range); random ones make the
    // interpreter reject them, and there is nothing to compare.
    try {
      std::vector<Tensor> ts = make_random_tensors(*b, s, 7);
      auto a = args_for(*b, ts);
      run_interp(*b, a);
    } catch (const TesseraError&) {
      continue;
    }
    int64_t n = expect_same_as_interp(*b, s, 7);
    if (has_view) {
      EXPECT_GT(n, 0) << k->name;
    }
    ++tested;
  }
  if (tested == 0) GTEST_SKIP() << "no kernel in this file runs on the interpreter with random inputs";
}

INSTANTIATE_TEST_SUITE_P(TextData, Corpus, ::testing::ValuesIn(corpus_files()),
                         [](const auto& info) { return std::filesystem::path(info.param).stem().string(); });

}  // namespace
}  // namespace tessera::cputest
