// tanh-sums-to-sigmoid: 1 + tanh(y) becomes 2 sigmoid(2y), and 1 - tanh(y) becomes
// 2 sigmoid(-2y) (the same functions: 1 + tanh(y) = 2 / (1 + e^(-2y))).
//
// Why: the sum cancels where tanh(y) nears -1. In f32, 1 + tanh(-5) keeps about 11 of its 24
// bits (tanh(-5) = -0.99990920, one ulp of it 6e-8 against a sum of 9.1e-5), and the tanh-form
// GELU, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), inherits that error for x < -2; the
// sigmoid form has no cancellation (its relative error is its exp's and division's). It is also
// cheaper where it runs: on cuda one exp and one approximate division (tsr::fsigmoid) against
// tanhf's 17 instructions (with its own exp and reciprocal); the H200 ran matmul + bias + GELU
// at 4096^3 in 0.197-0.201 ms through sigmoid against 0.203-0.204 through tanh
// (bench/RESULTS.md, session 23). The factors of 2 are exact (a power of two scales without
// rounding, short of overflow, where both forms reach their limits 0 and 2 alike).
//
// Rewrites an `add` of a tanh and a 1 (either order) or a `sub` of a tanh from a 1, in f32 or
// f64, where the 1 is a `const` or a `splat` of one and the tanh's result has no other use (else
// both would be computed). Stat tanh-sums-to-sigmoid.rewritten.
#include <unordered_map>
#include <vector>

#include "ir/IR.h"
#include "passes/Passes.h"

namespace tessera {

namespace {

// Whether `v` is the constant 1: a `const` of value 1, or a `splat` of one.
bool is_one(const Value* v) {
  const Op* d = v ? v->def : nullptr;
  if (d && d->kind == OpKind::Splat) d = d->operand(0)->def;
  if (!d || d->kind != OpKind::Const) return false;
  const Attr* a = d->find_attr("value");
  if (!a) return false;
  if (const double* x = std::get_if<double>(a)) return *x == 1.0;
  if (const int64_t* i = std::get_if<int64_t>(a)) return *i == 1;
  return false;
}

class Rewriter {
 public:
  explicit Rewriter(Kernel& k) : k_(k) {
    walk(k_, [&](Op& op) {
      for (const Value* v : op.operands) ++uses_[v];
    });
  }

  int64_t run(Block& b) {
    int64_t n = 0;
    std::vector<Op*> ops;  // (the rewrite inserts in front of the op it rewrites)
    for (auto& o : b.ops) ops.push_back(o.get());
    for (Op* o : ops) {
      Op& op = *o;
      for (auto& r : op.regions)
        if (r) n += run(*r);
      Value* y = nullptr;
      double sign = 1.0;
      if (!match(op, y, sign)) continue;
      rewrite(op, y, sign);
      ++n;
    }
    return n;
  }

 private:
  Kernel& k_;
  std::unordered_map<const Value*, int64_t> uses_;

  // `op` is 1 + tanh(y) (sign 1) or 1 - tanh(y) (sign -1) with the tanh used only here.
  bool match(const Op& op, Value*& y, double& sign) {
    if ((op.kind != OpKind::Add && op.kind != OpKind::Sub) || op.operands.size() != 2 || op.results.size() != 1)
      return false;
    const Type& t = op.result()->type;
    if (t.elem != ScalarKind::F32 && t.elem != ScalarKind::F64) return false;
    auto tanh_of = [&](const Value* v) -> Value* {
      const Op* d = v->def;
      if (!d || d->kind != OpKind::Tanh || uses_[v] != 1 || d->operand(0)->type != t) return nullptr;
      return d->operand(0);
    };
    if (op.operand(0)->type != t || op.operand(1)->type != t) return false;
    if (is_one(op.operand(0))) {
      y = tanh_of(op.operand(1));
      sign = op.kind == OpKind::Add ? 1.0 : -1.0;
    } else if (op.kind == OpKind::Add && is_one(op.operand(1))) {
      y = tanh_of(op.operand(0));
    }
    return y != nullptr;
  }

  // A constant of `t` (a scalar, or its splat over a tile) in front of `before`.
  Value* constant(Op& before, const Type& t, double value) {
    Value* c = k_.create_op(*before.parent, OpKind::Const, {}, {Type::scalar(t.elem)}, {{"value", value}}, before.loc, 0,
                            &before)->result();
    if (t.is_scalar()) return c;
    return k_.create_op(*before.parent, OpKind::Splat, {c}, {t}, {}, before.loc, 0, &before)->result();
  }

  // The new ops go where the tanh was (y is defined before it, and the tanh before the sum): a
  // tanh hoisted out of a loop whose sum stays in it keeps its sigmoid out of the loop too.
  void rewrite(Op& op, Value* y, double sign) {
    Op& at = *(op.operand(0)->def->kind == OpKind::Tanh && op.operand(0)->def->operand(0) == y ? op.operand(0)->def
                                                                                                : op.operand(1)->def);
    Block& b = *at.parent;
    const Type t = op.result()->type;
    Value* two_y = k_.create_op(b, OpKind::Mul, {constant(at, t, 2.0 * sign), y}, {t}, {}, at.loc, 0, &at)->result();
    Value* sig = k_.create_op(b, OpKind::Sigmoid, {two_y}, {t}, {}, at.loc, 0, &at)->result();
    Value* out = k_.create_op(b, OpKind::Mul, {constant(at, t, 2.0), sig}, {t}, {}, at.loc, 0, &at)->result();
    out->name = op.result()->name;
    op.result()->name.clear();
    replace_all_uses(k_, op.result(), out);
    // The sum and its tanh are left without uses: dce removes them.
  }
};

}  // namespace

void tanh_sums_to_sigmoid(Kernel& k, PassStats& stats) {
  Rewriter r(k);
  int64_t n = 0;
  if (k.grid) n += r.run(*k.grid);
  if (k.body) n += r.run(*k.body);
  stats["tanh-sums-to-sigmoid.rewritten"] += n;
}

}  // namespace tessera
