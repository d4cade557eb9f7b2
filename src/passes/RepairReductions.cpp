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

 protected:
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

// --- the split schedule (FlashDecoding) ---
//
// A rolling loop (the one repair-reductions writes, or one written by hand) carries a running
// max m and sums S, each either rescaled, S' = S * alpha + f with alpha = exp(m - shift(m'))
// and f = exp(-shift(m')) * g (g free of the max), or plain, S' = S + f with f free of the max.
// Then after the loop S = exp(-shift(M)) * sum_t g_t, so the loop's iterations may be split in
// runs, each run's (m_s, S_s) computed from -inf and 0 by its own program, and merged by
//   M = max_s m_s,  S = sum_s S_s * exp(m_s - shift(M))   (plain sums: S = sum_s S_s)
// which is the same loop once more, over the runs instead of the tiles.

// One carried sum of a rolling loop.
struct RollingSum {
  size_t index = 0;        // carried value number (>= 1)
  bool rescaled = false;   // S * alpha + f; else S + f with f free of the max
  std::vector<int> rows;   // rescaled: the axes of S along which alpha lies
};

class Rolling : public Repair {
 public:
  using Repair::Repair;

  Op* loop = nullptr;
  std::vector<RollingSum> sums;

  // The first loop of the kernel body that is a rolling reduction: "" when found, else why
  // none is (the last candidate's reason).
  std::string find() {
    std::string why = "no loop of the kernel body carries a running max (yield max(m, r)) and sums";
    for (auto& own : k_.body->ops) {
      Op& op = *own;
      if (op.kind != OpKind::For || op.results.size() < 2) continue;
      std::string w = match(op);
      if (w.empty()) {
        loop = &op;
        return "";
      }
      why = loc_of(op) + w;
    }
    return why;
  }

  // Does v (computed in the loop body) depend on x?
  bool depends(const Value* v, const Value* x, std::unordered_set<const Value*>& seen) const {
    if (v == x) return true;
    if (!seen.insert(v).second || !v->def) return false;
    bool d = false;
    for (const Value* o : v->def->operands) d = d || depends(o, x, seen);
    for (const auto& r : v->def->regions)
      walk(*r, [&](Op& inner) {
        for (const Value* o : inner.operands) d = d || depends(o, x, seen);
      });
    return d;
  }

  static int uses(Block& b, const Value* v) {
    int n = 0;
    walk(b, [&](Op& o) {
      for (const Value* x : o.operands) n += x == v;
    });
    return n;
  }

  std::string match(Op& l) {
    info_.clear();
    sums.clear();
    Block& body = l.region(0);
    Op* y = body.terminator();
    Value* mc = body.args.at(1);
    if (!y || !mc->type.is_value() || !is_float(mc->type.elem)) return "its first carried value is not a float";
    Value* mnew = y->operand(0);
    Op* mx = mnew->def;
    if (!mx || mx->parent != &body || mx->kind != OpKind::Max) return "its first carried value is not a running max";
    Value* r = mx->operand(0) == mc ? mx->operand(1) : mx->operand(1) == mc ? mx->operand(0) : nullptr;
    std::unordered_set<const Value*> seen;
    if (!r || depends(r, mc, seen)) return "its max is not max(m, r) with r independent of m";
    if (!is_float_const(l.operand(3), -INFINITY)) return "the running max does not start from -inf";
    if (std::string w = body_problem(l); !w.empty()) return w;

    std::unordered_set<const Op*> skip{mx, y};
    // The safe shift where(m' == -inf, 0, m'), if the loop uses one.
    Value* shift = mnew;
    for (auto& o : body.ops)
      if (o->kind == OpKind::Where && o->operand(2) == mnew && is_float_const(o->operand(1), 0)) {
        Op* c = o->operand(0)->def;
        if (c && c->kind == OpKind::Cmp && c->attr_string("pred") == "eq" && c->operand(0) == mnew &&
            is_float_const(c->operand(1), -INFINITY) && uses(body, c->result()) == 1) {
          shift = o->result();
          skip.insert(o.get());
          skip.insert(c);
        }
      }
    // alpha = exp(m - shift) (or exp(m - m')); m has no other use.
    std::unordered_map<const Value*, std::vector<int>> spread_rows;  // alpha and its spreads
    int mc_uses = 0;
    for (auto& o : body.ops) {
      for (const Value* v : o->operands) mc_uses += v == mc;
      if (o->kind != OpKind::Sub || o->operand(0) != mc || (o->operand(1) != shift && o->operand(1) != mnew)) continue;
      for (auto& e : body.ops)
        if (e->kind == OpKind::Exp && e->operand(0) == o->result()) {
          spread_rows[e->result()] = iota(mc->type.rank());
          skip.insert(e.get());
        }
      skip.insert(o.get());
    }
    if (uses(body, mc) != mc_uses) return "the running max is used inside a nested region";
    for (auto& o : body.ops)
      if (o->operands.size() > 0 && std::count(o->operands.begin(), o->operands.end(), mc) && !skip.count(o.get()))
        return "the running max is used other than by max(m, r) and exp(m - m')";
    // Spreads of alpha: splat / expand_dims / broadcast, in program order.
    for (auto& o : body.ops) {
      if (o->operands.empty() || !spread_rows.count(o->operand(0))) continue;
      std::vector<int> rows = spread_rows.at(o->operand(0));
      if (o->kind == OpKind::ExpandDims) {
        int64_t axis = o->attr_int("axis");
        for (int& d : rows) d += d >= axis;
      } else if (o->kind != OpKind::Broadcast && o->kind != OpKind::Splat) {
        if (o->kind != OpKind::Mul) return "the repair factor exp(m - m') is used other than to rescale a sum";
        continue;  // a rescale, judged with its sum below
      }
      spread_rows[o->result()] = rows;
      skip.insert(o.get());
    }

    // The sums.
    for (size_t c = 1; c < l.results.size(); ++c) {
      Value* arg = body.args.at(c + 1);
      Value* yv = y->operand(c);
      Op* u = yv->def;
      if (!u || u->parent != &body || uses(body, arg) != 1 || uses(body, yv) != 1)
        return "carried value " + std::to_string(c) + " is not a sum its loop updates once";
      if (!is_float(arg->type.elem)) return "carried value " + std::to_string(c) + " is not a float";
      if (!is_float_const(l.operand(3 + c), 0)) return "carried value " + std::to_string(c) + " does not start from 0";
      // The accumulator side of the update: the carried value itself, or it times alpha.
      auto acc_side = [&](Value* v, RollingSum& s) {
        if (v == arg) return true;
        Op* m = v->def;
        if (!m || m->kind != OpKind::Mul || m->parent != &body || uses(body, v) != 1) return false;
        Value* other = m->operand(0) == arg ? m->operand(1) : m->operand(1) == arg ? m->operand(0) : nullptr;
        if (!other || !spread_rows.count(other)) return false;
        s.rescaled = true;
        s.rows = spread_rows.at(other);
        skip.insert(m);
        return true;
      };
      RollingSum s;
      s.index = c;
      Value* term = nullptr;
      if (u->kind == OpKind::Add && acc_side(u->operand(0), s)) {
        term = u->operand(1);
      } else if (u->kind == OpKind::Add && acc_side(u->operand(1), s)) {
        term = u->operand(0);
      } else if (u->kind == OpKind::Dot && u->operand(0) != arg && u->operand(1) != arg && acc_side(u->operand(2), s)) {
      } else {
        return "carried value " + std::to_string(c) + " is updated by '" + std::string(u->name()) +
               "' (only sums, S * alpha + f, and dot accumulations are split)";
      }
      skip.insert(u);
      sums.push_back(s);
      update_terms_.push_back({u, term});
    }
    // What the repair factor computes (exp(m - m'), its spreads, the rescaled sums) is known
    // only to the ops judged above: any other use would escape the algebra below.
    std::unordered_set<const Value*> internal;
    for (const Op* o : skip)
      if (o != mx && o != y && o->results.size() == 1 && o->result() != shift) internal.insert(o->result());
    for (auto& [v, rows] : spread_rows) internal.insert(v);
    std::string escape;
    walk(body, [&](Op& o) {
      for (const Value* v : o.operands)
        if (internal.count(v) && !skip.count(&o) && escape.empty())
          escape = loc_of(o) + "'" + std::string(o.name()) + "' uses the repair factor exp(m - m') other than to rescale a sum";
    });
    if (!escape.empty()) return escape;
    // The terms, by repair-reductions' algebra with the running shift as the max.
    info_[shift] = of(Dep::MaxRow, iota(mc->type.rank()));
    info_[mnew] = info_[shift];
    std::vector<Op*> ops;
    for (auto& o : body.ops) ops.push_back(o.get());
    std::string w = analyze(ops, skip, true);
    std::vector<std::pair<Op*, Value*>> terms;
    terms.swap(update_terms_);
    if (!w.empty()) return w;
    for (size_t i = 0; i < sums.size(); ++i) {
      Info t = terms[i].second ? get(terms[i].second) : transfer_dot(*terms[i].first);
      if (t.dep == Dep::Bad) return loc_of(*terms[i].first) + t.why;
      const std::string which = "carried value " + std::to_string(sums[i].index);
      if (sums[i].rescaled) {
        if (t.dep != Dep::Factor || t.dm != 1 || !t.dl.empty() || t.rows != sums[i].rows)
          return which + " is rescaled by exp(m - m') but its term is not exp(x - m') times a max-free value along the same rows";
      } else if (t.dep != Dep::Indep) {
        return which + " adds a term that depends on the max without being rescaled";
      }
    }
    return "";
  }

  // --- building the two kernels ---

  Value* scalar_op(Block& b, const Op* before, OpKind kind, std::vector<Value*> ops, std::vector<NamedAttr> attrs = {},
                   const char* name = "") {
    return make(b, before, kind, std::move(ops), Type::scalar(ScalarKind::I32), std::move(attrs), name);
  }

  // The program's number in the kernel's own grid (rank <= 2), row-major over (y, x).
  Value* linear_program(Block& b, const Op* before, int grid_rank) {
    Value* x = scalar_op(b, before, OpKind::ProgramId, {}, {{"axis", int64_t{0}}}, "split_px");
    if (grid_rank == 1) return x;
    Value* yv = scalar_op(b, before, OpKind::ProgramId, {}, {{"axis", int64_t{1}}}, "split_py");
    Value* nx = scalar_op(b, before, OpKind::NumPrograms, {}, {{"axis", int64_t{0}}}, "split_nx");
    Value* t = scalar_op(b, before, OpKind::Mul, {yv, nx});
    return scalar_op(b, before, OpKind::Add, {t, x}, {}, "split_prog");
  }

  // The partial views, one per carried value: [SPLIT_P, SPLIT_N, the value's dims].
  std::vector<Value*> add_partial_views() {
    std::vector<Value*> views;
    for (size_t c = 0; c < loop->results.size(); ++c) {
      const Type& t = loop->result(c)->type;
      Shape shape{Dim("SPLIT_P"), Dim("SPLIT_N")};
      for (const Dim& d : t.shape) shape.push_back(d);
      std::string n = loop->result(c)->name.empty() ? std::to_string(c) : loop->result(c)->name;
      views.push_back(k_.add_param(Type::view(t.elem, shape), "split_" + n));
    }
    return views;
  }

  // [1, 1, dims] index operands: the program, the run, zeros.
  std::vector<Value*> partial_index(Value* prog, Value* run, Value* zero, const Type& t) {
    std::vector<Value*> idx{prog, run};
    for (int i = 0; i < t.rank(); ++i) idx.push_back(zero);
    return idx;
  }

  static Type partial_tile(const Type& t) {
    Shape s{Dim(1), Dim(1)};
    for (const Dim& d : t.shape) s.push_back(d);
    return Type::tile(t.elem, s);
  }

  // The kernel whose program (p, s) runs the s-th of SPLIT_N runs of the loop's iterations and
  // stores its carried values to the partial views.
  void make_partial(int grid_rank) {
    std::vector<Value*> views = add_partial_views();
    Op* gy = k_.grid->terminator();
    Value* nsg = make(*k_.grid, gy, OpKind::Dim, {views[0]}, Type::scalar(ScalarKind::I32), {{"axis", int64_t{1}}}, "split_n");
    gy->operands.push_back(nsg);

    Block& b = *k_.body;
    const Op* at = loop;
    Value* prog = linear_program(b, at, grid_rank);
    Value* run = scalar_op(b, at, OpKind::ProgramId, {}, {{"axis", int64_t{grid_rank}}}, "split_run");
    Value* nruns = scalar_op(b, at, OpKind::NumPrograms, {}, {{"axis", int64_t{grid_rank}}}, "split_runs");
    Value* zero = scalar_op(b, at, OpKind::Const, {}, {{"value", int64_t{0}}});
    Value *lo = loop->operand(0), *hi = loop->operand(1), *step = loop->operand(2);
    // Iterations cdiv(max(hi - lo, 0), step), cdiv(that, runs) per run.
    Value* span = scalar_op(b, at, OpKind::Max, {scalar_op(b, at, OpKind::Sub, {hi, lo}), zero});
    Value* trips = scalar_op(b, at, OpKind::Cdiv, {span, step}, {}, "split_trips");
    Value* per = scalar_op(b, at, OpKind::Cdiv, {trips, nruns}, {}, "split_per");
    Value* width = scalar_op(b, at, OpKind::Mul, {per, step});
    Value* nlo = scalar_op(b, at, OpKind::Add, {lo, scalar_op(b, at, OpKind::Mul, {run, width})}, {}, "split_lo");
    Value* nhi = scalar_op(b, at, OpKind::Min, {scalar_op(b, at, OpKind::Add, {nlo, width}), hi}, {}, "split_hi");
    loop->operands[0] = nlo;
    loop->operands[1] = nhi;

    // What followed the loop is the merge kernel's; here the carried values are stored.
    while (b.ops.back().get() != loop) b.ops.pop_back();
    for (size_t c = 0; c < loop->results.size(); ++c) {
      Value* v = loop->result(c);
      Type pt = partial_tile(v->type);
      Value* tile = make(b, nullptr, v->type.is_scalar() ? OpKind::Splat : OpKind::Reshape, {v}, pt);
      std::vector<Value*> ops{views[c], tile};
      for (Value* i : partial_index(prog, run, zero, v->type)) ops.push_back(i);
      k_.create_op(b, OpKind::StoreTile, ops, {}, {}, loop->loc);
    }
  }

  // A partial value of run `run` as the carried value's type.
  Value* load_partial(Block& b, Value* view, Value* prog, Value* run, Value* zero, const Type& t) {
    std::vector<Value*> ops{view};
    for (Value* i : partial_index(prog, run, zero, t)) ops.push_back(i);
    Value* tile = make(b, nullptr, OpKind::LoadTile, ops, partial_tile(t));
    if (!t.is_scalar()) return make(b, nullptr, OpKind::Reshape, {tile}, t);
    Value* one = make(b, nullptr, OpKind::Reshape, {tile}, Type::tile(t.elem, {Dim(1)}));
    return make(b, nullptr, OpKind::Reduce, {one}, t, {{"axis", int64_t{0}}, {"kind", std::string("max")}});
  }

  // The kernel whose program p merges the SPLIT_N partials of its loop, then runs what
  // followed the loop.
  void make_merge(int grid_rank) {
    std::vector<Value*> views = add_partial_views();
    Block& b = *k_.body;
    const Op* at = loop;
    Value* prog = linear_program(b, at, grid_rank);
    Value* zero = scalar_op(b, at, OpKind::Const, {}, {{"value", int64_t{0}}});
    Value* one = scalar_op(b, at, OpKind::Const, {}, {{"value", int64_t{1}}});
    Value* nruns = make(b, at, OpKind::Dim, {views[0]}, Type::scalar(ScalarKind::I32), {{"axis", int64_t{1}}}, "split_runs");
    const Type& mt = loop->result(0)->type;
    Value* ninf = float_const(b, at, mt, -INFINITY, "");
    Value* fzero = float_const(b, at, mt, 0.0, "");
    std::vector<Value*> operands{zero, nruns, one, ninf};
    std::vector<Type> types{mt};
    for (const RollingSum& s : sums) {
      const Type& t = loop->result(s.index)->type;
      operands.push_back(float_const(b, at, t, 0.0, ""));
      types.push_back(t);
    }
    Op* merged = k_.create_op(b, OpKind::For, operands, types, {}, loop->loc, 1, loop);
    Block& body = merged->region(0);
    Value* run = k_.add_block_arg(body, Type::scalar(ScalarKind::I32), "split_run");
    Value* mc = k_.add_block_arg(body, mt, "m_run");
    std::vector<Value*> acc;
    for (const RollingSum& s : sums) acc.push_back(k_.add_block_arg(body, loop->result(s.index)->type, "s_run"));
    Value* ms = load_partial(body, views[0], prog, run, zero, mt);
    Value* mn = make(body, nullptr, OpKind::Max, {mc, ms}, mt, {}, "m_new");
    Value* none = make(body, nullptr, OpKind::Cmp, {mn, ninf}, mt.with_elem(ScalarKind::I1), {{"pred", std::string("eq")}}, "m_none");
    Value* shift = make(body, nullptr, OpKind::Where, {none, fzero, mn}, mt, {}, "m_shift");
    Value* a_run = make(body, nullptr, OpKind::Exp, {make(body, nullptr, OpKind::Sub, {mc, shift}, mt)}, mt, {}, "alpha");
    Value* a_part = make(body, nullptr, OpKind::Exp, {make(body, nullptr, OpKind::Sub, {ms, shift}, mt)}, mt, {}, "beta");
    std::vector<Value*> yields{mn};
    for (size_t i = 0; i < sums.size(); ++i) {
      const Type& t = acc[i]->type;
      Value* part = load_partial(body, views[sums[i].index], prog, run, zero, t);
      Value* next;
      if (sums[i].rescaled) {
        Value* x = make(body, nullptr, OpKind::Mul, {acc[i], spread(body, nullptr, a_run, t, sums[i].rows)}, t);
        Value* p = make(body, nullptr, OpKind::Mul, {part, spread(body, nullptr, a_part, t, sums[i].rows)}, t);
        next = make(body, nullptr, OpKind::Add, {x, p}, t);
      } else {
        next = make(body, nullptr, OpKind::Add, {acc[i], part}, t);
      }
      yields.push_back(next);
    }
    k_.create_op(body, OpKind::Yield, yields, {}, {}, loop->loc);
    for (size_t c = 0; c < loop->results.size(); ++c) {
      merged->result(c)->name = loop->result(c)->name;
      replace_all_uses(k_, loop->result(c), merged->result(c));
    }
    b.ops.erase(op_position(*loop));
    loop = merged;
  }

 private:
  std::vector<std::pair<Op*, Value*>> update_terms_;  // per sum: its update and its term (null for a dot)
};

}  // namespace

void repair_reductions(Kernel& k, PassStats& stats) { Repair(k, stats).run(); }

SplitKernels split_reduction(const Kernel& k, PassStats& stats) {
  SplitKernels out;
  auto refuse = [&](const std::string& why) {
    ++stats["split-reduction.skipped"];
    stats.notes.push_back("split-reduction: kernel '" + k.name + "' left as written: " + why);
    out.why = why;
    return std::move(out);
  };
  if (!k.grid || !k.grid->terminator() || k.grid->terminator()->operands.size() > 2)
    return refuse("its grid has 3 axes (the runs need a grid axis of their own)");
  const int grid_rank = static_cast<int>(k.grid->terminator()->operands.size());
  // The runs take grid axis grid_rank: a program that reads that axis (always 0 in its own grid)
  // would read the run instead.
  std::string reads_axis;
  walk(*k.body, [&](Op& op) {
    if ((op.kind == OpKind::ProgramId || op.kind == OpKind::NumPrograms) && op.attr_int("axis") >= grid_rank &&
        reads_axis.empty())
      reads_axis = loc_of(op) + "'" + std::string(op.name()) + "' reads grid axis " + std::to_string(op.attr_int("axis")) +
                   ", which the runs would take";
  });
  if (!reads_axis.empty()) return refuse(reads_axis);
  for (const Value* p : k.params)
    for (const Dim& d : p->type.shape)
      if (d.symbol == "SPLIT_P" || d.symbol == "SPLIT_N") return refuse("it already names a dim " + d.symbol);
  std::unique_ptr<Kernel> part = k.clone(), merge = k.clone();
  PassStats unused;
  Rolling a(*part, unused), b(*merge, unused);
  if (std::string why = a.find(); !why.empty()) return refuse(why);
  b.find();
  for (const Value* r : a.loop->results)
    if (!shape_is_static(r->type.shape)) return refuse("its carried values' shapes are not bound (run the pipeline first)");
  if (!const_positive(a.loop->operand(2))) return refuse("the loop's step is not a positive constant");
  for (auto& op : part->body->ops) {
    if (op.get() == a.loop) break;
    if (writes_any(*op)) return refuse(loc_of(*op) + "'" + std::string(op->name()) + "' before the loop writes memory (each run would write it again)");
  }
  a.make_partial(grid_rank);
  b.make_merge(grid_rank);
  part->name = k.name + "_partial";
  merge->name = k.name + "_merge";
  for (Kernel* x : {part.get(), merge.get()}) {
    cse(*x, unused);  // the program ids and constants the kernel already had
    dce(*x, unused);  // the partial kernel's epilogue, the merge kernel's loop inputs
  }
  ++stats["split-reduction.split"];
  out.partial = std::move(part);
  out.merge = std::move(merge);
  return out;
}

}  // namespace tessera
