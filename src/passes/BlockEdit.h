// Small edits of a block's op list that the passes share: where an op stands in its block,
// the op after it, and moving an op in front of another.
#pragma once

#include <algorithm>
#include <cmath>
#include <memory>

#include "ir/IR.h"

namespace tessera {

// The position of `op` in its block's op list (the op must be in it).
inline std::vector<std::unique_ptr<Op>>::iterator op_position(const Op& op) {
  auto& ops = op.parent->ops;
  return std::find_if(ops.begin(), ops.end(), [&](const auto& o) { return o.get() == &op; });
}

// The op after `op` in its block, or null for the last.
inline const Op* next_op(const Op& op) {
  auto at = std::next(op_position(op));
  return at == op.parent->ops.end() ? nullptr : at->get();
}

// Whether load `load` pads what lies past its view with +0 (no pad, or pad = 0.0 with a positive
// sign): what asynchronous copies into shared memory fill there.
inline bool pads_with_positive_zero(const Op& load) {
  return !load.has_attr("pad") || (load.attr_number("pad") == 0.0 && !std::signbit(load.attr_number("pad")));
}

// Are rows of `n` elements of `t` whole 16-byte chunks of 1-, 2-, 4- or 8-byte elements (what
// the layout emitter's cp.async copies into shared tiles move)?
inline bool whole_chunk_rows(ScalarKind t, int64_t n) {
  const int eb = scalar_bytes(t);
  return (eb == 1 || eb == 2 || eb == 4 || eb == 8) && n % (16 / eb) == 0;
}

// Whether a load of `t` can write a shared tile with asynchronous copies (a tile with other
// rows stays a load into registers, stored into shared memory after it).
inline bool loads_in_whole_chunks(const Type& t) {
  return shape_is_static(t.shape) && !t.shape.empty() && whole_chunk_rows(t.elem, t.shape.back().value);
}

// Does a reshape from `from` to `to` only add or drop dims of extent 1, keeping the last dim?
// (Then a row-major tile of either shape has the same bytes in the same places.)
inline bool only_unit_dims_change(const Type& from, const Type& to) {
  std::vector<int64_t> a, b;
  for (const Dim& d : from.shape)
    if (!(d.is_static() && d.value == 1)) a.push_back(d.is_static() ? d.value : -1);
  for (const Dim& d : to.shape)
    if (!(d.is_static() && d.value == 1)) b.push_back(d.is_static() ? d.value : -1);
  return a == b && from.shape.back() == to.shape.back();
}

// Whether `op` itself (its regions aside) may write memory or has effects a pass cannot see
// through: Raw and Struct ops, and memory ops other than load_tile and gather.
inline bool may_write_memory(const Op& op) {
  const OpClass c = op.info().cls;
  return c == OpClass::Raw || c == OpClass::Struct ||
         (c == OpClass::Memory && op.kind != OpKind::LoadTile && op.kind != OpKind::Gather);
}

// Whether `v` is defined inside `region_op` (by an op in its regions, at any depth, or as an
// argument of one of their blocks).
inline bool defined_inside(const Value* v, const Op& region_op) {
  for (const Op* d = v->def; d; d = d->parent ? d->parent->parent : nullptr)
    if (d == &region_op) return true;
  if (v->block)
    for (const Op* p = v->block->parent; p; p = p->parent ? p->parent->parent : nullptr)
      if (p == &region_op) return true;
  return false;
}

// Moves `op` out of its block to just in front of `anchor` (in anchor's block).
inline void move_before(Op& op, const Op& anchor) {
  auto at = op_position(op);
  std::unique_ptr<Op> owned = std::move(*at);
  op.parent->ops.erase(at);
  Block& to = *anchor.parent;
  owned->parent = &to;
  to.ops.insert(op_position(anchor), std::move(owned));
}

}  // namespace tessera
