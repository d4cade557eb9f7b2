// Generated code run on a GPU against the interpreter (skips without a device): the library at
// tile-multiple and ragged sizes, and the op corpus. The GPU suite proper is tests/gpu; this
// one exists so that the emitter's author can check a change in one run.
#include <gtest/gtest.h>

#include "../gpu/GpuTestUtil.h"

namespace tessera::gputest {
namespace {

TEST(CudaCodegenGpu, LibraryMatchesInterpreter) {
  REQUIRE_GPU();
  for (const auto& lk : library())
    for (ScalarKind dt : {ScalarKind::F32, ScalarKind::BF16, ScalarKind::F16}) {
      if (std::find(lk.dtypes.begin(), lk.dtypes.end(), dt) == lk.dtypes.end()) continue;
      auto k = bind_constexprs(*lk.build(dt), {});
      for (auto [base, step] : {std::pair<int64_t, int64_t>{256, 0}, {100, 37}}) {
        SCOPED_TRACE(lk.name + "/" + std::string(scalar_name(dt)) + " base " + std::to_string(base));
        try {
          expect_gpu_matches_interp(*k, sizes_for(*k, base, step), 7);
        } catch (const TesseraError& e) {
          ADD_FAILURE() << e.what();
        }
      }
    }
}

TEST(CudaCodegenGpu, CorpusMatchesInterpreter) {
  REQUIRE_GPU();
  for (const std::string& f : corpus_files()) {
    auto m = parse_file(f);
    for (auto& uk : m->kernels) {
      auto k = bind_constexprs(*uk, {});
      bool raw = false;
      walk(*k, [&](Op& op) { raw |= op.kind == OpKind::Raw; });
      if (raw) continue;
      SCOPED_TRACE(f + " @" + k->name);
      try {
        expect_gpu_matches_interp(*k, sizes_for(*k, 256, 64), 11);
      } catch (const TesseraError& e) {
        std::string m = e.what();
        if (m.find("interp") == std::string::npos && m.find("out of bounds") == std::string::npos) ADD_FAILURE() << m;
      }
    }
  }
}

}  // namespace
}  // namespace tessera::gputest
