// Reductions and scans along one axis.
#include "lang/Internal.h"

namespace tessera::lang {

using detail::fail;

namespace {

Val tile_arg(const Operand& x, const std::string& what, const SrcLoc& loc) {
  Val v = detail::value_of(x, std::nullopt, loc);
  if (!v.is_tile()) fail(loc, what + " needs a tile, got " + v.type().str());
  return v;
}

Val reduce_kind(const char* kind, const Operand& x, int axis, const SrcLoc& loc) {
  std::string what = kind;
  Val v = tile_arg(x, what, loc);
  int a = detail::normalize_axis(axis, v.rank(), what, loc);
  if (is_bool(v.dtype()))
    fail(loc, what + " needs numeric operands, got " + v.type().str() +
                  " (cast to i32 first with .to(i32); an i1 sum would wrap modulo 2)");
  Shape s = v.shape();
  s.erase(s.begin() + a);
  bool arg = what == "argmax" || what == "argmin";
  ScalarKind elem = arg ? ScalarKind::I32 : v.dtype();
  Type t = s.empty() ? Type::scalar(elem) : Type::tile(elem, s);
  return detail::kb(loc).emit(OpKind::Reduce, {v}, t,
                              {{"axis", int64_t{a}}, {"kind", std::string(kind)}}, loc);
}

Val scan_kind(const char* kind, const char* what, const Operand& x, int axis, const SrcLoc& loc) {
  Val v = tile_arg(x, what, loc);
  int a = detail::normalize_axis(axis, v.rank(), what, loc);
  if (is_bool(v.dtype()))
    fail(loc, std::string(what) + " needs numeric operands, got " + v.type().str() + " (cast to i32 first with .to(i32))");
  return detail::kb(loc).emit(OpKind::Scan, {v}, v.type(),
                              {{"axis", int64_t{a}}, {"kind", std::string(kind)}}, loc);
}

}  // namespace

Val sum(const Operand& x, int axis, SrcLoc loc) { return reduce_kind("sum", x, axis, loc); }
Val prod(const Operand& x, int axis, SrcLoc loc) { return reduce_kind("prod", x, axis, loc); }
Val max(const Operand& x, int axis, SrcLoc loc) { return reduce_kind("max", x, axis, loc); }
Val min(const Operand& x, int axis, SrcLoc loc) { return reduce_kind("min", x, axis, loc); }
Val argmax(const Operand& x, int axis, SrcLoc loc) { return reduce_kind("argmax", x, axis, loc); }
Val argmin(const Operand& x, int axis, SrcLoc loc) { return reduce_kind("argmin", x, axis, loc); }

Val item(const Operand& x, SrcLoc loc) {
  Val v = detail::value_of(x, std::nullopt, loc);
  if (v.type().is_scalar()) return v;
  if (!detail::is_one_element_tile(v.type()))
    fail(loc, "item needs a tile of one element (every dim a static 1), got " + v.type().str());
  // No op turns a tile into a scalar directly: a max over the one element is exact for every
  // type (NaN included). Reductions take no i1, so flags go through i8.
  bool flag = is_bool(v.dtype());
  if (flag) v = cast(v, ScalarKind::I8, loc);
  if (v.rank() != 1) v = reshape(v, {1}, loc);
  Val s = detail::kb(loc).emit(OpKind::Reduce, {v}, Type::scalar(v.dtype()),
                               {{"axis", int64_t{0}}, {"kind", std::string("max")}}, loc);
  return flag ? cast(s, ScalarKind::I1, loc) : s;
}

Val reduce(const Operand& x, int axis, const std::function<Val(Val, Val)>& combine, SrcLoc loc) {
  Val v = tile_arg(x, "reduce", loc);
  int a = detail::normalize_axis(axis, v.rank(), "reduce", loc);
  return detail::kb(loc).region_combine(OpKind::ReduceWith, v, a, combine, loc);
}

Val cumsum(const Operand& x, int axis, SrcLoc loc) { return scan_kind("sum", "cumsum", x, axis, loc); }
Val cumprod(const Operand& x, int axis, SrcLoc loc) { return scan_kind("prod", "cumprod", x, axis, loc); }
Val cummax(const Operand& x, int axis, SrcLoc loc) { return scan_kind("max", "cummax", x, axis, loc); }
Val cummin(const Operand& x, int axis, SrcLoc loc) { return scan_kind("min", "cummin", x, axis, loc); }

Val scan(const Operand& x, int axis, const std::function<Val(Val, Val)>& combine, SrcLoc loc) {
  Val v = tile_arg(x, "scan", loc);
  int a = detail::normalize_axis(axis, v.rank(), "scan", loc);
  return detail::kb(loc).region_combine(OpKind::ScanWith, v, a, combine, loc);
}

}  // namespace tessera::lang
