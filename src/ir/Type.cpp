#include "ir/Type.h"

#include <algorithm>
#include <cassert>
#include <climits>
#include <cmath>

namespace tessera {

namespace {
struct ScalarInfo {
  ScalarKind kind;
  std::string_view name;
  int bits;
};
constexpr ScalarInfo kScalars[] = {
#define X(name, text, bits) {ScalarKind::name, text, bits},
    TESSERA_SCALAR_KINDS(X)
#undef X
};
}  // namespace

std::string_view scalar_name(ScalarKind k) { return kScalars[static_cast<int>(k)].name; }

std::optional<ScalarKind> scalar_from_name(std::string_view s) {
  for (const auto& info : kScalars)
    if (info.name == s) return info.kind;
  return std::nullopt;
}

int scalar_bits(ScalarKind k) { return kScalars[static_cast<int>(k)].bits; }
int scalar_bytes(ScalarKind k) { return k == ScalarKind::I1 ? 1 : scalar_bits(k) / 8; }

double unit_roundoff(ScalarKind k) {
  switch (k) {
    case ScalarKind::F64: return std::ldexp(1.0, -53);
    case ScalarKind::F32: return std::ldexp(1.0, -24);
    case ScalarKind::F16: return std::ldexp(1.0, -11);
    case ScalarKind::BF16: return std::ldexp(1.0, -8);
    case ScalarKind::F8E4M3: return std::ldexp(1.0, -4);
    case ScalarKind::F8E5M2: return std::ldexp(1.0, -3);
    default: return 0;
  }
}

bool is_narrow(ScalarKind k) {
  return k == ScalarKind::F16 || k == ScalarKind::BF16 || k == ScalarKind::F8E4M3 || k == ScalarKind::F8E5M2;
}

bool is_float(ScalarKind k) {
  switch (k) {
    case ScalarKind::F8E4M3:
    case ScalarKind::F8E5M2:
    case ScalarKind::F16:
    case ScalarKind::BF16:
    case ScalarKind::F32:
    case ScalarKind::F64:
      return true;
    default:
      return false;
  }
}
bool is_int(ScalarKind k) { return !is_float(k); }
bool is_bool(ScalarKind k) { return k == ScalarKind::I1; }
bool is_signed_int(ScalarKind k) {
  return k == ScalarKind::I8 || k == ScalarKind::I16 || k == ScalarKind::I32 || k == ScalarKind::I64;
}
bool is_unsigned_int(ScalarKind k) {
  return k == ScalarKind::U8 || k == ScalarKind::U16 || k == ScalarKind::U32 || k == ScalarKind::U64;
}

const std::vector<ScalarKind>& all_scalar_kinds() {
  static const std::vector<ScalarKind> all = [] {
    std::vector<ScalarKind> v;
    for (const auto& info : kScalars) v.push_back(info.kind);
    return v;
  }();
  return all;
}

std::string bitcast_type_error(ScalarKind from, ScalarKind to) {
  auto name = [](ScalarKind k) { return std::string(scalar_name(k)); };
  // i1 is one bit held in a byte: it has no bits to reinterpret.
  if (from == ScalarKind::I1 || to == ScalarKind::I1)
    return "has no i1 form (use cast), got " + name(from) + " to " + name(to);
  if (scalar_bits(from) != scalar_bits(to))
    return "needs element types of the same width, got " + name(from) + " (" + std::to_string(scalar_bits(from)) +
           " bits) to " + name(to) + " (" + std::to_string(scalar_bits(to)) + " bits)";
  return "";
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += s[i].str();
  }
  return out + "]";
}

bool shape_is_static(const Shape& s) {
  for (const auto& d : s)
    if (!d.is_static()) return false;
  return true;
}

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (const auto& d : s) {
    assert(d.is_static());
    n *= d.value;
  }
  return n;
}

std::vector<int64_t> static_shape(const Shape& s) {
  std::vector<int64_t> out;
  for (const auto& d : s) {
    assert(d.is_static());
    out.push_back(d.value);
  }
  return out;
}

std::string Type::str() const {
  std::string e(scalar_name(elem));
  switch (kind) {
    case Kind::None:
      return "none";
    case Kind::Scalar:
      return e;
    case Kind::Ptr:
      return "ptr<" + e + ">";
    case Kind::View:
      return "view<" + e + ", " + shape_str(shape) + ">";
    case Kind::Tile:
    case Kind::Buffer:
    case Kind::Pipe: {
      std::string out = std::string(kind == Kind::Tile ? "tile" : kind == Kind::Buffer ? "buffer" : "pipe") +
                        "<" + e + ", " + shape_str(shape);
      if (!layout.empty()) out += ", layout = " + layout.str();
      if (!space.empty()) out += ", space = \"" + space + "\"";
      return out + ">";
    }
  }
  return "none";
}

}  // namespace tessera

namespace tessera {

namespace {

using DOp = DimExpr::Op;

// Binding strength in the canonical text: calls and leaves bind tightest.
int precedence(DOp op) {
  switch (op) {
    case DOp::Add:
    case DOp::Sub: return 1;
    case DOp::Mul:
    case DOp::Div: return 2;
    default: return 3;
  }
}

const char* op_text(DOp op) {
  switch (op) {
    case DOp::Add: return "+";
    case DOp::Sub: return "-";
    case DOp::Mul: return "*";
    case DOp::Div: return "/";
    case DOp::Cdiv: return "cdiv";
    case DOp::Min: return "min";
    case DOp::Max: return "max";
    default: return "?";
  }
}

}  // namespace

Dim::Dim(std::shared_ptr<const DimExpr> e) : expr(std::move(e)) { symbol = expr->str(); }

std::shared_ptr<const DimExpr> DimExpr::leaf(const Dim& d) {
  if (d.expr) return d.expr;
  auto e = std::make_shared<DimExpr>();
  if (d.is_static()) {
    e->op = Op::Int;
    e->value = d.value;
  } else {
    e->op = Op::Name;
    e->name = d.symbol;
  }
  return e;
}

std::shared_ptr<const DimExpr> DimExpr::make(Op op, const Dim& a, const Dim& b) {
  auto e = std::make_shared<DimExpr>();
  e->op = op;
  e->lhs = leaf(a);
  e->rhs = leaf(b);
  return e;
}

std::string DimExpr::str() const {
  switch (op) {
    case Op::Int: return std::to_string(value);
    case Op::Name: return name;
    case Op::Cdiv:
    case Op::Min:
    case Op::Max: return std::string(op_text(op)) + "(" + lhs->str() + ", " + rhs->str() + ")";
    default: break;
  }
  // Operators are left-associative: a right operand of the same strength keeps its
  // parentheses (a - (b - c)), a left one does not need them ((a - b) - c is a - b - c).
  int p = precedence(op);
  auto side = [&](const DimExpr& e, bool right) {
    int q = precedence(e.op);
    return q < p || (right && q == p) ? "(" + e.str() + ")" : e.str();
  };
  return side(*lhs, false) + " " + op_text(op) + " " + side(*rhs, true);
}

Dim dim_expr(DimExpr::Op op, const Dim& a, const Dim& b) { return Dim(DimExpr::make(op, a, b)); }
Dim operator+(const Dim& a, const Dim& b) { return dim_expr(DOp::Add, a, b); }
Dim operator-(const Dim& a, const Dim& b) { return dim_expr(DOp::Sub, a, b); }
Dim operator*(const Dim& a, const Dim& b) { return dim_expr(DOp::Mul, a, b); }
Dim operator/(const Dim& a, const Dim& b) { return dim_expr(DOp::Div, a, b); }
Dim cdiv(const Dim& a, const Dim& b) { return dim_expr(DOp::Cdiv, a, b); }
Dim min(const Dim& a, const Dim& b) { return dim_expr(DOp::Min, a, b); }
Dim max(const Dim& a, const Dim& b) { return dim_expr(DOp::Max, a, b); }

std::vector<std::string> dim_names(const Dim& d) {
  std::vector<std::string> out;
  std::function<void(const DimExpr&)> walk = [&](const DimExpr& e) {
    if (e.op == DOp::Name) {
      if (std::find(out.begin(), out.end(), e.name) == out.end()) out.push_back(e.name);
    } else if (e.lhs) {
      walk(*e.lhs);
      walk(*e.rhs);
    }
  };
  if (d.expr) walk(*d.expr);
  else if (!d.is_static()) out.push_back(d.symbol);
  return out;
}

DimValue eval_dim(const Dim& d, const std::function<std::optional<int64_t>(const std::string&)>& lookup) {
  DimValue r;
  std::function<std::optional<int64_t>(const DimExpr&)> ev = [&](const DimExpr& e) -> std::optional<int64_t> {
    if (e.op == DOp::Int) return e.value;
    if (e.op == DOp::Name) {
      if (auto v = lookup(e.name)) return v;
      r.error = "names '" + e.name + "', which is not a constexpr";
      r.unknown_name = true;
      return std::nullopt;
    }
    auto a = ev(*e.lhs);
    if (!a) return std::nullopt;
    auto b = ev(*e.rhs);
    if (!b) return std::nullopt;
    int64_t x = *a, y = *b, z = 0;
    auto say = [&](const std::string& why) {
      r.error = e.str() + " is " + std::to_string(x) + " " + op_text(e.op) + " " + std::to_string(y) + ": " + why;
      if (e.op >= DOp::Cdiv)
        r.error = e.str() + " is " + op_text(e.op) + "(" + std::to_string(x) + ", " + std::to_string(y) + "): " + why;
      return std::nullopt;
    };
    bool overflow = false;
    switch (e.op) {
      case DOp::Add: overflow = __builtin_add_overflow(x, y, &z); break;
      case DOp::Sub: overflow = __builtin_sub_overflow(x, y, &z); break;
      case DOp::Mul: overflow = __builtin_mul_overflow(x, y, &z); break;
      case DOp::Div:
        if (y == 0) return say("division by zero");
        if (x == INT64_MIN && y == -1) {  // before x % y, which traps on it (SIGFPE)
          overflow = true;
          break;
        }
        if (x % y != 0) return say("'/' in a shape must divide evenly (cdiv rounds up)");
        z = x / y;
        break;
      case DOp::Cdiv:
        if (y <= 0) return say("cdiv needs a positive divisor");
        z = x / y + (x % y > 0 ? 1 : 0);
        break;
      case DOp::Min: z = std::min(x, y); break;
      case DOp::Max: z = std::max(x, y); break;
      default: break;
    }
    if (overflow) return say("overflows int64");
    return z;
  };
  if (d.is_static()) {
    r.value = d.value;
  } else if (auto v = ev(*DimExpr::leaf(d))) {
    r.value = *v;
  }
  return r;
}

}  // namespace tessera
