// sort and topk along one axis; histogram.
#include "lang/Internal.h"

namespace tessera::lang {

using detail::fail;

namespace {

// The op, with `k` along the axis of the results for topk (null: the operand's size).
std::vector<Val> sort_op(OpKind kind, const char* what, const Operand& x, const Operand* idx, const Dim* k, int axis,
                         bool flag, bool with_indices, const SrcLoc& loc) {
  Val v = detail::value_of(x, std::nullopt, loc);
  if (!v.is_tile()) fail(loc, std::string(what) + " needs a tile, got " + v.type().str());
  if (is_bool(v.dtype())) fail(loc, std::string(what) + " needs numeric keys, got " + v.type().str() + " (cast to i8 first)");
  int a = detail::normalize_axis(axis, v.rank(), what, loc);
  std::vector<Val> ops{v};
  if (idx) {
    Val iv = detail::value_of(*idx, ScalarKind::I32, loc);
    if (!iv.is_tile() || iv.dtype() != ScalarKind::I32 || iv.shape() != v.shape())
      fail(loc, std::string(what) + " needs an i32 index tile of the keys' shape " + shape_str(v.shape()) + ", got " +
                    iv.type().str());
    ops.push_back(iv);
  }
  Shape s = v.shape();
  if (k) {
    const Dim& len = s[static_cast<size_t>(a)];
    if (k->is_static() && (k->value < 1 || (len.is_static() && k->value > len.value)))
      fail(loc, std::string(what) + " k = " + std::to_string(k->value) + " must be in [1, " + len.str() +
                    "], the size of axis " + std::to_string(a) + " of " + v.type().str());
    s[static_cast<size_t>(a)] = *k;
  }
  std::vector<Type> res{Type::tile(v.dtype(), s)};
  if (with_indices) res.push_back(Type::tile(ScalarKind::I32, s));
  std::vector<NamedAttr> attrs{{"axis", int64_t{a}}};
  if (kind == OpKind::Topk) {
    if (!flag) attrs.push_back({"largest", false});
  } else if (flag) {
    attrs.push_back({"descending", true});
  }
  return detail::kb(loc).emit_multi(kind, std::move(ops), res, std::move(attrs), loc);
}

}  // namespace

Val sort(const Operand& x, int axis, bool descending, SrcLoc loc) {
  return sort_op(OpKind::Sort, "sort", x, nullptr, nullptr, axis, descending, false, loc)[0];
}

Sorted sort_indexed(const Operand& x, int axis, bool descending, SrcLoc loc) {
  auto r = sort_op(OpKind::Sort, "sort_indexed", x, nullptr, nullptr, axis, descending, true, loc);
  return {r[0], r[1]};
}

Sorted sort_pairs(const Operand& x, const Operand& idx, int axis, bool descending, SrcLoc loc) {
  auto r = sort_op(OpKind::Sort, "sort_pairs", x, &idx, nullptr, axis, descending, true, loc);
  return {r[0], r[1]};
}

Sorted topk(const Operand& x, Dim k, int axis, bool largest, SrcLoc loc) {
  auto r = sort_op(OpKind::Topk, "topk", x, nullptr, &k, axis, largest, true, loc);
  return {r[0], r[1]};
}

Sorted topk_pairs(const Operand& x, const Operand& idx, Dim k, int axis, bool largest, SrcLoc loc) {
  auto r = sort_op(OpKind::Topk, "topk_pairs", x, &idx, &k, axis, largest, true, loc);
  return {r[0], r[1]};
}

Val histogram(const Operand& x, Dim bins, SrcLoc loc) {
  Val v = detail::value_of(x, std::nullopt, loc);
  if (!v.is_tile() || !is_int(v.dtype()) || is_bool(v.dtype()))
    fail(loc, "histogram needs an integer tile (the bin of each element), got " + v.type().str());
  if (bins.is_static() && bins.value < 1) fail(loc, "histogram needs at least one bin, got " + std::to_string(bins.value));
  return detail::kb(loc).emit(OpKind::Histogram, {v}, Type::tile(ScalarKind::I32, Shape{bins}), {}, loc);
}

}  // namespace tessera::lang
