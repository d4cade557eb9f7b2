// prefetch-loop-loads (GPU lowering, the knob prefetch_loads = 1): a read-only loop's loads
// issued one iteration ahead, into registers the loop carries.
//
// A row kernel's loop over column tiles (softmax's, layernorm's and rmsnorm's reduction passes)
// loads a tile and then reduces it: the reductions' shuffles and barriers wait on the load, and
// the next load waits on them. Issued one iteration ahead, the next tile's load is in flight
// while this one is reduced. For each `for` without a ring (pipeline-loops' `pipeline = S`: its
// loads are copied stages ahead already) whose body (nested regions included) writes no memory
// (no store_tile, scatter, atomic, Struct or Raw op; a later iteration's load then reads what it
// would have read) and each load_tile into registers (not a shared tile) at the body's top
// level whose view and indices are the induction variable or values from outside the loop:
//
//   %first = load at lb                                           (before the loop)
//   for ... carrying %cur = %first {
//     %next = if (iv + step < ub) { load at iv + step } else { %cur }   (the body's first op)
//     ... the body reads %cur where it read the load ...
//     yield ..., %next
//   }
//
// The guard keeps the loads in the loop to the iterations that run (a load past the loop's bound
// may still lie inside its view); the first tile is loaded even where the loop does not run
// (one tile's read; a load reads nothing past its view). What it costs: the tile's registers
// live across the whole iteration (bf16 softmax at BLOCK_N = 4096 on sm_90a: 64 -> 72
// registers, the planning emitter's prefetch of the same name 64), so it is a tuning knob, off
// by default. The layout emitter keeps the carried tile of a 16-bit load packed as it keeps the
// load (packs_value: the load, the loop's operand and argument, the `if` and the yields, all
// tsr::Packed16; unpacked it was 94). A note where the knob is set and no loop takes it; 0 and
// 1 only. After prefetch-programs: the first tile's load, outside the loop, is not a candidate
// for the next program's copies (it would take shared memory the row's own loads had).
#include <algorithm>

#include "ir/IR.h"
#include "passes/BlockEdit.h"
#include "passes/Passes.h"

namespace tessera {

namespace {

// Does `b` (nested regions included) write memory or hold an op whose effects the pass cannot
// see through?
bool writes_memory(Block& b) {
  bool writes = false;
  walk(b, [&](Op& o) { writes |= may_write_memory(o); });
  return writes;
}

// The loads of `loop`'s body that the pass issues an iteration ahead.
std::vector<Op*> prefetchable_loads(Op& loop) {
  std::vector<Op*> loads;
  Block& body = loop.region(0);
  // A ring loop's loads (pipeline-loops' `pipeline = S`) are copied stages ahead already.
  if ((loop.has_attr("pipeline") && loop.attr_int("pipeline") >= 2) || writes_memory(body)) return loads;
  for (const auto& op : body.ops) {
    // Registers only: a shared tile is one buffer, written where the load stands.
    if (op->kind != OpKind::LoadTile || op->result()->type.space == "shared") continue;
    // (Its view and indices from outside the loop, or the induction variable.)
    if (std::all_of(op->operands.begin(), op->operands.end(),
                    [&](const Value* v) { return v == body.args[0] || !defined_inside(v, loop); }))
      loads.push_back(op.get());
  }
  return loads;
}

// A copy of `load` at the end of `b` (or before `before`) with `iv` for the loop's induction
// variable `loop_iv` among its indices.
Value* load_at(Kernel& k, Block& b, const Op& load, const Value* loop_iv, Value* iv, const Op* before = nullptr) {
  std::vector<Value*> operands = load.operands;
  std::replace(operands.begin(), operands.end(), const_cast<Value*>(loop_iv), iv);
  return k.create_op(b, OpKind::LoadTile, operands, {load.result()->type}, load.attrs, load.loc, 0, before)->result();
}

void prefetch_loop(Kernel& k, Op& loop, const std::vector<Op*>& loads) {
  Block& body = loop.region(0);
  Value* const loop_iv = body.args[0];
  Value *lb = loop.operand(0), *ub = loop.operand(1), *step = loop.operand(2);
  const Loc& loc = loop.loc;
  const Type i1 = Type::scalar(ScalarKind::I1);
  // At the top of the body: whether there is a next iteration (iv + step < ub in 64 bits: near
  // the i32 limit the sum would wrap to a negative index) and its index (i32, used only where it
  // is below ub).
  const Op& first_body_op = *body.ops.front();
  auto in_body = [&](OpKind kind, std::vector<Value*> operands, const Type& t, std::vector<NamedAttr> attrs = {}) {
    return k.create_op(body, kind, std::move(operands), {t}, std::move(attrs), loc, 0, &first_body_op)->result();
  };
  const Type i64 = Type::scalar(ScalarKind::I64);
  Value* next_wide = in_body(OpKind::Add, {in_body(OpKind::Cast, {loop_iv}, i64), in_body(OpKind::Cast, {step}, i64)}, i64);
  Value* more = in_body(OpKind::Cmp, {next_wide, in_body(OpKind::Cast, {ub}, i64)}, i1, {{"pred", std::string("lt")}});
  Value* next_iv = in_body(OpKind::Add, {loop_iv, step}, loop_iv->type);
  Op& yield = *body.terminator();
  for (Op* load : loads) {
    const Type& t = load->result()->type;
    // The first iteration's tile, loaded whether the loop runs or not: a load reads nothing
    // past its view (what lies there is its pad), and its value is then never read. (An `if`
    // on the loop running would need a tile for its other branch, which the layout emitter
    // could not keep packed with the load.)
    Value* first = load_at(k, *loop.parent, *load, loop_iv, lb, &loop);
    // The loop carries it: this iteration's tile comes in as `cur`.
    loop.operands.push_back(first);
    Value* cur = k.add_block_arg(body, t, load->result()->name);
    Value* result = k.new_value(t);
    result->def = &loop;
    result->index = static_cast<int>(loop.results.size());
    loop.results.push_back(result);
    replace_all_uses(k, load->result(), cur);
    // The next iteration's, first in the body (or this one's again past the last iteration).
    Op* next = k.create_op(body, OpKind::If, {more}, {t}, {}, load->loc, 2, &first_body_op);
    k.create_op(next->region(0), OpKind::Yield, {load_at(k, next->region(0), *load, loop_iv, next_iv)}, {}, {}, load->loc);
    k.create_op(next->region(1), OpKind::Yield, {cur}, {}, {}, load->loc);
    yield.operands.push_back(next->result());
  }
  // (Erased last: the first of them may be the op the new ones were put in front of.)
  for (Op* load : loads) body.ops.erase(op_position(*load));
}

}  // namespace

void prefetch_loop_loads(Kernel& k, PassStats& stats) {
  const ConstexprDecl* knob = k.find_constexpr("prefetch_loads");
  if (!knob || knob->value == 0) return;
  if (knob->value != 1)
    throw TesseraError(knob->loc, "knob prefetch_loads = " + std::to_string(knob->value) +
                                      ": 0 (no prefetch) or 1 (a read-only loop's loads one iteration ahead)");
  std::vector<Op*> loops;
  walk(*k.body, [&](Op& op) {
    if (op.kind == OpKind::For) loops.push_back(&op);
  });
  int64_t taken = 0;
  for (Op* loop : loops) {
    std::vector<Op*> loads = prefetchable_loads(*loop);
    if (loads.empty()) continue;
    prefetch_loop(k, *loop, loads);
    ++stats["prefetch-loop-loads.loops"];
    taken += static_cast<int64_t>(loads.size());
  }
  stats["prefetch-loop-loads.loads"] += taken;
  if (taken == 0)
    stats.notes.push_back("knob prefetch_loads = 1 taken by no load: no loop whose body writes no memory loads a tile at "
                          "indices from outside it and its induction variable");
}

}  // namespace tessera
