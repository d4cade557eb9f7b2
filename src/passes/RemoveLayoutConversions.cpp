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
//   shared one: what cp.async and TMA do; also through a reshape of unit dims, which is then a
//   view of the shared tile), and a conversion of a one-operand elementwise op
//   whose operand is smaller (a widening cast) converts the operand instead, so that it can
//   reach the load;
// - stores: a store writes the unconverted value (a store takes any layout), and a reshape
//   that only adds or drops leading unit dims of an accumulator keeps its layout (the
//   conversion moves past it, to the store), as does a permute of a tensor-core layout (its
//   result in the permuted layout: the swapped product's accumulator permuted back) and a
//   reshape that puts a slice's removed dim back as a unit dim (its result in the parent);
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
#include <optional>
#include <set>

#include "ir/IR.h"
#include "passes/BlockEdit.h"
#include "passes/Passes.h"

namespace tessera {

namespace {

constexpr int64_t kNominalTrips = 16;
// How far up its producers a converted value is made again in the wanted layout: without
// loads (a few cheap ops instead of an exchange: the local rule), and with loads (judged by
// the search's cost).
constexpr int kRematerializeDepth = 4;
constexpr int kBackwardDepth = 6;
// The most moves the search makes (each lowers the cost, so it ends well before on real kernels).
constexpr int kMaxSearchMoves = 1024;

struct Use {
  Op* op;
  size_t index;
};

class Remove {
 public:
  explicit Remove(Kernel& k) : k_(k), warps_(launch_warps(k)) {}

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
  int warps_;

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

  // Does every thread hold the one element of tile `v`? (Then shape ops read it in any such
  // layout.)
  bool held_everywhere(const Value& v) const {
    return v.type.is_tile() && shape_is_static(v.type.shape) && shape_numel(v.type.shape) == 1 &&
           v.type.space.empty() && layouts_place_alike(v.type.layout, Layout::replicated(), static_shape(v.type.shape), warps_);
  }

  // An operand layout of a dot computed with FMAs (its parent is blocked): each thread holds
  // the rows or columns of the operand its part of the result needs, which a load can give
  // directly (the repeated reads are served by the L1 cache, as reads from shared memory would
  // be); a tensor-core operand instead goes through shared memory (ldmatrix, wgmma).
  static bool fma_operand(const Layout& l) {
    return l.kind == Layout::Kind::DotOperand && l.parent && l.parent->kind == Layout::Kind::Blocked;
  }

  // Layouts a load gives directly: the plain ones and FMA operands.
  static bool loadable(const Layout& l) {
    return l.kind == Layout::Kind::Blocked || l.kind == Layout::Kind::Slice || l.kind == Layout::Kind::Replicated ||
           fma_operand(l);
  }

  // Do only dots read `v` (a 2-D tile), each able to read it transposed in shared memory
  // (order = [0, 1])? wgmma reads B [K, N] K-major (that order) for every element type, and A
  // [M, K] M-major (that order) only for 16-bit ones: 8-bit and tf32 operands are K-major only.
  // An FMA dot (a blocked accumulator) reads A either way, but B only [K, N]: per k, the
  // threads of a warp read neighbouring columns of B's row k, which K-major rows (68 floats
  // apart) would put in two banks.
  bool dots_read_transposed(const Value* v) {
    std::vector<Use> us = uses(v);
    return !us.empty() && v->type.rank() == 2 && std::all_of(us.begin(), us.end(), [&](Use u) {
             if (u.op->kind != OpKind::Dot) return false;
             if (u.op->result()->type.layout.kind != Layout::Kind::Mma) return u.index == 0;
             return u.index == 1 || (u.index == 0 && scalar_bits(v->type.elem) == 16);
           });
  }

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
    // duplicates: an earlier conversion of the same value to the same place in this block
    for (const auto& o : c.parent->ops) {
      if (o.get() == &c) break;
      if (o->kind == OpKind::ConvertLayout && o->operand(0) == x && same_place(o->result()->type, y->type)) {
        replace_all_uses(k_, y, o->result());
        erase(c);
        return true;
      }
    }
    // chains
    if (src && src->kind == OpKind::ConvertLayout) {
      c.operands[0] = src->operand(0);
      erase_if_unused(src);
      return true;
    }
    // one element held by every thread: an expand_dims or broadcast reads it in either layout
    if (held_everywhere(*x) && held_everywhere(*y)) {
      bool changed = false;
      for (Use u : uses(y))
        if (u.op->kind == OpKind::ExpandDims || u.op->kind == OpKind::Broadcast) u.op->operands[u.index] = x, changed = true;
      if (changed) {
        if (uses(y).empty()) erase(c);
        return true;
      }
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
    // Loads and one-operand ops take plain layouts and FMA operands only: a tensor-core
    // operand is loaded through shared memory, and that exchange stays.
    const bool plain = loadable(y->type.layout);
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
    // backward rematerialization: a converted value computed by elementwise ops from splats,
    // aranges and scalars alone (a mask of column indices) is computed again in the wanted
    // layout: a few cheap ops instead of an exchange
    if (src && y->type.layout.is_distributed() && y->type.space.empty() &&
        backward_reaches(x, /*load_ok=*/false, kRematerializeDepth)) {
      Value* made = remade(x, y->type, c);
      replace_all_uses(k_, y, made);
      erase(c);
      erase_dead_tree(src);
      return true;
    }
    // a permute into shared memory that only dots read, transposed (dots_read_transposed):
    // the permute's operand goes into shared memory in its own order, and the permute is a
    // view of those bytes in the permuted order
    if (src && src->kind == OpKind::Permute && y->type.layout.kind == Layout::Kind::Shared &&
        y->type.layout.order.empty() && uses(x).size() == 1 && src->operand(0)->type.is_tile() &&
        dots_read_transposed(y)) {
      const Layout& want = y->type.layout;
      Type shared = src->operand(0)->type;
      shared.layout = Layout::shared(want.swizzle, want.pad);
      shared.space = "shared";
      src->operands[0] = convert(src->operand(0), shared, *src->parent, src, src->loc);
      // Result dim i is operand dim dims[i]: the operand's dims from fastest (last first), as
      // result dims.
      const std::vector<int64_t>& dims = src->attr_ints("dims");
      std::vector<int64_t> order;
      for (size_t j = dims.size(); j-- > 0;)
        order.push_back(std::find(dims.begin(), dims.end(), static_cast<int64_t>(j)) - dims.begin());
      x->type.layout = Layout::shared(want.swizzle, want.pad, order);
      x->type.space = "shared";
      replace_all_uses(k_, y, x);
      erase(c);
      return true;
    }
    std::vector<Use> ys = uses(y);
    // loads into shared memory (asynchronous copies, which fill what lies past the view with
    // +0: a load with another pad value stays a load into registers, stored after it), also
    // through a reshape that only adds or drops unit dims (a row-major view of the same bytes:
    // one head of a [H, S, D] view read as [S, D]); not into a shared tile of another order (an
    // f8 mma operand's K-fastest tile of B [K, N]): copies do not transpose, so the load stays
    // and the conversion stores it transposed
    const std::vector<int64_t>& order = y->type.layout.order;
    const bool row_major = std::is_sorted(order.rbegin(), order.rend()) &&
                           (order.empty() || (order.front() == int64_t(order.size()) - 1 && order.back() == 0));
    if (src && y->type.space == "shared" && uses(x).size() == 1 && row_major) {
      Op* load = src;
      if (src->kind == OpKind::Reshape && y->type.layout.order.empty() &&
          only_unit_dims_change(src->operand(0)->type, x->type) && uses(src->operand(0)).size() == 1)
        load = src->operand(0)->def;
      if (load && load->kind == OpKind::LoadTile && pads_with_positive_zero(*load) && loads_in_whole_chunks(load->result()->type)) {
        for (Value* v : {load->result(), x}) {
          v->type.layout = y->type.layout;
          v->type.space = y->type.space;
        }
        replace_all_uses(k_, y, x);
        erase(c);
        return true;
      }
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
    // reshapes of leading unit dims of an accumulator (for a store to a view of higher rank):
    // the reshape keeps the accumulator's layout (ir/Layout.h), and the conversion moves past it
    // (where the store rule above takes it away)
    if (user.kind == OpKind::Reshape && x->type.layout.kind == Layout::Kind::Mma &&
        leading_units_only(x->type, user.result()->type) &&
        layout_misfit(x->type.layout, static_shape(user.result()->type.shape)).empty()) {
      user.operands[0] = x;
      Value* r = user.result();
      const Type old = r->type;
      r->type.layout = x->type.layout;
      r->type.space = x->type.space;
      Value* back = convert(r, old, *user.parent, next_op(user), user.loc);
      redirect(r, back, back->def);
      erase(c);
      return true;
    }
    // reshapes that put a slice's removed dim back as a unit dim (a reduction's row stored
    // through a view of one more dim: [64] -> [1, 64]): the result takes the slice's parent,
    // which places every element where the slice does (replicated along the unit dim), and the
    // conversion moves past the reshape, on toward the store rule above
    if (user.kind == OpKind::Reshape && x->type.layout.kind == Layout::Kind::Slice && x->type.space.empty() &&
        x->type.layout.parent && unit_dim_put_back(x->type, user.result()->type, x->type.layout.dim) &&
        layout_misfit(*x->type.layout.parent, static_shape(user.result()->type.shape)).empty()) {
      user.operands[0] = x;
      Value* r = user.result();
      const Type old = r->type;
      r->type.layout = *x->type.layout.parent;
      r->type.space = x->type.space;
      Value* back = convert(r, old, *user.parent, next_op(user), user.loc);
      redirect(r, back, back->def);
      erase(c);
      return true;
    }
    // permutes of a tensor-core layout (the swapped product's accumulator, permuted back after
    // its loop): the permute keeps every element in its thread (a permuted layout, ir/Layout.h),
    // and the conversion moves past it, on toward the store rule above
    // (Not a permute in shared memory: the view above, which a dot reads, moves nothing.)
    if (user.kind == OpKind::Permute && x->type.space.empty() && permutable(x->type.layout) &&
        user.result()->type.space.empty() && user.result()->type.layout.is_distributed()) {
      const Layout moved = Layout::permuted(x->type.layout, user.attr_ints("dims"));
      if (layout_misfit(moved, static_shape(user.result()->type.shape)).empty()) {
        user.operands[0] = x;
        Value* r = user.result();
        const Type old = r->type;
        r->type.layout = moved;
        Value* back = convert(r, old, *user.parent, next_op(user), user.loc);
        redirect(r, back, back->def);
        erase(c);
        return true;
      }
    }
    if (elementwise_forward(c, user)) return true;
    return carried(c);
  }

  // A register layout that a permute carries as a permuted layout (ir/Layout.h): a blocked
  // layout permutes into a blocked one instead (assign-layouts).
  static bool permutable(const Layout& l) {
    return l.kind == Layout::Kind::Mma || l.kind == Layout::Kind::DotOperand || l.kind == Layout::Kind::Permuted;
  }

  // Do `from` and `to` (static shapes) differ only in leading dims of extent 1?
  static bool leading_units_only(const Type& from, const Type& to) {
    if (!shape_is_static(from.shape) || !shape_is_static(to.shape)) return false;
    auto core = [](const Type& t) {
      std::vector<int64_t> d = static_shape(t.shape);
      size_t i = 0;
      while (i + 2 < d.size() && d[i] == 1) ++i;
      return std::vector<int64_t>(d.begin() + static_cast<std::ptrdiff_t>(i), d.end());
    };
    return core(from) == core(to);
  }

  // Whether `to` is `from` with a unit dim inserted at `dim` (static shapes).
  static bool unit_dim_put_back(const Type& from, const Type& to, int64_t dim) {
    if (!shape_is_static(from.shape) || !shape_is_static(to.shape)) return false;
    std::vector<int64_t> f = static_shape(from.shape), t = static_shape(to.shape);
    if (dim < 0 || static_cast<size_t>(dim) >= t.size() || t.size() != f.size() + 1 || t[dim] != 1) return false;
    t.erase(t.begin() + dim);
    return t == f;
  }

  // Erases `root` if unused, then the producers of its operands that this left unused. An op
  // may feed several operands (mul %e, %e) or several producers: each is looked at by pointer
  // against those already erased before it is read.
  void erase_dead_tree(Op* root) {
    std::vector<Op*> work = {root};
    std::set<const Op*> erased;
    while (!work.empty()) {
      Op* op = work.back();
      work.pop_back();
      if (!op || erased.count(op) || !op->regions.empty() || op->info().cls == OpClass::Memory ||
          op->results.size() != 1 || !uses(op->result()).empty())
        continue;
      for (Value* o : op->operands)
        if (o->def) work.push_back(o->def);
      erased.insert(op);
      erase(*op);
    }
  }

  static bool elementwise(const Op& e) {
    const OpClass cls = e.info().cls;
    return cls == OpClass::Unary || cls == OpClass::Binary || cls == OpClass::Compare || cls == OpClass::Ternary ||
           (cls == OpClass::Cast && e.kind != OpKind::ConvertLayout);
  }

  bool elementwise_forward(Op& c, Op& e) {
    if (!elementwise(e) || !e.result()->type.is_tile()) return false;
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

 public:
  // The layouts worth trying for the `i`th value `loop` carries: those that conversions of
  // tiles of its shape, in the loop or of its result, convert from or to (the layouts the
  // program computes such tiles in).
  std::vector<Layout> carried_candidates(Op& loop, size_t i) {
    const Type& t = loop.results[i]->type;
    std::vector<Layout> out;
    auto add = [&](const Type& c) {
      if (c.shape == t.shape && c.layout.is_distributed() && c.layout != t.layout &&
          std::find(out.begin(), out.end(), c.layout) == out.end())
        out.push_back(c.layout);
    };
    auto look = [&](Op& op) {
      if (op.kind != OpKind::ConvertLayout) return;
      add(op.operand(0)->type);
      add(op.result()->type);
    };
    walk(loop.region(0), look);
    for (Use u : uses(loop.results[i])) look(*u.op);
    return out;
  }

  // `loop` carries its `i`th value in layout `l` instead: the initial value and the yielded one
  // are converted to it, and each use in the body and after the loop converts back, so the
  // program means the same; the local rewrites then take away what they can.
  void retype_carried(Op& loop, size_t i, const Layout& l) {
    Block& body = loop.region(0);
    Value* arg = body.args[1 + i];
    Value* res = loop.results[i];
    const Type old = arg->type;
    Type want = old;
    want.layout = l;
    want.space = "";
    loop.operands[3 + i] = convert(loop.operand(3 + i), want, *loop.parent, &loop, loop.loc);
    Op* y = body.terminator();
    y->operands[i] = convert(y->operand(i), want, body, y, y->loc);
    for (Value* v : {arg, res}) {
      std::vector<Use> us = uses(v);
      v->type.layout = l;
      v->type.space = "";
      for (Use u : us) {
        if (u.op == y && v == arg && u.index == i) continue;  // the yield converts on its own
        u.op->operands[u.index] = convert(v, old, *u.op->parent, u.op, u.op->loc);
      }
    }
  }

  // The Carried move: `loop` carries its values `which` in layout `l` (retype_carried), and
  // the body computes in it from the carried values on: the conversions back to the old
  // layout that their readers got are pushed forward through them (an accumulator carried in
  // the dot's layout is rescaled in it), or the move could not pay on its own.
  void carry_in(Op& loop, const std::vector<size_t>& which, const Layout& l) {
    for (size_t i : which) retype_carried(loop, i, l);
    for (size_t i : which) {
      std::vector<Op*> back;
      for (Use u : uses(loop.region(0).args[1 + i]))
        if (u.op->kind == OpKind::ConvertLayout && u.op->parent == &loop.region(0)) back.push_back(u.op);
      for (Op* c : back) propagate_forward(*c);
    }
  }

  // Forward propagation: the elementwise ops that read `c`'s result, and those that read
  // theirs, in `c`'s block, compute in `c`'s source layout instead. What they read from
  // elsewhere is converted to it, and what they give to other ops is converted back, so the
  // program means the same; the local rewrites then take away what they can (a converted
  // bias pushed back to its load, a converted splat made again; what the ops read is made in
  // the new layout up its producers where `propagate_backward` can).
  void propagate_forward(Op& c) {
    const Type from = c.operand(0)->type;
    Block& b = *c.parent;
    std::vector<Op*> set;
    std::vector<const Value*> inside = {c.result()};
    auto is_inside = [&](const Value* v) { return std::find(inside.begin(), inside.end(), v) != inside.end(); };
    for (auto it = std::next(op_position(c)); it != b.ops.end(); ++it) {
      Op& op = **it;
      if (!elementwise(op) || op.results.size() != 1 || !op.result()->type.is_tile()) continue;
      if (std::none_of(op.operands.begin(), op.operands.end(), is_inside)) continue;
      set.push_back(&op);
      inside.push_back(op.result());
    }
    std::vector<std::pair<Value*, Type>> old;
    std::vector<Op*> pulled;  // the conversions of what the set reads from elsewhere
    for (Op* op : set) {
      for (Value*& v : op->operands) {
        if (v == c.result()) v = c.operand(0);
        else if (v->type.is_tile() && !is_inside(v)) v = convert(v, from, b, op, op->loc), pulled.push_back(v->def);
      }
      old.push_back({op->result(), op->result()->type});
    }
    for (auto& [r, type] : old) {
      std::vector<Use> us = uses(r);
      r->type.layout = from.layout;
      r->type.space = from.space;
      for (Use u : us)
        if (std::find(set.begin(), set.end(), u.op) == set.end())
          u.op->operands[u.index] = convert(r, type, *u.op->parent, u.op, u.op->loc);
    }
    if (uses(c.result()).empty()) erase(c);
    // What the set reads is made in the new layout where its producers allow (a gathered
    // value, and the indices it was gathered with).
    for (Op* p : pulled) propagate_backward(*p);
  }

  // Backward propagation: `c`'s operand is made in `c`'s layout instead, and so on up its
  // producers (elementwise ops, made again in the new layout; a load or a gather, which reads
  // in it, the rest of its uses converting back; splats and aranges, made again), as far as
  // kBackwardDepth ops.
  // False (and nothing changed) when the producers are of another kind.
  bool propagate_backward(Op& c) {
    if (!c.result()->type.layout.is_distributed() || !c.result()->type.space.empty() ||
        !backward_reaches(c.operand(0), loadable(c.result()->type.layout), kBackwardDepth))
      return false;
    Value* made = remade(c.operand(0), c.result()->type, c);
    replace_all_uses(k_, c.result(), made);
    Op* src = c.operand(0)->def;
    erase(c);
    erase_dead_tree(src);
    return true;
  }

 private:
  // Can `v` be made in another layout from its producers, up to `depth` ops: elementwise ops
  // down to splats, aranges and (when `load_ok`) loads?
  static bool backward_reaches(const Value* v, bool load_ok, int depth) {
    if (!v->type.is_tile() || rematerializable(v)) return v->type.is_tile();
    if (depth == 0 || !v->def) return false;
    if (v->def->kind == OpKind::LoadTile || v->def->kind == OpKind::Gather) return load_ok;
    if (!elementwise(*v->def)) return false;
    for (const Value* o : v->def->operands)
      if (o->type.is_tile() && !backward_reaches(o, load_ok, depth - 1)) return false;
    return true;
  }

  // `v` in `want`'s layout, for `propagate_backward`.
  Value* remade(Value* v, const Type& want, Op& before) {
    Type t = v->type;
    t.layout = want.layout;
    t.space = want.space;
    if (same_place(v->type, t)) return v;
    Op* d = v->def;
    if (d->kind == OpKind::LoadTile || d->kind == OpKind::Gather) {
      // Memory is read where it was (a store may come between it and `before`); a gather's
      // indices and mask are converted too: they have its result's layout.
      const Type old = v->type;
      std::vector<Use> others = uses(v);
      v->type = t;
      for (Use u : others) u.op->operands[u.index] = convert(v, old, *u.op->parent, u.op, u.op->loc);
      for (Value*& o : d->operands)
        if (o->type.is_tile()) o = convert(o, t, *d->parent, d, d->loc);
      return v;
    }
    std::vector<Value*> operands = d->operands;
    for (Value*& o : operands)
      if (o->type.is_tile()) o = remade(o, want, before);
    return k_.create_op(*before.parent, d->kind, operands, {t}, d->attrs, d->loc, 0, &before)->result();
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

// The trip count of a `for` if its bounds are constants, else kNominalTrips (a `while`'s too).
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
    const int64_t inner = op->kind == OpKind::For ? weight * trips(*op) : op->kind == OpKind::While ? weight * kNominalTrips : weight;
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
  const int warps = launch_warps(k);
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

namespace {

// The local rewrites, repeated until none applies; how many were made.
int64_t rewrite_to_fixpoint(Kernel& k) {
  Remove r(k);
  int64_t rewrites = 0;
  while (rewrites < 10000 && r.step()) ++rewrites;
  return rewrites;
}

std::vector<Op*> for_loops(Kernel& k) {
  std::vector<Op*> out;
  walk(*k.body, [&](Op& op) {
    if (op.kind == OpKind::For) out.push_back(&op);
  });
  return out;
}

// The cost the search minimizes: bytes moved times trips, then the number of conversions.
std::pair<int64_t, int64_t> search_cost(const Kernel& k) {
  auto [n, bytes] = layout_conversion_cost(k);
  return {bytes, n};
}

std::vector<Op*> conversions(Kernel& k) {
  std::vector<Op*> out;
  walk(*k.body, [&](Op& op) {
    if (op.kind == OpKind::ConvertLayout) out.push_back(&op);
  });
  return out;
}

// A change the search tries: retype carried values `which` of loop number `index` to
// `layout`, or propagate conversion number `index`'s source layout forward.
struct Move {
  enum Kind { Carried, Forward, Backward } kind;
  size_t index;
  std::vector<size_t> which;
  Layout layout;
};

void apply(Kernel& k, const Move& m) {
  if (m.kind == Move::Carried)
    Remove(k).carry_in(*for_loops(k)[m.index], m.which, m.layout);
  else if (m.kind == Move::Forward)
    Remove(k).propagate_forward(*conversions(k)[m.index]);
  else
    Remove(k).propagate_backward(*conversions(k)[m.index]);
  rewrite_to_fixpoint(k);
}

// The moves worth trying now.
// - Carried: a loop carries each value in the layout of its initial value, which is often
//   not the layout the body computes it in (a running max carried as a rank-1 tile while the
//   reduction that updates it gives a slice of the scores' layout): every layout the
//   conversions of tiles of its shape name, for the value alone and together with the loop's
//   other carried tiles of its shape and layout (a running sum is rescaled by a factor
//   computed from the running max: neither moves alone).
// - Forward: each conversion from a register layout, its source layout pushed through the
//   elementwise ops after it (an epilogue computed in the accumulator's layout).
std::vector<Move> moves(Kernel& k) {
  std::vector<Move> out;
  const std::vector<Op*> loops = for_loops(k);
  for (size_t li = 0; li < loops.size(); ++li) {
    Op* loop = loops[li];
    for (size_t i = 0; i < loop->results.size(); ++i) {
      const Type& t = loop->results[i]->type;
      if (!t.is_tile() || !t.layout.is_distributed()) continue;
      std::vector<size_t> alike;
      for (size_t j = 0; j < loop->results.size(); ++j)
        if (loop->results[j]->type.shape == t.shape && loop->results[j]->type.layout == t.layout) alike.push_back(j);
      for (const Layout& l : Remove(k).carried_candidates(*loop, i)) {
        out.push_back({Move::Carried, li, {i}, l});
        if (alike.size() > 1) out.push_back({Move::Carried, li, alike, l});
      }
    }
  }
  const std::vector<Op*> cs = conversions(k);
  for (size_t ci = 0; ci < cs.size(); ++ci) {
    const Type& from = cs[ci]->operand(0)->type;
    if (from.is_tile() && from.layout.is_distributed() && from.space.empty()) out.push_back({Move::Forward, ci, {}, {}});
    out.push_back({Move::Backward, ci, {}, {}});
  }
  return out;
}

// The search: try each move on a copy of the kernel, run the local rewrites, and make the
// first move that lowers the cost; repeat until none does. How many moves were made.
//
// Each round starts where the last kept move was (the moves before it did not lower the cost
// a moment ago), so a kernel with many independent loops takes about one pass over its moves,
// not one pass per kept move.
int64_t search_moves(Kernel& k) {
  int64_t made = 0;
  size_t start = 0;
  for (int round = 0; round < kMaxSearchMoves; ++round) {
    const auto now = search_cost(k);
    const std::vector<Move> ms = moves(k);
    bool improved = false;
    for (size_t n = 0; n < ms.size() && !improved; ++n) {
      const size_t at = (start + n) % ms.size();
      auto trial = k.clone();
      apply(*trial, ms[at]);
      if (search_cost(*trial) < now) {
        apply(k, ms[at]);
        improved = true;
        start = at;
        ++made;
      }
    }
    if (!improved) break;
  }
  return made;
}

}  // namespace

void remove_layout_conversions(Kernel& k, PassStats& stats) {
  auto [n0, b0] = layout_conversion_cost(k);
  int64_t rewrites = rewrite_to_fixpoint(k);
  stats["remove-layout-conversions.searched-moves"] += search_moves(k);
  stats["remove-layout-conversions.rewrites"] += rewrites;
  auto [n1, b1] = layout_conversion_cost(k);
  stats["remove-layout-conversions.before"] += n0;
  stats["remove-layout-conversions.after"] += n1;
  stats["remove-layout-conversions.after-between-threads"] += n1 - free_conversions(k);
  stats["remove-layout-conversions.bytes-before"] += b0;
  stats["remove-layout-conversions.bytes-after"] += b1;
}

}  // namespace tessera
