// IR -> C++ for the cpu backend.
//
// Tiles are flat row-major local arrays of their compute type (narrow floats compute as float
// and are rounded back after every op, as the interpreter does); elementwise ops are plain loops
// the compiler vectorizes; the grid is an OpenMP parallel for over all program ids. Each IR op
// is written as a comment above its code, and every emitted line remembers its op so that a
// compiler error can be mapped back to the user's source.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "cpu/CpuBackend.h"
#include "codegen/CTypes.h"
#include "codegen/Shapes.h"
#include "cpu/CpuInternal.h"
#include "ir/Struct.h"
#include "support/Float.h"
#include "text/Text.h"

namespace tessera::cpu {

using namespace codegen;  // ctype, stype, load_conv, store_conv, fround, dround

namespace {

// An exact C++ literal for a double.
std::string dlit(double v) {
  if (std::isnan(v)) return "double(NAN)";
  if (std::isinf(v)) return v > 0 ? "double(INFINITY)" : "double(-INFINITY)";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}

// A constant of kind `k` with value `v` (already a number of that kind, e.g. an attribute). A
// narrow float is rounded here (support/Float.h, the interpreter's rounding) and written as the
// float it is: `tsr::bf2f(tsr::f2bf_d(0x0p+0))` at every padded load was for GCC to fold,
// ~0.015 s of topk bf16's cold compile (bench/RESULTS.md session 24).
std::string klit(ScalarKind k, double v) {
  if (is_narrow(k)) return "float(" + dlit(round_to_float(k, v)) + ")";
  if (is_float(k)) return dround(k, dlit(v));
  if (k == ScalarKind::I1) return v != 0 ? "uint8_t(1)" : "uint8_t(0)";
  return ctype(k) + "(INT64_C(" + std::to_string(static_cast<int64_t>(v)) + "))";
}
std::string ilit(ScalarKind k, int64_t v) {
  if (is_float(k)) return dround(k, dlit(int_to_float(k, v, false)));  // one rounding
  if (k == ScalarKind::I1) return (v & 1) ? "uint8_t(1)" : "uint8_t(0)";
  if (v == INT64_MIN) return ctype(k) + "(INT64_MIN)";
  return ctype(k) + "(INT64_C(" + std::to_string(v) + "))";
}

std::string sanitize(const std::string& s) {
  std::string o;
  for (char c : s) o += (std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  return o.size() > 24 ? o.substr(0, 24) : o;
}

// "((a0)*4 + a1)*8 + a2"
// The tsr::load_row conversion (runtime header) from kind k's storage to its compute type.
std::string row_conv(ScalarKind k) {
  switch (k) {
    case ScalarKind::BF16: return "ld_bf16";
    case ScalarKind::F16: return "ld_f16";
    case ScalarKind::F8E4M3: return "ld_e4m3";
    case ScalarKind::F8E5M2: return "ld_e5m2";
    case ScalarKind::I1: return "ld_i1";
    default: return "ld_same";
  }
}

// The tsr::store_row conversion (runtime header) from kind k's compute type to its storage.
std::string row_store_conv(ScalarKind k) {
  switch (k) {
    case ScalarKind::BF16: return "st_bf16";
    case ScalarKind::F16: return "st_f16";
    case ScalarKind::F8E4M3: return "st_e4m3";
    case ScalarKind::F8E5M2: return "st_e5m2";
    default: return "st_same";
  }
}

std::string flat_index(const std::vector<std::string>& idx, const std::vector<int64_t>& shape) {
  if (idx.empty()) return "0";
  std::string e = idx[0];
  for (size_t d = 1; d < idx.size(); ++d)
    e = "(" + e + ")*" + std::to_string(shape[d]) + " + " + idx[d];
  return e;
}

// What one program instance does, in one walk of its body, loops counted by their trip counts
// (kLoopGuess times unless constant), an `if` by its larger branch:
// - `elements`: the elements of every tile its ops produce (a dot: M * N * K), saturating at
//   2^40 (how much work a grid is: the serial launcher's rule);
// - `ops` and `bytes`: the same elements weighed as work (a transcendental 15 ops, the
//   runtime's exp being 13 vector instructions; a relaxed exp 8, for its 7; a sort or topk its
//   merge network's steps over its operand), and the bytes its load_tile / store_tile ops move
//   (the streamed stores' rule).
constexpr int64_t kLoopGuess = 4;
struct ProgramWork {
  int64_t elements = 0;
  double ops = 0, bytes = 0;
};
// An exp that may be within kRelaxedExpError (relax-exp-precision's max_rel_error): its
// vectors by tsr::exp16_relaxed, 7 instructions against 13.
bool relaxed_exp(const Op& op) {
  return op.kind == OpKind::Exp && op.has_attr("max_rel_error") && op.attr_number("max_rel_error") >= kRelaxedExpError;
}
// skip: an op of `b` that counts nothing (branch_work's `if`, one branch of which it adds).
ProgramWork estimate_work(const Block& b, const Op* skip = nullptr) {
  auto sat = [](int64_t a, int64_t m) { return (a > (int64_t{1} << 40) / std::max<int64_t>(m, 1)) ? (int64_t{1} << 40) : a * m; };
  static const OpKind transcendental[] = {OpKind::Exp, OpKind::Exp2, OpKind::Log,     OpKind::Log2, OpKind::Log1p, OpKind::Expm1,
                                          OpKind::Sin, OpKind::Cos,  OpKind::Tanh,    OpKind::Sigmoid, OpKind::Erf, OpKind::Pow};
  ProgramWork w;
  for (const auto& o : b.ops) {
    int64_t here = 1;
    for (const Value* r : o->results)
      if (r->type.is_tile() && shape_is_static(r->type.shape)) here = std::max(here, shape_numel(r->type.shape));
    if (o->kind == OpKind::Dot && o->operands.size() >= 2 && o->operand(0)->type.is_tile() &&
        shape_is_static(o->operand(0)->type.shape) && o->operand(0)->type.rank() == 2)
      here = sat(here, static_shape(o->operand(0)->type.shape)[1]);
    double ops = double(here);
    if (std::find(std::begin(transcendental), std::end(transcendental), o->kind) != std::end(transcendental))
      ops *= relaxed_exp(*o) ? 8 : 15;
    if (o->kind == OpKind::Sort || o->kind == OpKind::Topk) {  // a merge network over the operand: log2(n) (log2(n) + 1) / 2 steps
      const Value* x = o->operand(0);
      double n = double(here);
      if (x->type.is_tile() && shape_is_static(x->type.shape)) n = std::max(n, double(shape_numel(x->type.shape)));
      const double lg = std::log2(std::max(2.0, n));
      ops = n * lg * (lg + 1) / 2;
    }
    if ((o->kind == OpKind::LoadTile || o->kind == OpKind::StoreTile) && !o->operands.empty()) {
      const Value* tile = o->kind == OpKind::LoadTile ? o->result() : o->operands.size() > 1 ? o->operand(1) : nullptr;
      if (tile && tile->type.is_tile() && shape_is_static(tile->type.shape))
        w.bytes += double(shape_numel(tile->type.shape)) * scalar_bytes(o->operand(0)->type.elem);
    }
    ProgramWork inner;
    if (o.get() == skip) {
      continue;
    } else if (o->kind == OpKind::If) {
      for (const auto& r : o->regions) {
        ProgramWork x = estimate_work(*r);
        inner.elements = std::max(inner.elements, x.elements);
        inner.ops = std::max(inner.ops, x.ops), inner.bytes = std::max(inner.bytes, x.bytes);
      }
    } else {
      int64_t trips = 1;
      if (o->kind == OpKind::While) trips = kLoopGuess;
      if (o->kind == OpKind::For) {
        auto lb = const_int(o->operand(0)), ub = const_int(o->operand(1)), st = const_int(o->operand(2));
        trips = lb && ub && st && *st > 0 ? std::max<int64_t>(0, (*ub - *lb + *st - 1) / *st) : kLoopGuess;
      }
      for (const auto& r : o->regions) {
        ProgramWork x = estimate_work(*r);
        inner.elements += sat(x.elements, trips);
        inner.ops += x.ops * double(trips), inner.bytes += x.bytes * double(trips);
      }
    }
    w.elements = std::min(int64_t{1} << 40, w.elements + here + inner.elements);
    w.ops += ops + inner.ops, w.bytes += inner.bytes;
  }
  return w;
}
// The work of a program that takes `branch`, a region of an `if` among the body's own ops: the
// branch's and that of the body's other ops (another `if` counting its costlier branch).
ProgramWork branch_work(const Block& body, const Block& branch) {
  ProgramWork w = estimate_work(body, branch.parent), x = estimate_work(branch);
  w.elements = std::min(int64_t{1} << 40, w.elements + x.elements);
  w.ops += x.ops, w.bytes += x.bytes;
  return w;
}
// The branch of an `if` among the body's own ops that holds `op`, or null.
const Block* top_level_branch(const Op& op, const Block& body) {
  const Block* b = op.parent;
  while (b && b != &body) {
    const Op* owner = b->parent;
    if (!owner) return nullptr;
    if (owner->kind == OpKind::If && owner->parent == &body) return b;
    b = owner->parent;
  }
  return nullptr;
}
// Long f32 / bf16 row stores stream (tsr::stream_f32 / stream_bf16, into views of at least
// tsr::kStreamBytes) in kernels doing fewer element ops than this per byte they move: there a
// plain store's read of each line it writes costs time, while a compute-bound kernel (bf16
// softmax: ~6 ops a byte) ran 5-30% slower streaming (bench/RESULTS.md, session 31).
constexpr double kStreamOpsPerByte = 4.0;
constexpr int64_t kStreamPiece = 256;  // the emitter's kPrefetchPiece

// Grids doing at most this many element ops in all run without OpenMP (about 0.2 ms of work).
constexpr int64_t kSerialWork = int64_t{1} << 19;

class Emitter {
 public:
  explicit Emitter(const Kernel& k) : k_(k), op_texts_(print_op_lines(k)) {}

  // Prefetch sites: a first run (probe) records each prefetchable load's candidate loops and
  // their cost; the second is given the costliest one of each (see Prefetch).
  std::vector<const Op*> best_prefetch_sites() const;
  void set_prefetch_sites(std::vector<const Op*> sites) {
    probe_ = false;
    chosen_ = std::move(sites);
  }

  EmittedCpp run();

 private:
  const Kernel& k_;
  std::vector<std::string> lines_;
  std::vector<const Op*> line_op_;
  const Op* cur_ = nullptr;
  int ind_ = 0;
  int counter_ = 0;
  std::unordered_map<const Value*, std::string> name_;
  std::unordered_map<const Value*, int> view_index_;  // view param -> parameter number
  std::string ew_i_;  // the element index variable inside elementwise()

  void line(const std::string& s) {
    lines_.push_back(std::string(static_cast<size_t>(ind_) * 2, ' ') + s);
    line_op_.push_back(cur_);
  }
  // Unindented lines of no op, inserted before line `at` (0-based) once the rest is written.
  void insert_lines(size_t at, const std::vector<std::string>& ls) {
    lines_.insert(lines_.begin() + static_cast<std::ptrdiff_t>(at), ls.begin(), ls.end());
    line_op_.insert(line_op_.begin() + static_cast<std::ptrdiff_t>(at), ls.size(), nullptr);
  }
  // Each op's line as `tessera compile --emit ir` prints it (same value names).
  std::unordered_map<const Op*, std::string> op_texts_;
  std::string text_of(const Op& op) const {
    auto it = op_texts_.find(&op);
    return it != op_texts_.end() ? it->second : std::string(op.name());
  }
  void comment(const Op& op) { line("// " + text_of(op)); }
  std::string fresh(const std::string& prefix) { return prefix + std::to_string(counter_++); }
  [[noreturn]] void fail(const Op& op, const std::string& msg) const {
    throw TesseraError(op.loc, "cpu backend: " + msg + " (in `" + text_of(op) + "`)");
  }

  const std::string& nm(const Value* v) const {
    auto it = name_.find(v);
    if (it == name_.end()) throw TesseraError("cpu backend: internal: value without a name");
    return it->second;
  }
  std::string bind_new(const Value* v, const std::string& hint = "v") {
    std::string n = fresh(hint);
    if (!v->name.empty()) n += "_" + sanitize(v->name);
    name_[v] = n;
    return n;
  }
  static int64_t numel(const Value* v) { return v->type.is_tile() ? shape_numel(v->type.shape) : 1; }
  std::vector<int64_t> shape_of(const Op& op, const Value* v) const {
    if (!v->type.is_tile()) return {};
    if (!shape_is_static(v->type.shape))
      fail(op, "tile shape " + shape_str(v->type.shape) +
                   " is not static; bind the constexprs (bind_constexprs) before compiling");
    return static_shape(v->type.shape);
  }
  int view_of(const Op& op, const Value* v) const {
    auto it = view_index_.find(v);
    if (it == view_index_.end()) fail(op, "operand 0 must be a view parameter");
    return it->second;
  }
  // Declare a result: an aligned array for a tile, nothing for a scalar (its definition
  // declares it). Returns the name.
  std::string declare(const Op& op, const Value* v, const std::string& hint = "v") {
    std::string n = bind_new(v, hint);
    if (v->type.is_tile()) {
      shape_of(op, v);
      declare_array(op, v->type.elem, n, numel(v));
    } else if (v->type.is_scalar()) {
      line(ctype(v->type.elem) + " " + n + ";");
    } else {
      fail(op, "results of type " + v->type.str() + " are not supported");
    }
    return n;
  }
  // A result that is a new name for its operand's array (an exact cast, a reshape): it is read
  // the way the operand is, so it takes the operand's uniform value and, for a bf16 row read in
  // place, its tsr::bf16_row form (not a pointer: no tsr::store_row of it).
  void alias(const Value* res, const Value* src) {
    if (auto it = expr_.find(src); it != expr_.end()) {  // computed inside its user (can_defer)
      expr_[res] = it->second;
      return;
    }
    name_[res] = nm(src);
    if (auto it = uniform_.find(src); it != uniform_.end()) uniform_[res] = it->second;
    if (bf16_rows_.count(src)) bf16_rows_.insert(res);
  }
  // An exp of a float tile of at least kVectorExpMin elements (f32, or a narrow float computing
  // as f32) is computed by tsr::exp_inplace over its own array: the loop writes the argument,
  // then the runtime's AVX-512 exp (vscalefps, a degree-6 polynomial) runs over it 16 lanes at
  // a time. GCC cannot vectorize fast_expf's scaling into one instruction, and the scalar form
  // cost 33 instructions per vector against 13 (softmax f32, 4096 x 4096: bench/RESULTS.md
  // session 16). So such an exp is never deferred into its user.
  static constexpr int64_t kVectorExpMin = 16;
  static bool vector_exp(const Op& op) {
    if (op.kind != OpKind::Exp || op.results.size() != 1) return false;
    const Type& t = op.result()->type;
    return t.is_tile() && shape_is_static(t.shape) && ctype(t.elem) == "float" &&
           shape_numel(t.shape) >= kVectorExpMin;
  }
  // A vector exp (f32) whose one row is also summed along it, by a reduce in the same block: the
  // exp's loop accumulates the sum (tsr::exp_sum_inplace); exp_sum_ maps that reduce to the
  // variable holding it. Softmax's denominator pass over the row cost ~10% of a row.
  std::unordered_map<const Op*, std::string> exp_sum_;
  const Op* fused_exp_sum(const Op& op) const {
    const Value* r = op.result();
    if (r->type.elem != ScalarKind::F32 || r->type.shape.empty() || numel(r) != r->type.shape.back()) return nullptr;
    auto it = users_.find(r);
    if (it == users_.end()) return nullptr;
    for (const Op* u : it->second)
      if (u->kind == OpKind::Reduce && u->parent == op.parent && u->operand(0) == r && u->attr_string("kind") == "sum" &&
          u->attr_int("axis") == static_cast<int64_t>(r->type.shape.size()) - 1 && u->result()->type.elem == ScalarKind::F32)
        return u;
    return nullptr;
  }
  // Splats and broadcasts of a single element: elementwise consumers read the element itself,
  // so the materialized array is usually dead and the compiler drops it.
  std::unordered_map<const Value*, std::string> uniform_;
  std::unordered_set<std::string> float_arrays_;  // names of declared float arrays (declare_array)
  std::unordered_set<const Value*> bf16_rows_;     // bf16 tiles read in place (a tsr::bf16_row, not a pointer)
  // Elementwise results used once, by an op that reads them element by element in the same
  // block, are not materialized: the user inlines the expression (with @I@ for the index).
  std::unordered_map<const Value*, std::string> expr_;
  std::unordered_map<const Value*, std::vector<const Op*>> users_;
  // A result read by one op (possibly as several of its operands: d * d) in the same block. One
  // read more than once is recomputed at each read, so only a cheap expression is (cheap_tree).
  bool can_defer(const Op& op) const {
    if (auto it = defer_memo_.find(&op); it != defer_memo_.end()) return it->second;
    const bool d = can_defer_here(op) && expression_weight(op) <= kMaxExpressionWeight;
    defer_memo_[&op] = d;
    return d;
  }
  // An expression computed inside its user repeats, in the C++ text, every expression it
  // inlines, once per read: `a * a` chains double at each step. Past this many ops (counted
  // with their repeats) the value is an array of its own, so that the generated source (and
  // the emitter's time) stays linear in the kernel (a 20-deep chain of squares was 2^20 copies;
  // a chain of 20000 adds, quadratic). No library kernel comes near it.
  static constexpr int64_t kMaxExpressionWeight = 256;
  mutable std::unordered_map<const Op*, bool> defer_memo_;
  mutable std::unordered_map<const Op*, int64_t> weight_memo_;
  // The ops in op's expression, with the deferred expressions it inlines at each read.
  int64_t expression_weight(const Op& op) const {
    if (auto it = weight_memo_.find(&op); it != weight_memo_.end()) return it->second;
    int64_t w = 1;
    for (const Value* v : op.operands) {
      const Op* d = def_past_renames(v);
      if (!d || !v->type.is_tile() || !(is_elementwise(*d) || d->info().cls == OpClass::Create) || !can_defer(*d)) continue;
      w = std::min<int64_t>(w + expression_weight(*d), int64_t{1} << 40);
    }
    weight_memo_[&op] = w;
    return w;
  }
  // A tile-to-tile expand_dims or reshape: the same elements in the same flat order, so a
  // value computed inside its user may pass through it (the mask `expand_dims(arange < N)` of
  // a padded row is then a compare in the masked loop, not a byte array: layernorm's
  // variance).
  static bool is_flat_rename(const Op& o) {
    return (o.kind == OpKind::ExpandDims || o.kind == OpKind::Reshape) && o.operands.size() == 1 &&
           o.results.size() == 1 && o.operand(0)->type.is_tile() && o.result()->type.is_tile();
  }
  // The op whose code reads r when r is computed inside its user: r's one user, past flat
  // renames that r's expression passes through (each with one user in the same block).
  // Null when r has no such user.
  // (At most kMaxRenames of them: def_past_renames looks back as far, so that the expression
  // weight of the user counts the value's expression.)
  static constexpr int kMaxRenames = 8;
  // `several_reads`, when given, says whether some op on the way reads its operand more than
  // once; `read` gets the value the user reads (r, or the last rename's result).
  const Op* deferred_user(const Value* r, const Block* home, bool* several_reads = nullptr,
                          const Value** read = nullptr) const {
    if (several_reads) *several_reads = false;
    for (int renames = 0;; ++renames) {
      auto it = users_.find(r);
      if (it == users_.end() || it->second.empty()) return nullptr;
      const Op* u = it->second[0];
      for (const Op* o : it->second)
        if (o != u) return nullptr;
      if (u->parent != home) return nullptr;
      if (several_reads && it->second.size() > 1) *several_reads = true;
      if (read) *read = r;
      if (!is_flat_rename(*u)) return u;
      if (renames == kMaxRenames) return nullptr;
      r = u->result();
    }
  }
  // v's defining op, past the flat renames between them.
  static const Op* def_past_renames(const Value* v) {
    const Op* d = v->def;
    for (int renames = 0; d && is_flat_rename(*d) && renames < kMaxRenames; ++renames) d = d->operand(0)->def;
    return d;
  }
  bool can_defer_here(const Op& op) const {
    const Value* r = op.result();
    if (!r->type.is_tile() || vector_exp(op)) return false;
    bool several_reads = false;
    const Value* read = nullptr;
    const Op* u = deferred_user(r, op.parent, &several_reads, &read);
    if (!u || is_flat_rename(*u)) return false;
    if (several_reads && !cheap_tree(op)) return false;
    switch (u->info().cls) {
      case OpClass::Unary:
      case OpClass::Binary:
      case OpClass::Compare:
      case OpClass::Ternary:
      case OpClass::Cast:
        return u->result()->type.is_tile() && numel(u->result()) == numel(r);
      case OpClass::Memory:
        return u->kind == OpKind::StoreTile && u->operand(1) == read && u->operand(0) != read;
      case OpClass::Reduce:
        return u->kind == OpKind::Reduce && is_float(r->type.elem) && uses_simd_rows(*u);
      default:
        return false;
    }
  }
  // Whether op's expression, with the deferred expressions it inlines, is a few instructions
  // per element: adds, multiplies, compares, selects, casts, index ranges and splats.
  bool cheap_tree(const Op& op) const {
    switch (op.kind) {
      case OpKind::Add: case OpKind::Sub: case OpKind::Mul: case OpKind::Neg: case OpKind::Abs:
      case OpKind::Cmp: case OpKind::Where: case OpKind::Cast: case OpKind::Arange: case OpKind::Splat:
        break;
      default:
        return false;
    }
    for (const Value* v : op.operands) {  // operands inlined into op's expression
      const Op* d = def_past_renames(v);
      if (!d || !v->type.is_tile()) continue;
      const bool ew = is_elementwise(*d) || d->info().cls == OpClass::Create;
      if (ew && can_defer(*d) && !cheap_tree(*d)) return false;
    }
    return true;
  }
  // A stored bf16 row that is `a * u` rounded by the store (the cast to bf16 and the f32 mul
  // both inlined into the store): a an f32 array of the row's shape (its name in `arr`), u one
  // value for the whole row (its expression in `u`).
  bool scaled_row(const Value* v, std::string& arr, std::string& u) const {
    const Op* c = v->def;
    if (!c || c->kind != OpKind::Cast || !expr_.count(v) || v->type.elem != ScalarKind::BF16) return false;
    return scaled_f32(c->operand(0), v->type.shape, arr, u);
  }
  // An f32 tile `a * u` computed inside its user (a an f32 array of `shape`, u one value).
  bool scaled_f32(const Value* m, const Shape& shape, std::string& arr, std::string& u) const {
    if (m->type.elem != ScalarKind::F32 || !m->def || m->def->kind != OpKind::Mul || !expr_.count(m)) return false;
    for (int k = 0; k < 2; ++k) {
      const Value *a = m->def->operand(k), *s = m->def->operand(1 - k);
      auto us = uniform_.find(s);
      if (us == uniform_.end() || !in_array(a)) continue;
      auto na = name_.find(a);
      if (na == name_.end() || !float_arrays_.count(na->second) || a->type.shape != shape) continue;
      arr = na->second;
      u = us->second;
      return true;
    }
    return false;
  }
  // A loaded row tile (every dim but the last is 1) whose elements are stored as they compute
  // is read in place: its name is a pointer into the view when the tile is in bounds, and to a
  // padded local copy otherwise. Copying 4 KB rows into locals cost softmax a third of its
  // time. The in-place read is only safe while nothing writes memory between the load and the
  // last read of the tile (a deferred expression is read where its user is emitted); a final
  // store_tile that reads the tile element by element as it writes is fine unless views
  // partially overlap, which kernels do not do.
  // A cast that changes no value in the compute type: the same kind, or a narrow float to f32.
  static bool is_alias_cast(const Op& o) {
    if (o.kind != OpKind::Cast || o.operands.size() != 1 || o.results.size() != 1) return false;
    const Type &f = o.operand(0)->type, &t = o.result()->type;
    if (!f.is_tile() || !t.is_tile() || !is_float(f.elem)) return false;
    return f.elem == t.elem || (is_narrow(f.elem) && t.elem == ScalarKind::F32);
  }
  static bool writes_memory(const Op& o) {
    bool w = o.info().cls == OpClass::Raw ||
             (o.info().cls == OpClass::Memory && o.kind != OpKind::LoadTile && o.kind != OpKind::Gather);
    for (const auto& r : o.regions)
      for (const auto& c : r->ops) w = w || writes_memory(*c);
    return w;
  }
  static long pos_in(const Block* b, const Op* o) {
    for (size_t i = 0; i < b->ops.size(); ++i)
      if (b->ops[i].get() == o) return static_cast<long>(i);
    return -1;
  }
  // Every read of `v`: fn(user, at) where `at` is the op of `home` whose code performs the read
  // (users through renaming shape ops; a deferred elementwise expression is read where its
  // user is emitted; nested users lifted to their ancestor in `home`). False when fn is, or
  // when a user is not inside `home`.
  bool for_each_read(const Value* v, const Block* home,
                     const std::function<bool(const Op* user, const Op* at)>& fn) const {
    std::vector<const Value*> work{v};
    while (!work.empty()) {
      const Value* w = work.back();
      work.pop_back();
      auto it = users_.find(w);
      if (it == users_.end()) continue;
      for (const Op* u : it->second) {
        if (u->kind == OpKind::ExpandDims || u->kind == OpKind::Reshape || is_alias_cast(*u) ||
            row_broadcast_in_users(*u) || one_element_broadcast(*u)) {
          // Same storage, new name; a row broadcast or a one-element one (users read src[0]
          // where they run, emit_shape) is read by its users.
          work.push_back(u->result());
          continue;
        }
        const Op* e = u;
        for (;;) {
          if (!is_elementwise(*e) || !can_defer(*e)) break;
          e = deferred_user(e->result(), e->parent);
        }
        while (e && e->parent != home) e = e->parent ? e->parent->parent : nullptr;
        if (!e || !fn(u, e)) return false;
      }
    }
    return true;
  }
  bool in_place_load(const Op& load, const std::vector<int64_t>& S) const {
    ScalarKind t = load.operand(0)->type.elem;
    // bf16 is read in place through tsr::bf16_row (element i converted where it is read), when
    // every read indexes the tile element by element.
    const bool bf = t == ScalarKind::BF16;
    if (!bf && (ctype(t) != stype(t) || is_narrow(t))) return false;
    for (size_t d = 0; d + 1 < S.size(); ++d)
      if (S[d] != 1) return false;
    const Block* home = load.parent;
    long last = -1;
    bool ok = for_each_read(load.result(), home, [&](const Op* u, const Op* at) {
      switch (u->info().cls) {
        case OpClass::Unary: case OpClass::Binary: case OpClass::Compare: case OpClass::Ternary:
        case OpClass::Cast: case OpClass::Reduce: case OpClass::Shape:
          break;
        case OpClass::Scan: case OpClass::Dot: case OpClass::Control: case OpClass::Terminator:
          if (bf) return false;  // these take the array itself
          break;
        case OpClass::Memory:
          if (u->kind == OpKind::StoreTile && u->operand(0) != load.result()) break;
          return false;
        default:
          return false;
      }
      last = std::max(last, pos_in(home, at));
      return true;
    });
    if (!ok) return false;
    if (last < 0) return true;
    for (long i = pos_in(home, &load) + 1; i < last; ++i)
      if (writes_memory(*home->ops[static_cast<size_t>(i)])) return false;
    const Op& l = *home->ops[static_cast<size_t>(last)];
    return l.kind == OpKind::StoreTile || !writes_memory(l);
  }
  // A tile computed elementwise in a for body and only yielded back as carried value k is
  // written straight into the carried array (acc = acc + t without a temporary and a 4 KB copy
  // per iteration) when nothing reads the carried value after this op: the op itself reads it
  // element by element at the index it writes. Returns the carried array's name, or "".
  // So is an elementwise tile whose one user is a dot accumulating into it, when that dot's
  // result is written into a carried array: the rescaled accumulator of a fused attention
  // loop (acc * alpha, then acc += P @ V) is one pass over the carried array instead of a
  // product, a copy and the dot.
  std::string carried_target(const Op& op) const {
    const Value* a = carried_arg(op);
    return a ? nm(a) : "";
  }
  const Value* carried_arg(const Op& op) const {
    const Value* r = op.result();
    const Block* body = op.parent;
    if (!r->type.is_tile() || !body || !body->parent || body->parent->kind != OpKind::For) return nullptr;
    auto it = users_.find(r);
    if (it == users_.end() || it->second.size() != 1) return nullptr;
    const Op* u = it->second[0];
    const Value* a = nullptr;
    if (u->kind == OpKind::Dot && u->operands.size() == 3 && u->operand(2) == r && u->operand(0) != r &&
        u->operand(1) != r && u->parent == body && is_elementwise(op)) {
      a = carried_arg(*u);
    } else {
      const Op* y = body->terminator();
      if (!y || u != y) return nullptr;
      size_t k = y->operands.size();
      for (size_t j = 0; j < y->operands.size(); ++j)
        if (y->operand(j) == r) {
          if (k != y->operands.size()) return nullptr;
          k = j;
        }
      if (k == y->operands.size() || body->args.size() != y->operands.size() + 1) return nullptr;
      a = body->args[k + 1];
    }
    if (!a || a->type != r->type) return nullptr;
    long here = pos_in(body, &op);
    bool ok = for_each_read(a, body, [&](const Op*, const Op* at) { return pos_in(body, at) <= here; });
    return ok ? a : nullptr;
  }
  static bool one_element_broadcast(const Op& o) {
    return o.kind == OpKind::Broadcast && o.operands.size() == 1 && o.operand(0)->type.is_tile() &&
           shape_is_static(o.operand(0)->type.shape) && shape_numel(o.operand(0)->type.shape) == 1;
  }
  static bool is_elementwise(const Op& o) {
    OpClass c = o.info().cls;
    return o.results.size() == 1 &&
           (c == OpClass::Unary || c == OpClass::Binary || c == OpClass::Compare || c == OpClass::Ternary || c == OpClass::Cast);
  }
  // A broadcast along the last axis of a [..., R, 1] tile to [..., R, C] whose users are all
  // elementwise loops of the same block (none computed inside another user): the broadcast
  // is not materialized; each user runs over rows and columns and reads the row's element
  // once per row (a rescale acc * alpha of a [64, 128] accumulator: one pass, not three).
  bool row_broadcast_in_users(const Op& op) const {
    if (op.kind != OpKind::Broadcast || op.operands.size() != 1) return false;
    const Value *src = op.operand(0), *res = op.result();
    if (!src->type.is_tile() || !res->type.is_tile() || !shape_is_static(src->type.shape) ||
        !shape_is_static(res->type.shape))
      return false;
    auto Sx = static_shape(src->type.shape), R = static_shape(res->type.shape);
    if (Sx.size() != R.size() || Sx.empty() || Sx.back() != 1 || R.back() < 16) return false;
    for (size_t d = 0; d + 1 < R.size(); ++d)
      if (Sx[d] != R[d]) return false;
    if (numel(src) == 1) return false;  // one element: the uniform path
    return read_by_elementwise_loops(res, op.parent, numel(res));
  }
  // Whether every use of `v` ends in an elementwise loop of `home` over `n` elements, through
  // elementwise expressions computed inside their users.
  bool read_by_elementwise_loops(const Value* v, const Block* home, int64_t n) const {
    auto it = users_.find(v);
    if (it == users_.end() || it->second.empty()) return false;
    for (const Op* u : it->second) {
      if (u->parent != home || !is_elementwise(*u) || is_alias_cast(*u) || !u->result()->type.is_tile() ||
          numel(u->result()) != n)
        return false;
      if (can_defer(*u) && !read_by_elementwise_loops(u->result(), home, n)) return false;
    }
    return true;
  }
  // The row length of the row broadcast that `op` reads, directly or through expressions
  // computed inside it (0: none).
  int64_t row_length(const Op& op) const {
    for (const Value* v : op.operands) {
      if (auto it = row_bcast_.find(v); it != row_bcast_.end()) return it->second;
      if (v->def && expr_.count(v))
        if (int64_t n = row_length(*v->def)) return n;
    }
    return 0;
  }
  // The row lengths of the broadcasts row_broadcast_in_users took; elem() reads one as
  // `src[@R@]`, @R@ standing for the row index of the loop that finally computes it.
  std::unordered_map<const Value*, int64_t> row_bcast_;
  // --- Prefetching the next program's row tiles ---
  // A program that reads a row tile (every dim but the last is 1) from memory and then
  // computes on it waits on memory and then on its arithmetic, one after the other: the
  // hardware prefetchers stop when the demand loads stop. So a program-level load_tile whose
  // indices are pure functions of the program ids (prefetchable below) has the same tile of
  // the next program instance (pid0 + 1, the one this thread runs next under the static
  // schedule) prefetched during one elementwise loop of this program after its own first
  // read of the tile: the loop that does the most arithmetic per element (an exp counts as
  // many ops: the memory traffic hides behind it); that loop runs in pieces of kPrefetchPiece
  // elements, each starting with its share of the cache lines. Only a hint: nothing is read,
  // and a tile out of bounds (or no next program) prefetches nothing.
  // A program-level store_tile of a row tile with such indices has the next program's lines
  // prefetched for writing in the same loop: the store then finds its lines owned instead of
  // waiting for each one (softmax f32 at 4096 x 4096: 20.8 -> 25.1 GB/s).
  struct Prefetch {
    const Op* load = nullptr;  // a load_tile, or a store_tile (its lines prefetched for writing)
    bool write = false;
    size_t first = 1;  // the first index operand
    const Block* home = nullptr;
    long mem_pos = 0;  // position in `home` of the op that first reads the tile's memory
    std::string start, lines;  // names: the next tile's first cache line, its line count
    bool used = false;
    const Op* used_at = nullptr;  // the site that printed it (a streamed store prints it in both branches)
    std::vector<std::pair<const Op*, int>> candidates;  // (loop op, cost), from the probe
  };
  std::vector<Prefetch> prefetch_;
  // Views some store_tile of which streams (stream_store): each gets `const bool
  // tsr_stream<j>` at the program's start (the view's size decides at run time).
  std::vector<int> stream_views_;              // views with streamed stores (a flag each: tsr::stream_view)
  std::unordered_set<const Op*> stream_stores_;  // the stores that stream (where their view's flag says so)
  bool stream_store(const Op& store) const;
  std::string stream_flag(int j) const { return "tsr_stream" + std::to_string(j); }
  bool probe_ = true;
  std::vector<const Op*> chosen_;  // each prefetch's loop op, after the probe
  static constexpr int64_t kPrefetchPiece = 256;
  static_assert(kPrefetchPiece == kStreamPiece, "streamable_row's pieces are loop_with_prefetch's");
  bool in_streamed_store_ = false;  // printing a streamed store (its write prefetch is left out)
  std::string pid_expr_[3];  // what program_id reads (empty: pidN)
  // The pure scalar ops computing `v` (constants, dims, program ids, scalar arithmetic), added
  // to `slice` (each with whether it reads a program id); false if `v` depends on anything
  // else. `pid` is set when a program id is used.
  static bool pure_scalar(const Value* v, std::unordered_map<const Op*, bool>& slice, bool& pid) {
    if (!v->type.is_scalar()) return false;
    const Op* d = v->def;
    if (!d) return v->block == nullptr;  // a scalar kernel parameter
    if (auto it = slice.find(d); it != slice.end()) {
      pid = pid || it->second;
      return true;
    }
    switch (d->info().cls) {
      case OpClass::Constant: case OpClass::Index: case OpClass::Unary: case OpClass::Binary:
      case OpClass::Compare: case OpClass::Ternary: case OpClass::Cast:
        break;
      default:
        return false;
    }
    if (d->results.size() != 1 || !d->regions.empty()) return false;
    bool mine = d->kind == OpKind::ProgramId;
    for (const Value* o : d->operands)
      if (!(o->type.is_view() && d->info().cls == OpClass::Index) && !pure_scalar(o, slice, mine)) return false;
    slice[d] = mine;
    pid = pid || mine;
    return true;
  }
  // Whether `b` is inside a for or while body (within the program).
  static bool in_loop(const Block* b) {
    for (const Op* p = b ? b->parent : nullptr; p; p = p->parent ? p->parent->parent : nullptr)
      if (p->kind == OpKind::For || p->kind == OpKind::While) return true;
    return false;
  }
  // Finds the prefetchable loads of the program body (fills prefetch_ and `slice`).
  void find_prefetches(const Block& body, std::unordered_map<const Op*, bool>& slice);
  // The prefetch calls for a loop of `site` split into `parts` pieces (piece index `part`): the
  // loads whose first memory read comes before `site` and that no earlier site took.
  std::vector<std::string> prefetch_calls(const Op& site, int cost, const std::string& part, int64_t parts);
  // A loop statement's arithmetic per element, roughly: operators, and calls (math functions
  // such as exp weigh 16).
  static int loop_cost(const std::string& stmt);
  // `for (i = 0; i < n; ++i) stmt` (stmt reads the index as `i`), in pieces with prefetches
  // when `site` takes some (or always, with `pieces`, when n allows); `after` (if any) follows
  // each piece; stmt and after read the piece's start and length as @C@ and @N@ (the whole
  // loop: 0 and n). An empty stmt writes no loop, only `after` (a runtime call per piece).
  void loop_with_prefetch(const Op& site, int64_t n, const std::string& i, const std::string& stmt,
                          const std::string& after = "", bool pieces = false);
  // The used prefetches' addresses for the next program, computed at the program's start
  // (inserted at line `at`): the index ops recomputed with program_id(0) + 1.
  void emit_prefetch_prologue(const Block& body, size_t at);

  static bool uses_simd_rows(const Op& red) {
    const Value* x = red.operand(0);
    if (!x->type.is_tile() || !shape_is_static(x->type.shape)) return false;
    auto S = static_shape(x->type.shape);
    int64_t axis = red.attr_int("axis");
    const Attr* kind = red.find_attr("kind");
    if (!kind || !std::holds_alternative<std::string>(*kind)) return false;
    const std::string& kd = std::get<std::string>(*kind);
    return axis == static_cast<int64_t>(S.size()) - 1 && S.back() >= 16 &&
           (kd == "sum" || kd == "prod" || kd == "max" || kd == "min");
  }
  // `e` with every `mark` (a 3-character placeholder: @I@ the flat index, @R@ a row index,
  // @C@ / @N@ a loop piece's start and length) replaced by `i`.
  static std::string subst(std::string e, const std::string& i, const char* mark = "@I@") {
    for (size_t p = e.find(mark); p != std::string::npos; p = e.find(mark, p + i.size())) e.replace(p, 3, i);
    return e;
  }
  // A tile held in an array of its own (not an expression computed at its users, a uniform
  // value or a broadcast row), whose name can be indexed and offset.
  bool in_array(const Value* v) const { return !expr_.count(v) && !uniform_.count(v) && !row_bcast_.count(v); }
  std::string elem(const Value* v, const std::string& i) const {
    if (auto it = expr_.find(v); it != expr_.end()) return "(" + subst(it->second, i) + ")";
    if (auto it = uniform_.find(v); it != uniform_.end()) return it->second;
    if (row_bcast_.count(v)) return nm(v) + "[@R@]";
    return v->type.is_tile() ? nm(v) + "[" + i + "]" : nm(v);
  }
  void copy_value(const Value* dst_v, const std::string& dst, const Value* src) {
    if (dst_v->type.is_tile())
      line("__builtin_memcpy(" + dst + ", " + nm(src) + ", sizeof(" + dst + "));");
    else
      line(dst + " = " + nm(src) + ";");
  }

  // Emits nested loops over a static shape; body gets the index variable names.
  void nest(const std::vector<int64_t>& shape, const std::function<void(const std::vector<std::string>&)>& body) {
    std::vector<std::string> idx;
    for (size_t d = 0; d < shape.size(); ++d) {
      std::string v = fresh("i");
      idx.push_back(v);
      line("for (int64_t " + v + " = 0; " + v + " < " + std::to_string(shape[d]) + "; ++" + v + ") {");
      ++ind_;
    }
    body(idx);
    for (size_t d = 0; d < shape.size(); ++d) {
      --ind_;
      line("}");
    }
  }

  // The result computed elementwise from `fn` of the operand expressions.
  void elementwise(const Op& op, const std::function<std::string(const std::vector<std::string>&)>& fn) {
    const Value* r = op.result();
    if (r->type.is_tile() && can_defer(op)) {
      std::vector<std::string> ops;
      for (const Value* v : op.operands) ops.push_back(elem(v, "@I@"));
      ew_i_ = "@I@";
      expr_[r] = fn(ops);
      line("// (computed inside its user)");
      return;
    }
    if (r->type.is_tile()) {
      std::string n = carried_target(op);
      if (n.empty()) {
        n = declare(op, r);
      } else {
        name_[r] = n;
        line("// (written into the carried " + n + ")");
      }
      std::string i = fresh("i");
      std::vector<std::string> ops;
      for (const Value* v : op.operands) ops.push_back(elem(v, i));
      ew_i_ = i;
      // An exp of a float tile: the argument, then the runtime's vector exp over it in place.
      const bool vexp = vector_exp(op);
      auto exp_after = [&](const std::string& start, const std::string& count) {
        std::string after = std::string(relaxed_exp(op) ? "tsr::exp_inplace<1>(" : "tsr::exp_inplace(") + n + " + " +
                            start + ", " + count + ");";
        if (is_narrow(r->type.elem))
          after += " for (int64_t " + i + " = " + start + "; " + i + " < " + start + " + " + count + "; ++" + i + ") " + n +
                   "[" + i + "] = " + fround(r->type.elem, n + "[" + i + "]") + ";";
        return after;
      };
      std::string stmt = n + "[" + i + "] = " + (vexp ? ops[0] : fn(ops)) + ";";
      if (vexp && stmt.find("@R@") == std::string::npos) {
        if (const Op* u = fused_exp_sum(op)) {
          // sum(exp(.)) along the row: the exp's pieces return their sums (tsr::exp_sum_inplace)
          // and the reduce reads the total, instead of a pass of its own over the exp array.
          const std::string es = fresh("es");
          exp_sum_[u] = es;
          line("float " + es + " = 0.0f;");
          loop_with_prefetch(op, numel(r), i, stmt,
                             es + (relaxed_exp(op) ? " += tsr::exp_sum_inplace<1>(" : " += tsr::exp_sum_inplace(") + n +
                                 " + @C@, @N@);");
          return;
        }
      }
      if (stmt.find("@R@") != std::string::npos) {  // reads a row broadcast: rows, then columns
        int64_t row = row_length(op);
        const std::string rr = fresh("r"), R = std::to_string(row);
        stmt = subst(stmt, rr, "@R@");
        line("for (int64_t " + rr + " = 0; " + rr + " < " + std::to_string(numel(r) / row) + "; ++" + rr + ")");
        line("  for (int64_t " + i + " = " + rr + " * " + R + "; " + i + " < (" + rr + " + 1) * " + R + "; ++" + i + ") " + stmt);
        if (vexp) line(exp_after("0", std::to_string(numel(r))));
        return;
      }
      if (vexp)
        loop_with_prefetch(op, numel(r), i, stmt, exp_after("@C@", "@N@"));
      else
        loop_with_prefetch(op, numel(r), i, stmt);
    } else {
      std::vector<std::string> ops;
      for (const Value* v : op.operands) {
        if (v->type.is_tile()) fail(op, "a tile operand with a scalar result");
        ops.push_back(nm(v));
      }
      ew_i_ = "0";
      std::string n = bind_new(r);
      line("const " + ctype(r->type.elem) + " " + n + " = " + fn(ops) + ";");
    }
  }

  void emit_block(const Block& b);  // every op but the terminator
  const Op* terminator(const Block& b, const Op& parent) const {
    const Op* t = b.terminator();
    if (!t) fail(parent, "region does not end with yield");
    return t;
  }
  void emit_op(const Op& op);
  void emit_unary(const Op& op);
  void emit_binary(const Op& op);
  void emit_cast(const Op& op);
  // A tile of a view read into an existing array (async_copy, pipe_push): the view is operand
  // `view_i`, the tile indices start at operand `first`, `dst` names a pointer of the compute
  // type. Out-of-bounds elements read as the op's pad, exactly as load_tile.
  struct LoadInto {
    size_t view_i = 0, first = 1;
    std::vector<int64_t> shape;
    std::string dst;
  };
  void emit_load_store(const Op& op, const LoadInto* into = nullptr);
  // --- Struct ops (buffers and pipes are local arrays; see the section at emit_struct) ---
  void emit_struct(const Op& op);
  // "if (!(cond)) fault": records the op's fault code and ends this program instance.
  void fault_unless(const Op& op, const std::string& cond, StructFault f);
  // The flat element offset of slot (operands first...) of buffer operand 0 for tiles of rank
  // `tile_rank`, range-checked.
  std::string slot_offset(const Op& op, size_t first, int tile_rank);
  std::vector<const Op*> pipes_;  // top-level pipe ops, checked empty when the program ends
  bool has_struct_ = false;
  bool has_faults_ = false;  // some op can fault (fault_unless): the fault code is emitted
  bool in_grid_ = false;     // emitting grid_fn
  bool grid_faults_ = false; // grid_fn can fault (a division by a value that may be 0)
  // Tile arrays live on the stack while their bytes in one program instance stay within
  // kStackTileBytes; the rest go to the heap (tsr::HeapTile), so a large tile never overflows
  // a thread's stack.
  static constexpr int64_t kStackTileBytes = int64_t{1} << 20;
  int64_t stack_bytes_ = 0;
  // `alignas(64) T name[n];` on the stack, or the same array on the heap past the budget.
  // storage: of the element's storage type (uint16_t for bf16), not its compute type.
  void declare_array(const Op& op, ScalarKind elem, const std::string& n, int64_t count, bool storage = false);
  void emit_gather_scatter(const Op& op);
  void emit_atomic(const Op& op);
  // Element `i` of an indexed access (gather, scatter, atomics) of view parameter `j`: the
  // condition that it is in bounds and masked on, and its element offset in the view.
  std::pair<std::string, std::string> indexed_access(const Op& op, int j, size_t first, int rank,
                                                     bool has_mask, const std::string& i);
  // body(i) for every element index of `v` inside a loop (a tile), or once with "0" (a scalar).
  void for_each_element(const Value* v, const std::function<void(const std::string&)>& body);
  void emit_shape(const Op& op);
  void emit_dot(const Op& op);
  void emit_reduce(const Op& op);
  static constexpr int64_t kStreams = 4;  // accumulators of a long float row reduction
  void emit_scan(const Op& op);
  void emit_sort(const Op& op);
  void emit_for(const Op& op);
  void emit_if(const Op& op);
  // The ops of region `b` of `op`, then its yield copied into the result variables `res`.
  void emit_region_into(const Op& op, const Block& b, const std::vector<std::string>& res);
  void emit_while(const Op& op);
  void emit_raw(const Op& op);
  // Assign yielded values to loop-carried variables; values that are themselves carried
  // variables of the same loop go through temporaries first (a swap must read old values).
  void assign_carried(const Op& yield, const std::vector<const Value*>& carried_vals,
                      const std::vector<std::string>& carried);
  // Run a combiner region on scalars a and b; returns the name of the combined value.
  std::string combine(const Op& op, const std::string& a, const std::string& b);
};

void Emitter::find_prefetches(const Block& body, std::unordered_map<const Op*, bool>& slice) {
  for (const auto& o : body.ops) {
    if (o->kind == OpKind::For || o->kind == OpKind::While) continue;
    for (const auto& r : o->regions) find_prefetches(*r, slice);
    const bool write = o->kind == OpKind::StoreTile;
    if (!(o->kind == OpKind::LoadTile && o->results.size() == 1) && !(write && o->operands.size() >= 2)) continue;
    if (!view_index_.count(o->operand(0))) continue;
    const Value* t = write ? o->operand(1) : o->result();
    if (!t->type.is_tile() || !shape_is_static(t->type.shape) || t->type.rank() < 1) continue;
    auto S = static_shape(t->type.shape);
    bool row = true;
    for (size_t d = 0; d + 1 < S.size(); ++d) row = row && S[d] == 1;
    if (!row || S.back() * scalar_bytes(o->operand(0)->type.elem) < 1024) continue;
    std::unordered_map<const Op*, bool> mine = slice;
    bool pid = false, pure = true;
    for (size_t i = write ? 2 : 1; i < o->operands.size(); ++i) pure = pure && pure_scalar(o->operand(i), mine, pid);
    if (!pure || !pid) continue;  // the same tile in every program stays in cache by itself
    Prefetch p;
    p.load = o.get();
    p.write = write;
    p.first = write ? 2 : 1;
    p.home = o->parent;
    // A store's lines of the next program may come at any time (-1: every loop of its block).
    p.mem_pos = write ? -1 : pos_in(p.home, o.get());
    if (!write && in_place_load(*o, S)) {  // the tile's memory is read where its first user is emitted
      long first = -1;
      for_each_read(t, p.home, [&](const Op*, const Op* at) {
        long q = pos_in(p.home, at);
        first = first < 0 ? q : std::min(first, q);
        return true;
      });
      if (first >= 0) p.mem_pos = first;
    }
    std::string k = std::to_string(prefetch_.size());
    p.start = "pf" + k + "_";
    p.lines = "pfl" + k + "_";
    prefetch_.push_back(p);
    slice = std::move(mine);
  }
}

int Emitter::loop_cost(const std::string& stmt) {
  int c = 0;
  for (size_t i = 0; i < stmt.size(); ++i) {
    if (std::strchr("+-*/?<>", stmt[i]) && i > 0 && stmt[i - 1] == ' ') ++c;
    if (stmt.compare(i, 5, "tsr::") == 0) {
      c += 2;
      for (const char* f : {"exp", "log", "sin", "cos", "tanh", "erf", "pow", "sigmoid"})
        if (stmt.compare(i + 5, std::strlen(f), f) == 0 || stmt.compare(i + 10, std::strlen(f), f) == 0) c += 14;
    }
  }
  return c;
}

std::vector<const Op*> Emitter::best_prefetch_sites() const {
  std::vector<const Op*> best;
  for (const Prefetch& p : prefetch_) {
    const Op* b = nullptr;
    int bc = -1;
    for (const auto& [op, c] : p.candidates)
      if (c > bc) b = op, bc = c;  // the first of equals
    best.push_back(b);
  }
  return best;
}

std::vector<std::string> Emitter::prefetch_calls(const Op& site, int cost, const std::string& part, int64_t parts) {
  std::vector<std::string> calls;
  if (in_loop(site.parent)) return calls;
  for (size_t k = 0; k < prefetch_.size(); ++k) {
    Prefetch& p = prefetch_[k];
    if (p.used && p.used_at != &site) continue;
    const Op* e = &site;
    while (e && e->parent != p.home) e = e->parent ? e->parent->parent : nullptr;
    if (!e || pos_in(p.home, e) <= p.mem_pos) continue;
    if (probe_) {
      p.candidates.push_back({&site, cost});
      continue;
    }
    if (k >= chosen_.size() || chosen_[k] != &site) continue;
    p.used = true;
    p.used_at = &site;
    // A streamed store's lines are not brought into the cache (tsr::stream_f32 writes around it):
    // none in its streamed branch, and in its plain one only when the view does not stream.
    if (p.write && in_streamed_store_) continue;
    const std::string unless =
        p.write && stream_store(*p.load) ? "if (!" + stream_flag(view_of(*p.load, p.load->operand(0))) + ") " : "";
    calls.push_back(unless + (p.write ? "tsr::prefetch_part_w(" : "tsr::prefetch_part(") + p.start + ", " + p.lines + ", " + part + ", " + std::to_string(parts) + ");");
  }
  return calls;
}

void Emitter::loop_with_prefetch(const Op& site, int64_t n, const std::string& i, const std::string& stmt,
                                 const std::string& after, bool pieces) {
  const std::string N = std::to_string(n);
  auto piece = [](const std::string& a, const std::string& c, const std::string& len) {
    return subst(subst(a, c, "@C@"), len, "@N@");
  };
  if (n >= 2 * kPrefetchPiece && n % kPrefetchPiece == 0) {
    const std::string P = std::to_string(kPrefetchPiece);
    std::vector<std::string> calls = prefetch_calls(site, loop_cost(stmt + after), "@I@", n / kPrefetchPiece);
    if (!calls.empty() || pieces) {
      const std::string c = fresh("c");
      line("for (int64_t " + c + " = 0; " + c + " < " + N + "; " + c + " += " + P + ") {");
      ++ind_;
      for (const auto& l : calls) line(subst(l, c + " / " + P));
      if (!stmt.empty())
        line("for (int64_t " + i + " = " + c + "; " + i + " < " + c + " + " + P + "; ++" + i + ") " + piece(stmt, c, P));
      if (!after.empty()) line(piece(after, c, P));
      --ind_;
      line("}");
      return;
    }
  }
  if (!stmt.empty()) line("for (int64_t " + i + " = 0; " + i + " < " + N + "; ++" + i + ") " + piece(stmt, "0", N));
  if (!after.empty()) line(piece(after, "0", N));
}

// A store_tile of one long f32 or bf16 row (whole 256-element pieces, at least two), which
// tsr::stream_f32 / stream_bf16 can write.
bool streamable_row(const Op& store) {
  if (store.kind != OpKind::StoreTile || store.operands.size() < 2) return false;
  const Value* tile = store.operand(1);
  const ScalarKind t = store.operand(0)->type.elem;
  if ((t != ScalarKind::F32 && t != ScalarKind::BF16) || !tile->type.is_tile() || !shape_is_static(tile->type.shape)) return false;
  const std::vector<int64_t> S = static_shape(tile->type.shape);
  for (size_t d = 0; d + 1 < S.size(); ++d)
    if (S[d] != 1) return false;
  return S.back() >= 2 * kStreamPiece && S.back() % kStreamPiece == 0;
}

bool Emitter::stream_store(const Op& store) const {
  return stream_stores_.count(&store) != 0;  // (each with its view's flag in stream_views_)
}

void Emitter::emit_prefetch_prologue(const Block& body, size_t at) {
  std::unordered_map<const Op*, bool> slice;
  std::vector<const Prefetch*> used;
  for (const Prefetch& p : prefetch_) {
    if (!p.used) continue;
    bool pid = false;
    for (size_t i = p.first; i < p.load->operands.size(); ++i) pure_scalar(p.load->operand(i), slice, pid);
    used.push_back(&p);
  }
  if (used.empty()) return;
  const size_t from = lines_.size();
  const int saved_ind = ind_;
  ind_ = 1;
  line("// The next program's row tiles, prefetched while this one computes (tsr::prefetch_part).");
  for (const Prefetch* p : used) {
    line("const char* " + p->start + " = nullptr;");
    line("int64_t " + p->lines + " = 0;");
  }
  line("if (int64_t(pid0) + 1 < int64_t(np0)) {");
  ++ind_;
  line("const int32_t pn0_ = pid0 + 1;");
  pid_expr_[0] = "pn0_";
  std::function<void(const Block&)> ops = [&](const Block& b) {
    for (const auto& o : b.ops) {
      if (slice.count(o.get())) emit_op(*o);
      for (const auto& r : o->regions) ops(*r);
    }
  };
  ops(body);
  pid_expr_[0].clear();
  for (const Prefetch* p : used) {
    const Op& op = *p->load;
    cur_ = &op;
    const Value* view = op.operand(0);
    const int rank = view->type.rank();
    auto S = static_shape((p->write ? op.operand(1) : op.result())->type.shape);
    const std::string js = std::to_string(view_index_.at(view));
    std::string inb, goff;
    line("{");
    ++ind_;
    for (int d = 0; d < rank; ++d) {
      std::string o = fresh("o");
      line("const int64_t " + o + " = int64_t(" + nm(op.operand(p->first + d)) + ") * " + std::to_string(S[d]) + ";");
      inb += (d ? " && " : "") + o + " >= 0 && " + o + " + " + std::to_string(S[d]) + " <= A.d" + js + "_" + std::to_string(d);
      goff += (d ? " + " : "") + o + (d + 1 < rank ? " * A.s" + js + "_" + std::to_string(d) : "");
    }
    line("if (" + inb + ") {");
    line("  const char* p_ = reinterpret_cast<const char*>(A.p" + js + " + " + goff + ");");
    line("  " + p->start + " = tsr::line_start(p_);");
    line("  " + p->lines + " = tsr::line_count(p_, " + std::to_string(S.back() * scalar_bytes(view->type.elem)) + ");");
    line("}");
    --ind_;
    line("}");
  }
  cur_ = nullptr;
  --ind_;
  line("}");
  ind_ = saved_ind;
  // Move the lines written above to `at`.
  std::vector<std::string> ls(lines_.begin() + static_cast<std::ptrdiff_t>(from), lines_.end());
  std::vector<const Op*> lo(line_op_.begin() + static_cast<std::ptrdiff_t>(from), line_op_.end());
  lines_.resize(from);
  line_op_.resize(from);
  lines_.insert(lines_.begin() + static_cast<std::ptrdiff_t>(at), ls.begin(), ls.end());
  line_op_.insert(line_op_.begin() + static_cast<std::ptrdiff_t>(at), lo.begin(), lo.end());
}

void Emitter::emit_block(const Block& b) {
  for (const auto& o : b.ops)
    if (o->kind != OpKind::Yield) emit_op(*o);
}

void Emitter::emit_op(const Op& op) {
  const Op* saved = cur_;
  cur_ = &op;
  comment(op);
  switch (op.info().cls) {
    case OpClass::Constant: {
      const Value* r = op.result();
      if (op.kind == OpKind::Const) {
        const Attr* a = op.find_attr("value");
        std::string lit;
        if (a && std::holds_alternative<int64_t>(*a))
          lit = ilit(r->type.elem, std::get<int64_t>(*a));
        else
          lit = klit(r->type.elem, op.attr_number("value"));
        line("const " + ctype(r->type.elem) + " " + bind_new(r) + " = " + lit + ";");
      } else {
        const std::string& cname = op.attr_string("name");
        const ConstexprDecl* d = k_.find_constexpr(cname);
        if (!d) fail(op, "unknown constexpr '" + cname + "'");
        line("const " + ctype(r->type.elem) + " " + bind_new(r) + " = " + ilit(r->type.elem, d->value) + ";");
      }
      break;
    }
    case OpClass::Index: {
      const Value* r = op.result();
      int64_t axis = op.attr_int("axis");
      if (op.kind == OpKind::Dim) {
        int j = view_of(op, op.operand(0));
        if (axis < 0 || axis >= op.operand(0)->type.rank()) fail(op, "axis out of range");
        line("const int32_t " + bind_new(r) + " = int32_t(A.d" + std::to_string(j) + "_" + std::to_string(axis) + ");");
      } else {
        if (axis < 0 || axis > 2) fail(op, "axis must be 0, 1 or 2");
        std::string src = (op.kind == OpKind::ProgramId ? "pid" : "np") + std::to_string(axis);
        if (op.kind == OpKind::ProgramId && !pid_expr_[axis].empty()) src = pid_expr_[axis];
        line("const int32_t " + bind_new(r) + " = " + src + ";");
      }
      break;
    }
    case OpClass::Create: {
      if (op.kind == OpKind::Arange) {
        int64_t start = op.has_attr("start") ? op.attr_int("start") : 0;
        elementwise(op, [&](const std::vector<std::string>&) { return "int32_t(" + std::to_string(start) + " + " + ew_i_ + ")"; });
      } else {
        elementwise(op, [](const std::vector<std::string>& a) { return a[0]; });
        if (op.result()->type.is_tile()) uniform_[op.result()] = nm(op.operand(0));
      }
      break;
    }
    case OpClass::Memory:
      if (op.kind == OpKind::LoadTile || op.kind == OpKind::StoreTile) emit_load_store(op);
      else if (op.kind == OpKind::Gather || op.kind == OpKind::Scatter) emit_gather_scatter(op);
      else emit_atomic(op);
      break;
    case OpClass::Unary: emit_unary(op); break;
    case OpClass::Binary:
    case OpClass::Compare: emit_binary(op); break;
    case OpClass::Ternary:
      if (op.kind == OpKind::Where) {
        elementwise(op, [](const std::vector<std::string>& a) { return "tsr::sel(" + a[0] + ", " + a[1] + ", " + a[2] + ")"; });
      } else {
        ScalarKind t = op.result()->type.elem;
        if (!is_float(t)) fail(op, "fma needs a float type");
        elementwise(op, [&](const std::vector<std::string>& a) {
          return fround(t, "tsr::fma(" + a[0] + ", " + a[1] + ", " + a[2] + ")");
        });
      }
      break;
    case OpClass::Cast: emit_cast(op); break;
    case OpClass::Shape: emit_shape(op); break;
    case OpClass::Dot: emit_dot(op); break;
    case OpClass::Reduce: emit_reduce(op); break;
    case OpClass::Scan: emit_scan(op); break;
    case OpClass::Sort: emit_sort(op); break;
    case OpClass::Control:
      if (op.kind == OpKind::For) emit_for(op);
      else if (op.kind == OpKind::If) emit_if(op);
      else emit_while(op);
      break;
    case OpClass::Terminator: fail(op, "yield outside the end of a region");
    case OpClass::Raw: emit_raw(op); break;
    case OpClass::Struct: emit_struct(op); break;
  }
  cur_ = saved;
}

void Emitter::emit_unary(const Op& op) {
  ScalarKind t = op.operand(0)->type.elem;
  const std::string T = ctype(t);
  bool f = is_float(t), d = t == ScalarKind::F64;
  auto need_float = [&] {
    if (!f) fail(op, std::string(op.name()) + " needs a float type");
  };
  auto math = [&](const char* fn) {
    need_float();
    elementwise(op, [&](const std::vector<std::string>& a) { return fround(t, std::string("tsr::") + fn + "(" + a[0] + ")"); });
  };
  switch (op.kind) {
    case OpKind::Neg:
      elementwise(op, [&](const std::vector<std::string>& a) { return f ? T + "(-" + a[0] + ")" : "tsr::wneg(" + a[0] + ")"; });
      break;
    case OpKind::Not:
      if (f) fail(op, "not needs an integer or i1 type");
      elementwise(op, [&](const std::vector<std::string>& a) {
        return t == ScalarKind::I1 ? "uint8_t(" + a[0] + " ^ 1)" : T + "(~" + a[0] + ")";
      });
      break;
    case OpKind::Exp:
      need_float();
      elementwise(op, [&](const std::vector<std::string>& a) {
        return d ? "tsr::exp(" + a[0] + ")" : fround(t, "tsr::fast_expf(" + a[0] + ")");
      });
      break;
    case OpKind::Exp2: math("exp2"); break;
    case OpKind::Log: math("log"); break;
    case OpKind::Log2: math("log2"); break;
    case OpKind::Log1p: math("log1p"); break;
    case OpKind::Expm1: math("expm1"); break;
    case OpKind::Sqrt: math("sqrt"); break;
    case OpKind::Sin: math("sin"); break;
    case OpKind::Cos: math("cos"); break;
    case OpKind::Tanh: math("tanh"); break;
    case OpKind::Erf: math("erf"); break;
    case OpKind::Floor: math("floor"); break;
    case OpKind::Ceil: math("ceil"); break;
    case OpKind::Rsqrt:
      need_float();
      elementwise(op, [&](const std::vector<std::string>& a) {
        return fround(t, d ? "1.0 / tsr::sqrt(" + a[0] + ")" : "1.0f / tsr::sqrt(" + a[0] + ")");
      });
      break;
    case OpKind::Sigmoid:
      need_float();
      elementwise(op, [&](const std::vector<std::string>& a) {
        return fround(t, d ? "1.0 / (1.0 + tsr::exp(-" + a[0] + "))" : "1.0f / (1.0f + tsr::fast_expf(-" + a[0] + "))");
      });
      break;
    case OpKind::Abs:
      elementwise(op, [&](const std::vector<std::string>& a) { return f ? T + "(tsr::fabs(" + a[0] + "))" : "tsr::iabs(" + a[0] + ")"; });
      break;
    default: fail(op, "not a unary op");
  }
}

void Emitter::emit_binary(const Op& op) {
  ScalarKind t = op.operand(0)->type.elem;
  const std::string T = ctype(t);
  bool f = is_float(t), b1 = t == ScalarKind::I1;
  // An integer division by zero in the grid is an error (docs/semantics.md, "Grid").
  if (in_grid_ && !f && (op.kind == OpKind::Div || op.kind == OpKind::Rem || op.kind == OpKind::Cdiv)) {
    std::optional<int64_t> d = const_int(op.operand(1));
    if (!d || *d == 0) fault_unless(op, nm(op.operand(1)) + " != 0", StructFault::GridDivZero);
  }
  auto wrap1 = [&](const std::string& e) { return b1 ? "uint8_t((" + e + ") & 1)" : e; };
  auto arith = [&](char c, const char* ifn) {
    elementwise(op, [&](const std::vector<std::string>& a) {
      if (f) return fround(t, a[0] + " " + c + " " + a[1]);
      return wrap1(std::string("tsr::") + ifn + "(" + a[0] + ", " + a[1] + ")");
    });
  };
  auto bits = [&](const char* c) {
    if (f) fail(op, std::string(op.name()) + " needs an integer or i1 type");
    elementwise(op, [&](const std::vector<std::string>& a) { return T + "(" + a[0] + " " + c + " " + a[1] + ")"; });
  };
  switch (op.kind) {
    case OpKind::Add: arith('+', "wadd"); break;
    case OpKind::Sub: arith('-', "wsub"); break;
    case OpKind::Mul: arith('*', "wmul"); break;
    case OpKind::Div: arith('/', "idiv"); break;
    case OpKind::Cdiv:  // (a + b - 1) / b, the sum wrapping (docs/semantics.md)
      elementwise(op, [&](const std::vector<std::string>& a) {
        return "tsr::idiv(tsr::wsub(tsr::wadd(" + a[0] + ", " + a[1] + "), " + T + "(1)), " + a[1] + ")";
      });
      break;
    case OpKind::Rem:
      elementwise(op, [&](const std::vector<std::string>& a) {
        return f ? fround(t, "tsr::fmod(" + a[0] + ", " + a[1] + ")") : "tsr::irem(" + a[0] + ", " + a[1] + ")";
      });
      break;
    case OpKind::Min:
    case OpKind::Max: {
      std::string fn = std::string(f ? "tsr::f" : "tsr::i") + (op.kind == OpKind::Min ? "min" : "max") + (f ? "_nan" : "");
      elementwise(op, [&](const std::vector<std::string>& a) { return fn + "(" + a[0] + ", " + a[1] + ")"; });
      break;
    }
    case OpKind::Pow:
      if (!f) fail(op, "pow needs a float type");
      elementwise(op, [&](const std::vector<std::string>& a) {
        return fround(t, "tsr::pow(" + a[0] + ", " + a[1] + ")");
      });
      break;
    case OpKind::And: bits("&"); break;
    case OpKind::Or: bits("|"); break;
    case OpKind::Xor: bits("^"); break;
    case OpKind::Shl:
    case OpKind::Shr:
      if (f || b1) fail(op, std::string(op.name()) + " needs an integer type");
      elementwise(op, [&](const std::vector<std::string>& a) {
        return std::string(op.kind == OpKind::Shl ? "tsr::ishl(" : "tsr::ishr(") + a[0] + ", " + a[1] + ")";
      });
      break;
    case OpKind::Cmp: {
      const std::string& p = op.attr_string("pred");
      std::string c = p == "eq" ? "==" : p == "ne" ? "!=" : p == "lt" ? "<" : p == "le" ? "<=" : p == "gt" ? ">" : p == "ge" ? ">=" : "";
      if (c.empty()) fail(op, "unknown cmp predicate '" + p + "'");
      elementwise(op, [&](const std::vector<std::string>& a) { return "uint8_t(" + a[0] + " " + c + " " + a[1] + ")"; });
      break;
    }
    default: fail(op, "not a binary op");
  }
}

void Emitter::emit_cast(const Op& op) {
  ScalarKind from = op.operand(0)->type.elem, to = op.result()->type.elem;
  const std::string To = ctype(to);
  const Value* src = op.operand(0);
  const Value* r = op.result();
  // An exact cast within one compute type (bf16 -> f32: both float here) is a new name for
  // the operand's array; a copy would be one more pass over the row per use.
  if (is_alias_cast(op) && !can_defer(op) && !expr_.count(src)) {
    alias(r, src);
    line("// (the same array as its operand: exact in the compute type)");
    return;
  }
  // A cast to a narrow float that only a store_tile reads is rounded by the store's own
  // conversion (round to nearest even from float, the same rounding): rounding twice costs
  // the bf16 row kernels a third of their time.
  bool store_rounds = false;
  if (op.kind == OpKind::Cast && is_narrow(to) && is_float(from) && from != ScalarKind::F64 && can_defer(op)) {
    const Op* u = users_.at(r)[0];
    store_rounds = u->kind == OpKind::StoreTile && u->operand(1) == r && u->operand(0)->type.elem == to;
  }
  elementwise(op, [&](const std::vector<std::string>& a) -> std::string {
    const std::string& x = a[0];
    if (store_rounds) return "float(" + x + ")";
    if (op.kind == OpKind::Bitcast) return bitcast_expr(from, to, x);
    if (to == ScalarKind::I1) return "uint8_t(" + x + " != 0)";
    if (is_float(from) && !is_float(to)) return "tsr::fcast_int<" + To + ">(" + x + ")";
    if (!is_float(to)) return To + "(" + x + ")";  // int -> int wraps (C++20)
    if (is_float(from) && from != ScalarKind::F64) return fround(to, x);  // exact in float
    if (!is_float(from) && scalar_bits(from) == 64 && to != ScalarKind::F64)
      return dround(to, "tsr::int_to_double_odd(" + x + ")");
    return dround(to, "double(" + x + ")");
  });
}

void Emitter::emit_load_store(const Op& op, const LoadInto* into) {
  bool load = into || op.kind == OpKind::LoadTile;
  const Value* view = op.operand(into ? into->view_i : 0);
  int j = view_of(op, view);
  const Value* tile = into ? nullptr : load ? op.result() : op.operand(1);
  size_t first_idx = into ? into->first : load ? 1 : 2;
  int rank = view->type.rank();
  if (tile && (!tile->type.is_tile() || tile->type.rank() != rank)) fail(op, "tile rank must equal the view rank");
  if (op.operands.size() != first_idx + static_cast<size_t>(rank)) fail(op, "needs one index per view dim");
  std::vector<int64_t> S = into ? into->shape : shape_of(op, tile);
  if (static_cast<int>(S.size()) != rank) fail(op, "tile rank must equal the view rank");
  ScalarKind t = view->type.elem;
  std::string js = std::to_string(j);
  auto D = [&](int d) { return "A.d" + js + "_" + std::to_string(d); };
  auto St = [&](int d) { return "A.s" + js + "_" + std::to_string(d); };
  std::string r, rbuf;  // rbuf: the array padded loads fill
  const bool in_place = !into && load && in_place_load(op, S);
  if (into) {
    r = rbuf = into->dst;
  } else if (in_place && t == ScalarKind::BF16) {  // the padded copy holds bf16 bits
    r = bind_new(tile);
    rbuf = r + "_pad";
    declare_array(op, t, rbuf, numel(tile), true);
    line("tsr::bf16_row " + r + "{" + rbuf + "};");
    bf16_rows_.insert(tile);
  } else if (in_place) {
    r = bind_new(tile);
    rbuf = r + "_pad";
    declare_array(op, t, rbuf, numel(tile));
    line("const " + ctype(t) + "* " + r + " = " + rbuf + ";");
  } else if (load) {
    r = rbuf = declare(op, tile);
  }
  std::string pad = klit(t, op.has_attr("pad") ? op.attr_number("pad") : 0.0);
  line("{");
  ++ind_;
  std::vector<std::string> o(rank);
  std::string inb;
  for (int d = 0; d < rank; ++d) {
    o[d] = fresh("o");
    line("const int64_t " + o[d] + " = int64_t(" + nm(op.operand(first_idx + d)) + ") * " + std::to_string(S[d]) + ";");
    inb += (d ? " && " : "") + o[d] + " >= 0 && " + o[d] + " + " + std::to_string(S[d]) + " <= " + D(d);
  }
  // Fast path: the whole tile is inside the view, rows are contiguous.
  line("if (" + inb + ") {");
  ++ind_;
  std::vector<int64_t> outer(S.begin(), S.end() - 1);
  int64_t rows = 1;
  for (int64_t d : outer) rows *= d;
  nest(outer, [&](const std::vector<std::string>& idx) {
    std::string goff, toff;
    for (int d = 0; d < rank - 1; ++d) goff += "(" + o[d] + " + " + idx[d] + ") * " + St(d) + " + ";
    goff += o[rank - 1];
    std::vector<int64_t> oshape(outer);
    toff = idx.empty() ? "0" : "(" + flat_index(idx, oshape) + ") * " + std::to_string(S[rank - 1]);
    std::string i = fresh("i");
    std::string n = std::to_string(S[rank - 1]);
    // A streamed row (stream_store): tsr::stream_f32 / stream_bf16 where the view is large
    // enough (its flag), the plain store below otherwise.
    const bool stream = !load && !into && stream_store(op);
    if (stream) {
      const int64_t n = S[rank - 1];
      const std::string dst = "A.p" + js + " + " + goff + " + @C@", bf = t == ScalarKind::BF16 ? "bf16" : "f32";
      std::string sa, su;
      line("if (" + stream_flag(j) + ") {");
      ++ind_;
      in_streamed_store_ = true;
      if (t == ScalarKind::BF16 ? scaled_row(tile, sa, su) : scaled_f32(tile, tile->type.shape, sa, su)) {
        loop_with_prefetch(op, n, i, "", "tsr::stream_" + bf + "_mul(" + dst + ", " + sa + " + " + toff + " + @C@, " + su + ", @N@);");
      } else if (t == ScalarKind::F32 && in_array(tile)) {
        loop_with_prefetch(op, n, i, "", "tsr::stream_f32(" + dst + ", " + nm(tile) + " + " + toff + " + @C@, @N@);");
      } else {
        std::string f = fresh("st");
        declare_array(op, ScalarKind::F32, f, kPrefetchPiece);
        loop_with_prefetch(op, n, i, f + "[" + i + " - @C@] = " + elem(tile, toff + " + " + i) + ";",
                           "tsr::stream_" + bf + "(" + dst + ", " + f + ", @N@);", true);
      }
      in_streamed_store_ = false;
      --ind_;
      line("} else {");
      ++ind_;
    }
    if (in_place)
      line(r + (t == ScalarKind::BF16 ? ".p" : "") + " = A.p" + js + " + " + goff + ";");
    else if (load && rows == 1 && is_narrow(t) && S[rank - 1] >= 256)
      // One long row converted from a narrow float: the ragged path's tsr::load_row with the
      // whole row inside, one instance for both (the conversion loop inline, vectorized at each
      // such load, cost ~0.005 s each; topk bf16 has five; bench/RESULTS.md session 24).
      line("tsr::load_row<tsr::" + row_conv(t) + ">(" + r + (toff == "0" ? "" : " + " + toff) + ", A.p" + js + ", " + goff +
           ", 0, " + n + ", " + n + ", " + pad + ");");
    else if (load)
      line("for (int64_t " + i + " = 0; " + i + " < " + n + "; ++" + i + ") " + r + "[" + toff + " + " + i + "] = " +
           load_conv(t, "A.p" + js + "[" + goff + " + " + i + "]") + ";");
    else if (rows == 1 && t == ScalarKind::BF16 && S[rank - 1] >= 16) {
      // A bf16 row: the floats into a local piece, then tsr::store_bf16 converts and stores them
      // (the hardware's bf16 conversion where the CPU has one), piece by piece (a whole-row
      // buffer took L1 from the row's own arrays). A row `a * u` (a an f32 array, u one value
      // for the row) needs no piece: tsr::store_bf16_mul multiplies while it converts.
      const int64_t n = S[rank - 1];
      std::string sa, su;
      if (scaled_row(tile, sa, su)) {
        line("// " + sa + " * " + su + ", multiplied by the store");
        loop_with_prefetch(op, n, i, "",
                           "tsr::store_bf16_mul(A.p" + js + " + " + goff + " + @C@, " + sa + " + " + toff + " + @C@, " + su +
                               ", @N@);");
      } else {
        const bool cut = n >= 2 * kPrefetchPiece && n % kPrefetchPiece == 0;
        std::string f = fresh("st");
        declare_array(op, ScalarKind::F32, f, cut ? kPrefetchPiece : n);
        loop_with_prefetch(op, n, i, f + "[" + i + " - @C@] = " + elem(tile, toff + " + " + i) + ";",
                           "tsr::store_bf16(A.p" + js + " + " + goff + " + @C@, " + f + ", @N@);", true);
      }
    } else if (rows == 1)
      loop_with_prefetch(op, S[rank - 1], i, "A.p" + js + "[" + goff + " + " + i + "] = " + store_conv(t, elem(tile, toff + " + " + i)) + ";");
    else
      line("for (int64_t " + i + " = 0; " + i + " < " + n + "; ++" + i + ") A.p" + js + "[" + goff + " + " + i + "] = " +
           store_conv(t, elem(tile, toff + " + " + i)) + ";");
    if (stream) {
      --ind_;
      line("}");
    }
  });
  --ind_;
  line("} else {");
  ++ind_;
  if (rank >= 1) {
    // Partly outside: a row inside the view copies its columns inside ([lo, hi), contiguous)
    // and pads the rest; a row outside is all padding. Element-by-element bounds checks here
    // cost every ragged edge tile (a matmul's last k step in every program) ~3x its copy.
    const std::string n = std::to_string(S[rank - 1]), ol = o[rank - 1], lo = fresh("lo"), hi = fresh("hi");
    line(std::string("// partly outside: each row copies its columns inside [lo, hi)") + (load ? " and pads the rest" : ""));
    line("const int64_t " + lo + " = " + ol + " >= 0 ? 0 : -" + ol + " < " + n + " ? -" + ol + " : " + n + ";");
    line("const int64_t " + hi + " = " + D(rank - 1) + " - " + ol + " >= " + n + " ? " + n + " : " + D(rank - 1) + " - " +
         ol + " > " + lo + " ? " + D(rank - 1) + " - " + ol + " : " + lo + ";");
    const std::string padv = load && in_place && t == ScalarKind::BF16 ? "tsr::f2bf(" + pad + ")" : pad;
    nest(outer, [&](const std::vector<std::string>& idx) {
      std::string ok, rowoff;  // rowoff: the row's first element (column 0 of the view)
      for (int d = 0; d < rank - 1; ++d) {
        std::string gd = "(" + o[d] + " + " + idx[d] + ")";
        ok += (d ? " && " : "") + gd + " >= 0 && " + gd + " < " + D(d);
        rowoff += (d ? " + " : "") + gd + " * " + St(d);
      }
      const std::string goff = rowoff.empty() ? ol : rowoff + " + " + ol;
      if (ok.empty()) ok = "true";
      std::vector<int64_t> oshape(outer);
      const std::string toff = idx.empty() ? "0" : "(" + flat_index(idx, oshape) + ") * " + n;
      const std::string i = fresh("i");
      if (load) {
        // tsr::load_row, out of line: these loops inline at every load cost ~0.1 s of a row
        // kernel's cold compile (session 18); the bf16 row read in place keeps bf16 bits.
        const std::string conv = "tsr::load_row<tsr::" + (in_place && t == ScalarKind::BF16 ? std::string("ld_same") : row_conv(t)) + ">(";
        const std::string dst = rbuf + (toff == "0" ? "" : " + " + toff) + ", A.p" + js;
        if (ok == "true") {
          line(conv + dst + (rowoff.empty() ? "" : " + " + rowoff) + ", " + ol + ", " + lo + ", " + hi + ", " + n + ", " + padv + ");");
        } else {
          line("if (" + ok + ") " + conv + dst + " + " + rowoff + ", " + ol + ", " + lo + ", " + hi + ", " + n + ", " + padv + ");");
          line("else " + conv + dst + ", 0, 0, 0, " + n + ", " + padv + ");");
        }
      } else if (!expr_.count(tile) && !uniform_.count(tile) && !bf16_rows_.count(tile) &&
                 elem(tile, "@I@") == nm(tile) + "[@I@]") {
        // tsr::store_row, out of line like load_row: the conversion loop inline at every store
        // (vectorized, with epilogues) cost ~0.04 s of topk bf16's cold compile for one row
        // of 64 (bench/RESULTS.md session 24).
        const std::string src = nm(tile) + (toff == "0" ? "" : " + " + toff);
        line("if (" + ok + ") tsr::store_row<tsr::" + row_store_conv(t) + ">(A.p" + js + (rowoff.empty() ? "" : " + " + rowoff) +
             ", " + src + ", " + ol + ", " + lo + ", " + hi + ");");
      } else {
        line("if (" + ok + ")");
        line("  for (int64_t " + i + " = " + lo + "; " + i + " < " + hi + "; ++" + i + ") A.p" + js + "[" + goff + " + " + i + "] = " +
             store_conv(t, elem(tile, toff + " + " + i)) + ";");
      }
    });
  } else nest(S, [&](const std::vector<std::string>& idx) {
    std::string ok, g;
    for (int d = 0; d < rank; ++d) {
      std::string gd = "(" + o[d] + " + " + idx[d] + ")";
      ok += (d ? " && " : "") + gd + " >= 0 && " + gd + " < " + D(d);
      g += (d ? " + " : "") + gd + " * " + St(d);
    }
    std::string fi = flat_index(idx, S);
    if (load && in_place && t == ScalarKind::BF16)
      line(rbuf + "[" + fi + "] = (" + ok + ") ? A.p" + js + "[" + g + "] : tsr::f2bf(" + pad + ");");
    else if (load)
      line(rbuf + "[" + fi + "] = (" + ok + ") ? " + load_conv(t, "A.p" + js + "[" + g + "]") + " : " + pad + ";");
    else
      line("if (" + ok + ") A.p" + js + "[" + g + "] = " + store_conv(t, elem(tile, fi)) + ";");
  });
  --ind_;
  line("}");
  --ind_;
  line("}");
}


std::pair<std::string, std::string> Emitter::indexed_access(const Op& op, int j, size_t first, int rank,
                                                            bool has_mask, const std::string& i) {
  std::string js = std::to_string(j);
  std::string ok = has_mask ? "(" + elem(op.operand(first + rank), i) + " != 0)" : "true", off;
  for (int d = 0; d < rank; ++d) {
    std::string g = "int64_t(" + elem(op.operand(first + d), i) + ")";
    ok += " && " + g + " >= 0 && " + g + " < A.d" + js + "_" + std::to_string(d);
    // The last dim's stride is 1 (unpack: views are row-major): written as 1, GCC no longer
    // versions every gather / scatter loop on it (a second copy of the loop to compile).
    off += (d ? " + " : "") + g + (d + 1 < rank ? " * A.s" + js + "_" + std::to_string(d) : "");
  }
  if (rank == 0) off = "0";
  return {ok, off};
}

void Emitter::for_each_element(const Value* v, const std::function<void(const std::string&)>& body) {
  if (!v->type.is_tile()) {
    body("0");
    return;
  }
  std::string i = fresh("i");
  line("for (int64_t " + i + " = 0; " + i + " < " + std::to_string(numel(v)) + "; ++" + i + ") {");
  ++ind_;
  body(i);
  --ind_;
  line("}");
}

void Emitter::emit_gather_scatter(const Op& op) {
  bool gather = op.kind == OpKind::Gather;
  const Value* view = op.operand(0);
  int j = view_of(op, view);
  int rank = view->type.rank();
  size_t first = gather ? 1 : 2;
  size_t n = op.operands.size();
  bool has_mask = n == first + rank + 1;
  if (n != first + rank && !has_mask) fail(op, "needs one index per view dim and an optional mask");
  ScalarKind t = view->type.elem;
  std::string js = std::to_string(j);
  const Value* shaped = gather ? op.result() : op.operand(first);
  if (gather) declare(op, op.result());
  std::string pad = klit(t, op.has_attr("pad") ? op.attr_number("pad") : 0.0);
  auto body = [&](const std::string& i) {
    auto [ok, off] = indexed_access(op, j, first, rank, has_mask, i);
    if (gather)
      line(elem(op.result(), i) + " = (" + ok + ") ? " + load_conv(t, "A.p" + js + "[" + off + "]") + " : " + pad + ";");
    else
      line("if (" + ok + ") A.p" + js + "[" + off + "] = " + store_conv(t, elem(op.operand(1), i)) + ";");
  };
  // A scatter whose mask is an array of whole 64-element chunks skips the chunks with no
  // element set (tsr::any64: one 64-byte test): its element loop is scalar, and masks such as
  // topk's "kept" flags are mostly clear (the keep pass's two scatters were ~30% of cpu topk).
  const Value* mask = has_mask && !gather ? op.operand(first + rank) : nullptr;
  if (mask && mask->type.is_tile() && mask->type.elem == ScalarKind::I1 && numel(mask) >= 64 &&
      numel(mask) % 64 == 0 && numel(shaped) == numel(mask) && in_array(mask)) {
    const std::string c = fresh("c"), i = fresh("i");
    line("for (int64_t " + c + " = 0; " + c + " < " + std::to_string(numel(mask)) + "; " + c + " += 64) {");
    ++ind_;
    line("if (!tsr::any64(" + nm(mask) + " + " + c + ")) continue;");
    line("for (int64_t " + i + " = " + c + "; " + i + " < " + c + " + 64; ++" + i + ") {");
    ++ind_;
    body(i);
    --ind_;
    line("}");
    --ind_;
    line("}");
    return;
  }
  for_each_element(shaped, body);
}

void Emitter::emit_atomic(const Op& op) {
  bool cas = op.kind == OpKind::AtomicCas;
  const Value* view = op.operand(0);
  int j = view_of(op, view);
  int rank = view->type.rank();
  size_t first = cas ? 3 : 2;
  size_t n = op.operands.size();
  bool has_mask = !cas && n == first + rank + 1;
  if (n != first + rank && !has_mask) fail(op, "needs one index per view dim");
  ScalarKind t = view->type.elem;
  std::string S = stype(t), C = ctype(t), js = std::to_string(j);
  std::string kind = cas ? "" : op.attr_string("kind");
  if (!cas && kind != "add" && kind != "max" && kind != "min") fail(op, "atomic kind must be add, max or min");
  declare(op, op.result());
  auto body = [&](const std::string& i) {
    auto [ok, off] = indexed_access(op, j, first, rank, has_mask, i);
    std::string val = elem(op.operand(cas ? 2 : 1), i);
    line("if (" + ok + ") {");
    ++ind_;
    line(S + "* q_ = &A.p" + js + "[" + off + "];");
    line(S + " o_;");
    line("__atomic_load(q_, &o_, __ATOMIC_RELAXED);");
    line("for (;;) {");
    ++ind_;
    line("const " + C + " ov_ = " + load_conv(t, "o_") + ";");
    if (cas) {
      // Bit patterns are compared, as the interpreter and a hardware CAS do: -0 != +0, and a
      // NaN matches the same NaN.
      line("const " + S + " cs_ = " + store_conv(t, elem(op.operand(1), i)) + ";");
      line("if (__builtin_memcmp(&o_, &cs_, sizeof o_) != 0) break;");
      line(S + " ns_ = " + store_conv(t, val) + ";");
    } else {
      std::string nv;
      if (kind == "add") nv = is_float(t) ? fround(t, "ov_ + " + val) : (t == ScalarKind::I1 ? "uint8_t((ov_ + " + val + ") & 1)" : "tsr::wadd(ov_, " + C + "(" + val + "))");
      else nv = std::string(is_float(t) ? "tsr::f" : "tsr::i") + kind + (is_float(t) ? "_nan" : "") + "(ov_, " + C + "(" + val + "))";
      line(S + " ns_ = " + store_conv(t, nv) + ";");
    }
    line("if (__atomic_compare_exchange(q_, &o_, &ns_, false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) break;");
    --ind_;
    line("}");
    line(elem(op.result(), i) + " = " + load_conv(t, "o_") + ";");
    --ind_;
    line("} else {");
    line("  " + elem(op.result(), i) + " = " + C + "(0);");
    line("}");
  };
  for_each_element(op.result(), body);
}

void Emitter::emit_shape(const Op& op) {
  const Value* src = op.operand(0);
  const Value* res = op.result();
  switch (op.kind) {
    case OpKind::ExpandDims:
    case OpKind::Reshape:
      // Flat row-major storage is the same: the result names the operand's array.
      if (src->type.is_tile() && res->type.is_tile()) {
        if (numel(src) != numel(res)) fail(op, "element counts differ");
        alias(res, src);
      } else if (res->type.is_tile()) {
        std::string n = declare(op, res);
        line(n + "[0] = " + nm(src) + ";");
      } else {
        line("const " + ctype(res->type.elem) + " " + bind_new(res) + " = " + elem(src, "0") + ";");
      }
      return;
    case OpKind::Broadcast: {
      if (!src->type.is_tile()) {
        elementwise(op, [](const std::vector<std::string>& a) { return a[0]; });
        uniform_[res] = nm(src);
        return;
      }
      if (numel(src) == 1) {
        std::string n = declare(op, res);
        std::string one = elem(src, "0");
        line("for (int64_t i_ = 0; i_ < " + std::to_string(numel(res)) + "; ++i_) " + n + "[i_] = " + one + ";");
        uniform_[res] = one;
        return;
      }
      std::vector<int64_t> R = shape_of(op, res), Sx = shape_of(op, src);
      if (R.size() != Sx.size()) fail(op, "broadcast operand rank must equal the result rank");
      if (row_broadcast_in_users(op)) {
        row_bcast_[res] = R.back();
        name_[res] = nm(src);
        line("// (each row's element read by its users)");
        return;
      }
      std::string n = declare(op, res);
      nest(R, [&](const std::vector<std::string>& idx) {
        std::vector<std::string> sidx;
        for (size_t d = 0; d < R.size(); ++d) sidx.push_back(Sx[d] == 1 ? "0" : idx[d]);
        line(n + "[" + flat_index(idx, R) + "] = " + nm(src) + "[" + flat_index(sidx, Sx) + "];");
      });
      return;
    }
    case OpKind::Permute: {
      const auto& dims = op.attr_ints("dims");
      std::vector<int64_t> R = shape_of(op, res), Sx = shape_of(op, src);
      if (dims.size() != R.size()) fail(op, "dims must be a permutation of the operand dims");
      std::string n = declare(op, res);
      // A transpose: blocked (tsr::transpose), from an array (a bf16 row read in place is a
      // tsr::bf16_row, read element by element below).
      if (R.size() == 2 && dims[0] == 1 && dims[1] == 0 && !bf16_rows_.count(src)) {
        line("tsr::transpose<" + ctype(res->type.elem) + ", " + std::to_string(Sx[0]) + ", " + std::to_string(Sx[1]) + ">(" +
             nm(src) + ", " + n + ");");
        return;
      }
      nest(R, [&](const std::vector<std::string>& idx) {
        std::vector<std::string> sidx(Sx.size());
        for (size_t d = 0; d < R.size(); ++d) sidx[dims[d]] = idx[d];
        line(n + "[" + flat_index(idx, R) + "] = " + nm(src) + "[" + flat_index(sidx, Sx) + "];");
      });
      return;
    }
    case OpKind::ExtractTile:
    case OpKind::InsertTile: {
      bool ext = op.kind == OpKind::ExtractTile;
      const Value* sub = ext ? res : op.operand(1);
      std::vector<int64_t> Big = shape_of(op, src), Sub = shape_of(op, sub);
      size_t first = ext ? 1 : 2;
      if (op.operands.size() != first + Big.size()) fail(op, "needs one index per dim");
      std::string n = declare(op, res);
      if (!ext && bf16_rows_.count(src))  // a bf16 row read in place: converted element by element
        line("for (int64_t i_ = 0; i_ < " + std::to_string(numel(res)) + "; ++i_) " + n + "[i_] = " + nm(src) + "[i_];");
      else if (!ext)
        line("__builtin_memcpy(" + n + ", " + nm(src) + ", sizeof(" + n + "));");
      std::vector<std::string> o;
      for (size_t d = 0; d < Big.size(); ++d) {
        o.push_back(fresh("o"));
        line("const int64_t " + o.back() + " = int64_t(" + nm(op.operand(first + d)) + ") * " + std::to_string(Sub[d]) + ";");
      }
      nest(Sub, [&](const std::vector<std::string>& idx) {
        std::vector<std::string> bidx;
        for (size_t d = 0; d < Big.size(); ++d) bidx.push_back(o[d] + " + " + idx[d]);
        std::string b = flat_index(bidx, Big), s = flat_index(idx, Sub);
        if (ext) line(n + "[" + s + "] = " + nm(src) + "[" + b + "];");
        else line(n + "[" + b + "] = " + nm(op.operand(1)) + "[" + s + "];");
      });
      return;
    }
    default: fail(op, "not a shape op");
  }
}

void Emitter::emit_dot(const Op& op) {
  const Value *a = op.operand(0), *b = op.operand(1), *acc = op.operand(2);
  std::vector<int64_t> As = shape_of(op, a), Bs = shape_of(op, b), Cs = shape_of(op, acc);
  if (As.size() != 2 || Bs.size() != 2 || Cs.size() != 2 || As[1] != Bs[0] || As[0] != Cs[0] || Bs[1] != Cs[1])
    fail(op, "dot needs a [M, K], b [K, N], acc [M, N]");
  int64_t M = As[0], K = As[1], N = Bs[1];
  ScalarKind in = a->type.elem, at = acc->type.elem;
  // acc = dot(a, b, acc) in a loop accumulates straight into the carried array when nothing
  // reads the carried value after the dot (carried_target), and a and b are not that array:
  // two 16 KB copies per k step less for a 64x64 f32 tile.
  std::string r = carried_target(op);
  if (!r.empty() && r != nm(a) && r != nm(b)) {
    name_[op.result()] = r;
    if (r != nm(acc)) line("__builtin_memcpy(" + r + ", " + nm(acc) + ", sizeof(" + r + "));");
    else line("// (accumulated in place into the carried " + r + ")");
  } else {
    r = declare(op, op.result());
    line("__builtin_memcpy(" + r + ", " + nm(acc) + ", sizeof(" + r + "));");
  }
  std::string Ms = std::to_string(M), Ns = std::to_string(N), Ks = std::to_string(K);
  if (at == ScalarKind::F32 && is_float(in) && in != ScalarKind::F64) {
    // Codegen knobs cpu_dot_mr / cpu_dot_nr (kernel constexprs; absent or 0: the header's own
    // choice) fix the register block; the default text is unchanged without them.
    const ConstexprDecl *mr = k_.find_constexpr("cpu_dot_mr"), *nr = k_.find_constexpr("cpu_dot_nr");
    const int64_t mrv = mr ? mr->value : 0, nrv = nr ? nr->value : 0;
    const std::string block = mrv || nrv ? ", " + std::to_string(mrv) + ", " + std::to_string(nrv) : "";
    line("tsr::dot_f32<" + Ms + ", " + Ns + ", " + Ks + block + ">(" + nm(a) + ", " + nm(b) + ", " + r + ");");
    return;
  }
  std::string upd;
  std::string av = nm(a) + "[m_ * " + Ks + " + k_]", bv = nm(b) + "[k_ * " + Ns + " + n_]", cv = r + "[m_ * " + Ns + " + n_]";
  if (is_float(at)) upd = fround(at, "tsr::fma(" + ctype(at) + "(" + av + "), " + ctype(at) + "(" + bv + "), " + cv + ")");
  else upd = "tsr::wadd(" + cv + ", tsr::wmul(" + ctype(at) + "(" + av + "), " + ctype(at) + "(" + bv + ")))";
  line("for (int64_t m_ = 0; m_ < " + Ms + "; ++m_)");
  line("  for (int64_t k_ = 0; k_ < " + Ks + "; ++k_)");
  line("    for (int64_t n_ = 0; n_ < " + Ns + "; ++n_) " + cv + " = " + upd + ";");
}

std::string Emitter::combine(const Op& op, const std::string& a, const std::string& b) {
  const Block& reg = op.region(0);
  if (reg.args.size() != 2) fail(op, "the combiner region takes two arguments");
  name_[reg.args[0]] = a;
  name_[reg.args[1]] = b;
  emit_block(reg);
  const Op* y = terminator(reg, op);
  if (y->operands.size() != 1) fail(op, "the combiner yields one value");
  return nm(y->operand(0));
}

// Reduction identity values and combining expressions per kind.
struct ReduceKind {
  std::string init;                                  // empty: start from the first element
  std::function<std::string(std::string, std::string)> step;
};

void Emitter::emit_reduce(const Op& op) {
  const Value* x = op.operand(0);
  const Value* res = op.result();
  std::vector<int64_t> S = shape_of(op, x);
  int64_t axis = op.attr_int("axis");
  if (axis < 0 || axis >= static_cast<int64_t>(S.size())) fail(op, "axis out of range");
  const AxisSplit sp = split_at_axis(S, axis);
  const int64_t outer = sp.outer, len = sp.len, inner = sp.inner;
  ScalarKind t = x->type.elem;
  std::string C = ctype(t);
  bool f = is_float(t);
  std::string r = declare(op, res);
  auto out = [&](const std::string& o, const std::string& in) {
    return res->type.is_tile() ? r + "[" + o + " * " + std::to_string(inner) + " + " + in + "]" : r;
  };
  if (auto fused = exp_sum_.find(&op); fused != exp_sum_.end()) {
    line("// (summed by the exp's loop)");
    line(out("0", "0") + " = " + fused->second + ";");
    return;
  }
  std::string xs = expr_.count(x) ? std::string() : nm(x), L = std::to_string(len), I = std::to_string(inner), O = std::to_string(outer);
  auto src = [&](const std::string& o, const std::string& l, const std::string& in) {
    return xs + "[(" + o + " * " + L + " + " + l + ") * " + I + " + " + in + "]";
  };

  if (op.kind == OpKind::ReduceWith) {
    line("for (int64_t o_ = 0; o_ < " + O + "; ++o_)");
    line("for (int64_t n_ = 0; n_ < " + I + "; ++n_) {");
    ++ind_;
    std::string acc = fresh("acc");
    line(C + " " + acc + " = " + src("o_", "0", "n_") + ";");
    std::string l = fresh("l");
    line("for (int64_t " + l + " = 1; " + l + " < " + L + "; ++" + l + ") {");
    ++ind_;
    std::string av = fresh("a"), bv = fresh("b");
    line("const " + C + " " + av + " = " + acc + ";");
    line("const " + C + " " + bv + " = " + src("o_", l, "n_") + ";");
    std::string c = combine(op, av, bv);
    cur_ = &op;
    line(acc + " = " + c + ";");
    --ind_;
    line("}");
    line(out("o_", "n_") + " = " + acc + ";");
    --ind_;
    line("}");
    return;
  }

  const std::string& kind = op.attr_string("kind");
  if (kind == "argmax" || kind == "argmin") {
    bool mx = kind == "argmax";
    std::string better = f ? (mx ? "(v_ > b_ || (v_ != v_ && b_ == b_))" : "(v_ < b_ || (v_ != v_ && b_ == b_))")
                           : (mx ? "(v_ > b_)" : "(v_ < b_)");
    line("for (int64_t o_ = 0; o_ < " + O + "; ++o_)");
    line("for (int64_t n_ = 0; n_ < " + I + "; ++n_) {");
    line("  " + C + " b_ = " + src("o_", "0", "n_") + "; int32_t bi_ = 0;");
    line("  for (int64_t l_ = 1; l_ < " + L + "; ++l_) {");
    line("    const " + C + " v_ = " + src("o_", "l_", "n_") + ";");
    line("    if " + better + " { b_ = v_; bi_ = int32_t(l_); }");
    line("  }");
    line("  " + out("o_", "n_") + " = bi_;");
    line("}");
    return;
  }
  // Narrow floats accumulate in float and round once at the end.
  std::string init, stepfn;
  std::function<std::string(const std::string&, const std::string&)> step;
  if (kind == "sum") {
    init = f ? C + "(0)" : C + "(0)";
    step = [&](const std::string& a, const std::string& b) { return f ? a + " + " + b : "tsr::wadd(" + a + ", " + b + ")"; };
  } else if (kind == "prod") {
    init = C + "(1)";
    step = [&](const std::string& a, const std::string& b) { return f ? a + " * " + b : "tsr::wmul(" + a + ", " + b + ")"; };
  } else if (kind == "max" || kind == "min") {
    bool mx = kind == "max";
    init = f ? C + (mx ? "(-INFINITY)" : "(INFINITY)") : "tsr::lim<" + C + ">::" + (mx ? "lowest()" : "max()");
    std::string fn = std::string(f ? "tsr::f" : "tsr::i") + kind + (f ? "_nan" : "");
    step = [fn](const std::string& a, const std::string& b) { return fn + "(" + a + ", " + b + ")"; };
  } else {
    fail(op, "unknown reduce kind '" + kind + "'");
  }
  auto fin = [&](const std::string& e) { return f ? fround(t, e) : (t == ScalarKind::I1 ? "uint8_t((" + e + ") & 1)" : e); };
  if (inner == 1 && f && len >= 16 && kind != "argmax" && kind != "argmin") {
    // Contiguous float rows: an OpenMP simd reduction (reassociation is allowed for floats);
    // max/min track NaN separately because the simd max/min ignore it.
    // A row of 256 or more (a multiple of 64) is read as kStreams contiguous quarters, each its
    // own accumulator: GCC gives an OpenMP simd reduction one vector accumulator, and the
    // dependent adds (or max) then cost their latency per vector (softmax f32's two
    // reductions: a row 12% faster with four; bench/RESULTS.md session 16). One whose operand is
    // an inlined expression runs two halves: each stream repeats the expression, and four
    // copies cost ~0.05 s of compile each (layernorm's centered squares; session 18), while
    // the expression's own work per vector leaves less of the add's latency to hide.
    std::string red = kind == "sum" ? "+" : kind == "prod" ? "*" : kind;
    const int64_t streams = len >= 256 && len % (kStreams * 16) == 0 ? (xs.empty() ? 2 : kStreams) : 1;
    const std::string Q = std::to_string(len / streams);
    auto a = [](int64_t k) { return "a" + std::to_string(k) + "_"; };
    auto xv = [](int64_t k) { return "x" + std::to_string(k) + "_"; };
    const std::string cmp = kind == "max" ? " > " : " < ";
    auto pick = [&](const std::string& u, const std::string& v) {  // the step of u and v
      return kind == "sum" ? u + " + " + v : kind == "prod" ? u + " * " + v : u + cmp + v + " ? " + u + " : " + v;
    };
    if (streams > 1 && C == "float" && (kind == "sum" || kind == "max" || kind == "min") && !xs.empty() &&
        elem(x, "@I@") == xs + "[@I@]") {
      // The operand is an array (or a bf16 row read in place): tsr::row_sum4 / row_max4 /
      // row_min4, the same four-quarter loop out of line, one instance per length and reader.
      // Each inline copy cost ~0.03 s of compile (layernorm has four, softmax two; session 18).
      line("for (int64_t o_ = 0; o_ < " + O + "; ++o_) " + out("o_", "0") + " = " +
           fin("tsr::row_" + kind + "4<" + Q + ">(" + xs + ", o_ * " + L + ")") + ";");
      return;
    }
    line("for (int64_t o_ = 0; o_ < " + O + "; ++o_) {");
    ++ind_;
    std::string accs, names;
    for (int64_t k = 0; k < streams; ++k) {
      accs += (k ? ", " : "") + a(k) + " = " + init;
      names += (k ? "," : "") + a(k);
    }
    line(C + " " + accs + ";");
    line("int nan_ = 0;");
    bool mm = kind == "max" || kind == "min";
    line(std::string("#pragma omp simd reduction(") + red + ":" + names + ")" + (mm ? " reduction(|:nan_)" : ""));
    line("for (int64_t l_ = 0; l_ < " + Q + "; ++l_) {");
    std::string nans;
    for (int64_t k = 0; k < streams; ++k) {
      line("  const " + C + " " + xv(k) + " = " + elem(x, "o_ * " + L + (k ? " + " + std::to_string(k * (len / streams)) : "") + " + l_") + ";");
      if (mm) line("  " + a(k) + " = " + pick(xv(k), a(k)) + ";");
      else line("  " + a(k) + " " + red + "= " + xv(k) + ";");
      nans += std::string(k ? " | " : "") + "(" + xv(k) + " != " + xv(k) + ")";
    }
    if (mm) line("  nan_ |= " + nans + ";");
    line("}");
    std::string acc = a(0);
    if (streams == 2) {
      acc = pick(a(0), a(1));
    } else if (streams > 1) {  // pairwise: (a0 . a1) . (a2 . a3)
      static_assert(kStreams == 4);
      line("const " + C + " b0_ = " + pick(a(0), a(1)) + ", b1_ = " + pick(a(2), a(3)) + ";");
      acc = pick("b0_", "b1_");
    }
    line(out("o_", "0") + " = nan_ ? " + C + "(NAN) : " + fin(acc) + ";");
    --ind_;
    line("}");
  } else if (inner == 1 && len % 16 == 0 && len >= 32 && !xs.empty() && elem(x, "@I@") == xs + "[@I@]") {
    // Contiguous rows of an array: tsr::row_lanes16, 16 independent lanes (they vectorize)
    // combined at the end, out of line (one instance per type and kind: each inline copy cost
    // ~0.01 s of compile, and topk has five; bench/RESULTS.md session 24).
    line("for (int64_t o_ = 0; o_ < " + O + "; ++o_) " + out("o_", "0") + " = " +
         fin("tsr::row_lanes16<tsr::rd_" + kind + ", " + C + ">(" + xs + " + o_ * " + L + ", " + L + ", " + init + ")") + ";");
  } else if (inner == 1 && len % 16 == 0 && len >= 32) {
    // Contiguous rows: 16 independent lanes vectorize; combined at the end.
    line("for (int64_t o_ = 0; o_ < " + O + "; ++o_) {");
    ++ind_;
    line(C + " ln_[16];");
    line("for (int q_ = 0; q_ < 16; ++q_) ln_[q_] = " + init + ";");
    line("for (int64_t l_ = 0; l_ < " + L + "; l_ += 16)");
    line("  for (int q_ = 0; q_ < 16; ++q_) ln_[q_] = " + step("ln_[q_]", xs + "[o_ * " + L + " + l_ + q_]") + ";");
    line(C + " acc_ = ln_[0];");
    line("for (int q_ = 1; q_ < 16; ++q_) acc_ = " + step("acc_", "ln_[q_]") + ";");
    line(out("o_", "0") + " = " + fin("acc_") + ";");
    --ind_;
    line("}");
  } else {
    // One scalar accumulator per column, the column loop outside. An array of I accumulators
    // updated row by row (l_ outside, n_ inside) is miscompiled by gcc 12 at -O3 with 512-bit
    // vectors (AVX-512, e.g. -march=native on Zen 4): for I = 8 int32 columns it vectorizes the
    // rows with 16-lane vectors and a following use of the result sees half the rows summed
    // (tests/cpu/CpuReduceColumnsTest.cpp, tests/corpus/moe_count.tile).
    line("for (int64_t o_ = 0; o_ < " + O + "; ++o_)");
    line("for (int64_t n_ = 0; n_ < " + I + "; ++n_) {");
    ++ind_;
    line(C + " acc_ = " + init + ";");
    line("for (int64_t l_ = 0; l_ < " + L + "; ++l_) acc_ = " + step("acc_", src("o_", "l_", "n_")) + ";");
    line(out("o_", "n_") + " = " + fin("acc_") + ";");
    --ind_;
    line("}");
  }
}

void Emitter::emit_scan(const Op& op) {
  const Value* x = op.operand(0);
  std::vector<int64_t> S = shape_of(op, x);
  int64_t axis = op.attr_int("axis");
  if (axis < 0 || axis >= static_cast<int64_t>(S.size())) fail(op, "axis out of range");
  const AxisSplit sp = split_at_axis(S, axis);
  const int64_t outer = sp.outer, len = sp.len, inner = sp.inner;
  ScalarKind t = x->type.elem;
  std::string C = ctype(t);
  bool f = is_float(t);
  std::string r = declare(op, op.result());
  std::string xs = nm(x), L = std::to_string(len), I = std::to_string(inner), O = std::to_string(outer);
  auto at = [&](const std::string& a, const std::string& o, const std::string& l, const std::string& in) {
    return a + "[(" + o + " * " + L + " + " + l + ") * " + I + " + " + in + "]";
  };
  // A sum scan of 32-bit integers along a contiguous axis: the runtime's vector scan (integer
  // sums are exact in any order).
  if (op.kind == OpKind::Scan && op.attr_string("kind") == "sum" && inner == 1 &&
      (t == ScalarKind::I32 || t == ScalarKind::U32) && in_array(x)) {
    line("for (int64_t o_ = 0; o_ < " + O + "; ++o_) tsr::scan_add32(" + xs + " + o_ * " + L + ", " + r + " + o_ * " + L +
         ", " + L + ");");
    return;
  }
  line("for (int64_t o_ = 0; o_ < " + O + "; ++o_)");
  line("for (int64_t n_ = 0; n_ < " + I + "; ++n_) {");
  ++ind_;
  std::string acc = fresh("acc");
  line(C + " " + acc + " = " + at(xs, "o_", "0", "n_") + ";");
  line(at(r, "o_", "0", "n_") + " = " + acc + ";");
  std::string l = fresh("l");
  line("for (int64_t " + l + " = 1; " + l + " < " + L + "; ++" + l + ") {");
  ++ind_;
  if (op.kind == OpKind::ScanWith) {
    std::string av = fresh("a"), bv = fresh("b");
    line("const " + C + " " + av + " = " + acc + ";");
    line("const " + C + " " + bv + " = " + at(xs, "o_", l, "n_") + ";");
    std::string c = combine(op, av, bv);
    cur_ = &op;
    line(acc + " = " + c + ";");
  } else {
    const std::string& kind = op.attr_string("kind");
    // Float sums and products accumulate in the compute type (f32 for narrow floats); each
    // output is rounded below.
    std::string b = at(xs, "o_", l, "n_"), e;
    if (kind == "sum") e = f ? C + "(" + acc + " + " + b + ")" : "tsr::wadd(" + acc + ", " + b + ")";
    else if (kind == "prod") e = f ? C + "(" + acc + " * " + b + ")" : "tsr::wmul(" + acc + ", " + b + ")";
    else if (kind == "max" || kind == "min") e = std::string(f ? "tsr::f" : "tsr::i") + kind + (f ? "_nan(" : "(") + acc + ", " + b + ")";
    else fail(op, "unknown scan kind '" + kind + "'");
    if (t == ScalarKind::I1 && (kind == "sum" || kind == "prod")) e = "uint8_t((" + e + ") & 1)";
    line(acc + " = " + e + ";");
  }
  line(at(r, "o_", l, "n_") + " = " + (f && op.kind == OpKind::Scan ? fround(t, acc) : acc) + ";");
  --ind_;
  line("}");
  --ind_;
  line("}");
}

// histogram: the runtime's tsr::histogram. sort / topk: the runtime's tsr::sort_lines, which orders by bit keys with the position as the
// tie-break (the interpreter sorts values directly), in scratch arrays declared here (the stack,
// or the heap with a fault when there is none).
void Emitter::emit_sort(const Op& op) {
  const Value* x = op.operand(0);
  std::vector<int64_t> S = shape_of(op, x);
  if (op.kind == OpKind::Histogram) {
    std::string h = declare(op, op.result());
    line("tsr::histogram(" + nm(x) + ", " + std::to_string(numel(x)) + ", " + h + ", " +
         std::to_string(numel(op.result())) + ");");
    return;
  }
  int64_t axis = op.attr_int("axis");
  if (axis < 0 || axis >= static_cast<int64_t>(S.size())) fail(op, "axis out of range");
  const AxisSplit sp = split_at_axis(S, axis);
  std::vector<int64_t> R = shape_of(op, op.result(0));
  if (R.size() != S.size()) fail(op, "result rank differs from the operand's");
  int64_t k = R[static_cast<size_t>(axis)];
  bool desc = op.kind == OpKind::Topk ? !op.has_attr("largest") || op.attr_bool("largest")
                                      : op.has_attr("descending") && op.attr_bool("descending");
  std::string v = declare(op, op.result(0));
  std::string ix = op.results.size() > 1 ? declare(op, op.result(1)) : std::string("(int32_t*)nullptr");
  std::string idx = op.operands.size() > 1 ? nm(op.operand(1)) : std::string("(const int32_t*)nullptr");
  std::string keys = fresh("sk"), pos = fresh("sp");
  declare_array(op, ScalarKind::U64, keys, 2 * sp.len);
  declare_array(op, ScalarKind::I32, pos, 2 * sp.len);
  line("tsr::sort_lines(" + nm(x) + ", " + idx + ", " + v + ", " + ix + ", " + std::to_string(sp.outer) + ", " +
       std::to_string(sp.len) + ", " + std::to_string(sp.inner) + ", " + std::to_string(k) + ", " +
       (desc ? "true" : "false") + ", " + keys + ", " + pos + ");");
}

void Emitter::assign_carried(const Op& y, const std::vector<const Value*>& carried_vals,
                             const std::vector<std::string>& carried) {
  if (y.operands.size() != carried.size()) fail(y, "yield must pass one value per carried value");
  std::vector<std::string> src(carried.size());
  for (size_t j = 0; j < carried.size(); ++j) {
    const Value* v = y.operand(j);
    src[j] = nm(v);
    for (size_t q = 0; q < carried.size(); ++q)
      if (q != j && src[j] == carried[q]) {
        std::string tmp = fresh("t");
        if (v->type.is_tile()) {
          declare_array(y, v->type.elem, tmp, numel(v));
          line("__builtin_memcpy(" + tmp + ", " + src[j] + ", sizeof(" + tmp + "));");
        } else {
          line("const " + ctype(v->type.elem) + " " + tmp + " = " + src[j] + ";");
        }
        src[j] = tmp;
        break;
      }
  }
  for (size_t j = 0; j < carried.size(); ++j) {
    if (src[j] == carried[j]) continue;
    if (carried_vals[j]->type.is_tile())
      line("__builtin_memcpy(" + carried[j] + ", " + src[j] + ", sizeof(" + carried[j] + "));");
    else
      line(carried[j] + " = " + src[j] + ";");
  }
}

void Emitter::emit_for(const Op& op) {
  if (op.operands.size() < 3) fail(op, "for needs lb, ub, step");
  const Block& body = op.region(0);
  size_t nc = op.operands.size() - 3;
  if (body.args.size() != nc + 1 || op.results.size() != nc) fail(op, "carried values do not match");
  std::vector<std::string> carried;
  std::vector<const Value*> vals;
  for (size_t j = 0; j < nc; ++j) {
    const Value* init = op.operand(3 + j);
    std::string c = declare(op, op.result(j), "c");
    copy_value(op.result(j), c, init);
    carried.push_back(c);
    vals.push_back(op.result(j));
    name_[body.args[j + 1]] = c;
  }
  // A step of 0 or below is an error (docs/semantics.md); a constant positive step needs no check.
  if (!const_positive(op.operand(2))) fault_unless(op, nm(op.operand(2)) + " > 0", StructFault::ForStep);
  std::string iv = fresh("iv");
  line("for (int64_t " + iv + "_ = " + nm(op.operand(0)) + "; " + nm(op.operand(2)) + " > 0 && " + iv + "_ < " +
       nm(op.operand(1)) + "; " + iv + "_ += " + nm(op.operand(2)) + ") {");
  ++ind_;
  line("const int32_t " + iv + " = int32_t(" + iv + "_);");
  name_[body.args[0]] = iv;
  emit_block(body);
  const Op* y = terminator(body, op);
  cur_ = y;
  comment(*y);
  assign_carried(*y, vals, carried);
  cur_ = &op;
  --ind_;
  line("}");
}

void Emitter::emit_if(const Op& op) {
  std::vector<std::string> res;
  for (const Value* r : op.results) res.push_back(declare(op, r));
  line("if (" + nm(op.operand(0)) + ") {");
  for (int reg = 0; reg < 2; ++reg) {
    ++ind_;
    emit_region_into(op, op.region(reg), res);
    --ind_;
    line(reg == 0 ? "} else {" : "}");
  }
}

void Emitter::emit_region_into(const Op& op, const Block& b, const std::vector<std::string>& res) {
  emit_block(b);
  const Op* y = terminator(b, op);
  if (y->operands.size() != res.size()) fail(op, "yield must pass one value per result");
  cur_ = y;
  comment(*y);
  for (size_t j = 0; j < res.size(); ++j) copy_value(op.result(j), res[j], y->operand(j));
  cur_ = &op;
}

void Emitter::emit_while(const Op& op) {
  const Block& cond = op.region(0);
  const Block& body = op.region(1);
  size_t nc = op.operands.size();
  if (cond.args.size() != nc || body.args.size() != nc || op.results.size() != nc) fail(op, "carried values do not match");
  std::vector<std::string> carried;
  std::vector<const Value*> vals;
  for (size_t j = 0; j < nc; ++j) {
    std::string c = declare(op, op.result(j), "c");
    copy_value(op.result(j), c, op.operand(j));
    carried.push_back(c);
    vals.push_back(op.result(j));
    name_[cond.args[j]] = c;
    name_[body.args[j]] = c;
  }
  // A loop still running after kMaxWhileIterations iterations is an error, as on the
  // interpreter (docs/semantics.md), never a hang.
  std::string w = fresh("w");
  line("for (int64_t " + w + " = 0;; ++" + w + ") {");
  ++ind_;
  fault_unless(op, w + " < INT64_C(" + std::to_string(kMaxWhileIterations) + ")", StructFault::WhileLimit);
  emit_block(cond);
  const Op* cy = terminator(cond, op);
  if (cy->operands.size() != 1) fail(op, "the condition region yields one i1");
  cur_ = cy;
  comment(*cy);
  line("if (!" + nm(cy->operand(0)) + ") break;");
  emit_block(body);
  const Op* y = terminator(body, op);
  cur_ = y;
  comment(*y);
  assign_carried(*y, vals, carried);
  cur_ = &op;
  --ind_;
  line("}");
}

void Emitter::emit_raw(const Op& op) {
  const Attr* body = op.find_attr("cpp");
  if (!body || !std::holds_alternative<std::string>(*body))
    fail(op, "raw op '" + (op.has_attr("name") ? op.attr_string("name") : std::string("?")) + "' has no cpp body");
  std::vector<std::string> outs;
  for (const Value* r : op.results) outs.push_back(declare(op, r));
  line("{");
  ++ind_;
  for (size_t i = 0; i < op.operands.size(); ++i) {
    const Value* v = op.operand(i);
    line("const auto& in" + std::to_string(i) + " = " + nm(v) + ";");
    line("constexpr int64_t in" + std::to_string(i) + "_numel = " + std::to_string(numel(v)) + ";");
  }
  for (size_t i = 0; i < outs.size(); ++i) {
    line("auto& out" + std::to_string(i) + " = " + outs[i] + ";");
    line("constexpr int64_t out" + std::to_string(i) + "_numel = " + std::to_string(numel(op.result(i))) + ";");
  }
  std::istringstream in(std::get<std::string>(*body));
  for (std::string l; std::getline(in, l);) line(l);
  --ind_;
  line("}");
}

// --- Struct ops ---------------------------------------------------------------------------
// Buffers and pipe rings are local arrays of the compute type, declared where `alloc` / `pipe`
// stand (the top of the program); a pipe is a ring with a head and a count. warp_role regions
// run in place, in program order: the sequential meaning of docs/semantics.md. The faults the
// interpreter reports (pipe full / empty / not empty at the end, slot out of range) end the
// program instance and come back as tessera_run's result (src/ir/Struct.h codes).

void Emitter::declare_array(const Op& op, ScalarKind elem, const std::string& n, int64_t count, bool storage) {
  const std::string T = storage ? stype(elem) : ctype(elem), N = std::to_string(count);
  if (!storage && is_float(elem) && elem != ScalarKind::F64) float_arrays_.insert(n);  // float in the compute type
  int64_t bytes = count * (is_narrow(elem) && !storage ? 4 : scalar_bytes(elem));  // the type's size
  if (stack_bytes_ + bytes <= kStackTileBytes) {
    stack_bytes_ += bytes;
    line("alignas(64) " + T + " " + n + "[" + N + "];");
    return;
  }
  line("tsr::HeapTile<" + T + ", " + N + "> " + n + "_heap;  // " + std::to_string(bytes) + " bytes: on the heap");
  fault_unless(op, n + "_heap.p", StructFault::TileAlloc);
  line(T + " (&" + n + ")[" + N + "] = *" + n + "_heap.p;");
}

void Emitter::fault_unless(const Op& op, const std::string& cond, StructFault f) {
  has_faults_ = true;
  line("if (!(" + cond + ")) { tsr_fault(" + std::to_string(struct_fault_code(k_, op, f)) + "); return; }");
}

std::string Emitter::slot_offset(const Op& op, size_t first, int tile_rank) {
  const Type& bt = op.operand(0)->type;
  std::vector<int64_t> dims = static_shape(bt.shape);
  size_t nslots = dims.size() - static_cast<size_t>(tile_rank);
  int64_t slot = 1;
  for (size_t d = nslots; d < dims.size(); ++d) slot *= dims[d];
  std::string flat = "0", ok = "true";
  for (size_t d = 0; d < nslots; ++d) {
    std::string i = "int64_t(" + nm(op.operand(first + d)) + ")";
    ok += " && " + i + " >= 0 && " + i + " < " + std::to_string(dims[d]);
    flat = "(" + flat + ") * " + std::to_string(dims[d]) + " + " + i;
  }
  if (nslots) fault_unless(op, ok, StructFault::SlotRange);
  return "(" + flat + ") * " + std::to_string(slot);
}

void Emitter::emit_struct(const Op& op) {
  auto storage_shape = [&](const Value* v) {
    if (!shape_is_static(v->type.shape)) fail(op, v->type.str() + " is not static; bind the constexprs first");
    return static_shape(v->type.shape);
  };
  switch (op.kind) {
    case OpKind::Alloc: {
      const Value* r = op.result();
      auto S = storage_shape(r);
      std::string n = bind_new(r, "buf");
      declare_array(op, r->type.elem, n, shape_numel(r->type.shape));
      (void)S;
      return;
    }
    case OpKind::Pipe: {
      const Value* r = op.result();
      auto S = storage_shape(r);
      std::string n = bind_new(r, "pipe");
      declare_array(op, r->type.elem, n, shape_numel(r->type.shape));
      line("int64_t " + n + "_head = 0, " + n + "_count = 0;  // " + std::to_string(S[0]) + " stages");
      pipes_.push_back(&op);
      return;
    }
    case OpKind::AsyncWait:
      line("// (copies are synchronous here: nothing to wait for)");
      return;
    case OpKind::AsyncCopy: {
      const Value* buf = op.operand(0);
      int rank = op.operand(1)->type.rank();
      size_t nslots = static_cast<size_t>(buf->type.rank() - rank);
      std::string off = slot_offset(op, 2, rank);
      line("{");
      ++ind_;
      std::string dst = fresh("dst");
      line(ctype(buf->type.elem) + "* const " + dst + " = " + nm(buf) + " + " + off + ";");
      LoadInto into{1, 2 + nslots, static_shape(struct_slot_shape(buf->type, rank)), dst};
      emit_load_store(op, &into);
      --ind_;
      line("}");
      return;
    }
    case OpKind::BufferRead: {
      const Value* r = op.result();
      std::string off = slot_offset(op, 1, r->type.rank());
      std::string n = declare(op, r);
      line("__builtin_memcpy(" + n + ", " + nm(op.operand(0)) + " + " + off + ", sizeof(" + n + "));");
      return;
    }
    case OpKind::BufferWrite: {
      const Value* v = op.operand(1);
      std::string off = slot_offset(op, 2, v->type.rank());
      line("__builtin_memcpy(" + nm(op.operand(0)) + " + " + off + ", " + nm(v) + ", sizeof(" + nm(v) + "));");
      return;
    }
    case OpKind::PipePush:
    case OpKind::PipePop: {
      const Value* p = op.operand(0);
      auto S = storage_shape(p);
      int64_t slot = shape_numel(p->type.shape) / S[0];
      std::string n = nm(p), st = std::to_string(S[0]), sl = std::to_string(slot);
      if (op.kind == OpKind::PipePop) {
        fault_unless(op, n + "_count > 0", StructFault::PipeEmpty);
        std::string r = declare(op, op.result());
        line("__builtin_memcpy(" + r + ", " + n + " + " + n + "_head * " + sl + ", sizeof(" + r + "));");
        line(n + "_head = (" + n + "_head + 1) % " + st + ";");
        line("--" + n + "_count;");
        return;
      }
      fault_unless(op, n + "_count < " + st, StructFault::PipeFull);
      line("{");
      ++ind_;
      std::string dst = fresh("dst");
      line(ctype(p->type.elem) + "* const " + dst + " = " + n + " + ((" + n + "_head + " + n + "_count) % " + st +
           ") * " + sl + ";");
      const Value* src = op.operand(1);
      if (src->type.is_view()) {
        LoadInto into{1, 2, static_shape(struct_slot_shape(p->type, 0)), dst};
        emit_load_store(op, &into);
      } else {
        line("__builtin_memcpy(" + dst + ", " + nm(src) + ", sizeof(" + nm(src) + "));");
      }
      --ind_;
      line("}");
      line("++" + n + "_count;");
      return;
    }
    case OpKind::WarpRole: {
      // Run by the whole program where it stands: the sequential meaning.
      std::vector<std::string> res;
      for (const Value* r : op.results) res.push_back(declare(op, r));
      line("{  // warp_role " + op.attr_string("role"));
      ++ind_;
      emit_region_into(op, op.region(0), res);
      --ind_;
      line("}");
      return;
    }
    default: fail(op, "not a Struct op");
  }
}

EmittedCpp Emitter::run() {
  const Kernel& k = k_;
  line("// Generated by Tessera (" + std::string(kCodegenVersion) + ") from kernel @" + k.name + ".");
  bool has_raw = false;
  walk(const_cast<Kernel&>(k), [&](Op& o) {
    has_struct_ |= o.info().cls == OpClass::Struct;
    has_raw |= o.info().cls == OpClass::Raw;
  });
  // The runtime header includes no standard header (compile time); a raw op's C++ body may
  // use them (std::sqrt, std::memcpy, ...).
  if (has_raw)
    for (const char* h : {"<cmath>", "<cstdint>", "<cstdlib>", "<cstring>", "<limits>", "<type_traits>"})
      line(std::string("#include ") + h);
  line("#include \"tessera_cpu.h\"");
  line("");
  line("namespace {");
  line("");
  const size_t fault_at = lines_.size();
  // Arguments: view pointers with dims and row-major strides, scalar values.
  auto count = [&](Op& o) {
    for (const Value* v : o.operands) users_[v].push_back(&o);
  };
  if (k.grid) walk(*k.grid, count);
  if (k.body) walk(*k.body, count);
  // can_defer's memo filled in program order: each op's operands are decided before it, so
  // expression_weight's recursion stays one level deep (an analysis asking first about the
  // end of a long chain would otherwise recurse through all of it).
  auto decide = [&](Op& o) {
    if (o.results.size() == 1) (void)can_defer(o);
  };
  if (k.grid) walk(*k.grid, decide);
  if (k.body) walk(*k.body, decide);
  line("struct Args {");
  ++ind_;
  int nviews = 0, nscalars = 0;
  for (size_t j = 0; j < k.params.size(); ++j) {
    const Value* p = k.params[j];
    std::string js = std::to_string(j);
    if (p->type.is_view()) {
      view_index_[p] = static_cast<int>(j);
      line(stype(p->type.elem) + "* p" + js + ";  // %" + p->name);
      for (int d = 0; d < p->type.rank(); ++d)
        line("int64_t d" + js + "_" + std::to_string(d) + ", s" + js + "_" + std::to_string(d) + ";");
    } else if (p->type.is_ptr()) {
      line("void* p" + js + ";  // %" + p->name + " (no Lite op reads pointers)");
    } else if (p->type.is_scalar()) {
      line(ctype(p->type.elem) + " p" + js + ";  // %" + p->name);
      name_[p] = "A.p" + js;
    } else {
      throw TesseraError(k.loc, "cpu backend: parameter %" + p->name + " of type " + p->type.str() + " is not supported");
    }
  }
  --ind_;
  line("};");
  // Streamed row stores (tsr::stream_f32): in kernels that move more bytes than they compute.
  // TESSERA_CPU_STREAM_STORES=0: never; =1: every streamable row, whatever its work per byte
  // (the A/B switches of bench/RESULTS.md, sessions 31 and 43).
  const char* sw = std::getenv("TESSERA_CPU_STREAM_STORES");
  const std::string stream_switch = sw ? sw : "";
  // A store inside a branch of one of the body's own `if`s is weighed with the work of the
  // programs that take that branch (a row kernel's one-tile branch and its looped one differ:
  // bf16 softmax with a relaxed exp streams its one-tile rows only, bench/RESULTS.md session 47).
  if (k.body && stream_switch != "0") {
    const ProgramWork whole = estimate_work(*k.body);
    std::unordered_map<const Block*, ProgramWork> per_branch;  // (each branch weighed once)
    walk(*k.body, [&](Op& o) {
      if (!streamable_row(o)) return;
      auto v = view_index_.find(o.operand(0));
      if (v == view_index_.end()) return;
      const Block* branch = top_level_branch(o, *k.body);
      if (branch && !per_branch.count(branch)) per_branch[branch] = branch_work(*k.body, *branch);
      const ProgramWork& pw = branch ? per_branch[branch] : whole;
      if (!(pw.bytes > 0 && (stream_switch == "1" || pw.ops < kStreamOpsPerByte * pw.bytes))) return;
      stream_stores_.insert(&o);
      if (std::find(stream_views_.begin(), stream_views_.end(), v->second) == stream_views_.end())
        stream_views_.push_back(v->second);
    });
  }
  line("");
  line("Args unpack(void** buf, const int64_t* dims, const int64_t* is, const double* fs) {");
  ++ind_;
  line("Args A;");
  int di = 0;
  for (size_t j = 0; j < k.params.size(); ++j) {
    const Value* p = k.params[j];
    std::string js = std::to_string(j);
    if (p->type.is_view()) {
      line("A.p" + js + " = static_cast<" + stype(p->type.elem) + "*>(buf[" + std::to_string(nviews++) + "]);");
      int R = p->type.rank();
      for (int d = 0; d < R; ++d) line("A.d" + js + "_" + std::to_string(d) + " = dims[" + std::to_string(di++) + "];");
      for (int d = R - 1; d >= 0; --d)
        line("A.s" + js + "_" + std::to_string(d) + " = " +
             (d == R - 1 ? std::string("1") : "A.s" + js + "_" + std::to_string(d + 1) + " * A.d" + js + "_" + std::to_string(d + 1)) + ";");
    } else if (p->type.is_ptr()) {
      line("A.p" + js + " = buf[" + std::to_string(nviews++) + "];");
    } else {
      std::string si = std::to_string(nscalars++);
      ScalarKind t = p->type.elem;
      line("A.p" + js + " = " + (is_float(t) ? dround(t, "fs[" + si + "]") : ctype(t) + "(is[" + si + "])") + ";");
    }
  }
  line("(void)buf; (void)dims; (void)is; (void)fs;");
  line("return A;");
  --ind_;
  line("}");
  line("");
  // Grid.
  line("void grid_fn(const Args& A, int32_t* g) {");
  ++ind_;
  if (!k.grid) throw TesseraError(k.loc, "cpu backend: kernel has no grid");
  in_grid_ = true;
  emit_block(*k.grid);
  in_grid_ = false;
  grid_faults_ = has_faults_;
  const Op* gy = k.grid->terminator();
  if (!gy || gy->operands.empty() || gy->operands.size() > 3)
    throw TesseraError(k.loc, "cpu backend: the grid must yield 1 to 3 sizes");
  cur_ = gy;
  comment(*gy);
  for (size_t i = 0; i < gy->operands.size(); ++i) line("g[" + std::to_string(i) + "] = int32_t(" + nm(gy->operand(i)) + ");");
  cur_ = nullptr;
  line("(void)A;");
  --ind_;
  line("}");
  line("");
  // One program instance.
  line("void program(const Args& A, int32_t pid0, int32_t pid1, int32_t pid2, int32_t np0, int32_t np1, int32_t np2) {");
  ++ind_;
  stack_bytes_ = 0;
  line("(void)A; (void)pid0; (void)pid1; (void)pid2; (void)np0; (void)np1; (void)np2;");
  // Constexprs by name, for raw bodies.
  for (const auto& c : k.constexprs)
    line("[[maybe_unused]] constexpr int64_t " + c.name + " = INT64_C(" + std::to_string(c.value) + ");");
  std::unordered_map<const Op*, bool> slice;
  find_prefetches(*k.body, slice);
  const size_t prologue_at = lines_.size();
  emit_block(*k.body);
  emit_prefetch_prologue(*k.body, prologue_at);
  std::vector<std::string> flags;
  for (int j : stream_views_) {
    const std::string js = std::to_string(j);
    flags.push_back("  const bool " + stream_flag(j) + " = tsr::stream_view(A.d" + js + "_0 * A.s" + js + "_0, " +
                    std::to_string(scalar_bytes(k.params[size_t(j)]->type.elem)) + ");  // streamed stores (tsr::kStreamBytes)");
  }
  insert_lines(prologue_at, flags);
  for (const Op* p : pipes_) {
    cur_ = p;
    line("// the end of the program: " + text_of(*p) + " must be empty");
    fault_unless(*p, nm(p->result()) + "_count == 0", StructFault::PipeNotEmpty);
  }
  cur_ = nullptr;
  --ind_;
  line("}");
  line("");
  line("}  // namespace");
  line("");
  line(std::string("extern \"C\" int ") + kRunSymbol +
       "(void** buf, const int64_t* dims, const int64_t* is, const double* fs, int nt) {");
  ++ind_;
  line("const Args A = unpack(buf, dims, is, fs);");
  line("int32_t g[3] = {1, 1, 1};");
  line("grid_fn(A, g);");
  if (grid_faults_) line("if (const int f = __atomic_exchange_n(&tsr_fault_code, 0, __ATOMIC_SEQ_CST)) return f;");
  // The programs are counted in 64 bits (OpenMP counts a collapsed loop in its variables'
  // type); a grid of more than 2^63 - 1 programs is an error, never a count that wraps.
  line("const int64_t g0 = g[0], g1 = g[1], g2 = g[2];");
  for (size_t i = 0; i < gy->operands.size(); ++i)
    line("if (g" + std::to_string(i) + " < 0) return " +
         std::to_string(struct_fault_code(k, *gy, static_cast<StructFault>(static_cast<int>(StructFault::GridNegative) + static_cast<int>(i)))) +
         ";  // " + grid_negative_message(k, static_cast<int>(i)));
  line("if (g0 == 0 || g1 == 0 || g2 == 0) return 0;  // no programs");
  if (gy->operands.size() == 3) {  // two i32 sizes multiply without overflow
    line("int64_t programs_ = 0;");
    line("if (__builtin_mul_overflow(g0 * g1, g2, &programs_)) return " +
         std::to_string(struct_fault_code(k, *gy, StructFault::GridTooLarge)) + ";  // " + grid_too_large_message(k));
  }
  // A grid with little work runs on the calling thread: waking OpenMP's team (the first time,
  // creating it) costs more than such a run (a warm cache hit of a tiny kernel: 2-12 ms).
  const int64_t work = estimate_work(*k.body).elements;
  line("if (nt <= 0) nt = omp_get_max_threads();");
  line("if (" + std::string(gy->operands.size() == 3 ? "programs_" : "g0 * g1 * g2") + " <= INT64_C(" +
       std::to_string(kSerialWork) + ") / INT64_C(" + std::to_string(std::max<int64_t>(work, 1)) +
       ")) nt = 1;  // about " + std::to_string(work) + " element ops per program");
  const std::string programs = "      for (int64_t x = 0; x < g0; ++x) program(A, int32_t(x), int32_t(y), int32_t(z), g[0], g[1], g[2]);";
  line("if (nt == 1) {");
  line("  for (int64_t z = 0; z < g2; ++z)");
  line("    for (int64_t y = 0; y < g1; ++y)");
  line(programs);
  if (!stream_views_.empty()) line("  tsr::stream_fence();  // the streamed stores, before the caller reads them");
  line("} else {");
  if (stream_views_.empty()) {
    line("  #pragma omp parallel for collapse(3) schedule(static) num_threads(nt)");
    line("  for (int64_t z = 0; z < g2; ++z)");
    line("    for (int64_t y = 0; y < g1; ++y)");
    line(programs);
  } else {
    // Each thread fences its own streamed stores before the team's closing barrier.
    line("  #pragma omp parallel num_threads(nt)");
    line("  {");
    line("  #pragma omp for collapse(3) schedule(static) nowait");
    line("  for (int64_t z = 0; z < g2; ++z)");
    line("    for (int64_t y = 0; y < g1; ++y)");
    line(programs);
    line("  tsr::stream_fence();");
    line("  }");
  }
  line("}");
  const bool faults = has_struct_ || has_faults_;
  line(faults ? "return __atomic_exchange_n(&tsr_fault_code, 0, __ATOMIC_SEQ_CST);" : "return 0;");
  --ind_;
  line("}");
  if (faults) {
    // The first fault of a run (src/ir/Struct.h code); tessera_run returns it.
    // (GCC atomic builtins: <atomic> alone costs a third of a second of compile time.)
    insert_lines(fault_at, {"int tsr_fault_code = 0;",
                            "void tsr_fault(int code) {",
                            "  int none = 0;",
                            "  __atomic_compare_exchange_n(&tsr_fault_code, &none, code, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);",
                            "}",
                            ""});
  }

  EmittedCpp out;
  for (auto& l : lines_) {
    out.source += l;
    out.source += '\n';
  }
  out.line_op = std::move(line_op_);
  out.op_texts = std::move(op_texts_);
  return out;
}

}  // namespace

EmittedCpp emit_cpp_detailed(const Kernel& k) {
  Emitter probe(k);
  EmittedCpp plain = probe.run();
  std::vector<const Op*> sites = probe.best_prefetch_sites();
  // With no site to prefetch from, a second run would print the probe's text again.
  if (std::all_of(sites.begin(), sites.end(), [](const Op* s) { return s == nullptr; })) return plain;
  Emitter e(k);
  e.set_prefetch_sites(std::move(sites));
  return e.run();
}

}  // namespace tessera::cpu

namespace tessera {
std::string emit_cpp(const Kernel& bound_kernel) { return cpu::emit_cpp_detailed(bound_kernel).source; }
}  // namespace tessera
