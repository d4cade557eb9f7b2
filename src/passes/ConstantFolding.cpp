// canonicalize: fold scalar integer and float arithmetic whose operands are constants into one
// `const`, so that index math on bound constexprs (BLOCK_N / 2, N * 4) becomes a number.
// Only what is exact here is folded: integers with their wrap-around, f32 and f64 (computed in
// double and rounded once, which is exact for one + - * / of f32 operands). Division by zero
// is left for the interpreter to report. A broadcast to its operand's own type (what a
// kernel written for a BLOCK_M-row tile leaves at BLOCK_M = 1) is replaced by its operand.
#include <cmath>
#include <optional>

#include "ir/IR.h"
#include "passes/Passes.h"

namespace tessera {

namespace {

bool foldable_type(const Type& t) {
  if (!t.is_scalar()) return false;
  switch (t.elem) {
    case ScalarKind::I8:
    case ScalarKind::I16:
    case ScalarKind::I32:
    case ScalarKind::I64:
    case ScalarKind::U8:
    case ScalarKind::U16:
    case ScalarKind::U32:
    case ScalarKind::F32:
    case ScalarKind::F64:
      return true;
    default:
      return false;
  }
}

// Two's complement wrap of `v` to integer kind `k` (no u64 here).
int64_t wrap(ScalarKind k, uint64_t v) {
  int bits = scalar_bits(k);
  if (bits >= 64) return static_cast<int64_t>(v);
  uint64_t mask = (uint64_t{1} << bits) - 1;
  v &= mask;
  if (is_signed_int(k) && (v >> (bits - 1)) & 1) v |= ~mask;
  return static_cast<int64_t>(v);
}

const Attr* const_value(const Value* v) {
  if (!v || !v->def || v->def->kind != OpKind::Const) return nullptr;
  return v->def->find_attr("value");
}

std::optional<Attr> fold_int(OpKind kind, ScalarKind t, int64_t a, int64_t b) {
  uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
  switch (kind) {
    case OpKind::Add: return wrap(t, ua + ub);
    case OpKind::Sub: return wrap(t, ua - ub);
    case OpKind::Mul: return wrap(t, ua * ub);
    case OpKind::Div:
    case OpKind::Rem:
      if (b == 0) return std::nullopt;
      // The one quotient that overflows int64; narrower types compute it exactly in 64 bits.
      if (t == ScalarKind::I64 && a == INT64_MIN && b == -1) return std::nullopt;
      // Unsigned values up to u32 are held non-negative, so signed 64-bit division is exact.
      return wrap(t, static_cast<uint64_t>(kind == OpKind::Div ? a / b : a % b));
    case OpKind::Min: return std::min(a, b);
    case OpKind::Max: return std::max(a, b);
    case OpKind::And: return wrap(t, ua & ub);
    case OpKind::Or: return wrap(t, ua | ub);
    case OpKind::Xor: return wrap(t, ua ^ ub);
    default: return std::nullopt;
  }
}

std::optional<Attr> fold_float(OpKind kind, ScalarKind t, double a, double b) {
  // A constant's value is its attribute rounded to the type.
  if (t == ScalarKind::F32) {
    a = static_cast<double>(static_cast<float>(a));
    b = static_cast<double>(static_cast<float>(b));
  }
  double r;
  switch (kind) {
    case OpKind::Add: r = a + b; break;
    case OpKind::Sub: r = a - b; break;
    case OpKind::Mul: r = a * b; break;
    case OpKind::Div: r = a / b; break;
    case OpKind::Min: r = (std::isnan(a) || std::isnan(b)) ? NAN : std::min(a, b); break;
    case OpKind::Max: r = (std::isnan(a) || std::isnan(b)) ? NAN : std::max(a, b); break;
    default: return std::nullopt;
  }
  if (t == ScalarKind::F32) r = static_cast<double>(static_cast<float>(r));
  return r;
}

std::optional<Attr> fold(const Op& op) {
  if (op.info().cls != OpClass::Binary || op.operands.size() != 2 || op.results.size() != 1) return std::nullopt;
  const Type& t = op.results[0]->type;
  if (!foldable_type(t)) return std::nullopt;
  const Attr* a = const_value(op.operands[0]);
  const Attr* b = const_value(op.operands[1]);
  if (!a || !b || op.operands[0]->type != t || op.operands[1]->type != t) return std::nullopt;
  if (is_int(t.elem)) {
    if (!std::holds_alternative<int64_t>(*a) || !std::holds_alternative<int64_t>(*b)) return std::nullopt;
    return fold_int(op.kind, t.elem, std::get<int64_t>(*a), std::get<int64_t>(*b));
  }
  auto num = [](const Attr& x) {
    return std::holds_alternative<int64_t>(x) ? static_cast<double>(std::get<int64_t>(x)) : std::get<double>(x);
  };
  return fold_float(op.kind, t.elem, num(*a), num(*b));
}

int64_t fold_block(Block& b) {
  int64_t folded = 0;
  for (auto& op : b.ops) {
    for (auto& r : op->regions) folded += fold_block(*r);
    if (auto v = fold(*op)) {
      // The op becomes the constant in place; its now-unused operands are left for dce.
      op->kind = OpKind::Const;
      op->operands.clear();
      op->attrs = {NamedAttr{"value", *v}};
      ++folded;
    }
  }
  return folded;
}

// Broadcasts whose result has the operand's type, in `b` and its regions.
void identity_broadcasts(Block& b, std::vector<Op*>& out) {
  for (auto& op : b.ops) {
    for (auto& r : op->regions) identity_broadcasts(*r, out);
    if (op->kind == OpKind::Broadcast && op->operands.size() == 1 && op->results.size() == 1 &&
        op->operands[0]->type == op->results[0]->type)
      out.push_back(op.get());
  }
}

}  // namespace

void canonicalize(Kernel& k, PassStats& stats) {
  int64_t n = fold_block(*k.grid);
  n += fold_block(*k.body);
  stats["canonicalize.folded"] += n;
  // The broadcast's uses read its operand instead; the op itself is left for dce.
  std::vector<Op*> same;
  identity_broadcasts(*k.body, same);
  for (Op* op : same) replace_all_uses(k, op->results[0], op->operands[0]);
  stats["canonicalize.identity-broadcasts"] += static_cast<int64_t>(same.size());
}

}  // namespace tessera
