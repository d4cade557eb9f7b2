// chunk-reductions: a program that holds a whole row of scores as one tile (attention written
// as `softmax(q @ k^T) @ v` over a [BM, T] tile, no loop) gets that row axis cut into chunks
// of `row_chunk` columns (64 unless the kernel binds the knob): every reduction over the axis
// (a row max, a row sum, a dot that contracts it) becomes a loop over the chunks that
// recomputes, chunk by chunk, the ops its operand needs. That is the three-loop program
// (max, sum of exp, P @ V), which repair-reductions then fuses into one rolling loop: the
// [BM, T] intermediates shrink to [BM, row_chunk] and K and V are read a chunk at a time.
//
// Which axis: the axes of all the body's tiles are put in classes, two (value, dim) pairs in
// one class when an op ties them (an elementwise op ties each dim of an operand to the same
// dim of its result; a broadcast ties the dims it keeps, not those it widens from 1;
// expand_dims, permute and a reshape that adds or drops unit dims tie what they move; a
// reduction ties the dims it keeps; a dot ties rows to rows, columns to columns and a's
// contracted dim to b's). A splat ties nothing: it holds no data along any axis, and cse has
// made one value of every identical splat, which would tie unrelated rows together; a chunk
// loop makes its own, narrower copy. A class is a candidate when a row max (`reduce max`)
// runs over it; the candidates are tried in program order and the first that works is cut
// (one class per kernel).
//
// When it is chunked (else the kernel stays as written; a note says why when the row came
// from a dot, the case the pass is for):
// - every value has at most one dim in the class, of one static extent E that row_chunk
//   divides (and E > row_chunk);
// - the values along it come from ops that can make a chunk: load_tile at tile index 0 along
//   the axis (chunk j loads tile j of the narrower tile, the same elements), arange (plus
//   j * row_chunk), splat, a broadcast from 1, and the ops that tie dims above;
// - a value along the axis is used only by such ops or by a reduction over the axis: `reduce`
//   max or sum (sums of integers or f32/f64, whose chunked sum differs only by reassociation;
//   f16/bf16 sums round once at the end and would round per chunk), or a dot contracting it
//   (its k order is kept: dot(p_j, v_j, acc) in j order is the same sequence of fused
//   multiply-adds); nothing along the axis is stored, scanned, sorted or used in a region;
// - a dot makes the row (scores, logits) or contracts it (P @ V): a row loaded from memory
//   and only reduced is in memory already, so recomputing it per chunk would only read it
//   again (and no note is given for such rows, which every row kernel has);
// - repair-reductions fuses the chunk loops into one (tried on a copy first): three loops that
//   each recompute q @ k^T would be slower than the plain program.
// The loops run over all E / row_chunk chunks: the plain program computes every column of its
// tile, masked or not, and so do they.
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "ir/IR.h"
#include "passes/BlockEdit.h"
#include "passes/Passes.h"

namespace tessera {

namespace {

constexpr int64_t kDefaultRowChunk = 64;

std::string loc_of(const Op& op) { return op.loc.known() ? op.loc.str() + ": " : ""; }

bool is_splat(const Value* v) { return v->type.is_tile() && v->def && v->def->kind == OpKind::Splat; }

bool elementwise(const Op& op) {
  switch (op.info().cls) {
    case OpClass::Unary:
    case OpClass::Binary:
    case OpClass::Compare:
    case OpClass::Ternary:
      return true;
    case OpClass::Cast:
      return op.kind != OpKind::ConvertLayout;
    default:
      return false;
  }
}

// The non-unit dims of a shape, in order (a reshape that only adds or drops unit dims keeps
// them).
std::vector<int> non_unit_dims(const Type& t) {
  std::vector<int> out;
  for (int d = 0; d < t.rank(); ++d)
    if (t.shape[d].value != 1) out.push_back(d);
  return out;
}

// The (value, dim) pairs of the body's top-level tiles in classes (union-find).
class AxisClasses {
 public:
  int id(const Value* v, int d) {
    auto [it, fresh] = base_.try_emplace(v, static_cast<int>(parent_.size()));
    if (fresh)
      for (int i = 0; i < v->type.rank(); ++i) {
        parent_.push_back(static_cast<int>(parent_.size()));
        members_.push_back({v, i});
      }
    return it->second + d;
  }
  int find(int x) {
    while (parent_[x] != x) x = parent_[x] = parent_[parent_[x]];
    return x;
  }
  int cls(const Value* v, int d) { return find(id(v, d)); }
  void tie(const Value* a, int da, const Value* b, int db) { parent_[cls(a, da)] = cls(b, db); }
  // Nothing along this class can be cut (why).
  void block(const Value* v, int d, const std::string& why) { blocked_.emplace(cls(v, d), why); }
  void block_all(const Value* v, const std::string& why) {
    if (v->type.is_tile())
      for (int d = 0; d < v->type.rank(); ++d) block(v, d, why);
  }
  std::optional<std::string> blocked(int c) {
    for (const auto& [b, why] : blocked_)
      if (find(b) == c) return why;
    return std::nullopt;
  }
  // The dim of `v` in class c, or -1; -2 when it has two.
  int dim_in(const Value* v, int c) {
    if (!v->type.is_tile()) return -1;
    int found = -1;
    for (int d = 0; d < v->type.rank(); ++d)
      if (cls(v, d) == c) found = found == -1 ? d : -2;
    return found;
  }
  std::vector<std::pair<const Value*, int>> members(int c) {
    std::vector<std::pair<const Value*, int>> out;
    for (size_t i = 0; i < members_.size(); ++i)
      if (find(static_cast<int>(i)) == c) out.push_back(members_[i]);
    return out;
  }

 private:
  std::unordered_map<const Value*, int> base_;
  std::vector<int> parent_;
  std::vector<std::pair<const Value*, int>> members_;
  std::multimap<int, std::string> blocked_;
};

// What the rewrite needs: the axis class, its extent and chunk, and the reductions over it.
struct Plan {
  int cls = -1;
  int64_t extent = 0, chunk = 0;
  std::vector<Op*> reducers;                     // in program order
  std::unordered_set<const Op*> chunked;         // ops with a result along the axis
  std::unordered_map<const Value*, int> axis_of; // value along the axis -> its dim
};

class Chunker {
 public:
  explicit Chunker(Kernel& k) : k_(k) {}

  // The candidate classes that can be chunked, in program order; `why` collects the reasons
  // the others cannot (for classes a dot makes or contracts).
  std::vector<Plan> analyze(std::vector<std::string>& why) {
    std::vector<Plan> plans;
    if (!k_.body) return plans;
    for (auto& o : k_.body->ops) ops_.push_back(o.get());
    for (size_t i = 0; i < ops_.size(); ++i) pos_[ops_[i]] = i;
    for (Op* op : ops_) tie(*op);
    std::set<int> tried;
    for (Op* op : ops_) {
      if (op->kind != OpKind::Reduce || op->attr_string("kind") != "max") continue;
      int c = classes_.cls(op->operand(0), static_cast<int>(op->attr_int("axis")));
      if (!tried.insert(c).second) continue;
      std::string reason;
      bool from_dot = false;
      if (auto plan = check(c, reason, from_dot))
        plans.push_back(std::move(*plan));
      else if (from_dot)
        why.push_back(loc_of(*op) + "row max left as written: " + reason);
    }
    return plans;
  }

  void rewrite(const Plan& p) {
    Block& body = *k_.body;
    const Op* first = body.ops.front().get();
    Value* c0 = int_const(body, first, 0);
    Value* c1 = int_const(body, first, 1);
    Value* count = int_const(body, first, p.extent / p.chunk);
    Value* width = int_const(body, first, p.chunk);
    for (Op* r : p.reducers) {
      Type rt = r->result()->type;
      Value* init = r->kind == OpKind::Dot ? r->operand(2) : identity(body, r, rt);
      Op* loop = k_.create_op(body, OpKind::For, {c0, count, c1, init}, {rt}, {}, r->loc, 1, r);
      Block& lb = loop->region(0);
      Value* j = k_.add_block_arg(lb, Type::scalar(ScalarKind::I32), "chunk");
      Value* acc = k_.add_block_arg(lb, rt, r->result()->name + "_run");
      std::unordered_map<const Value*, Value*> map;
      for (Op* op : slice(p, *r)) clone_chunk(p, *op, lb, j, width, map);
      auto mapped = [&](Value* v) {
        auto it = map.find(v);
        return it == map.end() ? v : it->second;
      };
      Value* next = nullptr;
      if (r->kind == OpKind::Dot) {
        next = make(lb, OpKind::Dot, {mapped(r->operand(0)), mapped(r->operand(1)), acc}, rt, r->attrs, r->loc);
      } else {
        Value* part = make(lb, OpKind::Reduce, {mapped(r->operand(0))}, rt, r->attrs, r->loc);
        OpKind combine = r->attr_string("kind") == "max" ? OpKind::Max : OpKind::Add;
        next = make(lb, combine, {acc, part}, rt, {}, r->loc);
      }
      next->name = r->result()->name;
      k_.create_op(lb, OpKind::Yield, {next}, {}, {}, r->loc);
      loop->result()->name = r->result()->name;
      replace_all_uses(k_, r->result(), loop->result());
    }
    // The reductions and the whole-row ops are read by nothing now.
    std::unordered_set<const Op*> gone(p.reducers.begin(), p.reducers.end());
    gone.insert(p.chunked.begin(), p.chunked.end());
    std::erase_if(body.ops, [&](const std::unique_ptr<Op>& o) { return gone.count(o.get()) != 0; });
  }

 private:
  Kernel& k_;
  AxisClasses classes_;
  std::vector<Op*> ops_;
  std::unordered_map<const Op*, size_t> pos_;

  // --- the classes ---

  void tie(Op& op) {
    // A tile of the body read inside a region: the region would see the whole row.
    for (auto& r : op.regions)
      walk(*r, [&](Op& inner) {
        for (Value* v : inner.operands)
          if (v->type.is_tile() && pos_.count(v->def)) classes_.block_all(v, "a region (" + std::string(op.name()) + ") reads it");
      });
    Value* res = op.results.size() == 1 ? op.result() : nullptr;
    if (elementwise(op)) {
      for (Value* v : op.operands)
        if (v->type.is_tile() && res && v->type.shape == res->type.shape && !is_splat(v))
          for (int d = 0; d < v->type.rank(); ++d) classes_.tie(v, d, res, d);
      return;
    }
    switch (op.kind) {
      case OpKind::Splat:
      case OpKind::Arange:
      case OpKind::LoadTile:
        // Nothing to tie: the result's dims start classes of their own (id registers them).
        if (res && res->type.is_tile()) classes_.id(res, 0);
        return;
      case OpKind::Broadcast:
        if (op.operand(0)->type.is_tile() && !is_splat(op.operand(0)))
          for (int d = 0; d < res->type.rank(); ++d)
            if (op.operand(0)->type.shape[d] == res->type.shape[d]) classes_.tie(op.operand(0), d, res, d);
        return;
      case OpKind::ExpandDims: {
        if (is_splat(op.operand(0))) return;
        int a = static_cast<int>(op.attr_int("axis"));
        for (int d = 0; d < op.operand(0)->type.rank(); ++d) classes_.tie(op.operand(0), d, res, d < a ? d : d + 1);
        return;
      }
      case OpKind::Permute: {
        if (is_splat(op.operand(0))) return;
        const auto& dims = op.attr_ints("dims");
        for (size_t d = 0; d < dims.size(); ++d) classes_.tie(op.operand(0), static_cast<int>(dims[d]), res, static_cast<int>(d));
        return;
      }
      case OpKind::Reshape: {
        if (is_splat(op.operand(0))) return;
        auto a = non_unit_dims(op.operand(0)->type), b = non_unit_dims(res->type);
        bool same = a.size() == b.size();
        for (size_t i = 0; same && i < a.size(); ++i) same = op.operand(0)->type.shape[a[i]] == res->type.shape[b[i]];
        if (!same) {
          classes_.block_all(op.operand(0), "a reshape that moves elements across dims");
          classes_.block_all(res, "a reshape that moves elements across dims");
          return;
        }
        for (size_t i = 0; i < a.size(); ++i) classes_.tie(op.operand(0), a[i], res, b[i]);
        return;
      }
      case OpKind::Reduce: {
        if (!op.operand(0)->type.is_tile() || is_splat(op.operand(0))) return;
        int a = static_cast<int>(op.attr_int("axis"));
        for (int d = 0; d < op.operand(0)->type.rank(); ++d)
          if (d != a) classes_.tie(op.operand(0), d, res, d < a ? d : d - 1);
        return;
      }
      case OpKind::Dot:
        // A splat accumulator (the usual zeros) ties nothing, like any splat.
        classes_.tie(op.operand(0), 0, res, 0);
        classes_.tie(op.operand(1), 1, res, 1);
        if (!is_splat(op.operand(2))) {
          classes_.tie(op.operand(2), 0, res, 0);
          classes_.tie(op.operand(2), 1, res, 1);
        }
        classes_.tie(op.operand(0), 1, op.operand(1), 0);
        return;
      default:
        // Stores, scans, sorts, gathers, sub-tiles, control flow, Struct and raw ops: what
        // they touch keeps its whole extent.
        for (Value* v : op.operands) classes_.block_all(v, std::string("'") + std::string(op.name()) + "' uses it whole");
        for (Value* v : op.results) classes_.block_all(v, std::string("'") + std::string(op.name()) + "' makes it whole");
        return;
    }
  }

  // --- the checks ---

  static std::optional<int64_t> chunk_knob(const Kernel& k) {
    const ConstexprDecl* c = k.find_constexpr("row_chunk");
    return c ? std::optional<int64_t>(c->value) : std::nullopt;
  }

  std::optional<Plan> check(int c, std::string& why, bool& from_dot) {
    Plan p;
    p.cls = c;
    auto members = classes_.members(c);
    for (auto [v, d] : members) from_dot = from_dot || (v->def && v->def->kind == OpKind::Dot);
    // A dot contracting the class also counts: its operands' k dims are in it.
    for (Op* op : ops_)
      if (op->kind == OpKind::Dot && classes_.cls(op->operand(0), 1) == c) from_dot = true;
    if (auto b = classes_.blocked(c)) return fail(why, "the row axis is needed whole: " + *b);
    for (auto [v, d] : members) {
      if (classes_.dim_in(v, c) == -2) return fail(why, "a value has two dims along the row axis");
      const Dim& dim = v->type.shape[d];
      if (!dim.is_static()) return fail(why, "the row axis has no static extent");
      if (p.extent == 0) p.extent = dim.value;
      if (dim.value != p.extent) return fail(why, "the row axis has two extents");
      p.axis_of[v] = d;
    }
    if (!from_dot) return fail(why, "no dot makes or contracts the row");
    p.chunk = chunk_knob(k_).value_or(kDefaultRowChunk);
    if (p.chunk <= 0) return fail(why, "row_chunk = " + std::to_string(p.chunk) + " is not positive");
    if (p.extent <= p.chunk)
      return fail(why, "the row's " + std::to_string(p.extent) + " columns fit in one chunk of row_chunk = " +
                           std::to_string(p.chunk));
    if (p.extent % p.chunk != 0)
      return fail(why, "the row's " + std::to_string(p.extent) + " columns are not a multiple of row_chunk = " +
                           std::to_string(p.chunk));
    for (Op* op : ops_) {
      bool along = false;
      for (Value* r : op->results) along = along || p.axis_of.count(r);
      if (along) {
        if (auto bad = cannot_chunk(*op, p)) return fail(why, *bad);
        p.chunked.insert(op);
        continue;
      }
      bool reads = false;
      for (Value* v : op->operands) reads = reads || p.axis_of.count(v);
      if (!reads) continue;
      if (auto bad = cannot_reduce(*op, p)) return fail(why, *bad);
      p.reducers.push_back(op);
    }
    if (p.reducers.empty()) return fail(why, "nothing reduces over the row axis");
    if (auto bad = splat_operands(p)) return fail(why, *bad);
    return p;
  }

  static std::optional<Plan> fail(std::string& why, const std::string& reason) {
    why = reason;
    return std::nullopt;
  }

  // Why an op with a result along the axis cannot make one chunk of it, or nothing.
  std::optional<std::string> cannot_chunk(const Op& op, const Plan& p) {
    if (op.results.size() != 1) return std::string("'") + std::string(op.name()) + "' along the row axis";
    int d = p.axis_of.at(op.result());
    switch (op.kind) {
      case OpKind::LoadTile: {
        auto idx = const_int(op.operand(1 + d));
        if (!idx || *idx != 0) return std::string("a load along the row axis at a tile index other than 0");
        return std::nullopt;
      }
      case OpKind::Splat:
      case OpKind::Arange:
      case OpKind::Broadcast:
      case OpKind::ExpandDims:
      case OpKind::Permute:
      case OpKind::Reshape:
      case OpKind::Reduce:
      case OpKind::Dot:
        return std::nullopt;
      default:
        if (elementwise(op)) return std::nullopt;
        return std::string("'") + std::string(op.name()) + "' along the row axis";
    }
  }

  // Why an op that reads a value along the axis (and makes none) is not a reduction the loop
  // can carry, or nothing.
  std::optional<std::string> cannot_reduce(const Op& op, const Plan& p) {
    if (op.kind == OpKind::Dot) {
      if (p.axis_of.count(op.operand(2))) return std::string("a dot accumulates into a value along the row axis");
      return std::nullopt;
    }
    if (op.kind != OpKind::Reduce) return std::string("'") + std::string(op.name()) + "' reads the whole row";
    const std::string& kind = op.attr_string("kind");
    ScalarKind e = op.result()->type.elem;
    if (kind == "max" && is_float(e)) return std::nullopt;
    if (kind == "sum" && (e == ScalarKind::F32 || e == ScalarKind::F64 || (is_int(e) && !is_bool(e)))) return std::nullopt;
    return "a " + kind + " reduction over the row axis of " + op.result()->type.str() +
           " (only max, f32/f64/integer sums and dots are carried chunk by chunk)";
  }

  // Splats tie nothing, so a chunk loop must know what to do with each splat it reads: an
  // elementwise op's splat operand (or a dot's splat accumulator) of the op's own shape is
  // made again at the chunk's shape; a splat as wide as the row anywhere else is refused.
  std::optional<std::string> splat_operands(const Plan& p) {
    auto wide = [&](const Value* v) {
      const auto& s = v->type.shape;
      return std::any_of(s.begin(), s.end(), [&](const Dim& d) { return d.is_static() && d.value == p.extent; });
    };
    std::vector<const Op*> ops(p.chunked.begin(), p.chunked.end());
    ops.insert(ops.end(), p.reducers.begin(), p.reducers.end());
    for (const Op* op : ops)
      for (size_t i = 0; i < op->operands.size(); ++i) {
        const Value* v = op->operand(i);
        if (!is_splat(v) || !wide(v)) continue;
        bool chunked = p.chunked.count(op) != 0;
        bool resplat = chunked && v->type.shape == op->result()->type.shape &&
                       (elementwise(*op) || (op->kind == OpKind::Dot && i == 2));
        if (!resplat) return "a splat as wide as the row feeds '" + std::string(op->name()) + "'";
      }
    return std::nullopt;
  }

  // --- the rewrite ---

  // The chunked ops reduction `r` needs, in program order.
  std::vector<Op*> slice(const Plan& p, const Op& r) {
    std::unordered_set<const Op*> need;
    std::vector<const Value*> work(r.operands.begin(), r.operands.end());
    while (!work.empty()) {
      const Value* v = work.back();
      work.pop_back();
      if (!v->def || !p.chunked.count(v->def) || !need.insert(v->def).second) continue;
      work.insert(work.end(), v->def->operands.begin(), v->def->operands.end());
    }
    std::vector<Op*> out;
    for (Op* op : ops_)
      if (need.count(op)) out.push_back(op);
    return out;
  }

  Value* make(Block& b, OpKind kind, std::vector<Value*> operands, const Type& t, std::vector<NamedAttr> attrs,
              const Loc& loc) {
    return k_.create_op(b, kind, std::move(operands), {t}, std::move(attrs), loc)->result();
  }

  Value* int_const(Block& b, const Op* before, int64_t v) {
    Op* op = k_.create_op(b, OpKind::Const, {}, {Type::scalar(ScalarKind::I32)}, {{"value", v}}, Loc{}, 0, before);
    return op->result();
  }

  // The start of a running max (-inf) or sum (0) of type t, in front of `before`.
  Value* identity(Block& b, const Op* before, const Type& t) {
    bool max = before->attr_string("kind") == "max";
    Type st = Type::scalar(t.elem);
    Attr v = is_float(t.elem) ? Attr(max ? -INFINITY : 0.0) : Attr(int64_t{0});
    Value* s = k_.create_op(b, OpKind::Const, {}, {st}, {{"value", v}}, before->loc, 0, before)->result();
    if (t.is_scalar()) return s;
    return k_.create_op(b, OpKind::Splat, {s}, {t}, {}, before->loc, 0, before)->result();
  }

  // `op`, for chunk j, at the end of `b`: dims along the axis become the chunk's width.
  void clone_chunk(const Plan& p, const Op& op, Block& b, Value* j, Value* width,
                   std::unordered_map<const Value*, Value*>& map) {
    Type t = op.result()->type;
    t.shape[p.axis_of.at(op.result())] = Dim(p.chunk);
    std::vector<Value*> operands;
    for (Value* v : op.operands) {
      auto it = map.find(v);
      if (it != map.end())
        operands.push_back(it->second);
      else if (is_splat(v) && v->type.shape == op.result()->type.shape)  // splat_operands allowed it
        operands.push_back(make(b, OpKind::Splat, {v->def->operand(0)}, t.with_elem(v->type.elem), {}, v->def->loc));
      else
        operands.push_back(v);
    }
    Value* out = nullptr;
    if (op.kind == OpKind::LoadTile) {
      operands[1 + p.axis_of.at(op.result())] = j;
      out = make(b, op.kind, operands, t, op.attrs, op.loc);
    } else if (op.kind == OpKind::Arange) {
      Value* lanes = make(b, OpKind::Arange, {}, t, op.attrs, op.loc);
      Value* first = make(b, OpKind::Mul, {j, width}, Type::scalar(ScalarKind::I32), {}, op.loc);
      Value* firsts = make(b, OpKind::Splat, {first}, t, {}, op.loc);
      out = make(b, OpKind::Add, {lanes, firsts}, t, {}, op.loc);
    } else {
      out = make(b, op.kind, operands, t, op.attrs, op.loc);
    }
    out->name = op.result()->name;
    map[op.result()] = out;
  }
};

// The `for` ops at the top of the body.
int64_t top_loops(const Kernel& k) {
  return std::count_if(k.body->ops.begin(), k.body->ops.end(), [](const auto& o) { return o->kind == OpKind::For; });
}

}  // namespace

void chunk_reductions(Kernel& k, PassStats& stats) {
  std::vector<std::string> why;
  Chunker chunker(k);
  std::vector<Plan> plans = chunker.analyze(why);
  auto skip = [&](const std::string& note) {
    ++stats["chunk-reductions.skipped"];
    stats.notes.push_back("chunk-reductions: " + note);
  };
  for (const std::string& w : why) skip(w);
  if (plans.empty()) return;
  // Worth it only when repair-reductions makes one loop of the chunk loops: tried on copies,
  // with and without the chunks, so that a loop it fuses anyway is not counted. The first
  // candidate that passes is cut.
  auto plain = k.clone();
  PassStats scratch;
  repair_reductions(*plain, scratch);
  for (size_t i = 0; i < plans.size(); ++i) {
    auto cut = k.clone();
    std::vector<std::string> unused;
    Chunker trial(*cut);
    auto again = trial.analyze(unused);  // the same candidates, on the copy's values
    if (again.size() != plans.size()) throw TesseraError(k.loc, "chunk-reductions: internal error: the copy's candidates differ");
    trial.rewrite(again[i]);
    PassStats repaired;
    repair_reductions(*cut, repaired);
    int64_t left = top_loops(*cut) - top_loops(*plain);
    if (left == 1) {
      chunker.rewrite(plans[i]);
      stats["chunk-reductions.chunked"] += static_cast<int64_t>(plans[i].reducers.size());
      return;
    }
    std::string because;
    for (const std::string& n : repaired.notes) because += "; " + n;
    skip("the row max over " + std::to_string(plans[i].extent) + " columns left as written: repair-reductions fuses its " +
         std::to_string(plans[i].reducers.size()) + " chunk loops into " + std::to_string(left) + ", not one" + because);
  }
}

}  // namespace tessera
