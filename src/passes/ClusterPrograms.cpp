// cluster-programs (GPU lowering, sm_90+; the knob cluster_size = C of 2, 4 or 8): each program
// runs on a thread-block cluster of C CTAs, each holding 1/C of the program's tiles.
//
// A memory-bound row kernel whose row fills a CTA (softmax of a 32768-element row: 32 warps,
// 1024 threads) can instead spread the row over the CTAs of a cluster, which the SMs schedule
// together and whose shared memories see each other (distributed shared memory). Here that is
// one mark, `num_ctas = C` on the grid's yield, which the passes after it read:
//  - assign-launch-shape gives the program C times the warps one CTA of the rule gets
//    (default_num_warps over 1/C of the largest tile): `num_warps` counts the program's warps,
//    warps [W c / C, W (c + 1) / C) running on the cluster's CTA of rank c;
//  - assign-layouts spreads tiles over all of them, as over the warps of one CTA, so that the
//    warp bits above a CTA's are the CTA rank's;
//  - the layout emitter launches clusters of C CTAs (`__cluster_dims__`), the program id being
//    the cluster's, and ends a reduction whose axis crosses CTAs with an exchange of the CTAs'
//    partial values through distributed shared memory.
// Declined with a note: a target below sm_90 (no clusters), a kernel without a grid, or one
// with an op whose data would cross CTAs other than by such a reduction (dots, scans, sorts,
// top-k, histograms, gathers, scatters, atomics, permutes, inserts and extracts of tiles, arg
// reductions, reductions with a combiner, shared buffers). Reductions over an axis held by
// several CTAs must end in one element (a whole row's sum or max): the layout emitter prints the
// kernel again without clusters, with a note, where one does not. Also declined: a grid whose
// yield already says how programs map to CTAs (persistent, group_rows, program_pairs, stream_k,
// prefetch_buffers) or a num_warps that C does not divide. A `num_ctas` written by hand is
// dropped with a note. Off by default (opt-in): on the H200 softmax, layernorm and rmsnorm at
// 4096 x 32768 ran 6%, 23% and 8% slower on clusters of 8 CTAs of 128 threads than on one CTA
// of 1024 threads per row (every reduction waits for the whole cluster; bench/RESULTS.md,
// session 5); on the H100 in session 55 the layout emitter's clusters ran 2-39% slower than
// its one CTA per row.
#include <string>

#include "ir/IR.h"
#include "passes/Passes.h"
#include "support/Diagnostic.h"

namespace tessera {

std::string unclusterable_op(const Op& op) {
  switch (op.kind) {
    case OpKind::Dot: return "a dot";
    case OpKind::Permute: return "a permute";
    case OpKind::InsertTile: return "an insert of a tile";
    case OpKind::ExtractTile: return "an extract of a tile";
    case OpKind::ReduceWith: return "a reduction with a combiner";
    case OpKind::Reduce: {
      const std::string kind = op.attr_string("kind");
      if (kind != "sum" && kind != "prod" && kind != "max" && kind != "min") return "a reduction of kind " + kind;
      if (op.results.size() != 1) return "a reduction with several results";
      return "";
    }
    default: break;
  }
  switch (op.info().cls) {
    case OpClass::Sort: return "a " + std::string(op.name());
    case OpClass::Memory:
      if (op.kind == OpKind::LoadTile || op.kind == OpKind::StoreTile) return "";
      return "a " + std::string(op.name());
    case OpClass::Struct: return "a " + std::string(op.name()) + " (Struct)";
    case OpClass::Raw: return "inline native code";
    case OpClass::Scan: return "a scan";
    default: return "";
  }
}

int launch_ctas(const Kernel& k) {
  if (k.grid)
    if (const Op* y = k.grid->terminator(); y && y->has_attr("num_ctas")) return static_cast<int>(y->attr_int("num_ctas"));
  return 1;
}

void cluster_programs(Kernel& k, const GpuLoweringOptions& o, PassStats& stats) {
  Op* yield = k.grid ? k.grid->terminator() : nullptr;
  // The mark is this pass's alone: written by hand, nothing would have checked the kernel's ops
  // (and a lowering without clusters must be one).
  if (yield && yield->has_attr("num_ctas")) {
    std::erase_if(yield->attrs, [](const NamedAttr& a) { return a.name == "num_ctas"; });
    stats.notes.push_back("yield at " + yield->loc.str() +
                          ": a written num_ctas is ignored (cluster-programs writes it for the knob cluster_size)");
  }
  const ConstexprDecl* knob = k.find_constexpr("cluster_size");
  if (!knob || knob->value == 1) return;
  const int64_t C = knob->value;
  if (C != 2 && C != 4 && C != 8)
    throw TesseraError(knob->loc, "knob cluster_size = " + std::to_string(C) + ": it must be 1, 2, 4 or 8");
  std::string why;
  if (o.sm < 90) why = "thread-block clusters need sm_90 or newer";
  else if (!o.clusters) why = "the kernel is lowered again without clusters";
  else if (!yield) why = "the kernel has no grid";
  else if (yield->has_attr("num_warps") && yield->attr_int("num_warps") % C != 0)
    why = "the grid's yield says num_warps = " + std::to_string(yield->attr_int("num_warps")) + ", not a multiple of " +
          std::to_string(C);
  else
    // (How programs map to CTAs otherwise: the program id would not be the cluster's.)
    for (const char* a : kProgramMappingAttrs)
      if (why.empty() && yield->has_attr(a)) why = std::string("the grid's yield says ") + a;
  if (why.empty())
    walk(*k.body, [&](Op& op) {
      if (!why.empty()) return;
      if (std::string w = unclusterable_op(op); !w.empty()) why = w + " at " + op.loc.str() + " would move data between CTAs";
    });
  if (!why.empty()) {
    stats.notes.push_back("cluster-programs: cluster_size = " + std::to_string(C) + " not taken: " + why);
    ++stats["cluster-programs.declined"];
    return;
  }
  yield->set_attr("num_ctas", C);
  ++stats["cluster-programs.clustered"];
}

}  // namespace tessera
