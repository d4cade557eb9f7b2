// c = a @ b written with the Struct layer: per K step a producer role pushes the A and B tiles
// into two STAGES-slot pipes and a consumer role pops them into an f32 accumulator. Its
// meaning is matmul's (the roles run in program order: push, push, pop, pop), and it has the
// same reference; STAGES says how far a producer may run ahead of the consumers where a
// backend runs the roles' warps concurrently (docs/layers.md).
#include "kernels/Kernels.h"
#include "lang/Lang.h"

namespace tessera::kernels {

namespace {

std::unique_ptr<Kernel> build(ScalarKind dt) {
  using namespace lang;
  KernelBuilder k("matmul_struct");
  auto a = k.view("a", dt, {"M", "K"}), b = k.view("b", dt, {"K", "N"});
  auto c = k.view("c", dt, {"M", "N"});
  auto BM = k.constexpr_("BLOCK_M", {16, 32, 64, 128}, 64);
  auto BN = k.constexpr_("BLOCK_N", {16, 32, 64, 128}, 64);
  auto BK = k.constexpr_("BLOCK_K", {16, 32, 64}, 32);
  auto STAGES = k.constexpr_("STAGES", {1, 2, 3, 4}, 2);
  k.grid({cdiv(a.dim(0), BM), cdiv(b.dim(1), BN)});
  auto pm = program_id(0), pn = program_id(1);

  Pipe pa = pipe(dt, {BM, BK}, STAGES).named("a_tiles"), pb = pipe(dt, {BK, BN}, STAGES).named("b_tiles");
  Var acc = zeros({BM, BN}, f32);
  for_range(0, cdiv(a.dim(1), BK), 1, [&](Val kk) {
    warp_role(producer, [&] {
      pa.push(a.tile({BM, BK}), {pm, kk});  // padding reads 0, which adds nothing
      pb.push(b.tile({BK, BN}), {kk, pn});
    });
    warp_role(consumer, [&] {
      Val at = pa.pop(), bt = pb.pop();  // in this order (function arguments have none)
      acc = dot(at, bt, acc);
    });
  });
  c.tile({BM, BN}).store({pm, pn}, acc.to(dt));
  return k.finish();
}

}  // namespace

LibraryKernel matmul_struct() {
  LibraryKernel k = matmul();  // the same reference, sizes, dtypes and figures
  k.name = "matmul_struct";
  k.summary = "c = a @ b through producer/consumer pipes (Struct layer), f32 accumulation";
  k.build = build;
  // matmul's per-target and per-size tiles are for its own pipelined loop (and BLOCK_N = 256 is
  // no candidate here: `tessera run matmul_struct --size M=1000,N=777,K=100` on the H200 took
  // matmul's 64 x 256 and stopped): this kernel keeps its defaults everywhere.
  k.target_configs = nullptr;
  k.size_configs = nullptr;
  return k;
}

}  // namespace tessera::kernels
