// Every kernel of the op corpus on the GPU against the interpreter, at ragged sizes and at
// tile multiples. Kernels the emitter rejects as unsupported are counted and printed.
#include "GpuTestUtil.h"

namespace tessera::gputest {
namespace {

class CorpusGpu : public ::testing::TestWithParam<std::string> {};

TEST_P(CorpusGpu, MatchesInterpreter) {
  REQUIRE_GPU();
  auto m = parse_file(GetParam());
  ASSERT_FALSE(m->kernels.empty());
  int tested = 0, unsupported = 0;
  for (auto& k : m->kernels) {
    bool has_ptr = false;
    for (const Value* p : k->params) has_ptr |= p->type.is_ptr();
    if (has_ptr) continue;  // the interpreter cannot pass pointers
    auto b = bind_constexprs(*k, {});
    for (const Sizes& s : {sizes_for(*b, 150, 29), sizes_for(*b, 256, 0)}) {
      // Some corpus kernels expect structured inputs (ids in range); random ones make the
      // interpreter reject them, and there is nothing to compare.
      try {
        std::vector<Tensor> ts = make_random_tensors(*b, s, 7);
        auto a = args_for(*b, ts);
        run_interp(*b, a);
      } catch (const TesseraError&) {
        continue;
      }
      try {
        expect_gpu_matches_interp(*b, s, 7);
      } catch (const TesseraError& e) {
        if (!is_unsupported(e)) throw;
        std::printf("[cuda gpu] unsupported: @%s: %s\n", k->name.c_str(), e.what());
        ++unsupported;
        break;
      }
      ++tested;
    }
  }
  std::printf("[cuda gpu] %s: %d runs compared, %d kernels unsupported\n", GetParam().c_str(), tested, unsupported);
  if (tested == 0) GTEST_SKIP() << "no kernel in this file runs (unsupported or needs structured inputs)";
}

INSTANTIATE_TEST_SUITE_P(Corpus, CorpusGpu, ::testing::ValuesIn(corpus_files()),
                         [](const auto& info) { return file_stem(info.param); });

}  // namespace
}  // namespace tessera::gputest
