// stream-k-programs (GPU lowering, sm_90a; the knob stream_k = 1 or the stream-K compilation,
// CudaTarget::stream_k): a persistent GEMM whose programs end in a partial wave shares that
// wave's K loops out over every CTA.
//
// A persistent kernel (persist-programs) runs its programs in waves of gridDim.x; a last wave
// of a few programs leaves most SMs idle for a whole K loop. Stream-K (Osama et al., 2023) cuts
// the K loops of the last tiles into gridDim.x units each and gives every CTA an equal run of
// units: the tiles when they are fewer than the CTAs, else a last partial wave (of at least half
// the CTAs; a smaller one with the full wave before it: cuda::stream_k_tiles). A CTA's run covers
// parts of at most three tiles; the parts that end inside a tile leave their partial sums in a
// workspace, and the CTA that runs a tile's last part adds the earlier ones (in K order) and
// runs the epilogue.
//
// Here that is two marks the layout emitter prints:
//  - `stream_k = 1` on the grid's yield: the persistent CTAs take whole tiles t = blockIdx.x, +
//    gridDim.x, ... below the shared-out ones, then their units of those, last tile first (so
//    the parts that end inside a tile, which the tile's last part waits for, run first);
//  - `stream_k = 1` on the K loop: it runs the iterations [trip * b / G, trip * e / G) of its
//    trip count for the program's units [b, e) of G (the whole loop for a whole tile), and its
//    carried value is a partial sum: after the loop a part that ends inside its tile leaves it
//    in its CTA's slot of the workspace (and skips the rest of the program), and the tile's last
//    part adds the earlier CTAs' slots before the rest runs; with `split_skip_rows = 1` (as
//    split-k-loops writes it) the warps whose rows all lie past the dot's A view move nothing. The runtime launches
//    cuda::stream_k_ctas CTAs and passes the workspace (CudaKernelInfo::stream_k).
// On one CTA per program (the interpreter, a non-persistent launch) both marks mean nothing: a
// program's part is its whole loop.
//
// Which loop: the warp-specialized loop (specialize-warps' producer), if it is the loop a
// split-K compilation would split (splittable_k_loop: a wgmma dot's f32 accumulator that starts
// at 0, a ring, a positive constant step, no other ring, no writes before it, two grid axes).
// Declined with a note: not sm_90a's wgmma, the split-K compilation (its CTAs share programs by
// grid axis 2 instead), a kernel that is not persistent or has no producer warpgroup, ping-pong
// consumers (each takes programs 2j + c), program prefetch, or a loop that cannot be split.
// Off by default (the knob is the tuner's): on the H200 the planning emitter's stream-K won at
// short last waves (1024 x 4608 x 3584: 0.0539 against 0.0763 ms) and lost where whole tiles
// nearly fill the last wave (4096^3: 0.196 against 0.189; bench/RESULTS.md, session 22). Other
// values of the knob: a located error.
#include <string>

#include "ir/IR.h"
#include "passes/Passes.h"
#include "support/Diagnostic.h"

namespace tessera {

void stream_k_programs(Kernel& k, const GpuLoweringOptions& o, PassStats& stats) {
  // The marks are this pass's alone: written by hand, nothing would have checked the loop.
  auto drop_written = [&](Op& op) {
    if (!op.has_attr("stream_k")) return;
    std::erase_if(op.attrs, [&](const NamedAttr& a) {
      return a.name == "stream_k" || (a.name == "split_skip_rows" && !op.has_attr("split_k"));
    });
    stats.notes.push_back(std::string(op.name()) + " at " + op.loc.str() +
                          ": a written stream_k is ignored (stream-k-programs writes it where it applies)");
  };
  walk(*k.body, drop_written);
  Op* yield = k.grid ? k.grid->terminator() : nullptr;
  if (yield) drop_written(*yield);
  const ConstexprDecl* knob = k.find_constexpr("stream_k");
  if (knob && knob->value != 0 && knob->value != 1)
    throw TesseraError(knob->loc, "knob stream_k = " + std::to_string(knob->value) +
                                      ": 0 (whole tiles, the default) or 1 (a last partial wave shared out over the CTAs)");
  if (!o.stream_k && !(knob && knob->value == 1)) return;
  Op* loop = nullptr;
  for (const auto& op : k.body->ops)
    if (op->kind == OpKind::For && op->has_attr("warp_specialize") && op->attr_int("warp_specialize") == 1) loop = op.get();
  std::string why;
  if (!o.wgmma) why = "the kernel's dots are not on wgmma (sm_90a)";
  else if (o.split_k) why = "the split-K compilation shares each program's K loop over grid axis 2 instead";
  else if (!yield || !yield->has_attr("persistent") || yield->attr_int("persistent") != 1)
    why = "the kernel is not persistent";
  else if (!loop) why = "no top-level loop has a producer warpgroup";
  else if (loop->has_attr("consumers") && loop->attr_int("consumers") == 2)
    why = "the ping-pong consumers take programs 2j + c of their own CTA";
  else if (yield->has_attr("prefetch_buffers")) why = "the programs prefetch their tiles (prefetch-programs)";
  else if (Op* split = splittable_k_loop(k, &why); split && split != loop)
    why = "the loop at " + split->loc.str() + " that could be cut into parts is not the producer's";
  if (!why.empty()) {
    stats.notes.push_back((loop ? "for at " + loop->loc.str() : std::string("kernel")) + ": stream-K not taken: " + why);
    ++stats["stream-k-programs.declined"];
    return;
  }
  yield->set_attr("stream_k", int64_t{1});
  loop->set_attr("stream_k", int64_t{1});
  ++stats["stream-k-programs.shared-out"];
  // Rows of the partial sums past the dot's A view that nothing after the loop reads: the fixup
  // need not move them (a decode product's few rows in a 64-row tile), as split-k-loops says.
  if (split_rows_load(*loop)) {
    loop->set_attr("split_skip_rows", int64_t{1});
    ++stats["stream-k-programs.rows-skippable"];
  }
}

}  // namespace tessera
