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
//   terms): no cancellation. A value carried by a `for` (its init or its body's yield) or
//   leaving an `if` is followed to its uses there; anything else (a sub, a compare, a `while`,
//   an f32 store, another exp) keeps the exp exact. (Where an intermediate overflows or
//   underflows, both forms give inf or 0 near the same arguments, not always the same ones.)
// - each stored value counts the relaxed exps it depends on (a product adds its operands'
//   counts, a sum or max takes the larger, a carried value the larger of its init's and its
//   yield's; an exp written with max_rel_error = r counts ceil(r / 2^-16)), and count x 2^-16
//   stays within an eighth of the narrow type's unit roundoff (bf16 2^-8: up to 32; f16
//   2^-11: up to 4); where it does not, every exp the value depends on that this pass would
//   relax stays exact. A count that grows around a loop (an exp multiplied into a carried
//   value every trip: the online softmax's rescale exp(m_old - m_new)) keeps that exp exact,
//   while the running sum's own exp, added each trip, stays relaxed (its count stays 1).
// Both "may be relaxed" and "cannot be negative" are greatest fixpoints over the kernel's
// values (a loop-carried sum of exps, 0 at first, is non-negative by induction); the counts
// a least fixpoint.
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

bool shape_op(OpKind k) {
  return k == OpKind::Broadcast || k == OpKind::ExpandDims || k == OpKind::Reshape || k == OpKind::Permute ||
         k == OpKind::Splat || k == OpKind::ConvertLayout;
}

bool wide_float(ScalarKind k) { return k == ScalarKind::F32 || k == ScalarKind::F64; }

// Where a value goes or comes from through control flow: a `for`'s init (operand 3 + i) and
// its body's yield (operand i) both become the body's argument 1 + i and the loop's result i;
// an `if` branch's yield operand i becomes the `if`'s result i. Anything else (a `while`, a
// combiner region) is opaque: the rule says no there.
struct Flow {
  std::vector<const Value*> to;  // the values it becomes
  bool opaque = false;
};

class Relaxer {
 public:
  explicit Relaxer(Kernel& k) : k_(k) {
    for (Block* b : {k_.grid.get(), k_.body.get()})
      if (b)
        for (Value* a : b->args) opaque_.push_back(a);
    walk(k_, [&](Op& op) {
      ops_.push_back(&op);
      for (Value* r : op.results)
        if (auto src = compute_sources(r); !src.empty()) sources_[r] = std::move(src);
      for (const auto& region : op.regions)
        for (Value* a : region->args)
          if (auto src = compute_sources(a); !src.empty()) sources_[a] = std::move(src);
      for (Value* r : op.results) values_.push_back(r);
      for (const auto& region : op.regions)
        for (Value* a : region->args) values_.push_back(a);
      for (size_t i = 0; i < op.operands.size(); ++i) {
        uses_[op.operands[i]].push_back({&op, i});
        if (op.operands[i]->type.is_view() && op.kind != OpKind::StoreTile && op.kind != OpKind::Dim)
          read_views_.insert(op.operands[i]);
      }
    });
  }

  int64_t run() {
    solve_nonneg();
    solve_tolerant();
    std::vector<Op*> relaxed;
    for (Op* op : ops_)
      if (op->kind == OpKind::Exp && op->results.size() == 1 && !op->has_attr("max_rel_error") &&
          op->result()->type.elem == ScalarKind::F32 && tolerant_.at(op->result()))
        relaxed.push_back(op);
    for (Op* e : relaxed) chosen_.insert(e);
    // Count each stored value's relaxed exps. A count that grows around a loop (an exp
    // multiplied into a carried value every iteration: softmax's rescale exp(m_old - m_new))
    // keeps that exp exact, found by counting with it alone relaxed; a store over its budget
    // keeps every exp it depends on exact; count again until nothing is left over.
    while (!chosen_.empty()) {
      Counts c = count_all(chosen_, true);
      const std::vector<const Op*> grow_slice = slice_exps(c.capped), over_slice = slice_exps(c.over);
      if (!grow_slice.empty()) {
        // The exps whose count alone (written exps not counted) reaches the cap: on a cycle.
        std::vector<const Op*> drop;
        for (const Op* e : grow_slice)
          if (!count_all({e}, false).capped.empty()) drop.push_back(e);
        for (const Op* e : drop.empty() ? grow_slice : drop) chosen_.erase(e);
        continue;
      }
      if (over_slice.empty()) break;  // (what is over budget is written exps' doing, not ours)
      for (const Op* e : over_slice) chosen_.erase(e);
    }
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
  // Counts saturate here, over every budget (f8e5m2's, the largest, is 1024): a count that
  // grows around a loop reaches it, which is how growth is found.
  static constexpr int64_t kCap = 1025;
  Kernel& k_;
  std::vector<Op*> ops_;             // every op, in program order (walk's pre-order)
  std::vector<const Value*> values_;  // every result and region argument of an op
  std::vector<const Value*> opaque_;  // the grid's and body's own arguments (none today)
  std::unordered_map<const Value*, std::vector<Use>> uses_;
  std::unordered_map<const Value*, std::vector<const Value*>> sources_;  // compute_sources, where not empty
  std::unordered_set<const Value*> read_views_;  // views some op reads (not a store_tile or dim)
  std::unordered_map<const Value*, bool> nonneg_, tolerant_;
  std::unordered_set<const Op*> chosen_;
  std::unordered_map<const Value*, int64_t> count_;

  const std::vector<Use>& uses(const Value* v) const {
    static const std::vector<Use> none;
    auto it = uses_.find(v);
    return it == uses_.end() ? none : it->second;
  }

  // What operand `index` of `op` becomes through control flow (`to` empty: not a flow).
  static Flow flow(const Op& op, size_t index) {
    Flow f;
    if (op.kind == OpKind::For && index >= 3) {
      const size_t i = index - 3;
      f.to = {op.results.at(i), op.region(0).args.at(1 + i)};
    } else if (op.kind == OpKind::Yield) {
      const Op* owner = op.parent ? op.parent->parent : nullptr;
      if (owner && owner->kind == OpKind::For) {
        f.to = {owner->results.at(index), owner->region(0).args.at(1 + index)};
      } else if (owner && owner->kind == OpKind::If) {
        f.to = {owner->results.at(index)};
      } else {
        f.opaque = true;  // a while, a combiner, the grid's or a role's yield
      }
    } else if (op.kind == OpKind::While || op.kind == OpKind::If) {
      f.opaque = op.kind == OpKind::While;  // an if's operand is its condition: not a flow
    }
    return f;
  }

  // The values that flow into v (an init and a yield for a loop's argument or result, the
  // branches' yields for an if's result), or null when v is made by an op or an opaque region.
  static std::vector<const Value*> compute_sources(const Value* v) {
    std::vector<const Value*> src;
    auto yielded = [](const Block& b, size_t i) -> const Value* {
      const Op* y = b.terminator();
      return y && i < y->operands.size() ? y->operand(i) : nullptr;
    };
    if (v->def && v->def->kind == OpKind::For) {
      const Op& f = *v->def;
      src = {f.operand(3 + size_t(v->index)), yielded(f.region(0), size_t(v->index))};
    } else if (v->def && v->def->kind == OpKind::If) {
      for (const auto& r : v->def->regions) src.push_back(yielded(*r, size_t(v->index)));
    } else if (!v->def && v->block && v->block->parent && v->block->parent->kind == OpKind::For && v->index >= 1) {
      const Op& f = *v->block->parent;
      src = {f.operand(2 + size_t(v->index)), yielded(f.region(0), size_t(v->index) - 1)};
    }
    if (std::find(src.begin(), src.end(), nullptr) != src.end()) return {};  // (unverified IR)
    return src;
  }
  // compute_sources of v, worked out once (the fixpoints ask for it again and again).
  const std::vector<const Value*>& sources(const Value* v) const {
    static const std::vector<const Value*> none;
    auto it = sources_.find(v);
    return it == sources_.end() ? none : it->second;
  }

  // nonneg: v cannot be negative (NaN aside, which both forms of exp pass through alike). The
  // greatest fixpoint: everything starts non-negative and loses it until nothing changes (a
  // loop-carried sum of exps, 0 at first, stays non-negative by induction).
  bool nonneg_rule(const Value* v) const {
    auto n = [&](const Value* x) { return nonneg_.at(x); };
    if (!is_float(v->type.elem)) return false;  // (integers wrap: a sum of positives may not be)
    const Op* d = v->def;
    if (!d || d->kind == OpKind::For || d->kind == OpKind::If) {  // what flows into it
      const std::vector<const Value*>& src = sources(v);
      return !src.empty() && std::all_of(src.begin(), src.end(), n);
    }
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
      case OpKind::Min: return n(d->operand(0)) && n(d->operand(1));
      case OpKind::Reduce: {
        const std::string& kind = d->attr_string("kind");
        return (kind == "sum" || kind == "max" || kind == "min") && n(d->operand(0));
      }
      case OpKind::Cast: return wide_float(d->result()->type.elem) && n(d->operand(0));
      default: return shape_op(d->kind) && n(d->operand(0));
    }
  }

  // tolerant: every path from v to an effect keeps v's relative error relative and ends in a
  // narrow-float store (the rule above); through a loop it follows the carried value around.
  // The greatest fixpoint as well.
  bool tolerant_rule(const Value* v) const {
    auto t = [&](const Value* x) { return tolerant_.at(x); };
    if (uses(v).empty()) return false;
    for (const Use& u : uses(v)) {
      const Op& op = *u.op;
      const Flow f = flow(op, u.index);
      bool ok = false;
      if (f.opaque) return false;
      if (!f.to.empty()) {
        ok = std::all_of(f.to.begin(), f.to.end(), t);
      } else if (op.results.size() != 1) {
        ok = false;
      } else if (op.kind == OpKind::Mul || op.kind == OpKind::Div || op.kind == OpKind::Max ||
                 op.kind == OpKind::Min || shape_op(op.kind)) {
        ok = t(op.result());
      } else if (op.kind == OpKind::Add) {
        ok = nonneg_.at(op.operand(0)) && nonneg_.at(op.operand(1)) && t(op.result());
      } else if (op.kind == OpKind::Reduce) {
        const std::string& kind = op.attr_string("kind");
        ok = (kind == "max" || kind == "min" || (kind == "sum" && nonneg_.at(v))) && t(op.result());
      } else if (op.kind == OpKind::Cast && wide_float(op.result()->type.elem)) {
        ok = t(op.result());
      } else if (op.kind == OpKind::Cast && is_narrow(op.result()->type.elem)) {
        const auto& stores = uses(op.result());
        ok = !stores.empty() && std::all_of(stores.begin(), stores.end(), [&](const Use& s) {
          return s.op->kind == OpKind::StoreTile && s.index == 1 && !read_views_.count(s.op->operand(0));
        });
      }
      if (!ok) return false;
    }
    return true;
  }

  // Everything starts true; a value whose rule fails turns false, and the values whose rules
  // read it (`dependents`) are checked again: a worklist, so each value is checked once plus
  // once for each dependency that turns false (linear in values and uses).
  template <class Rule, class Dependents>
  void greatest_fixpoint(std::unordered_map<const Value*, bool>& m, Rule rule, Dependents dependents) {
    for (const Value* v : values_) m[v] = true;
    for (const Value* p : k_.params) m[p] = false;
    for (const Value* a : opaque_) m[a] = false;
    std::vector<const Value*> work(values_.rbegin(), values_.rend());
    std::unordered_set<const Value*> queued(values_.begin(), values_.end());
    while (!work.empty()) {
      const Value* v = work.back();
      work.pop_back();
      queued.erase(v);
      if (!m[v] || rule(v)) continue;
      m[v] = false;
      for (const Value* d : dependents(v))
        if (m.count(d) && m[d] && queued.insert(d).second) work.push_back(d);
    }
  }
  // nonneg(v) reads its op's operands and its sources: x turning false affects its users'
  // results and what it flows into.
  void solve_nonneg() {
    greatest_fixpoint(nonneg_, [&](const Value* v) { return nonneg_rule(v); }, [&](const Value* x) {
      std::vector<const Value*> d;
      for (const Use& u : uses(x)) {
        d.insert(d.end(), u.op->results.begin(), u.op->results.end());
        const Flow f = flow(*u.op, u.index);
        d.insert(d.end(), f.to.begin(), f.to.end());
      }
      return d;
    });
  }
  // tolerant(v) reads the results of its users and what it flows into: x turning false
  // affects its op's operands and the values that flow into it.
  void solve_tolerant() {
    greatest_fixpoint(tolerant_, [&](const Value* v) { return tolerant_rule(v); }, [&](const Value* x) {
      std::vector<const Value*> d = sources(x);
      if (x->def) d.insert(d.end(), x->def->operands.begin(), x->def->operands.end());
      return d;
    });
  }

  int64_t counted(const Value* v) const {
    auto it = count_.find(v);
    return it == count_.end() ? 0 : it->second;
  }

  // Each value's number of relaxed exps it depends on (a product adds its operands', a sum or
  // max takes the larger, a carried value the larger of its init's and its yield's), up to
  // kCap: the least fixpoint (a count that grows around a loop climbs to the cap).
  struct Counts {
    std::vector<const Value*> capped, over;  // values at kCap; narrow casts over their budget
  };
  // chosen: the exps counted as relaxed; count_written: whether exps written with max_rel_error
  // count too (not in the test of one exp alone).
  Counts count_all(const std::unordered_set<const Op*>& chosen, bool count_written) {
    count_.clear();
    auto step = [&](const Value* v) -> int64_t {
      const Op* d = v->def;
      const std::vector<const Value*>& src = sources(v);
      if (!src.empty()) {
        int64_t c = 0;
        for (const Value* x : src) c = std::max(c, counted(x));
        return c;
      }
      if (!d || d->results.size() != 1) return 0;
      if (d->kind == OpKind::Exp && chosen.count(d)) return 1;
      if (d->kind == OpKind::Exp && d->has_attr("max_rel_error"))  // written so: its own share
        return count_written
                   ? std::min(int64_t(std::ceil(std::min(d->attr_number("max_rel_error"), 1.0) / kRelaxedExpError)), kCap)
                   : 0;
      if (d->kind == OpKind::Mul || d->kind == OpKind::Div)
        return std::min(counted(d->operand(0)) + counted(d->operand(1)), kCap);
      if (d->kind == OpKind::Add || d->kind == OpKind::Max || d->kind == OpKind::Min)
        return std::max(counted(d->operand(0)), counted(d->operand(1)));
      if (d->kind == OpKind::Reduce || d->kind == OpKind::Cast || shape_op(d->kind)) return counted(d->operand(0));
      return 0;
    };
    for (bool changed = true; changed;) {  // (counts only rise, to kCap at most: it ends)
      changed = false;
      for (const Value* v : values_) {
        const int64_t c = step(v);
        if (c != counted(v)) count_[v] = c, changed = true;
      }
    }
    Counts c;
    for (const Value* v : values_) {
      if (counted(v) >= kCap) c.capped.push_back(v);
      if (v->def && v->def->kind == OpKind::Cast && is_narrow(v->type.elem) &&
          double(counted(v)) * kRelaxedExpError > unit_roundoff(v->type.elem) / 8)
        c.over.push_back(v);
    }
    return c;
  }

  // The relaxed exps that the values `from` depend on (by the last count).
  std::vector<const Op*> slice_exps(const std::vector<const Value*>& from) const {
    std::vector<const Op*> exps;
    std::vector<const Value*> stack = from;
    std::unordered_set<const Value*> seen;
    while (!stack.empty()) {
      const Value* x = stack.back();
      stack.pop_back();
      if (!seen.insert(x).second || counted(x) == 0) continue;
      for (const Value* s : sources(x)) stack.push_back(s);
      if (!x->def) continue;
      if (chosen_.count(x->def)) exps.push_back(x->def);
      for (const Value* o : x->def->operands) stack.push_back(o);
    }
    return exps;
  }
};

}  // namespace

void relax_exp_precision(Kernel& k, PassStats& stats) {
  stats["relax-exp-precision.relaxed"] += Relaxer(k).run();
}

}  // namespace tessera
