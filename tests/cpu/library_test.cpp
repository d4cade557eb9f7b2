// Every library kernel in f32 and bf16 on the cpu backend against the interpreter, ragged sizes.
#include "CpuTestUtil.h"
#include "kernels/Library.h"

namespace tessera::cputest {
namespace {

TEST(CpuLibrary, EveryKernelMatchesInterpreter) {
  ASSERT_FALSE(library().empty());
  for (const LibraryKernel& lk : library()) {
    for (ScalarKind dt : {ScalarKind::F32, ScalarKind::BF16}) {
      if (std::find(lk.dtypes.begin(), lk.dtypes.end(), dt) == lk.dtypes.end()) continue;
      SCOPED_TRACE(lk.name + " " + std::string(scalar_name(dt)));
      auto k = bind_constexprs(*lk.build(dt), {});
      // Small ragged sizes: not multiples of any block size.
      Sizes s;
      int i = 0;
      for (const auto& [name, v] : lk.default_sizes) s[name] = std::min<int64_t>(v, 67 + 30 * i++);
      EXPECT_GT(expect_same_as_interp(*k, s, 21), 0);
    }
  }
}

}  // namespace
}  // namespace tessera::cputest
