// dce: remove ops that have no effect: pure ops none of whose results is used, and control flow
// whose results are unused and whose regions write nothing. An op that may stop the program
// with an error (docs/semantics.md) stays: a `for` whose step is not a positive constant (a step
// of 0 or below is an error), a `while` (2^26 iterations are an error), an integer `div`,
// `rem` or `cdiv` by what is not a nonzero constant (may_divide_by_zero), an `extract_tile` or
// `insert_tile` at a run-time index (out of range is an error): removing it would turn an
// error into a run that succeeds.
#include <unordered_map>

#include "ir/IR.h"
#include "passes/Passes.h"

namespace tessera {

namespace {

bool has_side_effect_itself(OpKind k) {
  switch (k) {
    case OpKind::StoreTile:
    case OpKind::Scatter:
    case OpKind::Atomic:
    case OpKind::AtomicCas:
    case OpKind::Raw:  // native code may do anything
    case OpKind::Yield:
    // Struct ops that change storage: a pop removes a tile even when the tile is unused.
    case OpKind::AsyncCopy:
    case OpKind::AsyncWait:
    case OpKind::BufferWrite:
    case OpKind::PipePush:
    case OpKind::PipePop:
      return true;
    default:
      return false;
  }
}

bool may_fail(const Op& op) {
  switch (op.kind) {
    case OpKind::For:
      return !const_positive(op.operands[2]);
    case OpKind::While:
      return true;
    case OpKind::ExtractTile:  // a run-time sub-tile index out of range is an error
    case OpKind::InsertTile:
      return has_runtime_subtile_index(op);
    default:
      return may_divide_by_zero(op);
  }
}

bool has_side_effect(const Op& op) {
  if (has_side_effect_itself(op.kind) || may_fail(op)) return true;
  for (const auto& r : op.regions)
    if (r)
      for (const auto& inner : r->ops)
        if (inner && inner->kind != OpKind::Yield && has_side_effect(*inner)) return true;
  return false;
}

class Dce {
 public:
  explicit Dce(Kernel& k) : k_(k) {}

  int64_t run() {
    walk(k_, [&](Op& op) {
      for (Value* v : op.operands) ++uses_[v];
    });
    int64_t before = removed_;
    do {
      before = removed_;
      sweep(*k_.grid);
      sweep(*k_.body);
    } while (removed_ != before);
    return removed_;
  }

 private:
  Kernel& k_;
  std::unordered_map<const Value*, int64_t> uses_;
  int64_t removed_ = 0;

  // Later ops first, each op's regions before the ops above it: a use inside a region always
  // comes after its definition, so one sweep frees whole chains.
  void sweep(Block& b) {
    for (size_t i = b.ops.size(); i-- > 0;) {
      Op& op = *b.ops[i];
      for (auto& r : op.regions) sweep(*r);
      if (!dead(op)) continue;
      forget_uses(op);
      b.ops.erase(b.ops.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }

  bool dead(const Op& op) const {
    if (has_side_effect(op)) return false;
    for (const Value* r : op.results) {
      auto it = uses_.find(r);
      if (it != uses_.end() && it->second > 0) return false;
    }
    return true;
  }

  void forget_uses(Op& op) {
    ++removed_;
    for (Value* v : op.operands) --uses_[v];
    for (auto& r : op.regions)
      for (auto& inner : r->ops) forget_uses(*inner);
  }
};

}  // namespace

void dce(Kernel& k, PassStats& stats) { stats["dce.removed"] += Dce(k).run(); }

}  // namespace tessera
