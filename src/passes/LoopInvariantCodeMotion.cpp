// licm: an op in a `for` body whose operands are all defined outside the loop computes the same
// thing every iteration, so it moves in front of the loop and runs once. Inner loops go first,
// so that an op invariant in two nested loops leaves both.
//
// Which ops may move: moving an op ahead of its loop makes it run even when the loop runs zero
// times, so only ops that cannot fail or write anything move (a failing op moved out of a loop
// that never runs would fail where the program did not):
// - pure ops without regions: constants, indices, creation, elementwise, casts, shape ops
//   but extract_tile and insert_tile (a sub-tile index out of range fails), dots, reductions
//   and scans without a combiner region; but not an integer division or remainder (it fails
//   on a zero divisor) unless the divisor is a nonzero constant;
// - `load_tile` of a view that nothing in the kernel writes (no store, scatter, atomic or raw
//   op names it): out-of-bounds elements read the pad, so a load never fails, and no write
//   can change what it reads between iterations. `gather` may fail (an index out of bounds)
//   and stays.
// Ops with regions, Struct ops (storage has a place in program order) and raw ops never move.
// Nor do the ops that only spread a smaller value over a tile (splat, broadcast, expand_dims,
// arange): they cost next to nothing each iteration, while their result, moved out, would be
// a whole tile held in registers across the loop (the row kernels' looping branch would keep
// two [1, BLOCK_N] tiles live for a row max and sum).
#include <unordered_set>

#include "ir/IR.h"
#include "passes/BlockEdit.h"
#include "passes/Passes.h"

namespace tessera {

namespace {

class Licm {
 public:
  explicit Licm(Kernel& k) {
    collect_written(*k.body);
  }

  int64_t run(Kernel& k) {
    block(*k.body);
    return hoisted_;
  }

 private:
  std::unordered_set<const Value*> written_;  // views some op writes
  int64_t hoisted_ = 0;

  void collect_written(const Block& b) {
    for (const auto& op : b.ops) {
      switch (op->kind) {
        case OpKind::StoreTile:
        case OpKind::Scatter:
        case OpKind::Atomic:
        case OpKind::AtomicCas:
          written_.insert(op->operand(0));
          break;
        case OpKind::Raw:
          for (const Value* v : op->operands) written_.insert(v);
          break;
        default:
          break;
      }
      for (const auto& r : op->regions) collect_written(*r);
    }
  }

  bool may_move(const Op& op) const {
    if (!op.regions.empty() || op.results.empty()) return false;
    if (op.kind == OpKind::Splat || op.kind == OpKind::Broadcast || op.kind == OpKind::ExpandDims ||
        op.kind == OpKind::Arange)
      return false;
    // A sub-tile index out of range is an error (docs/semantics.md).
    if (op.kind == OpKind::ExtractTile || op.kind == OpKind::InsertTile) return false;
    switch (op.info().cls) {
      case OpClass::Memory:
        return op.kind == OpKind::LoadTile && !written_.count(op.operand(0));
      case OpClass::Control:
      case OpClass::Terminator:
      case OpClass::Raw:
      case OpClass::Struct:
        return false;
      case OpClass::Binary:
        return !may_divide_by_zero(op);
      default:
        return true;
    }
  }

  // Every value defined in `b` or in a region inside it.
  static void defined_in(const Block& b, std::unordered_set<const Value*>& out) {
    for (const Value* a : b.args) out.insert(a);
    for (const auto& op : b.ops) {
      for (const Value* r : op->results) out.insert(r);
      for (const auto& region : op->regions) defined_in(*region, out);
    }
  }

  void block(Block& b) {
    for (size_t i = 0; i < b.ops.size(); ++i) {
      Op& op = *b.ops[i];
      for (auto& r : op.regions) block(*r);
      if (op.kind == OpKind::For) i += hoist_from(op);
    }
  }

  // Moves the invariant ops of loop `loop` in front of it, in their order; returns how many
  // moved.
  size_t hoist_from(Op& loop) {
    Block& body = loop.region(0);
    std::unordered_set<const Value*> inside;
    defined_in(body, inside);
    size_t moved = 0;
    for (size_t j = 0; j < body.ops.size();) {
      Op& op = *body.ops[j];
      bool invariant = may_move(op);
      for (const Value* v : op.operands) invariant = invariant && !inside.count(v);
      if (!invariant) {
        ++j;
        continue;
      }
      for (const Value* r : op.results) inside.erase(r);
      move_before(op, loop);  // after the ops moved before it: their order stays
      ++moved;
    }
    hoisted_ += static_cast<int64_t>(moved);
    return moved;
  }
};

}  // namespace

void licm(Kernel& k, PassStats& stats) {
  Licm pass(k);
  stats["licm.hoisted"] += pass.run(k);
}

}  // namespace tessera
