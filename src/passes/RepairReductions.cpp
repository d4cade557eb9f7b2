// repair-reductions: fuses a chain of loops over the same axis where a later loop needs an
// earlier loop's final running max (softmax, attention, logsumexp) into one loop, carrying the
// max as it goes and rescaling what was summed so far by the repair factor
// alpha = exp(m_old - m_new) each time the max grows (the FlashAttention schedule, derived
// from the plain program). docs/passes.md states the legality rule; in short:
//
// - The chain: `for` loops in one block with the same lower bound, upper bound and step values,
//   the first carrying one max accumulator (yield max(m, r), r independent of m), the others
//   carrying accumulators that are sums (yield add(c, f)) or dot accumulations
//   (yield dot(a, b, c)) of terms f independent of c. Nothing in the loops writes memory, and
//   the ops between them write nothing either.
// - A later loop may use the first loop's max m only as the shift of an exponential,
//   exp(x - m) (x independent of m), and the earlier loops' results only as per-row divisors
//   or factors; everything between the exponential and the accumulation must be linear in it
//   (products with independent values, sums of like terms, `where` against zero, a sum
//   reduction or a dot that keeps the row). Then each term is exp(-m) * (an m-free term),
//   so the sum over all iterations equals the running sum rescaled by exp(m_old - m_new) at
//   each step, and a division by a final sum commutes out of the loop to after it.
// - Rows where the max is still -inf use 0 as the shift (exp(-inf - 0) = 0), so that a row
//   whose first tiles are all masked does not turn the running sums into NaN.
//
// What the pass cannot prove repairable stays as written, with a note (PassStats::notes) and
// the count repair-reductions.skipped. After fusing, identical ops of the merged bodies
// (each loop's copy of the scores q @ k^T and its loads) are merged: that is the saving.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "ir/IR.h"
#include "passes/BlockEdit.h"
#include "passes/Passes.h"

namespace tessera {

namespace {

// How a value depends on the chain's results.
enum class Dep {
  Indep,    // not at all
  MaxRow,   // the max m, spread by expand_dims / broadcast (rows: where m's dims went)
  Shifted,  // x - m with x independent
  Factor,   // exp(-m)^dm * prod_k R_k^dl[k] * (an independent value), per row
  Final,    // an earlier loop's per-row result R_k, spread by expand_dims / broadcast
  Bad,      // none of these: not repairable (why)
};

struct Info {
  Dep dep = Dep::Indep;
  std::vector<int> rows;   // for each dim of m, the axis of this value it lies along (increasing)
  int dm = 0;              // Factor: power of exp(-m)
  std::map<int, int> dl;   // Factor: accumulator id -> power; zero powers erased
  int final_id = -1;       // Final: which accumulator
  std::string why;         // Bad
};

Info of(Dep d, std::vector<int> rows, int final_id = -1) {
  Info i;
  i.dep = d;
  i.rows = std::move(rows);
  i.final_id = final_id;
  return i;
}

Info bad(std::string why) {
  Info i;
  i.dep = Dep::Bad;
  i.why = std::move(why);
  return i;
}

bool writes(OpKind k) {
  switch (k) {
    case OpKind::StoreTile:
    case OpKind::Scatter:
    case OpKind::Atomic:
    case OpKind::AtomicCas:
    case OpKind::Raw:
      return true;
    default:
      return op_info(k).cls == OpClass::Struct;
  }
}

bool writes_any(const Op& op) {
  if (writes(op.kind)) return true;
  for (const auto& r : op.regions)
    for (const auto& inner : r->ops)
      if (writes_any(*inner)) return true;
  return false;
}

// A float constant (scalar const, or a splat of one) of value `want`.
bool is_float_const(const Value* v, double want) {
  const Op* d = v->def;
  if (d && d->kind == OpKind::Splat) d = d->operand(0)->def;
  if (!d || d->kind != OpKind::Const) return false;
  const Attr* a = d->find_attr("value");
  if (!a) return false;
  if (const double* x = std::get_if<double>(a)) return *x == want;
  if (const int64_t* x = std::get_if<int64_t>(a)) return static_cast<double>(*x) == want;
  return false;
}

bool same_factor(const Info& a, const Info& b) { return a.dm == b.dm && a.dl == b.dl && a.rows == b.rows; }

std::string loc_of(const Op& op) { return op.loc.known() ? op.loc.str() + ": " : ""; }

// A chain of loops and, for each carried value of its later loops, how it accumulates.
struct Acc {
  Op* loop = nullptr;
  size_t index = 0;     // carried value number in its loop
  Op* update = nullptr; // the op whose result the loop yields (add or dot)
  Value* term_src = nullptr;  // add: the term f
  Info term;            // the factor of f
};

class Repair {
 public:
  Repair(Kernel& k, PassStats& stats) : k_(k), stats_(stats) {
    walk(k, [&](Op& op) {
      if (op.kind == OpKind::StoreTile || op.kind == OpKind::Scatter || op.kind == OpKind::Atomic ||
          op.kind == OpKind::AtomicCas)
        written_.insert(op.operand(0));
      if (op.kind == OpKind::Raw)
        for (const Value* v : op.operands) written_.insert(v);
    });
  }

  void run() { block(*k_.body); }

 private:
  Kernel& k_;
  PassStats& stats_;
  std::unordered_set<const Value*> written_;
  std::unordered_map<const Value*, Info> info_;
  Value* max_ = nullptr;          // the first loop's result
  std::vector<Acc> accs_;         // the later loops' accumulators, by id

  void block(Block& b) {
    for (size_t i = 0; i < b.ops.size(); ++i) {
      Op& op = *b.ops[i];
      for (auto& r : op.regions) block(*r);
      if (op.kind == OpKind::For && max_update(op)) try_chain(b, i);
    }
  }

  static bool same_bounds(const Op& a, const Op& b) {
    return a.operand(0) == b.operand(0) && a.operand(1) == b.operand(1) && a.operand(2) == b.operand(2);
  }

  // The op the loop yields for carried value `c`, if the carried block argument has that op
  // as its only use and the result is used by the yield only.
  static Op* update_of(const Op& loop, size_t c) {
    Block& body = loop.region(0);
    Value* arg = body.args.at(c + 1);
    Value* y = body.terminator()->operand(c);
    if (!y->def || y->def->parent != &body) return nullptr;
    int arg_uses = 0, y_uses = 0;
    walk(body, [&](Op& o) {
      for (Value* v : o.operands) {
        arg_uses += v == arg;
        y_uses += v == y;
      }
    });
    if (arg_uses != 1 || y_uses != 1) return nullptr;
    bool uses_arg = false;
    for (Value* v : y->def->operands) uses_arg = uses_arg || v == arg;
    return uses_arg ? y->def : nullptr;
  }

  // The loop carries one value, a running max: yield max(m, r).
  static bool max_update(const Op& loop) {
    if (loop.results.size() != 1 || !loop.result()->type.is_value() || !is_float(loop.result()->type.elem))
      return false;
    Op* u = update_of(loop, 0);
    return u && u->kind == OpKind::Max;
  }

  void skip(const Op& loop, const std::string& why) {
    ++stats_["repair-reductions.skipped"];
    stats_.notes.push_back("repair-reductions: " + loc_of(loop) + "loop left as written: " + why);
  }

  // The ops between two ops of a block.
  static std::vector<Op*> between(Block& b, size_t from, size_t to) {
    std::vector<Op*> out;
    for (size_t i = from + 1; i < to; ++i) out.push_back(b.ops[i].get());
    return out;
  }

  Info get(const Value* v) const {
    auto it = info_.find(v);
    return it == info_.end() ? Info{} : it->second;
  }

  // The dependence of an op's single result on the chain, from its operands'.
  Info transfer(const Op& op) {
    std::vector<Info> in;
    bool any = false;
    for (const Value* v : op.operands) {
      in.push_back(get(v));
      any = any || in.back().dep != Dep::Indep;
    }
    // Values a region uses from outside count as operands that no rule below handles.
    for (const auto& r : op.regions)
      walk(*r, [&](Op& inner) {
        for (const Value* v : inner.operands)
          if (get(v).dep != Dep::Indep) any = true, in.push_back(bad("a loop or branch inside uses " + what(v)));
      });
    if (!any) return {};
    for (const Info& i : in)
      if (i.dep == Dep::Bad) return i;
    if (op.results.size() != 1) return bad("'" + std::string(op.name()) + "' of the max or of a sum");
    const Type& t = op.result()->type;
    auto dep = [&](size_t i) { return in.at(i).dep; };
    auto indep = [&](size_t i) { return dep(i) == Dep::Indep; };
    auto unsupported = [&] {
      return bad("'" + std::string(op.name()) + "' of " + what(op.operands[0]) +
                 " is not a repairable use (only exp(x - max), products and sums of such terms, and "
                 "division by a per-row sum)");
    };
    switch (op.kind) {
      case OpKind::ExpandDims: {
        Info r = in[0];
        if (r.dep == Dep::Shifted) return unsupported();
        int64_t axis = op.attr_int("axis");
        for (int& d : r.rows) d += d >= axis;
        return r;
      }
      case OpKind::Broadcast:
        if (dep(0) == Dep::Shifted) return unsupported();
        return in[0];
      case OpKind::Splat:  // a scalar max (or term) over a tile: the same for every element
        if (dep(0) == Dep::Shifted) return unsupported();
        return in[0];
      case OpKind::Sub:
        if (indep(0) && dep(1) == Dep::MaxRow) return with_dep(in[1], Dep::Shifted);
        if (dep(0) == Dep::Shifted && indep(1)) return in[0];
        if (dep(0) == Dep::Factor && dep(1) == Dep::Factor && same_factor(in[0], in[1])) return in[0];
        if (dep(1) == Dep::MaxRow) return bad("the max is subtracted from a value that depends on it");
        return unsupported();
      case OpKind::Add:
        if ((dep(0) == Dep::Shifted && indep(1)) || (indep(0) && dep(1) == Dep::Shifted))
          return indep(0) ? in[1] : in[0];
        if (dep(0) == Dep::Factor && dep(1) == Dep::Factor && same_factor(in[0], in[1])) return in[0];
        return unsupported();
      case OpKind::Neg:
        if (dep(0) == Dep::Factor) return in[0];
        return unsupported();
      case OpKind::Cast:
        if (dep(0) == Dep::Factor && is_float(t.elem)) return in[0];
        return unsupported();
      case OpKind::Exp:
        if (dep(0) == Dep::Shifted) {
          Info r = in[0];
          r.dep = Dep::Factor;
          r.dm = 1;
          return r;
        }
        if (dep(0) == Dep::MaxRow) return bad("exp of the max itself grows with it (only exp(x - max) is repairable)");
        return unsupported();
      case OpKind::Mul:
      case OpKind::Div: {
        const int sign = op.kind == OpKind::Mul ? 1 : -1;
        if (dep(0) == Dep::Factor && indep(1)) return in[0];
        if (op.kind == OpKind::Mul && indep(0) && dep(1) == Dep::Factor) return in[1];
        if (dep(1) == Dep::Final && (indep(0) || dep(0) == Dep::Factor)) {
          Info r = indep(0) ? of(Dep::Factor, in[1].rows) : in[0];
          if (r.rows != in[1].rows) return bad("a sum divides a value along another axis than its rows");
          if ((r.dl[in[1].final_id] += sign) == 0) r.dl.erase(in[1].final_id);
          return r;
        }
        if (op.kind == OpKind::Mul && dep(0) == Dep::Final && indep(1)) {
          Info r = of(Dep::Factor, in[0].rows);
          r.dl[in[0].final_id] = 1;
          return r;
        }
        if (op.kind == OpKind::Mul && dep(0) == Dep::Factor && dep(1) == Dep::Factor) {
          if (in[0].rows != in[1].rows) return unsupported();
          Info r = in[0];
          r.dm += in[1].dm;
          for (auto [id, p] : in[1].dl)
            if ((r.dl[id] += p) == 0) r.dl.erase(id);
          return r;
        }
        if (dep(0) == Dep::Shifted || dep(1) == Dep::Shifted)
          return bad("the exponent multiplies x - max (exp((x - max) * y) does not factor into exp(-max) times a max-free term)");
        return unsupported();
      }
      case OpKind::Where: {
        if (!indep(0)) return bad("a mask depends on the max or a sum");
        // -inf stays -inf under a shift; 0 stays 0 under a scaling.
        if (dep(1) == Dep::Shifted && indep(2) && is_float_const(op.operand(2), -INFINITY)) return in[1];
        if (dep(2) == Dep::Shifted && indep(1) && is_float_const(op.operand(1), -INFINITY)) return in[2];
        if (dep(1) == Dep::Factor && indep(2) && is_float_const(op.operand(2), 0)) return in[1];
        if (dep(2) == Dep::Factor && indep(1) && is_float_const(op.operand(1), 0)) return in[2];
        if (dep(1) == Dep::Factor && dep(2) == Dep::Factor && same_factor(in[1], in[2])) return in[1];
        return bad("a `where` picks between a value that depends on the max and one the repair cannot "
                   "rescale (only -inf before the exp, 0 after it)");
      }
      case OpKind::Reduce: {
        if (dep(0) != Dep::Factor) return unsupported();
        if (op.attr_string("kind") != "sum") return bad("a '" + op.attr_string("kind") + "' reduction of exp(x - max)");
        int64_t axis = op.attr_int("axis");
        Info r = in[0];
        for (int& d : r.rows) {
          if (d == axis) return bad("a sum over the max's own rows");
          d -= d > axis;
        }
        return r;
      }
      case OpKind::Dot: {
        // a @ b + c keeps a's rows and b's columns.
        if (!indep(2) && !(dep(2) == Dep::Factor)) return unsupported();
        if (dep(0) == Dep::Factor && indep(1) && (in[0].rows.empty() || in[0].rows == std::vector<int>{0})) {
          if (!indep(2) && !same_factor(in[2], in[0])) return unsupported();
          if (indep(2) && !is_float_const(op.operand(2), 0)) return bad("a dot of exp(x - max) adds a nonzero value");
          return in[0];
        }
        if (indep(0) && dep(1) == Dep::Factor && (in[1].rows.empty() || in[1].rows == std::vector<int>{1})) {
          if (!indep(2) && !same_factor(in[2], in[1])) return unsupported();
          if (indep(2) && !is_float_const(op.operand(2), 0)) return bad("a dot of exp(x - max) adds a nonzero value");
          return in[1];
        }
        return bad("a dot contracts over the max's rows");
      }
      default:
        return unsupported();
    }
  }

  static Info with_dep(Info i, Dep d) {
    i.dep = d;
    return i;
  }

  std::string what(const Value* v) const {
    Info i = get(v);
    if (i.dep == Dep::MaxRow || i.dep == Dep::Shifted) return "the max";
    if (i.dep == Dep::Final) return "a sum of an earlier loop";
    return "a value that depends on the max";
  }

  // Analyzes ops (outside the loops, or a later loop's body, in order); the update ops are
  // skipped (their terms are judged by the caller). Returns the first unrepairable op's
  // reason that a later loop body needs, "" if none.
  std::string analyze(const std::vector<Op*>& ops, const std::unordered_set<const Op*>& updates, bool in_loop) {
    for (Op* op : ops) {
      if (updates.count(op) || op->kind == OpKind::Yield) continue;
      Info i = transfer(*op);
      if (i.dep == Dep::Bad && in_loop) return loc_of(*op) + i.why;
      for (Value* r : op->results) info_[r] = i;
    }
    return "";
  }

  // The chain starting at b.ops[first]: the loops after it with the same bounds that read its
  // results, each fused when it is repairable; the first that is not ends the chain with a note.
  void try_chain(Block& b, size_t first) {
    Op& l1 = *b.ops[first];
    info_.clear();
    accs_.clear();
    max_ = l1.result();
    info_[max_] = of(Dep::MaxRow, iota(max_->type.rank()));
    std::vector<Op*> chain{&l1}, before;
    std::string why;
    const Op* refused = nullptr;
    for (size_t i = first + 1; i < b.ops.size(); ++i) {
      Op& op = *b.ops[i];
      if (op.kind != OpKind::For || !same_bounds(op, l1)) {
        before.push_back(&op);
        continue;
      }
      analyze(before, {}, false);
      // A loop that reads nothing of the chain is no reduction to repair: the chain ends.
      if (!reads_chain(op)) break;
      if (chain.size() == 1) why = body_problem(l1);
      for (const Op* w : before)
        if (why.empty() && writes_any(*w))
          why = loc_of(*w) + "'" + std::string(w->name()) + "' between the loops writes memory (a fused loop would move it)";
      if (why.empty()) why = add_loop(op);
      if (!why.empty()) {
        refused = &op;
        break;
      }
      chain.push_back(&op);
      before.clear();
    }
    bool repairs = false;
    for (const Acc& a : accs_) repairs = repairs || a.term.dm == 1;
    if (refused) skip(*refused, why + (chain.size() >= 2 && repairs ? " (the loops before it are fused)" : ""));
    if (chain.size() < 2) return;
    if (!repairs) return skip(*chain[1], "no sum depends on the max");
    rewrite(b, chain);
    ++stats_["repair-reductions.fused"];
    stats_["repair-reductions.loops-fused"] += static_cast<int64_t>(chain.size());
  }

  bool reads_chain(Op& loop) const {
    bool reads = false;
    for (const Value* v : loop.operands) reads = reads || get(v).dep != Dep::Indep;
    walk(loop.region(0), [&](Op& o) {
      for (const Value* v : o.operands) reads = reads || get(v).dep != Dep::Indep;
    });
    return reads;
  }

  static std::vector<int> iota(int n) {
    std::vector<int> r(n);
    for (int i = 0; i < n; ++i) r[i] = i;
    return r;
  }

  std::string body_problem(const Op& loop) {
    for (const auto& op : loop.region(0).ops)
      if (writes_any(*op)) return loc_of(*op) + "the loop writes memory ('" + std::string(op->name()) + "')";
    return "";
  }

  // Judges a later loop of the chain; on success records its accumulators.
  std::string add_loop(Op& loop) {
    if (std::string w = body_problem(loop); !w.empty()) return w;
    for (size_t c = 3; c < loop.operands.size(); ++c)
      if (get(loop.operand(c)).dep != Dep::Indep)
        return "the initial value of a carried value uses the max or a sum of the loop before";
    Block& body = loop.region(0);
    std::unordered_set<const Op*> updates;
    std::vector<Acc> mine;
    for (size_t c = 0; c < loop.results.size(); ++c) {
      Op* u = update_of(loop, c);
      Value* arg = body.args[c + 1];
      if (!u) return "carried value " + std::to_string(c) + " is used in its loop other than by one update";
      if (u->kind == OpKind::Add) {
        if (!is_float(u->result()->type.elem)) return "an integer sum";
        mine.push_back({&loop, c, u, u->operand(0) == arg ? u->operand(1) : u->operand(0), {}});
      } else if (u->kind == OpKind::Dot && u->operand(2) == arg && u->operand(0) != arg && u->operand(1) != arg) {
        mine.push_back({&loop, c, u, nullptr, {}});
      } else {
        return "carried value " + std::to_string(c) + " is updated by '" + std::string(u->name()) +
               "' (only sums and dot accumulations are repaired)";
      }
      updates.insert(u);
    }
    std::vector<Op*> ops;
    for (auto& op : body.ops) ops.push_back(op.get());
    if (std::string w = analyze(ops, updates, true); !w.empty()) return w;
    for (Acc& a : mine) {
      const Op& u = *a.update;
      Info t = a.term_src ? get(a.term_src) : transfer_dot(u);
      if (t.dep == Dep::Bad) return loc_of(u) + t.why;
      if (t.dep != Dep::Indep && t.dep != Dep::Factor)
        return loc_of(u) + "a sum adds " + what(a.term_src ? a.term_src : u.operand(0)) + " itself";
      if (t.dep == Dep::Factor) {
        if (t.dm != 0 && t.dm != 1) return loc_of(u) + "a sum of a power of exp(x - max) other than 1";
        if (!is_float_const(loop.operand(3 + a.index), 0))
          return loc_of(u) + "a sum that depends on the max starts from a nonzero value";
      }
      a.term = t;
    }
    for (Acc& a : mine) {
      int id = static_cast<int>(accs_.size());
      accs_.push_back(a);
      Value* r = loop.result(a.index);
      // Later loops may divide by it when it is one value per row of the max.
      if (r->type.kind == max_->type.kind && r->type.shape == max_->type.shape && (a.term.dep == Dep::Indep || a.term.rows == iota(max_->type.rank())))
        info_[r] = of(Dep::Final, iota(max_->type.rank()), id);
      else
        info_[r] = bad("a result of an earlier loop that is not one value per row");
    }
    return "";
  }

  // The term of dot(a, b, c) with c the carried value: a @ b.
  Info transfer_dot(const Op& u) {
    Info a = get(u.operand(0)), b = get(u.operand(1));
    if (a.dep == Dep::Indep && b.dep == Dep::Indep) return {};
    if (a.dep == Dep::Factor && b.dep == Dep::Indep && (a.rows.empty() || a.rows == std::vector<int>{0})) return a;
    if (a.dep == Dep::Bad) return a;
    if (b.dep == Dep::Bad) return b;
    return bad("a dot accumulation whose operands depend on the max other than as exp(x - max) rows");
  }

  // --- the rewrite ---

  Value* make(Block& b, const Op* before, OpKind kind, std::vector<Value*> operands, const Type& t,
              std::vector<NamedAttr> attrs = {}, const char* name = "") {
    Op* op = k_.create_op(b, kind, std::move(operands), {t}, std::move(attrs), before ? before->loc : Loc{}, 0, before);
    op->result()->name = name;
    return op->result();
  }

  // `x` (shaped like the max) spread along `rows` of type `t`.
  Value* spread(Block& b, const Op* before, Value* x, const Type& t, const std::vector<int>& rows) {
    if (x->type.is_scalar()) return t.is_scalar() ? x : make(b, before, OpKind::Splat, {x}, t);
    Value* v = x;
    int rank = x->type.rank();
    for (int axis = 0; axis < t.rank(); ++axis) {
      if (std::find(rows.begin(), rows.end(), axis) != rows.end()) continue;
      Type e = v->type;
      e.shape.insert(e.shape.begin() + axis, Dim(1));
      v = make(b, before, OpKind::ExpandDims, {v}, e, {{"axis", int64_t{axis}}});
      ++rank;
    }
    if (v->type.shape != t.shape) {
      Type e = v->type;
      e.shape = t.shape;
      v = make(b, before, OpKind::Broadcast, {v}, e);
    }
    return v;
  }

  // The constant `value` of type `t` (a splat for a tile), reusing one that `b` already
  // computes in front of `before` (the kernel's own -inf and 0 splats, typically).
  Value* float_const(Block& b, const Op* before, const Type& t, double value, const char* name) {
    Type s = Type::scalar(t.elem);
    Value *c = nullptr, *tile = nullptr;
    for (const auto& op : b.ops) {
      if (op.get() == before) break;
      if (op->results.size() != 1 || !is_float_const(op->result(), value)) continue;
      if (!c && op->kind == OpKind::Const && op->result()->type == s) c = op->result();
      if (!tile && c && op->kind == OpKind::Splat && op->operand(0) == c && op->result()->type == t) tile = op->result();
    }
    if (!c) c = make(b, before, OpKind::Const, {}, s, {{"value", value}});
    if (t.is_scalar()) return c;
    return tile ? tile : make(b, before, OpKind::Splat, {c}, t, {}, name);
  }

  void rewrite(Block& b, const std::vector<Op*>& chain) {
    Op& l1 = *chain.front();
    // The ops between the loops: those that depend on the chain go after the fused loop, the
    // others before it, each group in its order.
    std::vector<Op*> after;
    {
      size_t from = static_cast<size_t>(op_position(l1) - b.ops.begin());
      size_t to = static_cast<size_t>(op_position(*chain.back()) - b.ops.begin());
      std::unordered_set<const Op*> in_chain(chain.begin(), chain.end());
      for (Op* op : between(b, from, to)) {
        if (in_chain.count(op)) continue;
        bool dependent = false;
        for (const Value* r : op->results) dependent = dependent || get(r).dep != Dep::Indep;
        for (const Value* v : op->operands) dependent = dependent || get(v).dep != Dep::Indep;
        if (dependent)
          after.push_back(op);
        else
          move_before(*op, l1);
      }
    }

    // The fused loop, in front of the first.
    std::vector<Value*> operands{l1.operand(0), l1.operand(1), l1.operand(2), l1.operand(3)};
    std::vector<Type> types{max_->type};
    for (const Acc& a : accs_) {
      operands.push_back(a.loop->operand(3 + a.index));
      types.push_back(a.loop->result(a.index)->type);
    }
    Op* fused = k_.create_op(b, OpKind::For, operands, types, {}, l1.loc, 1, &l1);
    Block& body = fused->region(0);
    std::unordered_map<const Value*, Value*> map;
    Value* j = k_.add_block_arg(body, l1.region(0).args[0]->type, l1.region(0).args[0]->name);
    Value* mc = k_.add_block_arg(body, max_->type, "m_run");
    map[l1.region(0).args[1]] = mc;
    std::vector<Value*> carried;
    for (const Acc& a : accs_) {
      Value* arg = a.loop->region(0).args[a.index + 1];
      carried.push_back(k_.add_block_arg(body, arg->type, arg->name));
      map[arg] = carried.back();
    }
    for (Op* loop : chain) map[loop->region(0).args[0]] = j;

    // The first loop's body, its running max, the safe shift and the repair factor.
    clone_ops(l1.region(0), body, map, {});
    Value* mnew = map.at(l1.region(0).terminator()->operand(0));
    const Type& mt = max_->type;
    // The constants of the shift go in front of the loop: they are the same every iteration.
    Value* ninf = float_const(b, fused, mt, -INFINITY, "");
    Type bt = mt.with_elem(ScalarKind::I1);
    Value* empty = make(body, nullptr, OpKind::Cmp, {mnew, ninf}, bt, {{"pred", std::string("eq")}}, "m_none");
    Value* zero = float_const(b, fused, mt, 0.0, "");
    Value* msafe = make(body, nullptr, OpKind::Where, {empty, zero, mnew}, mt, {}, "m_shift");
    Value* diff = make(body, nullptr, OpKind::Sub, {mc, msafe}, mt, {}, "m_delta");
    Value* alpha = make(body, nullptr, OpKind::Exp, {diff}, mt, {}, "alpha");
    max_inside_ = msafe;
    inside_.clear();

    // The later loops' bodies: the max read as the running one, divisions by final sums left
    // to after the loop, each accumulator rescaled by alpha before its new term is added.
    std::vector<Value*> yields{mnew};
    size_t next = 0;
    for (size_t n = 1; n < chain.size(); ++n) {
      Op& loop = *chain[n];
      std::unordered_map<const Op*, const Acc*> updates;
      for (size_t a = next; a < accs_.size() && accs_[a].loop == &loop; ++a) updates[accs_[a].update] = &accs_[a];
      clone_ops(loop.region(0), body, map, updates);
      for (size_t a = next; a < accs_.size() && accs_[a].loop == &loop; ++a, ++next) {
        const Acc& acc = accs_[a];
        Value* c = carried[a];
        if (acc.term.dm == 1) c = make(body, nullptr, OpKind::Mul, {c, spread(body, nullptr, alpha, c->type, acc.term.rows)}, c->type, {}, "");
        std::vector<Value*> ops;
        for (Value* v : acc.update->operands) ops.push_back(v == acc.loop->region(0).args[acc.index + 1] ? c : remap(v, map, body));
        Value* u = make(body, nullptr, acc.update->kind, ops, acc.update->result()->type, acc.update->attrs,
                        acc.update->result()->name.c_str());
        yields.push_back(u);
      }
    }
    k_.create_op(body, OpKind::Yield, yields, {}, {}, l1.loc);
    merge_identical(body);

    // After the loop: the results, each divided by (or multiplied with) the final sums it
    // was scaled by, then the ops that depended on them.
    const Op* at = next_op(*fused);
    std::vector<Value*> finals(accs_.size());
    for (size_t a = 0; a < accs_.size(); ++a) {
      Value* v = fused->result(a + 1);
      v->name = accs_[a].loop->result(accs_[a].index)->name;
      for (auto [id, p] : accs_[a].term.dl)
        for (int i = 0; i < std::abs(p); ++i)
          v = make(b, at, p < 0 ? OpKind::Div : OpKind::Mul, {v, spread(b, at, finals.at(id), v->type, accs_[a].term.rows)},
                   v->type, {}, "");
      finals[a] = v;
    }
    fused->result(0)->name = max_->name;
    for (Op* op : after) move_before(*op, *at);
    std::vector<std::pair<Value*, Value*>> replace{{max_, fused->result(0)}};
    for (size_t a = 0; a < accs_.size(); ++a) replace.emplace_back(accs_[a].loop->result(accs_[a].index), finals[a]);
    for (Op* loop : chain) b.ops.erase(op_position(*loop));
    for (auto [from, to] : replace) replace_all_uses(k_, from, to);
  }

  Value* max_inside_ = nullptr;
  std::unordered_map<const Value*, Value*> inside_;  // a spread of the max, rebuilt inside

  // The value the fused body uses for `v`: its clone, the running max's spread for a spread of
  // the final max, or v itself (defined before the loop).
  Value* remap(Value* v, const std::unordered_map<const Value*, Value*>& map, Block& body) {
    if (auto it = map.find(v); it != map.end()) return it->second;
    Info i = get(v);
    if (i.dep != Dep::MaxRow) return v;
    if (v == max_) return max_inside_;
    if (auto it = inside_.find(v); it != inside_.end()) return it->second;
    Op& d = *v->def;
    std::vector<Value*> ops;
    for (Value* o : d.operands) ops.push_back(remap(o, map, body));
    Value* r = make(body, nullptr, d.kind, ops, v->type, d.attrs);
    inside_[v] = r;
    return r;
  }

  // Clones a loop body's ops (not its yield, not the accumulator updates) into `to`. An op
  // that divides by or multiplies with a final sum is replaced by its other operand: the
  // division happens after the loop.
  void clone_ops(Block& from, Block& to, std::unordered_map<const Value*, Value*>& map,
                 const std::unordered_map<const Op*, const Acc*>& updates) {
    for (auto& own : from.ops) {
      Op& op = *own;
      if (op.kind == OpKind::Yield || updates.count(&op)) continue;
      // A spread of a final sum only feeds the divisions that move after the loop.
      if (op.results.size() == 1 && get(op.result()).dep == Dep::Final) continue;
      if ((op.kind == OpKind::Mul || op.kind == OpKind::Div) && op.results.size() == 1) {
        int fin = get(op.operand(1)).dep == Dep::Final ? 1 : (op.kind == OpKind::Mul && get(op.operand(0)).dep == Dep::Final ? 0 : -1);
        if (fin >= 0) {
          map[op.result()] = remap(op.operand(1 - fin), map, to);
          continue;
        }
      }
      std::vector<Value*> ops;
      for (Value* v : op.operands) ops.push_back(remap(v, map, to));
      std::vector<Type> types;
      for (Value* r : op.results) types.push_back(r->type);
      Op* c = k_.create_op(to, op.kind, ops, types, op.attrs, op.loc, op.regions.size());
      for (size_t i = 0; i < op.results.size(); ++i) {
        c->results[i]->name = op.results[i]->name;
        map[op.results[i]] = c->results[i];
      }
      for (size_t r = 0; r < op.regions.size(); ++r) {
        Block& src = op.region(r);
        Block& dst = c->region(r);
        for (Value* a : src.args) map[a] = k_.add_block_arg(dst, a->type, a->name);
        clone_ops(src, dst, map, {});
        // clone_ops skips yields: the region's own yield is cloned here.
        if (Op* y = src.terminator()) {
          std::vector<Value*> yo;
          for (Value* v : y->operands) yo.push_back(remap(v, map, dst));
          k_.create_op(dst, OpKind::Yield, yo, {}, {}, y->loc);
        }
      }
    }
  }

  // --- merging the copies the loops each computed ---

  bool mergeable(const Op& op) const {
    if (op.results.empty() || op.kind == OpKind::Yield) return false;
    if (writes(op.kind)) return false;
    // A read merges when nothing in the kernel writes the view it reads.
    if (op.info().cls == OpClass::Memory &&
        ((op.kind != OpKind::LoadTile && op.kind != OpKind::Gather) || written_.count(op.operand(0))))
      return false;
    for (const auto& r : op.regions)
      for (const auto& inner : r->ops)
        if (inner->kind != OpKind::Yield && !mergeable(*inner) && !(inner->results.empty() && !writes_any(*inner)))
          return false;
    return true;
  }

  static bool same_op(const Op& a, const Op& b, std::unordered_map<const Value*, const Value*>& eq) {
    if (a.kind != b.kind || a.operands.size() != b.operands.size() || a.results.size() != b.results.size() ||
        a.regions.size() != b.regions.size() || a.attrs.size() != b.attrs.size())
      return false;
    for (size_t i = 0; i < a.operands.size(); ++i) {
      const Value* x = a.operands[i];
      if (auto it = eq.find(x); it != eq.end()) x = it->second;
      if (x != b.operands[i]) return false;
    }
    for (size_t i = 0; i < a.attrs.size(); ++i)
      if (a.attrs[i].name != b.attrs[i].name || attr_str(a.attrs[i].value) != attr_str(b.attrs[i].value)) return false;
    for (size_t i = 0; i < a.results.size(); ++i)
      if (a.results[i]->type != b.results[i]->type) return false;
    for (size_t r = 0; r < a.regions.size(); ++r) {
      const Block& ra = a.region(r);
      const Block& rb = b.region(r);
      if (ra.args.size() != rb.args.size() || ra.ops.size() != rb.ops.size()) return false;
      for (size_t i = 0; i < ra.args.size(); ++i) {
        if (ra.args[i]->type != rb.args[i]->type) return false;
        eq[ra.args[i]] = rb.args[i];
      }
      for (size_t i = 0; i < ra.ops.size(); ++i)
        if (!same_op(*ra.ops[i], *rb.ops[i], eq)) return false;
    }
    for (size_t i = 0; i < a.results.size(); ++i) eq[a.results[i]] = b.results[i];
    return true;
  }

  // Each op of the fused body that computes what an earlier one does is replaced by it.
  void merge_identical(Block& body) {
    int64_t merged = 0;
    for (size_t i = 0; i < body.ops.size();) {
      Op& op = *body.ops[i];
      Op* prior = nullptr;
      if (mergeable(op))
        for (size_t p = 0; p < i && !prior; ++p) {
          std::unordered_map<const Value*, const Value*> eq;
          if (same_op(op, *body.ops[p], eq)) prior = body.ops[p].get();
        }
      if (!prior) {
        ++i;
        continue;
      }
      for (size_t r = 0; r < op.results.size(); ++r) replace_all_uses(k_, op.results[r], prior->results[r]);
      body.ops.erase(body.ops.begin() + static_cast<std::ptrdiff_t>(i));
      ++merged;
    }
    stats_["repair-reductions.merged"] += merged;
  }
};

}  // namespace

void repair_reductions(Kernel& k, PassStats& stats) { Repair(k, stats).run(); }

}  // namespace tessera
