// c = (scale_a * scale_b) * (a @ b) for f8e4m3 a and b with per-tensor scales (the usual fp8
// GEMM: each operand was quantized as x / scale). Tiled like matmul: one program per
// BLOCK_M x BLOCK_N tile of c, a pipelined loop over K in BLOCK_K steps that only loads the two
// operand tiles and feeds them to one dot into an f32 accumulator (the shape the cuda backend's
// pipelined-dot recognizer looks for), then the scales and the cast in the epilogue. Padding
// reads 0, which adds nothing. The dtype is c's; a and b are always f8e4m3.
#include "kernels/Kernels.h"
#include "lang/Lang.h"

namespace tessera::kernels {

namespace {

std::unique_ptr<Kernel> build(ScalarKind dt) {
  using namespace lang;
  KernelBuilder k("matmul_fp8");
  auto a = k.view("a", f8e4m3, {"M", "K"}), b = k.view("b", f8e4m3, {"K", "N"});
  auto scale_a = k.scalar("scale_a", f32), scale_b = k.scalar("scale_b", f32);
  auto c = k.view("c", dt, {"M", "N"});
  // 128x128 output tiles with BK = 64: one 64-byte row of an f8 tile per K step, two wgmma
  // k-steps (k = 32 for f8) per stage on Hopper.
  auto BM = k.constexpr_("BLOCK_M", {16, 32, 64, 128}, 128);
  auto BN = k.constexpr_("BLOCK_N", {16, 32, 64, 128}, 128);
  auto BK = k.constexpr_("BLOCK_K", {16, 32, 64, 128}, 64);
  k.grid({cdiv(a.dim(0), BM), cdiv(b.dim(1), BN)});
  auto pm = program_id(0), pn = program_id(1);

  Var acc = zeros({BM, BN}, f32);
  for_range(0, cdiv(a.dim(1), BK), 1, [&](Val kk) {
    auto at = a.tile({BM, BK}).load({pm, kk});
    auto bt = b.tile({BK, BN}).load({kk, pn});
    acc = dot(at, bt, acc);
  }, pipeline(4));
  c.tile({BM, BN}).store({pm, pn}, (acc * (scale_a * scale_b)).to(dt));
  return k.finish();
}

// The scales are the f32 values the kernel receives; the rest is exact in double (products of
// e4m3 values are exact, and the sums of short K loops nearly so), rounded once to c's dtype.
void reference(std::vector<KernelArg>& args, const Sizes& sizes) {
  auto f32_of = [](const KernelArg& s) {
    return std::visit([](auto v) { return static_cast<double>(static_cast<float>(v)); }, s.scalar);
  };
  double scale = f32_of(args[2]) * f32_of(args[3]);
  matmul_reference(*args[0].tensor, *args[1].tensor, *args[4].tensor, sizes, scale);
}

}  // namespace

LibraryKernel matmul_fp8() {
  LibraryKernel k;
  k.name = "matmul_fp8";
  k.summary = "c = (scale_a * scale_b) * (a @ b) for f8e4m3 a [M, K], b [K, N], f32 accumulation; "
              "the dtype is c's";
  k.dtypes = {ScalarKind::BF16, ScalarKind::F16, ScalarKind::F32};
  k.default_sizes = {{"M", 512}, {"N", 512}, {"K", 512}};
  // Distinct and not powers of two: a kernel that used one scale twice or dropped one fails
  // its check (with make_args' 0.5 for both, scale_a * scale_a would pass).
  k.scalars = {{"scale_a", 0.37}, {"scale_b", 1.9}};
  k.build = build;
  k.reference = reference;
  k.bytes = [](const Sizes& s, ScalarKind dt) {
    return 1.0 * s.at("M") * s.at("K") + 1.0 * s.at("K") * s.at("N") +
           1.0 * s.at("M") * s.at("N") * scalar_bytes(dt);
  };
  k.flops = [](const Sizes& s, ScalarKind) { return 2.0 * s.at("M") * s.at("N") * s.at("K"); };
  return k;
}

}  // namespace tessera::kernels
