// Elementwise ops, operators, literal promotion and numpy-style broadcasting.
#include "lang/Internal.h"

namespace tessera::lang {

using detail::fail;

namespace detail {

std::string type_str(const Type& t) { return t.str(); }

Val value_of(const Operand& o, std::optional<ScalarKind> hint, const SrcLoc& sl) {
  return o.materialize(hint, sl);
}

Val index_value(const Operand& o, const std::string& what, const SrcLoc& sl) {
  // Said here rather than by the literal's promotion, which would speak of another operand.
  if (o.kind() == Operand::Kind::Float)
    fail(sl, what + " must be an i32 scalar, got the float literal " + attr_str(o.float_value()));
  Val v = value_of(o, ScalarKind::I32, sl);
  if (!v.type().is_scalar() || v.dtype() != ScalarKind::I32)
    fail(sl, what + " must be an i32 scalar, got " + v.type().str() + scalar_hint(v.type()));
  return v;
}

int normalize_axis(int axis, int rank, const std::string& what, const SrcLoc& sl) {
  int a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank)
    fail(sl, what + ": axis " + std::to_string(axis) + " is out of range for rank " +
                 std::to_string(rank));
  return a;
}

std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    // Align from the right, numpy style.
    const Dim* da = i < n - a.size() ? nullptr : &a[i - (n - a.size())];
    const Dim* db = i < n - b.size() ? nullptr : &b[i - (n - b.size())];
    auto is_one = [](const Dim* d) { return !d || (d->is_static() && d->value == 1); };
    if (is_one(da)) out[i] = db ? *db : Dim(1);
    else if (is_one(db) || *da == *db) out[i] = *da;
    else return std::nullopt;
  }
  return out;
}

Val broadcast_value(const Val& v, const Shape& shape, const std::string& what, const SrcLoc& sl) {
  KernelBuilder& b = kb(sl);
  const Type& t = v.type();
  if (t.is_scalar()) {
    if (shape.empty()) return v;
    return b.emit(OpKind::Splat, {v}, Type::tile(t.elem, shape), {}, sl);
  }
  if (t.shape == shape) return v;
  if (t.rank() > static_cast<int>(shape.size()) || !broadcast_shapes(t.shape, shape) ||
      *broadcast_shapes(t.shape, shape) != shape)
    fail(sl, what + ": cannot broadcast " + t.str() + " to shape " + shape_str(shape));
  Val cur = v;
  while (cur.rank() < static_cast<int>(shape.size())) {
    Shape s = cur.shape();
    s.insert(s.begin(), Dim(1));
    cur = b.emit(OpKind::ExpandDims, {cur}, Type::tile(t.elem, s), {{"axis", int64_t{0}}}, sl);
  }
  if (cur.shape() != shape) cur = b.emit(OpKind::Broadcast, {cur}, Type::tile(t.elem, shape), {}, sl);
  return cur;
}

// Several operands brought to one element type and one shape.
std::vector<Val> unify_all(const std::vector<const Operand*>& ops, const std::string& what,
                           const SrcLoc& sl) {
  std::optional<ScalarKind> elem;
  bool any_float_literal = false;
  std::vector<Val> vals(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i]->is_literal()) {
      any_float_literal |= ops[i]->kind() == Operand::Kind::Float;
      continue;
    }
    vals[i] = value_of(*ops[i], std::nullopt, sl);
    if (!elem) elem = vals[i].dtype();
    else if (*elem != vals[i].dtype())
      fail(sl, "operands of " + what + " have different element types " +
                   std::string(scalar_name(*elem)) + " and " +
                   std::string(scalar_name(vals[i].dtype())) + " (convert one with .to())");
  }
  if (!elem) elem = any_float_literal ? ScalarKind::F32 : ScalarKind::I32;
  for (size_t i = 0; i < ops.size(); ++i)
    if (!vals[i].valid()) vals[i] = value_of(*ops[i], elem, sl);
  Shape shape;
  for (const Val& v : vals) {
    auto s = broadcast_shapes(shape, v.shape());
    if (!s) {
      std::string types;
      for (const Val& w : vals) types += (types.empty() ? "" : " and ") + w.type().str();
      fail(sl, "operands of " + what + " cannot be broadcast together: " + types);
    }
    shape = *s;
  }
  for (Val& v : vals) v = broadcast_value(v, shape, what, sl);
  return vals;
}

std::pair<Val, Val> unify(const Operand& a, const Operand& b, const std::string& what,
                          const SrcLoc& sl) {
  auto v = unify_all({&a, &b}, what, sl);
  return {v[0], v[1]};
}

}  // namespace detail

namespace {

enum class Need { Any, Numeric, Float, SignedOrFloat, IntOrBool, Int };

void check_elem(ScalarKind k, Need need, const std::string& what, const Type& t, const SrcLoc& sl) {
  bool ok = true;
  const char* want = "";
  switch (need) {
    case Need::Any: break;
    case Need::Numeric: ok = !is_bool(k); want = "numeric (not i1)"; break;
    case Need::Float: ok = is_float(k); want = "float"; break;
    case Need::SignedOrFloat: ok = is_float(k) || is_signed_int(k); want = "signed integer or float"; break;
    case Need::IntOrBool: ok = is_int(k); want = "integer or i1"; break;
    case Need::Int: ok = is_int(k) && !is_bool(k); want = "integer (not i1)"; break;
  }
  if (!ok) fail(sl, what + " needs " + want + " operands, got " + t.str());
}

Val unary(OpKind kind, Need need, const Operand& x, const SrcLoc& sl) {
  std::string what(op_info(kind).name);
  Val v = detail::value_of(x, std::nullopt, sl);
  check_elem(v.dtype(), need, what, v.type(), sl);
  return detail::kb(sl).emit(kind, {v}, v.type(), {}, sl);
}

Val binary(OpKind kind, Need need, const Operand& a, const Operand& b, const SrcLoc& sl) {
  std::string what(op_info(kind).name);
  auto [x, y] = detail::unify(a, b, what, sl);
  check_elem(x.dtype(), need, what, x.type(), sl);
  return detail::kb(sl).emit(kind, {x, y}, x.type(), {}, sl);
}

Val compare(const char* pred, const Operand& a, const Operand& b, const SrcLoc& sl) {
  auto [x, y] = detail::unify(a, b, std::string("cmp ") + pred, sl);
  return detail::kb(sl).emit(OpKind::Cmp, {x, y}, x.type().with_elem(ScalarKind::I1),
                             {{"pred", std::string(pred)}}, sl);
}

}  // namespace

Val exp(const Operand& x, SrcLoc loc) { return unary(OpKind::Exp, Need::Float, x, loc); }
Val exp2(const Operand& x, SrcLoc loc) { return unary(OpKind::Exp2, Need::Float, x, loc); }
Val log(const Operand& x, SrcLoc loc) { return unary(OpKind::Log, Need::Float, x, loc); }
Val log2(const Operand& x, SrcLoc loc) { return unary(OpKind::Log2, Need::Float, x, loc); }
Val log1p(const Operand& x, SrcLoc loc) { return unary(OpKind::Log1p, Need::Float, x, loc); }
Val expm1(const Operand& x, SrcLoc loc) { return unary(OpKind::Expm1, Need::Float, x, loc); }
Val sqrt(const Operand& x, SrcLoc loc) { return unary(OpKind::Sqrt, Need::Float, x, loc); }
Val rsqrt(const Operand& x, SrcLoc loc) { return unary(OpKind::Rsqrt, Need::Float, x, loc); }
Val abs(const Operand& x, SrcLoc loc) { return unary(OpKind::Abs, Need::SignedOrFloat, x, loc); }
Val sin(const Operand& x, SrcLoc loc) { return unary(OpKind::Sin, Need::Float, x, loc); }
Val cos(const Operand& x, SrcLoc loc) { return unary(OpKind::Cos, Need::Float, x, loc); }
Val tanh(const Operand& x, SrcLoc loc) { return unary(OpKind::Tanh, Need::Float, x, loc); }
Val sigmoid(const Operand& x, SrcLoc loc) { return unary(OpKind::Sigmoid, Need::Float, x, loc); }
Val erf(const Operand& x, SrcLoc loc) { return unary(OpKind::Erf, Need::Float, x, loc); }
Val floor(const Operand& x, SrcLoc loc) { return unary(OpKind::Floor, Need::Float, x, loc); }
Val ceil(const Operand& x, SrcLoc loc) { return unary(OpKind::Ceil, Need::Float, x, loc); }

Val minimum(const Operand& a, const Operand& b, SrcLoc loc) {
  return binary(OpKind::Min, Need::Numeric, a, b, loc);
}
Val maximum(const Operand& a, const Operand& b, SrcLoc loc) {
  return binary(OpKind::Max, Need::Numeric, a, b, loc);
}

Val pow(const Operand& a, const Operand& b, SrcLoc loc) {
  return binary(OpKind::Pow, Need::Float, a, b, loc);
}

Val fma(const Operand& a, const Operand& b, const Operand& c, SrcLoc loc) {
  auto v = detail::unify_all({&a, &b, &c}, "fma", loc);
  check_elem(v[0].dtype(), Need::Float, "fma", v[0].type(), loc);
  return detail::kb(loc).emit(OpKind::Fma, {v[0], v[1], v[2]}, v[0].type(), {}, loc);
}

Val where(const Operand& cond, const Operand& a, const Operand& b, SrcLoc loc) {
  Val c = detail::value_of(cond, ScalarKind::I1, loc);
  if (c.dtype() != ScalarKind::I1) fail(loc, "where needs an i1 condition, got " + c.type().str());
  auto [x, y] = detail::unify(a, b, "where", loc);
  auto shape = detail::broadcast_shapes(c.shape(), x.shape());
  if (!shape)
    fail(loc, "where: the condition " + c.type().str() + " and the values " + x.type().str() +
                  " cannot be broadcast together");
  c = detail::broadcast_value(c, *shape, "where", loc);
  x = detail::broadcast_value(x, *shape, "where", loc);
  y = detail::broadcast_value(y, *shape, "where", loc);
  return detail::kb(loc).emit(OpKind::Where, {c, x, y}, x.type(), {}, loc);
}

Val cast(const Operand& x, ScalarKind dt, SrcLoc loc) {
  Val v = detail::value_of(x, dt, loc);
  if (v.dtype() == dt) return v;
  return detail::kb(loc).emit(OpKind::Cast, {v}, v.type().with_elem(dt), {}, loc);
}

Val bitcast(const Operand& x, ScalarKind dt, SrcLoc loc) {
  Val v = detail::value_of(x, std::nullopt, loc);
  if (std::string why = bitcast_type_error(v.dtype(), dt); !why.empty())
    throw TesseraError(detail::to_loc(loc), "bitcast " + why);
  return detail::kb(loc).emit(OpKind::Bitcast, {v}, v.type().with_elem(dt), {}, loc);
}

Val Val::to(ScalarKind dt, SrcLoc loc) const { return cast(*this, dt, loc); }

Val convert_layout(const Val& t, const Layout& layout, const std::string& space, SrcLoc loc) {
  if (!t.type().is_tile()) throw TesseraError(detail::to_loc(loc), "convert_layout needs a tile, got " + t.type().str());
  Type r = t.type();
  r.layout = layout;
  r.space = space;
  return detail::kb(loc).emit(OpKind::ConvertLayout, {t}, r, {}, loc);
}

Val eq(const Operand& a, const Operand& b, SrcLoc loc) { return compare("eq", a, b, loc); }
Val ne(const Operand& a, const Operand& b, SrcLoc loc) { return compare("ne", a, b, loc); }

// Operators cannot take a default source_location, so they use the one the Operand captured
// at the user's expression.
Val operator+(const Operand& a, const Operand& b) { return binary(OpKind::Add, Need::Numeric, a, b, a.where()); }
Val operator-(const Operand& a, const Operand& b) { return binary(OpKind::Sub, Need::Numeric, a, b, a.where()); }
Val operator*(const Operand& a, const Operand& b) { return binary(OpKind::Mul, Need::Numeric, a, b, a.where()); }
Val operator/(const Operand& a, const Operand& b) { return binary(OpKind::Div, Need::Numeric, a, b, a.where()); }
Val operator%(const Operand& a, const Operand& b) { return binary(OpKind::Rem, Need::Numeric, a, b, a.where()); }
Val operator&(const Operand& a, const Operand& b) { return binary(OpKind::And, Need::IntOrBool, a, b, a.where()); }
Val operator|(const Operand& a, const Operand& b) { return binary(OpKind::Or, Need::IntOrBool, a, b, a.where()); }
Val operator^(const Operand& a, const Operand& b) { return binary(OpKind::Xor, Need::IntOrBool, a, b, a.where()); }
Val operator<<(const Operand& a, const Operand& b) { return binary(OpKind::Shl, Need::Int, a, b, a.where()); }
Val operator>>(const Operand& a, const Operand& b) { return binary(OpKind::Shr, Need::Int, a, b, a.where()); }
Val operator<(const Operand& a, const Operand& b) { return compare("lt", a, b, a.where()); }
Val operator<=(const Operand& a, const Operand& b) { return compare("le", a, b, a.where()); }
Val operator>(const Operand& a, const Operand& b) { return compare("gt", a, b, a.where()); }
Val operator>=(const Operand& a, const Operand& b) { return compare("ge", a, b, a.where()); }
Val operator-(const Operand& a) { return unary(OpKind::Neg, Need::SignedOrFloat, a, a.where()); }
Val operator~(const Operand& a) { return unary(OpKind::Not, Need::IntOrBool, a, a.where()); }

Val cdiv(const Operand& a, const Operand& b, SrcLoc loc) {
  auto [x, y] = detail::unify(a, b, "cdiv", loc);
  check_elem(x.dtype(), Need::Int, "cdiv", x.type(), loc);
  KernelBuilder& k = detail::kb(loc);
  Val one = detail::broadcast_value(k.constant_int(x.dtype(), 1, loc), x.shape(), "cdiv", loc);
  Val t = k.emit(OpKind::Add, {x, y}, x.type(), {}, loc);
  t = k.emit(OpKind::Sub, {t, one}, x.type(), {}, loc);
  return k.emit(OpKind::Div, {t, y}, x.type(), {}, loc);
}

}  // namespace tessera::lang
