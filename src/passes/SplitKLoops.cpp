// split-k-loops (GPU lowering, sm_90a, the split-K compilation only): the CTAs of grid axis 2
// share each program's K loop.
//
// The runtime launches a kernel's split-K compilation (CudaTarget::split_k) when its programs are
// too few to fill the GPU and its K loop is long (cuda::split_k_factor): gridDim.z CTAs per
// program, each running a slice of the loop's iterations, whose partial sums are added before
// the epilogue. Here that is IR: the loop's bounds become its slice,
//   trip  = cdiv(max(ub - lb, 0), step)      chunk = cdiv(trip, num_programs(2))
//   lo    = lb + program_id(2) * chunk * step hi    = min(lo + chunk * step, ub)
// and `split_k = 1` on the loop says that its carried value is a partial sum, which the
// emitter adds over the program's CTAs after the loop (through the SplitWorkspace: each CTA
// leaves its part in its slot, the last to arrive adds the slots in split order and runs the
// rest of the program; the others end). The grid's yield gets `persistent = 0`: one CTA per
// (program, slice), as the planning emitter's split compilation runs. On one CTA per program
// (num_programs(2) = 1, what the interpreter and an unsplit launch see) the slice is the whole
// loop and the IR computes what it did before.
//
// Before pipeline-loops, which then gives the loop the ring as deep as shared memory allows,
// up to 8 stages (`pipeline = 8`, written here over the loop's annotation, with a note; the
// planning emitter's split compilation keeps 8 too): each of a split launch's few CTAs streams
// its slice of K with nothing else on its SM.
//
// Which loop (splittable_k_loop, which the layout emitter also asks to set
// CudaKernelInfo::split_k_capable on the unsplit compilation): the first top-level loop whose
// body holds a dot, if it loads a ring (ring_loads), carries one value, a wgmma dot's f32 accumulator
// that only the dot reads and starts at a splat of 0 (each part would add its start again), and
// steps by a positive constant; in a kernel with no other top-level ring loop (its producer
// warpgroup would wait for CTAs that end after the split loop), whose grid has at most two axes (axis 2 is the
// split's) that reads neither program_id nor num_programs of axis 2, and that writes nothing
// before the loop (every CTA of the program runs what precedes it).
#include <string>
#include <unordered_set>

#include "ir/IR.h"
#include "passes/Passes.h"

namespace tessera {

namespace {

constexpr int64_t kSplitKStages = 8;

bool reads_axis_2(const Kernel& k) {
  bool found = false;
  auto look = [&](Op& op) {
    found = found || ((op.kind == OpKind::ProgramId || op.kind == OpKind::NumPrograms) && op.attr_int("axis") == 2);
  };
  walk(*k.body, look);
  if (k.grid) walk(*k.grid, look);
  return found;
}

}  // namespace

const Op* split_rows_load(const Op& loop) {
  const Op* dot = in_flight_dot(const_cast<Op&>(loop));
  if (!dot || loop.operands.size() != 4 || dot->operand(2) != loop.region(0).args[1]) return nullptr;
  const Value* a = dot->operand(0);
  while (a->def && a->def->kind == OpKind::ConvertLayout) a = a->def->operand(0);
  const Op* load = a->def;
  if (!load || load->kind != OpKind::LoadTile || load->parent != &loop.region(0) || load->operands.size() != 3)
    return nullptr;
  // The tile row: the same for every iteration, computed before the loop.
  const Value* row = load->operand(1);
  if (!row->def || row->def->parent != loop.parent) return nullptr;
  const Dim& rows = load->operand(0)->type.shape.at(0);
  const Dim& tile_rows = load->result()->type.shape.at(0);
  // Everything computed from the loop's result, up to stores: elementwise ops only (a row of
  // theirs is computed from the same rows), each store at the same tile row of a view with the
  // same rows (it drops the rows past them).
  std::unordered_set<const Value*> from_acc{loop.result()};
  bool unread = true;
  walk(*loop.parent, [&](Op& op) {
    bool reads = false;
    for (const Value* v : op.operands) reads = reads || from_acc.count(v);
    if (!reads || !unread) return;
    const OpClass cls = op.info().cls;
    if (cls == OpClass::Unary || cls == OpClass::Binary || cls == OpClass::Compare || cls == OpClass::Ternary ||
        cls == OpClass::Cast) {
      for (const Value* r : op.results) from_acc.insert(r);
      return;
    }
    unread = op.kind == OpKind::StoreTile && op.operands.size() == 4 && !from_acc.count(op.operand(0)) &&
             !from_acc.count(op.operand(2)) && !from_acc.count(op.operand(3)) && op.operand(2) == row &&
             op.operand(0)->type.shape.at(0) == rows && op.operand(1)->type.shape.at(0) == tile_rows;
  });
  return unread ? load : nullptr;
}

Op* splittable_k_loop(const Kernel& k, std::string* why) {
  auto no = [&](const std::string& w) -> Op* {
    if (why) *why = w;
    return nullptr;
  };
  Op* loop = nullptr;
  for (const auto& op : k.body->ops) {
    if (op->kind != OpKind::For) continue;
    bool dot = false;
    walk(op->region(0), [&](Op& o) { dot = dot || o.kind == OpKind::Dot; });
    if (dot) {
      loop = op.get();
      break;
    }
  }
  if (!loop) return no("no top-level loop holds a dot");
  const std::string at = "the loop at " + loop->loc.str();
  if (ring_loads(*loop, nullptr).empty() || (loop->has_attr("pipeline") && loop->attr_int("pipeline") < 2))
    return no(at + " is not pipelined (no ring of loads, or a written pipeline = 1)");
  if (loop->operands.size() != 4) return no(at + " carries " + std::to_string(loop->operands.size() - 3) + " values, not one");
  if (!loop->operand(3)->type.is_tile() || loop->operand(3)->type.elem != ScalarKind::F32)
    return no(at + " does not carry an f32 accumulator");
  Op* dot = in_flight_dot(*loop);
  if (!dot || dot->operand(2) != loop->region(0).args[1])
    return no(at + " does not carry only a wgmma dot's accumulator");
  if (!starts_as_zero_splat(loop->operand(3))) return no(at + ": its accumulator does not start at 0 (each part would add its start)");
  const Op* step = loop->operand(2)->def;
  if (!step || step->kind != OpKind::Const || !std::holds_alternative<int64_t>(*step->find_attr("value")) ||
      step->attr_int("value") <= 0)
    return no(at + " does not step by a positive constant");
  // Another ring's producer warpgroup would wait for the releases of the CTAs that end after
  // the split loop (as persist-programs declines kernels with a second ring).
  for (const auto& op : k.body->ops)
    if (op.get() != loop && op->kind == OpKind::For && !ring_loads(*op, nullptr).empty())
      return no("the loop at " + op->loc.str() + " has a ring of its own");
  const Op* y = k.grid ? k.grid->terminator() : nullptr;
  if (y && y->operands.size() > 2) return no("the grid has three axes (the split takes axis 2)");
  if (reads_axis_2(k)) return no("the kernel reads program axis 2 (the split takes it)");
  // Struct buffers and raw code follow the loop's iterations as written (a ring filled before
  // the loop for its first iteration, not a part's first): each part would read the wrong
  // slots (found by review).
  std::string written;
  walk(*k.body, [&](Op& o) {
    if (written.empty() && (o.info().cls == OpClass::Struct || o.info().cls == OpClass::Raw))
      written = std::string(o.info().name) + " at " + o.loc.str();
  });
  if (!written.empty()) return no("the kernel has Struct or Raw ops (" + written + ")");
  for (const auto& op : k.body->ops) {
    if (op.get() == loop) break;
    bool writes = false;
    auto look = [&](Op& o) {
      // (Raw code anywhere is declined above.)
      writes = writes || (o.info().cls == OpClass::Memory && o.kind != OpKind::LoadTile && o.kind != OpKind::Gather);
    };
    look(*op);
    for (const auto& r : op->regions) walk(*r, look);
    if (writes) return no("the kernel writes memory before the loop at " + loop->loc.str() + " (" +
                          std::string(op->info().name) + " at " + op->loc.str() + "), which every part would repeat");
  }
  if (why) why->clear();
  return loop;
}

void split_k_loops(Kernel& k, const GpuLoweringOptions& o, PassStats& stats) {
  // The mark is this pass's alone: written by hand, the loop's bounds would not be its slice.
  walk(*k.body, [&](Op& op) {
    if (op.kind != OpKind::For || !op.has_attr("split_k")) return;
    std::erase_if(op.attrs, [](const NamedAttr& a) { return a.name == "split_k" || a.name == "split_skip_rows"; });
    stats.notes.push_back("for at " + op.loc.str() + ": a written split_k is ignored (split-k-loops writes it in the "
                          "split-K compilation, with the loop's slice)");
  });
  if (!o.split_k) return;
  std::string why;
  Op* loop = splittable_k_loop(k, &why);
  if (!loop) {
    stats.notes.push_back("split-K not taken: " + why);
    return;
  }
  Block& b = *k.body;
  const Loc& loc = loop->loc;
  const Type i32 = Type::scalar(ScalarKind::I32);
  auto make = [&](OpKind kind, std::vector<Value*> operands, std::vector<NamedAttr> attrs = {}) {
    return k.create_op(b, kind, std::move(operands), {i32}, std::move(attrs), loc, 0, loop)->result();
  };
  Value *lb = loop->operand(0), *ub = loop->operand(1), *step = loop->operand(2);
  Value* zero = make(OpKind::Const, {}, {{"value", int64_t{0}}});
  Value* part = make(OpKind::ProgramId, {}, {{"axis", int64_t{2}}});
  Value* parts = make(OpKind::NumPrograms, {}, {{"axis", int64_t{2}}});
  Value* trip = make(OpKind::Cdiv, {make(OpKind::Max, {make(OpKind::Sub, {ub, lb}), zero}), step});
  Value* chunk = make(OpKind::Cdiv, {trip, parts});
  Value* span = make(OpKind::Mul, {chunk, step});
  Value* lo = make(OpKind::Add, {lb, make(OpKind::Mul, {part, span})});
  Value* hi = make(OpKind::Min, {make(OpKind::Add, {lo, span}), ub});
  loop->operands[0] = lo;
  loop->operands[1] = hi;
  loop->set_attr("split_k", int64_t{1});
  // Rows of the partial sums past the dot's A view (what A reads there: its pad) that nothing
  // after the loop reads: the fixup need not add them (a 32-row decode product in 64-row tiles:
  // half the workspace's traffic).
  if (split_rows_load(*loop)) {
    loop->set_attr("split_skip_rows", int64_t{1});
    ++stats["split-k-loops.rows-skippable"];
  }
  // Each of the few CTAs streams its slice of K with nothing else on its SM to hide the memory
  // latency: a ring as deep as shared memory allows, up to kSplitKStages (pipeline-loops cuts it
  // to what fits), as the planning emitter's split compilation keeps, whatever the loop's
  // annotation chose for grids that fill the GPU (the library matmul writes 4).
  if (loop->has_attr("pipeline") && loop->attr_int("pipeline") != kSplitKStages)
    stats.notes.push_back("for at " + loc.str() + ": pipeline = " + std::to_string(loop->attr_int("pipeline")) +
                          " becomes " + std::to_string(kSplitKStages) + " in the split-K compilation");
  loop->set_attr("pipeline", kSplitKStages);
  if (Op* y = k.grid ? k.grid->terminator() : nullptr) take_back_persistence(*y);
  ++stats["split-k-loops.split"];
}

}  // namespace tessera
