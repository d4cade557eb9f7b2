// Conversions the GPU must get bit-exact, against the interpreter: wide sources (f64, 64- and
// 32-bit ints) into narrow floats are rounded once (through float rounded to odd), and
// atomic_cas compares stored bit patterns (-0 does not match +0). NaN lanes are left out: the
// NaN a conversion produces has a platform-specific payload.
#include <cstring>
#include <fstream>
#include <sstream>

#include "GpuTestUtil.h"

namespace tessera::gputest {
namespace {

std::unique_ptr<Kernel> casts_kernel() {
  std::ifstream in(std::string(TESSERA_SOURCE_DIR) + "/tests/cli/data/casts_wide_to_narrow.tile");
  std::stringstream ss;
  ss << in.rdbuf();
  auto m = parse_module(ss.str(), "casts_wide_to_narrow.tile");
  return bind_constexprs(*m->kernels.at(0), {});
}

TEST(ConversionsGpu, WideToNarrowRoundOnceAndCasComparesBits) {
  REQUIRE_GPU();
  auto k = casts_kernel();
  const int64_t n = 4096;
  std::vector<Tensor> want = make_random_tensors(*k, {{"N", n}}, 3);
  // Inputs whose double rounding would differ from one rounding: just above a bf16/f16 tie,
  // 64-bit integers whose low bits break a tie; for the compare-and-swap, old values -0, +0,
  // 2.5, 1.5 against cmp +0, +0, (other), 1.5: only lanes 1 and 3 of every 4 match.
  for (int64_t i = 0; i < n; ++i) {
    double tie = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30) * double(i % 7 + 1);
    want[0].set(i, (i % 2 ? -tie : tie) * std::ldexp(1.0, int(i % 40) - 20));
    want[1].set_int(i, (int64_t(1) << 62) + (int64_t(1) << 38) + (i % 5) - 2 + i * 977);
    want[2].set_int(i, (int64_t(1) << 40) * (i + 1) + 1);
    want[3].set_int(i, (1 << 24) + 2 * i + 1);
    double olds[4] = {-0.0, 0.0, 2.5, 1.5};
    want[8].set(i, olds[i % 4]);
    if (i % 4 == 0 || i % 4 == 1) want[0].set(i, 0.0);  // cmp = cast of a[i]
    if (i % 4 == 3) want[0].set(i, 1.5);
  }
  std::vector<Tensor> got = want;
  auto wa = args_for(*k, want), ga = args_for(*k, got);
  run_interp(*k, wa);
  compile_cuda(*k, test_options())->run_host(ga);
  for (size_t t = 4; t < want.size(); ++t) {
    SCOPED_TRACE(t);
    ASSERT_EQ(want[t].data.size(), got[t].data.size());
    int shown = 0;
    for (int64_t i = 0; i < n && shown < 5; ++i) {
      size_t b = static_cast<size_t>(scalar_bytes(want[t].dtype));
      if (std::memcmp(&want[t].data[i * b], &got[t].data[i * b], b) != 0) {
        ++shown;
        ADD_FAILURE() << "tensor " << t << " element " << i << ": gpu " << got[t].get(i) << " interp " << want[t].get(i);
      }
    }
  }
}

}  // namespace
}  // namespace tessera::gputest
