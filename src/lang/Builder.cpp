// KernelBuilder: the kernel signature, the insertion point, constants, the grid and finish().
#include <algorithm>
#include <cstring>
#include <set>
#include <unordered_set>

#include "ir/Verifier.h"
#include "lang/Internal.h"

namespace tessera::lang {

using detail::fail;
using detail::to_loc;

namespace {
// Free functions build into the innermost live builder of this thread.
thread_local KernelBuilder* g_current = nullptr;

}  // namespace

struct KernelBuilder::Caches {
  struct Const {
    ScalarKind kind;
    bool is_int;
    int64_t bits;  // the integer, or the double's bit pattern
    tessera::Value* value;
  };
  std::vector<Const> consts;
  std::vector<std::pair<std::string, tessera::Value*>> params;
};

KernelBuilder::KernelBuilder(std::string name, SrcLoc loc)
    : kernel_(std::make_unique<Kernel>()), caches_(std::make_unique<Caches>()) {
  kernel_->name = std::move(name);
  kernel_->loc = to_loc(loc);
  blocks_.push_back(kernel_->body.get());
  prev_ = g_current;
  g_current = this;
}

KernelBuilder::~KernelBuilder() {
  for (Var* v : vars_) v->owner_ = nullptr;
  if (g_current == this) g_current = prev_;
}

KernelBuilder& KernelBuilder::current(const SrcLoc& loc) {
  if (!g_current) fail(loc, "no KernelBuilder is active on this thread (create one first)");
  g_current->require_open(loc);
  return *g_current;
}

void KernelBuilder::require_open(const SrcLoc& loc) const {
  if (!kernel_) fail(loc, "the kernel was already finished; create a new KernelBuilder");
}

View KernelBuilder::view(const std::string& name, ScalarKind dt, Shape dims, SrcLoc loc) {
  require_open(loc);
  for (Value* p : kernel_->params)
    if (p->name == name) fail(loc, "parameter '" + name + "' is declared twice");
  if (dims.empty()) fail(loc, "view '" + name + "' needs at least one dim");
  for (const Dim& d : dims) {
    if (d.is_static() && d.value <= 0)
      fail(loc, "view '" + name + "' has a non-positive dim " + d.str());
    if (d.is_expr())
      fail(loc, "view '" + name + "' has the dim " + d.str() +
                    ": a view dim is an integer or a name, a runtime size (shape expressions are for tile dims)");
  }
  return View(kernel_->add_param(Type::view(dt, std::move(dims)), name));
}

Val KernelBuilder::scalar(const std::string& name, ScalarKind dt, SrcLoc loc) {
  require_open(loc);
  for (Value* p : kernel_->params)
    if (p->name == name) fail(loc, "parameter '" + name + "' is declared twice");
  return Val(kernel_->add_param(Type::scalar(dt), name));
}

Constexpr KernelBuilder::constexpr_(const std::string& name, std::vector<int64_t> candidates,
                                    std::optional<int64_t> value, SrcLoc loc) {
  require_open(loc);
  if (kernel_->find_constexpr(name)) fail(loc, "constexpr '" + name + "' is declared twice");
  if (!value && candidates.empty())
    fail(loc, "constexpr '" + name + "' needs a value or a list of candidates");
  int64_t v = value ? *value : candidates.front();
  if (!candidates.empty() && std::find(candidates.begin(), candidates.end(), v) == candidates.end())
    fail(loc, "constexpr '" + name + "' default " + std::to_string(v) +
                  " is not one of its candidates");
  kernel_->constexprs.push_back(ConstexprDecl{name, v, std::move(candidates), to_loc(loc)});
  return Constexpr(name, v);
}

bool KernelBuilder::visible(const tessera::Value* v) const {
  if (v->def == nullptr && v->block == nullptr) {
    return std::find(kernel_->params.begin(), kernel_->params.end(), v) != kernel_->params.end();
  }
  const Block* b = v->def ? v->def->parent : v->block;
  return std::find(blocks_.begin(), blocks_.end(), b) != blocks_.end();
}

void KernelBuilder::check_usable(const Val& v, const SrcLoc& loc) const {
  require_open(loc);
  if (!v.valid()) fail(loc, "use of an empty value (a Val that was never assigned)");
  if (!visible(v.ir()))
    fail(loc,
         "value used outside the loop or branch that defines it (assign it to a Var declared "
         "before the loop or branch to carry it out)");
}

Val KernelBuilder::emit(OpKind kind, std::vector<Val> operands, const Type& result,
                        std::vector<NamedAttr> attrs, const SrcLoc& loc) {
  std::vector<Value*> ops;
  for (const Val& v : operands) {
    check_usable(v, loc);
    ops.push_back(v.ir());
  }
  Op* op = kernel_->create_op(block(), kind, std::move(ops), {result}, std::move(attrs), to_loc(loc));
  return Val(op->result());
}

std::vector<Val> KernelBuilder::emit_multi(OpKind kind, std::vector<Val> operands,
                                           const std::vector<Type>& results,
                                           std::vector<NamedAttr> attrs, const SrcLoc& loc) {
  std::vector<Value*> ops;
  for (const Val& v : operands) {
    check_usable(v, loc);
    ops.push_back(v.ir());
  }
  Op* op = kernel_->create_op(block(), kind, std::move(ops), results, std::move(attrs), to_loc(loc));
  std::vector<Val> out;
  for (Value* r : op->results) out.emplace_back(r);
  return out;
}

void KernelBuilder::emit_void(OpKind kind, std::vector<Val> operands, std::vector<NamedAttr> attrs,
                              const SrcLoc& loc) {
  std::vector<Value*> ops;
  for (const Val& v : operands) {
    check_usable(v, loc);
    ops.push_back(v.ir());
  }
  kernel_->create_op(block(), kind, std::move(ops), {}, std::move(attrs), to_loc(loc));
}

// Constants are shared within the block stack so that the printed IR is not a wall of consts.
Val KernelBuilder::constant(ScalarKind dt, double v, const SrcLoc& loc) {
  require_open(loc);
  if (is_int(dt)) return constant_int(dt, static_cast<int64_t>(v), loc);
  int64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  auto& cache = caches_->consts;
  for (const auto& c : cache)
    if (c.kind == dt && !c.is_int && c.bits == bits && visible(c.value)) return Val(c.value);
  Val r = emit(OpKind::Const, {}, Type::scalar(dt), {{"value", v}}, loc);
  cache.push_back({dt, false, bits, r.ir()});
  return r;
}

Val KernelBuilder::constant_int(ScalarKind dt, int64_t v, const SrcLoc& loc) {
  require_open(loc);
  if (is_float(dt)) return constant(dt, static_cast<double>(v), loc);
  auto& cache = caches_->consts;
  for (const auto& c : cache)
    if (c.kind == dt && c.is_int && c.bits == v && visible(c.value)) return Val(c.value);
  Val r = emit(OpKind::Const, {}, Type::scalar(dt), {{"value", v}}, loc);
  cache.push_back({dt, true, v, r.ir()});
  return r;
}

Val KernelBuilder::param(const std::string& name, const SrcLoc& loc) {
  require_open(loc);
  if (!kernel_->find_constexpr(name)) fail(loc, "unknown constexpr '" + name + "'");
  auto& cache = caches_->params;
  for (const auto& [n, v] : cache)
    if (n == name && visible(v)) return Val(v);
  Val r = emit(OpKind::Param, {}, Type::scalar(ScalarKind::I32), {{"name", name}}, loc);
  cache.emplace_back(name, r.ir());
  return r;
}

// Grid sizes are built as ordinary expressions (in the body); grid() copies their scalar
// expression trees into the grid block, and finish() drops the body copies nobody used.
Value* KernelBuilder::clone_into_grid(tessera::Value* v, const SrcLoc& loc) {
  for (auto& [from, to] : grid_map_)
    if (from == v) return to;
  if (!v->def) {
    if (!v->block) return v;  // a kernel parameter
    fail(loc, "grid sizes cannot use loop or branch values");
  }
  Op* op = v->def;
  static const std::set<OpKind> allowed = {
      OpKind::Const, OpKind::Param, OpKind::Dim, OpKind::Add, OpKind::Sub, OpKind::Mul,
      OpKind::Div,   OpKind::Rem,   OpKind::Min, OpKind::Max, OpKind::Cast, OpKind::Cmp,
      OpKind::Where};
  if (!allowed.count(op->kind) || !op->results[0]->type.is_scalar())
    fail(loc, "grid sizes can only use dims, constexprs, scalar parameters, constants and scalar "
              "arithmetic, not '" + std::string(op->name()) + "'");
  std::vector<Value*> operands;
  for (Value* o : op->operands) operands.push_back(clone_into_grid(o, loc));
  Op* c = kernel_->create_op(*kernel_->grid, op->kind, std::move(operands), {op->results[0]->type},
                             op->attrs, op->loc);
  c->results[0]->name = op->results[0]->name;
  grid_map_.emplace_back(v, c->result());
  if (op->parent == kernel_->body.get()) grid_sources_.push_back(op);
  return c->result();
}

void KernelBuilder::grid(const std::vector<Operand>& sizes, SrcLoc loc) {
  require_open(loc);
  if (has_grid_) fail(loc, "the grid is already set");
  if (sizes.empty() || sizes.size() > 3)
    fail(loc, "the grid needs 1 to 3 sizes, got " + std::to_string(sizes.size()));
  std::vector<Value*> ys;
  for (const Operand& s : sizes) {
    Val v = detail::index_value(s, "grid size", loc);
    ys.push_back(clone_into_grid(v.ir(), loc));
  }
  kernel_->create_op(*kernel_->grid, OpKind::Yield, ys, {}, {}, to_loc(loc));
  has_grid_ = true;
}

void KernelBuilder::remove_dead_grid_sources() {
  std::unordered_set<const Value*> used;
  walk(*kernel_, [&](Op& op) {
    for (Value* v : op.operands) used.insert(v);
  });
  auto& ops = kernel_->body->ops;
  // Reverse order: removing a use can make an earlier source dead.
  for (size_t i = ops.size(); i-- > 0;) {
    Op* op = ops[i].get();
    if (std::find(grid_sources_.begin(), grid_sources_.end(), op) == grid_sources_.end()) continue;
    if (used.count(op->results[0])) continue;
    for (Value* o : op->operands) {
      bool other_use = false;
      walk(*kernel_, [&](Op& u) {
        if (&u != op)
          for (Value* x : u.operands) other_use |= (x == o);
      });
      if (!other_use) used.erase(o);
    }
    ops.erase(ops.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

std::unique_ptr<Kernel> KernelBuilder::finish(SrcLoc loc) {
  require_open(loc);
  if (blocks_.size() != 1) fail(loc, "finish() called inside a loop or branch body");
  if (!has_grid_) fail(loc, "kernel '" + kernel_->name + "' has no grid (call grid({...}))");
  remove_dead_grid_sources();
  auto k = std::move(kernel_);
  verify_or_throw(*k);
  return k;
}

// --- Val, Constexpr, Operand, View ---

const Type& Val::type() const {
  static const Type none;
  return v_ ? v_->type : none;
}

const Val& Val::named(const std::string& name) const {
  if (v_) v_->name = name;
  return *this;
}

Val Constexpr::val(SrcLoc loc) const { return detail::kb(loc).param(name_, loc); }

Operand::Operand(Val v, SrcLoc sl) : kind_(Kind::Value), val_(v), sl_(sl) {}
Operand::Operand(const Var& v, SrcLoc sl) : kind_(Kind::Value), val_(v.val()), sl_(sl) {}
Operand::Operand(const Constexpr& c, SrcLoc sl) : kind_(Kind::Constexpr), cx_(c.name()), sl_(sl) {}

Val Operand::materialize(std::optional<ScalarKind> hint, const SrcLoc& loc) const {
  KernelBuilder& b = detail::kb(loc);
  switch (kind_) {
    case Kind::Value:
      b.check_usable(val_, loc);
      return val_;
    case Kind::Constexpr:
      return b.param(cx_, loc);
    case Kind::Int:
      return b.constant_int(hint.value_or(ScalarKind::I32), int_, loc);
    case Kind::Float: {
      ScalarKind k = hint.value_or(ScalarKind::F32);
      if (!is_float(k))
        fail(loc, "float literal " + attr_str(float_) + " used with an integer operand of type " +
                      std::string(scalar_name(k)));
      return b.constant(k, float_, loc);
    }
  }
  return {};
}

Val View::dim(int axis, SrcLoc loc) const {
  if (axis < 0 || axis >= rank())
    fail(loc, "view '" + name() + "' has rank " + std::to_string(rank()) + ", no dim " +
                  std::to_string(axis));
  return detail::kb(loc).emit(OpKind::Dim, {Val(v_)}, Type::scalar(ScalarKind::I32),
                              {{"axis", int64_t{axis}}}, loc);
}

TiledView View::tile(Shape shape, SrcLoc loc) const {
  if (static_cast<int>(shape.size()) != rank())
    fail(loc, "view '" + name() + "' has rank " + std::to_string(rank()) + " but the tile shape " +
                  shape_str(shape) + " has rank " + std::to_string(shape.size()));
  for (const Dim& d : shape)
    if (d.is_static() && d.value <= 0) fail(loc, "tile dims must be positive, got " + shape_str(shape));
  return TiledView(v_, std::move(shape));
}

}  // namespace tessera::lang
