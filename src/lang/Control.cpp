// Structured control flow (for / if / while / combiner regions) and Vars.
//
// Vars become loop-carried values or branch results without the user listing them: a construct
// carries every Var live when it starts, builds its regions, then drops the Vars the regions
// left unchanged (their region arguments are replaced by the values from before).
#include <algorithm>

#include "lang/Internal.h"

namespace tessera::lang {

using detail::fail;
using detail::to_loc;

// --- Var ---

void Var::attach(const Operand& init, const SrcLoc& sl) {
  KernelBuilder& b = detail::kb(sl);
  cur_ = init.materialize(std::nullopt, sl);
  owner_ = &b;
  b.vars_.push_back(this);
}

Var::Var(const Var& o) : owner_(o.owner_), cur_(o.cur_) {
  if (owner_) owner_->vars_.push_back(this);
}

Var& Var::operator=(const Var& o) {
  cur_ = o.cur_;
  return *this;
}

void Var::assign(const Operand& v) {
  std::optional<ScalarKind> hint;
  if (cur_.valid()) hint = cur_.dtype();
  cur_ = v.materialize(hint, v.where());
}

Var::~Var() {
  if (owner_) std::erase(owner_->vars_, this);
}

Var& Var::operator+=(const Operand& o) { return *this = Operand(cur_, o.where()) + o; }
Var& Var::operator-=(const Operand& o) { return *this = Operand(cur_, o.where()) - o; }
Var& Var::operator*=(const Operand& o) { return *this = Operand(cur_, o.where()) * o; }
Var& Var::operator/=(const Operand& o) { return *this = Operand(cur_, o.where()) / o; }

namespace {

// Pops the insertion block even when the user's body throws.
struct BlockScope {
  std::vector<Block*>& stack;
  BlockScope(std::vector<Block*>& s, Block* b) : stack(s) { stack.push_back(b); }
  ~BlockScope() { stack.pop_back(); }
};

void erase_arg(Block& b, size_t i) {
  b.args.erase(b.args.begin() + static_cast<std::ptrdiff_t>(i));
  for (size_t j = 0; j < b.args.size(); ++j) b.args[j]->index = static_cast<int>(j);
}

void add_results(Kernel& k, Op* op, const std::vector<Type>& types) {
  for (const Type& t : types) {
    Value* r = k.new_value(t);
    r->def = op;
    r->index = static_cast<int>(op->results.size());
    op->results.push_back(r);
  }
}

std::string carried_type_msg(const char* what, const Type& before, const Type& after) {
  return std::string("a Var changes type in the ") + what + " from " + before.str() + " to " +
         after.str() + " (carried values keep their type; convert with .to())";
}

}  // namespace

std::vector<Val> KernelBuilder::for_loop(const Operand& lb, const Operand& ub, const Operand& step,
                                         std::vector<Val> init, const LoopBody& body,
                                         LoopOptions opts, const SrcLoc& loc) {
  require_open(loc);
  Val lbv = detail::index_value(lb, "loop lower bound", loc);
  Val ubv = detail::index_value(ub, "loop upper bound", loc);
  Val stv = detail::index_value(step, "loop step", loc);
  if (opts.pipeline < 0) fail(loc, "pipeline stages must be >= 1, got " + std::to_string(opts.pipeline));
  for (const Val& v : init) check_usable(v, loc);
  std::vector<Var*> vars = vars_;
  std::vector<Val> var_init;
  for (Var* v : vars) var_init.push_back(v->cur_);

  std::vector<Value*> operands = {lbv.ir(), ubv.ir(), stv.ir()};
  for (const Val& v : init) operands.push_back(v.ir());
  for (const Val& v : var_init) operands.push_back(v.ir());
  std::vector<NamedAttr> attrs;
  if (opts.pipeline > 0) attrs.push_back({"pipeline", int64_t{opts.pipeline}});
  Op* op = kernel_->create_op(block(), OpKind::For, operands, {}, std::move(attrs), to_loc(loc), 1);
  Block& r = op->region(0);
  Value* iv = kernel_->add_block_arg(r, Type::scalar(ScalarKind::I32));
  std::vector<Val> explicit_args;
  for (const Val& v : init) explicit_args.emplace_back(kernel_->add_block_arg(r, v.type()));
  std::vector<Value*> var_args;
  for (size_t i = 0; i < vars.size(); ++i) {
    var_args.push_back(kernel_->add_block_arg(r, var_init[i].type()));
    vars[i]->cur_ = Val(var_args.back());
  }

  std::vector<Val> outs;
  std::vector<Val> ends;
  {
    BlockScope scope(blocks_, &r);
    try {
      outs = body(Val(iv), explicit_args);
    } catch (...) {
      for (size_t i = 0; i < vars.size(); ++i) vars[i]->cur_ = var_init[i];
      throw;
    }
    if (outs.size() != init.size())
      fail(loc, "the loop body returns " + std::to_string(outs.size()) + " values for " +
                    std::to_string(init.size()) + " carried values");
    for (size_t i = 0; i < outs.size(); ++i) {
      check_usable(outs[i], loc);
      if (outs[i].type() != init[i].type())
        fail(loc, "carried value " + std::to_string(i) + " changes type in the loop body from " +
                      init[i].type().str() + " to " + outs[i].type().str());
    }
    for (size_t i = 0; i < vars.size(); ++i) {
      ends.push_back(vars[i]->cur_);
      vars[i]->cur_ = var_init[i];
      check_usable(ends[i], loc);
      if (ends[i].type() != var_init[i].type())
        fail(loc, carried_type_msg("loop body", var_init[i].type(), ends[i].type()));
    }
  }

  // Drop the Vars the body did not change.
  std::vector<std::pair<Value*, Value*>> dropped;
  size_t base = 3 + init.size();
  for (size_t i = vars.size(); i-- > 0;) {
    if (ends[i].ir() == var_args[i]) {
      replace_all_uses(*kernel_, var_args[i], var_init[i].ir());
      dropped.emplace_back(var_args[i], var_init[i].ir());
      op->operands.erase(op->operands.begin() + static_cast<std::ptrdiff_t>(base + i));
      erase_arg(r, 1 + init.size() + i);
    }
  }
  auto live = [&](Value* v) {  // a yielded value may be a dropped argument (`b = a`)
    for (auto& [from, to] : dropped)
      if (v == from) return to;
    return v;
  };
  std::vector<Var*> kept;
  std::vector<Value*> yields;
  for (const Val& v : outs) yields.push_back(live(v.ir()));
  for (size_t i = 0; i < vars.size(); ++i)
    if (ends[i].ir() != var_args[i]) {
      kept.push_back(vars[i]);
      yields.push_back(live(ends[i].ir()));
    }
  kernel_->create_op(r, OpKind::Yield, yields, {}, {}, to_loc(loc));
  std::vector<Type> types;
  for (const Val& v : init) types.push_back(v.type());
  for (Var* v : kept) types.push_back(v->cur_.type());
  add_results(*kernel_, op, types);
  std::vector<Val> results;
  for (size_t i = 0; i < init.size(); ++i) results.emplace_back(op->results[i]);
  for (size_t i = 0; i < kept.size(); ++i) kept[i]->cur_ = Val(op->results[init.size() + i]);
  return results;
}

std::vector<Val> KernelBuilder::if_then_else(const Operand& cond, const Branch& then_fn,
                                             const Branch* else_fn, const SrcLoc& loc) {
  require_open(loc);
  Val c = detail::value_of(cond, ScalarKind::I1, loc);
  if (!c.type().is_scalar() || c.dtype() != ScalarKind::I1)
    fail(loc, "if_ needs an i1 scalar condition, got " + c.type().str() +
                  detail::scalar_hint(c.type()));
  std::vector<Var*> vars = vars_;
  std::vector<Val> var_init;
  for (Var* v : vars) var_init.push_back(v->cur_);
  Op* op = kernel_->create_op(block(), OpKind::If, {c.ir()}, {}, {}, to_loc(loc), 2);

  auto run = [&](const Branch* fn, Block& b, std::vector<Val>& outs, std::vector<Val>& ends) {
    BlockScope scope(blocks_, &b);
    try {
      if (fn) outs = (*fn)();
    } catch (...) {
      for (size_t i = 0; i < vars.size(); ++i) vars[i]->cur_ = var_init[i];
      throw;
    }
    for (const Val& v : outs) check_usable(v, loc);
    for (size_t i = 0; i < vars.size(); ++i) {
      ends.push_back(vars[i]->cur_);
      vars[i]->cur_ = var_init[i];
      check_usable(ends[i], loc);
    }
  };
  std::vector<Val> t_outs, t_ends, e_outs, e_ends;
  run(&then_fn, op->region(0), t_outs, t_ends);
  run(else_fn, op->region(1), e_outs, e_ends);
  if (!else_fn && !t_outs.empty()) fail(loc, "an if_ that returns a value needs an else branch");
  if (t_outs.size() != e_outs.size())
    fail(loc, "the branches of if_ return " + std::to_string(t_outs.size()) + " and " +
                  std::to_string(e_outs.size()) + " values");
  std::vector<Type> types;
  std::vector<Value*> ty, ey;
  for (size_t i = 0; i < t_outs.size(); ++i) {
    if (t_outs[i].type() != e_outs[i].type())
      fail(loc, "the branches of if_ return different types " + t_outs[i].type().str() + " and " +
                    e_outs[i].type().str());
    types.push_back(t_outs[i].type());
    ty.push_back(t_outs[i].ir());
    ey.push_back(e_outs[i].ir());
  }
  std::vector<Var*> kept;
  for (size_t i = 0; i < vars.size(); ++i) {
    if (t_ends[i].ir() == var_init[i].ir() && e_ends[i].ir() == var_init[i].ir()) continue;
    if (t_ends[i].type() != e_ends[i].type())
      fail(loc, "a Var gets different types in the branches of if_: " + t_ends[i].type().str() +
                    " and " + e_ends[i].type().str());
    if (t_ends[i].type() != var_init[i].type())
      fail(loc, carried_type_msg("branches of if_", var_init[i].type(), t_ends[i].type()));
    kept.push_back(vars[i]);
    types.push_back(t_ends[i].type());
    ty.push_back(t_ends[i].ir());
    ey.push_back(e_ends[i].ir());
  }
  kernel_->create_op(op->region(0), OpKind::Yield, ty, {}, {}, to_loc(loc));
  kernel_->create_op(op->region(1), OpKind::Yield, ey, {}, {}, to_loc(loc));
  add_results(*kernel_, op, types);
  std::vector<Val> results;
  for (size_t i = 0; i < t_outs.size(); ++i) results.emplace_back(op->results[i]);
  for (size_t i = 0; i < kept.size(); ++i) kept[i]->cur_ = Val(op->results[t_outs.size() + i]);
  return results;
}

void KernelBuilder::warp_role_region(const std::string& role, const std::function<void()>& body,
                                     const SrcLoc& loc) {
  require_open(loc);
  if (role != "producer" && role != "consumer")
    fail(loc, "warp_role takes \"producer\" or \"consumer\", got \"" + role + "\"");
  if (!role_.empty()) fail(loc, "warp_role(" + role + ") inside warp_role(" + role_ + "): roles do not nest");
  std::vector<Var*> vars = vars_;
  std::vector<Val> var_init;
  for (Var* v : vars) var_init.push_back(v->cur_);
  Op* op = kernel_->create_op(block(), OpKind::WarpRole, {}, {}, {{"role", role}}, to_loc(loc), 1);
  auto restore = [&] {
    for (size_t i = 0; i < vars.size(); ++i) vars[i]->cur_ = var_init[i];
  };
  std::vector<Val> ends;
  {
    BlockScope scope(blocks_, &op->region(0));
    role_ = role;
    try {
      body();
    } catch (...) {
      role_.clear();
      restore();
      throw;
    }
    role_.clear();
    for (Var* v : vars) ends.push_back(v->cur_);
    restore();
    for (const Val& e : ends) check_usable(e, loc);
  }
  // Outer Vars the region assigned become its results.
  std::vector<Var*> kept;
  std::vector<Value*> yields;
  std::vector<Type> types;
  for (size_t i = 0; i < vars.size(); ++i) {
    if (ends[i].ir() == var_init[i].ir()) continue;
    if (role == "producer")
      fail(loc, "warp_role(producer) assigns a Var declared outside it: a producer hands data on only "
                "through pipes (declare the Var inside the region if it is local)");
    if (ends[i].type() != var_init[i].type())
      fail(loc, carried_type_msg("warp_role region", var_init[i].type(), ends[i].type()));
    kept.push_back(vars[i]);
    yields.push_back(ends[i].ir());
    types.push_back(ends[i].type());
  }
  kernel_->create_op(op->region(0), OpKind::Yield, yields, {}, {}, to_loc(loc));
  add_results(*kernel_, op, types);
  for (size_t i = 0; i < kept.size(); ++i) kept[i]->cur_ = Val(op->results[i]);
}

void KernelBuilder::while_loop(const std::function<Val()>& cond, const std::function<void()>& body,
                               const SrcLoc& loc) {
  require_open(loc);
  std::vector<Var*> vars = vars_;
  std::vector<Val> var_init;
  std::vector<Value*> operands;
  for (Var* v : vars) {
    var_init.push_back(v->cur_);
    operands.push_back(v->cur_.ir());
  }
  Op* op = kernel_->create_op(block(), OpKind::While, operands, {}, {}, to_loc(loc), 2);
  Block& cb = op->region(0);
  Block& bb = op->region(1);
  auto restore = [&] {
    for (size_t i = 0; i < vars.size(); ++i) vars[i]->cur_ = var_init[i];
  };
  std::vector<Value*> cargs, bargs;
  Val c;
  {
    for (size_t i = 0; i < vars.size(); ++i) {
      cargs.push_back(kernel_->add_block_arg(cb, var_init[i].type()));
      vars[i]->cur_ = Val(cargs.back());
    }
    BlockScope scope(blocks_, &cb);
    try {
      c = cond();
    } catch (...) {
      restore();
      throw;
    }
    for (size_t i = 0; i < vars.size(); ++i)
      if (vars[i]->cur_.ir() != cargs[i]) {
        restore();
        fail(loc, "the condition of while_ cannot assign Vars");
      }
    restore();
    check_usable(c, loc);
    if (!c.type().is_scalar() || c.dtype() != ScalarKind::I1)
      fail(loc, "the condition of while_ must be an i1 scalar, got " + c.type().str() +
                    detail::scalar_hint(c.type()));
  }
  kernel_->create_op(cb, OpKind::Yield, {c.ir()}, {}, {}, to_loc(loc));
  std::vector<Val> ends;
  {
    for (size_t i = 0; i < vars.size(); ++i) {
      bargs.push_back(kernel_->add_block_arg(bb, var_init[i].type()));
      vars[i]->cur_ = Val(bargs.back());
    }
    BlockScope scope(blocks_, &bb);
    try {
      body();
    } catch (...) {
      restore();
      throw;
    }
    for (Var* v : vars) ends.push_back(v->cur_);
    restore();
    for (size_t i = 0; i < vars.size(); ++i) {
      check_usable(ends[i], loc);
      if (ends[i].type() != var_init[i].type())
        fail(loc, carried_type_msg("while_ body", var_init[i].type(), ends[i].type()));
    }
  }
  std::vector<std::pair<Value*, Value*>> dropped;
  for (size_t i = vars.size(); i-- > 0;) {
    if (ends[i].ir() != bargs[i]) continue;
    replace_all_uses(*kernel_, cargs[i], var_init[i].ir());
    replace_all_uses(*kernel_, bargs[i], var_init[i].ir());
    dropped.emplace_back(bargs[i], var_init[i].ir());
    op->operands.erase(op->operands.begin() + static_cast<std::ptrdiff_t>(i));
    erase_arg(cb, i);
    erase_arg(bb, i);
  }
  std::vector<Var*> kept;
  std::vector<Value*> yields;
  std::vector<Type> types;
  for (size_t i = 0; i < vars.size(); ++i)
    if (ends[i].ir() != bargs[i]) {
      Value* y = ends[i].ir();
      for (auto& [from, to] : dropped)
        if (y == from) y = to;
      kept.push_back(vars[i]);
      yields.push_back(y);
      types.push_back(ends[i].type());
    }
  kernel_->create_op(bb, OpKind::Yield, yields, {}, {}, to_loc(loc));
  add_results(*kernel_, op, types);
  for (size_t i = 0; i < kept.size(); ++i) kept[i]->cur_ = Val(op->results[i]);
}

Val KernelBuilder::region_combine(OpKind kind, const Val& x, int axis,
                                  const std::function<Val(Val, Val)>& fn, const SrcLoc& loc) {
  const Type& t = x.type();
  Type result = t;
  if (kind == OpKind::ReduceWith) {
    result.shape.erase(result.shape.begin() + axis);
    if (result.shape.empty()) result = Type::scalar(t.elem);
  }
  Op* op = kernel_->create_op(block(), kind, {x.ir()}, {result}, {{"axis", int64_t{axis}}},
                              to_loc(loc), 1);
  Block& r = op->region(0);
  Value* a = kernel_->add_block_arg(r, Type::scalar(t.elem));
  Value* b = kernel_->add_block_arg(r, Type::scalar(t.elem));
  std::vector<Val> before;
  for (Var* v : vars_) before.push_back(v->cur_);
  Val out;
  {
    BlockScope scope(blocks_, &r);
    out = fn(Val(a), Val(b));
    for (size_t i = 0; i < vars_.size() && i < before.size(); ++i)
      if (vars_[i]->cur_.ir() != before[i].ir()) {
        vars_[i]->cur_ = before[i];
        fail(loc, "a combiner function cannot assign Vars");
      }
    check_usable(out, loc);
  }
  if (out.type() != Type::scalar(t.elem))
    fail(loc, "the combiner must return a " + std::string(scalar_name(t.elem)) + " scalar, got " +
                  out.type().str());
  kernel_->create_op(r, OpKind::Yield, {out.ir()}, {}, {}, to_loc(loc));
  return Val(op->result());
}

}  // namespace tessera::lang
