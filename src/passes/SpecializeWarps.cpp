// specialize-warps (GPU lowering, sm_90a): a producer warpgroup for the kernel's ring loop.
//
// A pipelined loop (pipeline-loops' `pipeline >= 2`) at the kernel's top level, on a target with
// wgmma (and so TMA), gets `warp_specialize = 1`: the program runs one more warpgroup, one thread
// of which issues every stage's copies (waiting for the stage to be released, then arming its
// barrier), while the other warps only compute. The compute warps never stop to issue copies,
// nor wait on a copy's slot: the loop's tensor-core work and the copies run side by side, as
// in Triton's and CUTLASS's warp-specialized Hopper kernels. The producer runs ahead on what it
// can compute alone, so the loop qualifies only when its bounds and every ring load's indices
// come from pure scalar ops (program ids, dims, constants, arithmetic) of the kernel's top
// level; and, since the compute warps then synchronise among themselves only (a named barrier
// that the producer does not join), only in a kernel whose other ops the layout emitter prints
// with its own barriers (no sort, topk or histogram network, no Struct or Raw ops).
//
// The producer costs the program its chance of sharing the SM: the kernel is then launched for
// one program per SM (its registers split 232 / 40 between the compute warps and the producer).
// Where two programs' shared memory fits on the SM, they overlap each other's copies and
// arithmetic already, and the loop is left as it is (stat specialize-warps.two-programs-fit).
// Measured on the H200 (bench/RESULTS.md, session 19): the bf16 FlashAttention at BM 128, BN 64,
// D 128 (96 KiB of shared tiles, 128 registers: two programs per SM) took 3.11 ms with a
// producer against 2.65 ms without; matmul + bias + GELU with a 4-stage ring of 128 x 64 and
// 64 x 128 f16 tiles (128 KiB: one program per SM either way) 0.266 ms against 0.308.
// Not so a loop that computes nothing but wgmma dots of its ring's tiles (a GEMM's K loop,
// computes_only_dots): a second program there has no arithmetic to overlap but its copies,
// which the producer keeps in flight as well, and a GEMM with few programs (a decode product:
// N / 64 of them, fewer than the SMs) has no second program per SM at all. Measured on the H100 (session 49): the swapped
// 1 x 4608 x 3584 decode product (72 programs of 80 KiB) took 0.0223 ms without a producer
// against 0.0189 for the planning emitter's with one.
//
// A written `warp_specialize` stays (0 turns it off, 1 asks for a producer even where two
// programs fit); a written 1 that does not qualify is set to 0 with a note. One loop per
// kernel: the producer issues one ring.
#include <algorithm>
#include <set>

#include "ir/IR.h"
#include "passes/Passes.h"

namespace tessera {

std::vector<const Op*> producer_slice(const Kernel& k, const Op& loop, std::string* why) {
  auto no = [&](const std::string& w) {
    if (why) *why = w;
    return std::vector<const Op*>{};
  };
  if (loop.parent != k.body.get()) return no("the loop is not at the kernel's top level");
  if (!loop.has_attr("pipeline") || loop.attr_int("pipeline") < 2) return no("the loop is not pipelined");
  std::vector<const Op*> chain;
  const std::vector<const Op*> loads = ring_loads(loop, &chain);
  if (loads.empty()) return no("the loop has no ring loads");
  // The values the producer needs from outside the loop: its bounds and the loads' indices.
  std::vector<const Value*> need = {loop.operands[0], loop.operands[1], loop.operands[2]};
  for (const Op* l : loads) need.insert(need.end(), l->operands.begin() + 1, l->operands.end());
  for (const Op* c : chain) need.insert(need.end(), c->operands.begin(), c->operands.end());
  std::set<const Value*> seen;
  std::set<const Op*> slice;
  while (!need.empty()) {
    const Value* v = need.back();
    need.pop_back();
    if (!seen.insert(v).second || !v->def) continue;  // a kernel parameter
    const Op* d = v->def;
    if (d->parent == &loop.region(0)) continue;  // the induction variable's chain
    if (d->parent != k.body.get() || !pure_scalar_op(*d))
      return no("the loop's bounds or load indices need " + std::string(d->info().name) + " at " + d->loc.str() +
                ", which the producer cannot compute alone");
    slice.insert(d);
    need.insert(need.end(), d->operands.begin(), d->operands.end());
  }
  // The producer's copies are ordered after nothing the compute warps do: a view they write
  // (anywhere in the kernel) could be read before the write lands.
  std::string written;
  walk(*k.body, [&](Op& op) {
    if (!written.empty() || op.info().cls != OpClass::Memory || op.kind == OpKind::LoadTile || op.kind == OpKind::Gather)
      return;
    for (const Op* l : loads)
      if (op.operand(0) == l->operand(0))
        written = "the kernel writes %" + l->operand(0)->name + " (" + std::string(op.info().name) + " at " +
                  op.loc.str() + "), which the ring reads";
  });
  if (!written.empty()) return no(written);
  std::string other;
  walk(*k.body, [&](Op& op) {
    const OpClass c = op.info().cls;
    if (other.empty() && (c == OpClass::Sort || c == OpClass::Scan || c == OpClass::Struct || c == OpClass::Raw))
      other = std::string(op.info().name) + " at " + op.loc.str();
  });
  if (!other.empty()) return no("the kernel has " + other + ", whose code synchronises the whole program");
  std::vector<const Op*> out;  // in program order
  for (const auto& op : k.body->ops)
    if (slice.count(op.get())) out.push_back(op.get());
  if (why) why->clear();
  return out;
}

namespace {

// The shared memory of the program's tiles: every load into a shared tile, times the stages of
// the ring it fills.
int64_t shared_tile_bytes(Kernel& k) {
  int64_t bytes = 0;
  walk(*k.body, [&](Op& loop) {
    if (loop.kind != OpKind::For) return;
    const int64_t S = loop.has_attr("pipeline") ? std::max<int64_t>(1, loop.attr_int("pipeline")) : 1;
    for (const Op* l : ring_loads(loop, nullptr)) bytes += (S - 1) * stage_bytes(*l);
  });
  walk(*k.body, [&](Op& op) {
    if (op.kind == OpKind::LoadTile && op.result()->type.layout.kind == Layout::Kind::Shared) bytes += stage_bytes(op);
  });
  return bytes;
}

// Whether `loop`'s body is its ring loads, views of them in shared memory (a swapped product's
// permutes), wgmma dots and index arithmetic, nothing else (a GEMM's K loop; not an
// attention's, whose softmax is elementwise work).
bool computes_only_dots(Op& loop) {
  if (!has_mma_dot(loop.region(0), 3)) return false;
  const std::vector<const Op*> ring = ring_loads(loop, nullptr);
  for (const auto& op : loop.region(0).ops) {
    const bool shared_view = op->kind == OpKind::Permute && op->result()->type.layout.kind == Layout::Kind::Shared;
    const bool ring_load = std::find(ring.begin(), ring.end(), op.get()) != ring.end();
    const bool wgmma_dot = op->kind == OpKind::Dot && op->result()->type.layout.kind == Layout::Kind::Mma &&
                           op->result()->type.layout.version == 3;
    if (!ring_load && !wgmma_dot && op->kind != OpKind::Yield && !shared_view && !pure_scalar_op(*op)) return false;
  }
  return true;
}

// The shared memory of one streaming multiprocessor, of which a program may take
// shared_memory_per_program and each program keeps 1 KiB for the system.
int64_t shared_memory_per_sm(int sm) { return sm >= 90 ? 228 * 1024 : sm == 80 || sm == 87 ? 164 * 1024 : 100 * 1024; }

}  // namespace

void specialize_warps(Kernel& k, const GpuLoweringOptions& o, PassStats& stats) {
  // Two programs per SM: the exchanges' scratch (8 KiB) and a swizzled base's alignment as in
  // pipeline-loops, and the system's 1 KiB, each.
  const bool two_fit = 2 * (shared_tile_bytes(k) + 8192 + 1024 + 1024) <= shared_memory_per_sm(o.sm);
  std::vector<Op*> loops;
  walk(*k.body, [&](Op& op) {
    if (op.kind == OpKind::For && op.has_attr("pipeline") && op.attr_int("pipeline") >= 2) loops.push_back(&op);
  });
  const Op* chosen = nullptr;
  for (Op* loop : loops) {
    const bool written = loop->has_attr("warp_specialize");
    if (written && loop->attr_int("warp_specialize") == 0) continue;
    std::string why = "the target has no TMA and wgmma (sm_90a)";
    if (o.wgmma) producer_slice(k, *loop, &why);
    if (why.empty() && chosen) why = "the kernel's producer warpgroup already serves the loop at " + chosen->loc.str();
    if (why.empty() && !written && two_fit && !computes_only_dots(*loop)) {
      ++stats["specialize-warps.two-programs-fit"];
      continue;
    }
    if (why.empty()) {
      chosen = loop;
      if (!written) {
        loop->set_attr("warp_specialize", int64_t{1});
        ++stats["specialize-warps.specialized"];
      }
      continue;
    }
    if (written) {
      loop->set_attr("warp_specialize", int64_t{0});
      stats.notes.push_back("for at " + loop->loc.str() + ": warp_specialize = 1 not taken: " + why);
    }
  }
}

}  // namespace tessera
