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
  if (is_bool(v.dtype())) fail(loc, what + " needs numeric operands, got " + v.type().str());
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
  if (is_bool(v.dtype())) fail(loc, std::string(what) + " needs numeric operands, got " + v.type().str());
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
