// remove-layout-conversions (GPU lowering): takes away the convert_layout ops that
// assign-layouts made explicit wherever the program can run in the source layout instead, by
// local rewrites repeated until none applies. Each rewrite removes a conversion or moves it
// onto fewer or smaller tiles, or out of a loop, so the cost (bytes converted, times the trip
// count of the loops around) never grows:
// - identity: a conversion to the layout the value has goes;
// - loop-invariant conversions (of a value from outside the loop) move in front of the loop;
// - chains: a conversion of a conversion converts the original value;
// - rematerialization: a converted splat or arange is made in the wanted layout instead, and
//   a converted broadcast or expand_dims converts its (smaller) operand;
// - loads: a load whose one use converts it loads in that layout (into shared memory for a
//   shared one: what cp.async and TMA do), and a conversion of a one-operand elementwise op
//   whose operand is smaller (a widening cast) converts the operand instead, so that it can
//   reach the load;
// - stores: a store writes the unconverted value (a store takes any layout);
// - forward through elementwise ops: an op whose tile operands are all conversions from one
//   layout (or rematerializable) runs in that layout, with one conversion of its result, when
//   that result has no more bytes than the conversions it replaces;
// - reductions: a reduction of a converted tile reduces the original and converts the (smaller)
//   slice;
// - loop-carried values: a `for` value yielded through a conversion, whose every use in the
//   body converts it back, is carried in the yielded layout: the two conversions in the loop
//   become one before and one after it.
// Statistics: conversions and their weighted bytes before and after (a loop whose trip count is
// not a constant counts as kNominalTrips iterations), and how many of those left move data
// between threads (the rest only rename registers: both layouts put every element in the
// same threads, as for the 1-element row statistics of the row kernels).
#include <algorithm>
#include <functional>

#include "ir/IR.h"
#include "passes/BlockEdit.h"
#include "passes/Passes.h"

namespace tessera {

namespace {

constexpr int64_t kNominalTrips = 16;

struct Use {
  Op* op;
  size_t index;
};

class Remove {
 public:
  explicit Remove(Kernel& k) : k_(k) {}

  bool step() {
    std::vector<Op*> converts;
    walk(*k_.body, [&](Op& op) {
      if (op.kind == OpKind::ConvertLayout) converts.push_back(&op);
    });
    for (Op* c : converts)
      if (rewrite(*c)) return true;
    return false;
  }

 private:
  Kernel& k_;

  std::vector<Use> uses(const Value* v) {
    std::vector<Use> out;
    walk(*k_.body, [&](Op& op) {
      for (size_t i = 0; i < op.operands.size(); ++i)
        if (op.operands[i] == v) out.push_back({&op, i});
    });
    return out;
  }

  static void erase(Op& op) { op.parent->ops.erase(op_position(op)); }

  // Erase `op` if none of its results is used (a pure op left behind by a rewrite).
  void erase_if_unused(Op* op) {
    if (!op || !op->regions.empty() || op->info().cls == OpClass::Memory) return;
    for (const Value* r : op->results)
      if (!uses(r).empty()) return;
    erase(*op);
  }

  // A convert of `v` to `t`'s layout and space, in front of `before` (null: at the end of `b`).
  Value* convert(Value* v, const Type& t, Block& b, const Op* before, const Loc& loc) {
    Type r = v->type;
    r.layout = t.layout;
    r.space = t.space;
    return k_.create_op(b, OpKind::ConvertLayout, {v}, {r}, {}, loc, 0, before)->result();
  }

  // Every use of `v`'s old value, but `keep`, now reads `to`.
  void redirect(Value* from, Value* to, const Op* keep) {
    for (Use u : uses(from))
      if (u.op != keep) u.op->operands[u.index] = to;
  }

  // Is `v` defined in `b` or in a region nested in it?
  static bool defined_in(const Value* v, const Block& b) {
    for (const Block* at = v->def ? v->def->parent : v->block; at; at = at->parent ? at->parent->parent : nullptr)
      if (at == &b) return true;
    return false;
  }

  static bool same_place(const Type& a, const Type& b) { return a.layout == b.layout && a.space == b.space; }

  static bool rematerializable(const Value* v) {
    return v->def && (v->def->kind == OpKind::Splat || v->def->kind == OpKind::Arange) && v->type.is_tile();
  }

  bool rewrite(Op& c) {
    Value* x = c.operand(0);
    Value* y = c.result();
    Op* src = x->def;
    // identity
    if (same_place(x->type, y->type)) {
      replace_all_uses(k_, y, x);
      erase(c);
      return true;
    }
    // loop-invariant: a conversion of a value from outside the loop it sits in runs once,
    // in front of the loop
    if (Op* loop = c.parent->parent; loop && loop->kind == OpKind::For && !defined_in(x, *c.parent)) {
      move_before(c, *loop);
      return true;
    }
    // chains
    if (src && src->kind == OpKind::ConvertLayout) {
      c.operands[0] = src->operand(0);
      erase_if_unused(src);
      return true;
    }
    // backward through broadcast and expand_dims: convert the smaller operand instead
    if (src && (src->kind == OpKind::Broadcast || src->kind == OpKind::ExpandDims) && uses(x).size() == 1 &&
        src->operand(0)->type.is_tile() && y->type.layout.is_distributed()) {
      Value* a = src->operand(0);
      Type want = a->type;
      want.layout = src->kind == OpKind::Broadcast ? y->type.layout : Layout::slice(y->type.layout, src->attr_int("axis"));
      want.space = y->type.space;
      if (layout_misfit(want.layout, static_shape(a->type.shape)).empty()) {
        src->operands[0] = convert(a, want, *src->parent, src, src->loc);
        x->type.layout = y->type.layout;
        x->type.space = y->type.space;
        replace_all_uses(k_, y, x);
        erase(c);
        return true;
      }
    }
    // Loads and one-operand ops take plain layouts only: a tensor-core operand is loaded
    // through shared memory, and that exchange stays.
    const Layout::Kind yk = y->type.layout.kind;
    const bool plain = yk == Layout::Kind::Blocked || yk == Layout::Kind::Slice || yk == Layout::Kind::Replicated;
    // backward through a one-operand elementwise op (a widening cast) whose operand is smaller:
    // convert the operand instead (strictly smaller, so that the forward rule below, which
    // moves a conversion past an op whose result is no larger, never undoes it)
    if (src && uses(x).size() == 1 && plain && src->operands.size() == 1 &&
        (src->info().cls == OpClass::Unary || src->kind == OpKind::Cast) && src->operand(0)->type.is_tile() &&
        scalar_bytes(src->operand(0)->type.elem) < scalar_bytes(x->type.elem)) {
      src->operands[0] = convert(src->operand(0), y->type, *src->parent, src, src->loc);
      x->type.layout = y->type.layout;
      x->type.space = y->type.space;
      replace_all_uses(k_, y, x);
      erase(c);
      return true;
    }
    // a load whose one use converts it loads in that layout (a load can give any layout)
    if (src && src->kind == OpKind::LoadTile && uses(x).size() == 1 && plain) {
      x->type = y->type;
      replace_all_uses(k_, y, x);
      erase(c);
      return true;
    }
    // rematerialization
    if (rematerializable(x)) {
      Op* made = k_.create_op(*c.parent, src->kind, src->operands, {y->type}, src->attrs, src->loc, 0, &c);
      replace_all_uses(k_, y, made->result());
      erase(c);
      erase_if_unused(src);
      return true;
    }
    std::vector<Use> ys = uses(y);
    // loads into shared memory
    if (src && src->kind == OpKind::LoadTile && y->type.space == "shared" && uses(x).size() == 1) {
      x->type = y->type;
      replace_all_uses(k_, y, x);
      erase(c);
      return true;
    }
    // stores
    bool stored = false;
    for (Use u : ys)
      if (u.op->kind == OpKind::StoreTile && u.index == 1) u.op->operands[1] = x, stored = true;
    if (stored) {
      if (uses(y).empty()) erase(c);
      return true;
    }
    if (ys.size() != 1) return false;
    Op& user = *ys[0].op;
    // (the rules below move the conversion to the user: only within one block, never into a
    // loop)
    if (user.parent != c.parent) return carried(c);
    // reductions
    if (user.kind == OpKind::Reduce && x->type.layout.is_distributed()) {
      user.operands[0] = x;
      Value* r = user.result();
      if (!r->type.is_tile()) {
        erase(c);
        return true;
      }
      const Type old = r->type;
      r->type.layout = Layout::slice(x->type.layout, user.attr_int("axis"));
      r->type.space = x->type.space;
      Value* back = convert(r, old, *user.parent, next_op(user), user.loc);
      redirect(r, back, back->def);
      erase(c);
      return true;
    }
    if (elementwise_forward(c, user)) return true;
    return carried(c);
  }

  bool elementwise_forward(Op& c, Op& e) {
    const OpClass cls = e.info().cls;
    const bool elementwise = cls == OpClass::Unary || cls == OpClass::Binary || cls == OpClass::Compare ||
                             cls == OpClass::Ternary || (cls == OpClass::Cast && e.kind != OpKind::ConvertLayout);
    if (!elementwise || !e.result()->type.is_tile()) return false;
    const Type& from = c.operand(0)->type;
    int64_t removed_bytes = 0;
    for (const Value* v : e.operands) {
      if (!v->type.is_tile()) continue;
      if (v->def && v->def->kind == OpKind::ConvertLayout && same_place(v->def->operand(0)->type, from) &&
          uses(v).size() == 1) {
        removed_bytes += shape_numel(v->type.shape) * scalar_bytes(v->type.elem);
      } else if (!rematerializable(v)) {
        return false;
      }
    }
    Value* r = e.result();
    if (shape_numel(r->type.shape) * scalar_bytes(r->type.elem) > removed_bytes) return false;
    std::vector<Op*> gone;
    for (size_t i = 0; i < e.operands.size(); ++i) {
      Value* v = e.operands[i];
      if (!v->type.is_tile()) continue;
      if (v->def->kind == OpKind::ConvertLayout) {
        gone.push_back(v->def);
        e.operands[i] = v->def->operand(0);
      } else {
        Type t = v->type;
        t.layout = from.layout;
        t.space = from.space;
        e.operands[i] = k_.create_op(*e.parent, v->def->kind, v->def->operands, {t}, v->def->attrs, v->def->loc, 0, &e)->result();
      }
    }
    const Type old = r->type;
    r->type.layout = from.layout;
    r->type.space = from.space;
    Value* back = convert(r, old, *e.parent, next_op(e), e.loc);
    redirect(r, back, back->def);
    for (Op* g : gone) erase(*g);
    return true;
  }

  // The yield of a `for` reads `c`'s result: carry the unconverted value when every use of the
  // carried value in the body converts it to that layout.
  bool carried(Op& c) {
    std::vector<Use> ys = uses(c.result());
    if (ys.size() != 1 || ys[0].op->kind != OpKind::Yield) return false;
    Op& yield = *ys[0].op;
    Block& body = *yield.parent;
    Op* loop = body.parent;
    if (!loop || loop->kind != OpKind::For) return false;
    const size_t i = ys[0].index;
    Value* arg = body.args[1 + i];
    const Type& want = c.operand(0)->type;
    std::vector<Use> args = uses(arg);
    for (Use u : args)
      if (u.op->kind != OpKind::ConvertLayout || !same_place(u.op->result()->type, want)) return false;
    // The loop carries `want`: the converts of the argument in the body are the argument now.
    const Type old = arg->type;
    for (Use u : args) {
      replace_all_uses(k_, u.op->result(), arg);
      erase(*u.op);
    }
    arg->type.layout = want.layout;
    arg->type.space = want.space;
    yield.operands[i] = c.operand(0);
    erase(c);
    Value* result = loop->results[i];
    loop->operands[3 + i] = convert(loop->operand(3 + i), want, *loop->parent, loop, loop->loc);
    result->type.layout = want.layout;
    result->type.space = want.space;
    Value* back = convert(result, old, *loop->parent, next_op(*loop), loop->loc);
    redirect(result, back, back->def);
    return true;
  }
};

// The trip count of a `for` if its bounds are constants, else kNominalTrips.
int64_t trips(const Op& loop) {
  int64_t v[3];
  for (int i = 0; i < 3; ++i) {
    const Op* d = loop.operand(i)->def;
    const Attr* a = d && d->kind == OpKind::Const ? d->find_attr("value") : nullptr;
    const int64_t* n = a ? std::get_if<int64_t>(a) : nullptr;
    if (!n) return kNominalTrips;
    v[i] = *n;
  }
  return v[2] > 0 && v[1] > v[0] ? (v[1] - v[0] + v[2] - 1) / v[2] : 0;
}

// Conversions and their bytes times the trip counts of the loops around them.
std::pair<int64_t, int64_t> conversion_cost(const Block& b, int64_t weight) {
  int64_t n = 0, bytes = 0;
  for (const auto& op : b.ops) {
    if (op->kind == OpKind::ConvertLayout && op->result()->type.is_tile()) {
      n += 1;
      bytes += weight * shape_numel(op->result()->type.shape) * scalar_bytes(op->result()->type.elem);
    }
    const int64_t inner = op->kind == OpKind::For ? weight * trips(*op) : weight;
    for (const auto& r : op->regions) {
      auto [rn, rb] = conversion_cost(*r, inner);
      n += rn;
      bytes += rb;
    }
  }
  return {n, bytes};
}

// Conversions between layouts that put every element in the same threads (nothing moves
// between threads: Layout.h, layouts_place_alike).
int64_t free_conversions(const Kernel& k) {
  int64_t n = 0;
  const int warps = default_num_warps(k);
  walk(*k.body, [&](Op& op) {
    if (op.kind != OpKind::ConvertLayout || !op.result()->type.is_tile()) return;
    const Type& a = op.operand(0)->type;
    const Type& b = op.result()->type;
    if (a.space == b.space && layouts_place_alike(a.layout, b.layout, static_shape(a.shape), warps)) ++n;
  });
  return n;
}

}  // namespace

std::pair<int64_t, int64_t> layout_conversion_cost(const Kernel& k) { return conversion_cost(*k.body, 1); }

void remove_layout_conversions(Kernel& k, PassStats& stats) {
  auto [n0, b0] = layout_conversion_cost(k);
  Remove r(k);
  int64_t rewrites = 0;
  while (rewrites < 10000 && r.step()) ++rewrites;
  stats["remove-layout-conversions.rewrites"] += rewrites;
  auto [n1, b1] = layout_conversion_cost(k);
  stats["remove-layout-conversions.before"] += n0;
  stats["remove-layout-conversions.after"] += n1;
  stats["remove-layout-conversions.after-between-threads"] += n1 - free_conversions(k);
  stats["remove-layout-conversions.bytes-before"] += b0;
  stats["remove-layout-conversions.bytes-after"] += b1;
}

}  // namespace tessera
