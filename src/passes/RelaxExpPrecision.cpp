// relax-exp-precision: an f32 `exp` whose result reaches memory only as a narrow float (bf16,
// f16, f8), through ops that keep a relative error relative, gets `max_rel_error =
// kRelaxedExpError` (2^-16): a backend may then compute it with fewer instructions (the cpu
// backend does; cuda's exp is already exp2f of x log2(e) and ignores it).
//
// Why: the bf16 softmax on cpu spends most of its row in exp (the runtime's f32 exp is 13
// AVX-512 instructions a vector, about 1 ulp of f32: 2^-24), and its result is rounded to bf16
// (unit roundoff 2^-8) before anyone sees it. An exp within 2^-16 is 7 instructions (a
// degree-4 polynomial of 2^f after vreduceps; tsr::exp16_relaxed): bench/RESULTS.md, session 47.
//
// The rule, so that no output can tell beyond a small part of its own rounding:
// - the exp's result is f32 (a tile or a scalar), and every path from it to an effect is through
//   mul, div (either operand), max, min, an add of two values that cannot be negative, a sum
//   reduce of such a value, a max/min reduce, a shape op (broadcast, expand_dims, reshape,
//   permute, splat, convert_layout) or a cast to f32/f64, and ends at a cast to a narrow float
//   whose every use is the value of a store_tile into a view the kernel never reads (a value
//   read back could meet a sub, where a flipped rounding would be magnified). Along such a path
//   relative errors add (a product's, a quotient's) or stay (a max, a sum of non-negative
//   terms): no cancellation. Anything else (a sub, a compare, a yield, an f32 store, another
//   exp) keeps the exp exact. (Where an intermediate overflows or underflows, both forms give
//   inf or 0 near the same arguments, not always the same ones.)
// - each stored value counts the relaxed exps it depends on (a product adds its operands'
//   counts, a sum or max takes the larger; an exp written with max_rel_error = r counts
//   ceil(r / 2^-16)), and count x 2^-16 stays within an eighth of the narrow type's unit
//   roundoff (bf16 2^-8: up to 32; f16 2^-11: up to 4); where it does not, every exp the value
//   depends on that this pass would relax stays exact.
// The interpreter ignores the attribute (it computes exp in double): `run --check` and the
// pass-file tests hold the relaxed backends to the same tolerances. Stat
// relax-exp-precision.relaxed.
#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/IR.h"
#include "passes/Passes.h"

namespace tessera {

namespace {

bool narrow_float(ScalarKind k) {
  return k == ScalarKind::BF16 || k == ScalarKind::F16 || k == ScalarKind::F8E4M3 || k == ScalarKind::F8E5M2;
}

bool shape_op(OpKind k) {
  return k == OpKind::Broadcast || k == OpKind::ExpandDims || k == OpKind::Reshape || k == OpKind::Permute ||
         k == OpKind::Splat || k == OpKind::ConvertLayout;
}

bool wide_float(ScalarKind k) { return k == ScalarKind::F32 || k == ScalarKind::F64; }

class Relaxer {
 public:
  explicit Relaxer(Kernel& k) : k_(k) {
    walk(k_, [&](Op& op) {
      for (size_t i = 0; i < op.operands.size(); ++i) {
        uses_[op.operands[i]].push_back({&op, i});
        if (op.operands[i]->type.is_view() && op.kind != OpKind::StoreTile && op.kind != OpKind::Dim)
          read_views_.insert(op.operands[i]);
      }
    });
  }

  int64_t run() {
    std::vector<Op*> relaxed;
    walk(k_, [&](Op& op) {
      if (op.kind == OpKind::Exp && op.results.size() == 1 && !op.has_attr("max_rel_error") &&
          op.result()->type.elem == ScalarKind::F32 && tolerant(op.result()))
        relaxed.push_back(&op);
    });
    if (relaxed.empty()) return 0;
    for (Op* e : relaxed) chosen_.insert(e);
    // Count each stored value's relaxed exps; a store over its budget keeps its exps exact.
    walk(k_, [&](Op& op) { count(op); });
    for (const Value* v : over_budget_) keep_exact(v);
    int64_t n = 0;
    for (Op* e : relaxed)
      if (chosen_.count(e)) {
        e->set_attr("max_rel_error", kRelaxedExpError);
        ++n;
      }
    return n;
  }

 private:
  struct Use {
    Op* op;
    size_t index;
  };
  Kernel& k_;
  std::unordered_map<const Value*, std::vector<Use>> uses_;
  std::unordered_map<const Value*, bool> tolerant_;  // memo (false while being decided)
  std::unordered_map<const Value*, bool> nonneg_;    // memo, likewise
  std::unordered_set<const Value*> read_views_;      // views some op reads (not a store_tile or dim)
  std::unordered_set<const Op*> chosen_;
  std::unordered_map<const Value*, int64_t> count_;
  std::vector<const Value*> over_budget_;

  const std::vector<Use>& uses(const Value* v) {
    static const std::vector<Use> none;
    auto it = uses_.find(v);
    return it == uses_.end() ? none : it->second;
  }

  // Whether v cannot be negative (NaN aside, which both forms of exp pass through alike).
  // Memoized: a chain of adds of a value to itself would otherwise take 2^length steps.
  bool nonneg(const Value* v) {
    if (auto it = nonneg_.find(v); it != nonneg_.end()) return it->second;
    nonneg_[v] = false;
    const bool r = nonneg_uncached(v);
    nonneg_[v] = r;
    return r;
  }
  bool nonneg_uncached(const Value* v) {
    const Op* d = v->def;
    if (!d) return false;
    switch (d->kind) {
      case OpKind::Exp: return true;
      case OpKind::Const: {
        const Attr* a = d->find_attr("value");
        if (!a) return false;
        if (const double* x = std::get_if<double>(a)) return *x >= 0;
        if (const int64_t* i = std::get_if<int64_t>(a)) return *i >= 0;
        return false;
      }
      case OpKind::Mul:
      case OpKind::Div:
      case OpKind::Add:
      case OpKind::Max:
      case OpKind::Min: return nonneg(d->operand(0)) && nonneg(d->operand(1));
      case OpKind::Reduce: {
        const std::string& kind = d->attr_string("kind");
        return (kind == "sum" || kind == "max" || kind == "min") && nonneg(d->operand(0));
      }
      case OpKind::Cast: return wide_float(d->result()->type.elem) && nonneg(d->operand(0));
      default: return shape_op(d->kind) && nonneg(d->operand(0));
    }
  }

  // Whether every path from v to an effect keeps v's relative error relative and ends in a
  // narrow-float store (the rule above).
  bool tolerant(const Value* v) {
    if (auto it = tolerant_.find(v); it != tolerant_.end()) return it->second;
    tolerant_[v] = false;  // a cycle (none in SSA outside loops, which end at yields) says no
    bool ok = !uses(v).empty();
    for (const Use& u : uses(v)) {
      const Op& op = *u.op;
      if (op.results.size() != 1) {
        ok = false;
      } else if (op.kind == OpKind::Mul || op.kind == OpKind::Div || op.kind == OpKind::Max ||
                 op.kind == OpKind::Min || shape_op(op.kind)) {
        ok = tolerant(op.result());
      } else if (op.kind == OpKind::Add) {
        ok = nonneg(op.operand(0)) && nonneg(op.operand(1)) && tolerant(op.result());
      } else if (op.kind == OpKind::Reduce) {
        const std::string& kind = op.attr_string("kind");
        ok = (kind == "max" || kind == "min" || (kind == "sum" && nonneg(v))) && tolerant(op.result());
      } else if (op.kind == OpKind::Cast && wide_float(op.result()->type.elem)) {
        ok = tolerant(op.result());
      } else if (op.kind == OpKind::Cast && narrow_float(op.result()->type.elem)) {
        const auto& stores = uses(op.result());
        ok = !stores.empty() && std::all_of(stores.begin(), stores.end(), [&](const Use& s) {
          return s.op->kind == OpKind::StoreTile && s.index == 1 && !read_views_.count(s.op->operand(0));
        });
      } else {
        ok = false;
      }
      if (!ok) break;
    }
    tolerant_[v] = ok;
    return ok;
  }

  static constexpr int64_t kMaxCount = int64_t{1} << 20;  // (saturates: every budget is far below)
  int64_t counted(const Value* v) const {
    auto it = count_.find(v);
    return it == count_.end() ? 0 : it->second;
  }

  // In program order (walk's pre-order): each result's number of relaxed exps it depends on.
  void count(const Op& op) {
    if (op.results.size() != 1) return;
    const Value* r = op.result();
    int64_t c = 0;
    if (op.kind == OpKind::Exp && chosen_.count(&op)) {
      c = 1;
    } else if (op.kind == OpKind::Exp && op.has_attr("max_rel_error")) {  // written so: its own share
      c = int64_t(std::ceil(std::min(op.attr_number("max_rel_error"), 1.0) / kRelaxedExpError));
    } else if (op.kind == OpKind::Mul || op.kind == OpKind::Div) {
      c = std::min(counted(op.operand(0)) + counted(op.operand(1)), kMaxCount);
    } else if (op.kind == OpKind::Add || op.kind == OpKind::Max || op.kind == OpKind::Min) {
      c = std::max(counted(op.operand(0)), counted(op.operand(1)));
    } else if (op.kind == OpKind::Reduce || op.kind == OpKind::Cast || shape_op(op.kind)) {
      c = counted(op.operand(0));
    }
    if (c == 0) return;
    count_[r] = c;
    if (op.kind == OpKind::Cast && narrow_float(r->type.elem) &&
        double(c) * kRelaxedExpError > unit_roundoff(r->type.elem) / 8)
      over_budget_.push_back(r);
  }

  // Every relaxed exp that v depends on stays exact.
  void keep_exact(const Value* v) {
    std::vector<const Value*> stack{v};
    std::unordered_set<const Value*> seen;
    while (!stack.empty()) {
      const Value* x = stack.back();
      stack.pop_back();
      if (!seen.insert(x).second || counted(x) == 0 || !x->def) continue;
      chosen_.erase(x->def);
      for (const Value* o : x->def->operands) stack.push_back(o);
    }
  }
};

}  // namespace

void relax_exp_precision(Kernel& k, PassStats& stats) {
  stats["relax-exp-precision.relaxed"] += Relaxer(k).run();
}

}  // namespace tessera
