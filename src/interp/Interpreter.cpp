// The interpreter's driver: argument binding, the grid, program instances and structured
// control flow. Op evaluation per concern is in Elementwise/Shape/Memory/Reduce.cpp.
#include "interp/Interpreter.h"

#include <cmath>

#include "interp/Exec.h"
#include "ir/Struct.h"
#include "support/Float.h"

namespace tessera {

namespace interp {

Machine::Machine(const Kernel& k, std::vector<KernelArg>& args, const InterpOptions& opts)
    : k_(k), args_(args), opts_(opts) {
  if (!k.grid || !k.body) throw TesseraError(k.loc, "kernel '" + k.name + "' has no grid or body");
  check_bound(*k.grid);
  check_bound(*k.body);
  sizes_ = bind_dims(k, args);
  for (const Value* p : k.params) slot_.emplace(p, static_cast<int>(slot_.size()));
  number(*k.grid);
  number(*k.body);
  env_.resize(slot_.size());
  defined_.assign(slot_.size(), 0);
  for (size_t i = 0; i < k.params.size(); ++i) {
    const Value* p = k.params[i];
    if (p->type.is_view()) {
      ViewArg v;
      v.param = p;
      v.tensor = args[i].tensor;
      v.shape = v.tensor->shape;
      v.strides.assign(v.shape.size(), 1);
      for (size_t d = v.shape.size(); d-- > 1;) v.strides[d - 1] = v.strides[d] * v.shape[d];
      views_.emplace(p, std::move(v));
      continue;
    }
    if (!p->type.is_scalar())
      throw TesseraError(k.loc, "parameter '" + p->name + "' of kernel '" + k.name + "' has type " +
                                    p->type.str() + ", which the interpreter cannot pass");
    RValue r = RValue::make(p->type.elem, true, {});
    if (auto* iv = std::get_if<int64_t>(&args[i].scalar)) r.set_i(0, *iv);
    else r.set_f(0, std::get<double>(args[i].scalar));
    set(p, std::move(r));
  }
}

void Machine::number(const Block& b) {
  for (const Value* a : b.args) slot_.emplace(a, static_cast<int>(slot_.size()));
  for (const auto& op : b.ops) {
    for (const Value* r : op->results) slot_.emplace(r, static_cast<int>(slot_.size()));
    for (const auto& reg : op->regions) number(*reg);
  }
}

// A kernel must be bound before it runs: every tile dim static and no `param` op left.
void Machine::check_bound(const Block& b) {
  for (const auto& op : b.ops) {
    if (op->kind == OpKind::Param) {
      std::string n = op->has_attr("name") ? op->attr_string("name") : "?";
      throw TesseraError(op->loc, "kernel '" + k_.name + "' is not bound: constexpr '" + n +
                                      "' is still a param op; bind its constexprs before running it");
    }
    auto check_type = [&](const Type& t) {
      for (const Dim& d : t.shape)
        if (t.has_static_dims() && !d.is_static())
          throw TesseraError(op->loc, "kernel '" + k_.name + "' is not bound: " + t.str() +
                                          " has the symbolic dim '" + d.symbol +
                                          "'; bind its constexprs before running it");
    };
    for (const Value* r : op->results) check_type(r->type);
    for (const auto& reg : op->regions) {
      for (const Value* a : reg->args) check_type(a->type);
      check_bound(*reg);
    }
  }
}

const RValue& Machine::val(const Op& op, const Value* v) const {
  auto it = slot_.find(v);
  if (it == slot_.end() || !defined_[it->second])
    throw TesseraError(op.loc, std::string(op.name()) + " uses a value that has no definition" +
                                   (v && !v->name.empty() ? " (%" + v->name + ")" : std::string()));
  return env_[it->second];
}

void Machine::set(const Value* v, RValue r) {
  auto it = slot_.find(v);
  if (it == slot_.end()) throw TesseraError("interpreter: value outside the kernel");
  env_[it->second] = std::move(r);
  defined_[it->second] = 1;
}

ViewArg& Machine::view(const Op& op, const Value* v) {
  auto it = views_.find(v);
  if (it == views_.end())
    throw TesseraError(op.loc, std::string(op.name()) + " needs a view parameter as its first operand");
  return it->second;
}

std::vector<RValue> Machine::run_region(const Block& b, std::vector<RValue> args) {
  if (args.size() != b.args.size())
    throw TesseraError(b.parent ? b.parent->loc : Loc{},
                       "region takes " + std::to_string(b.args.size()) + " arguments, got " +
                           std::to_string(args.size()));
  for (size_t i = 0; i < args.size(); ++i) set(b.args[i], std::move(args[i]));
  run_ops(b);
  std::vector<RValue> out;
  const Op* y = b.terminator();
  if (!y) throw TesseraError(b.parent ? b.parent->loc : Loc{}, "region does not end in yield");
  for (const Value* v : y->operands) out.push_back(val(*y, v));
  return out;
}

void Machine::run_ops(const Block& b) {
  for (const auto& op : b.ops)
    if (op->kind != OpKind::Yield) exec(*op);
}

double Machine::combine_f(const Op& op, ScalarKind elem, double a, double b) {
  RValue ra = RValue::make(elem, true, {}), rb = RValue::make(elem, true, {});
  ra.f[0] = a;
  rb.f[0] = b;
  auto out = run_region(op.region(0), {std::move(ra), std::move(rb)});
  if (out.size() != 1 || !out[0].floats() || out[0].numel() != 1)
    throw TesseraError(op.loc, std::string(op.name()) + " combiner must yield one " +
                                   std::string(scalar_name(elem)) + " scalar");
  return round_to_float(elem, out[0].f[0]);
}

int64_t Machine::combine_i(const Op& op, ScalarKind elem, int64_t a, int64_t b) {
  RValue ra = RValue::make(elem, true, {}), rb = RValue::make(elem, true, {});
  ra.i[0] = a;
  rb.i[0] = b;
  auto out = run_region(op.region(0), {std::move(ra), std::move(rb)});
  if (out.size() != 1 || out[0].floats() || out[0].numel() != 1)
    throw TesseraError(op.loc, std::string(op.name()) + " combiner must yield one " +
                                   std::string(scalar_name(elem)) + " scalar");
  return out[0].i[0];
}

namespace {

int64_t scalar_int(const Machine& m, const Op& op, size_t i) {
  const RValue& v = m.val(op, op.operand(i));
  if (v.numel() != 1 || v.floats())
    throw TesseraError(op.loc, std::string(op.name()) + " operand " + std::to_string(i) +
                                   " must be an integer scalar");
  return v.i[0];
}

int axis_attr(const Op& op) {
  int64_t a = op.attr_int("axis");
  if (a < 0 || a > 2)
    throw TesseraError(op.loc, std::string(op.name()) + " axis " + std::to_string(a) +
                                   " is not in 0..2");
  return static_cast<int>(a);
}

}  // namespace

void Machine::exec(const Op& op) {
  switch (op.info().cls) {
    case OpClass::Unary:
    case OpClass::Binary:
    case OpClass::Compare:
    case OpClass::Ternary:
    case OpClass::Cast: exec_elementwise(*this, op); return;
    case OpClass::Create:
    case OpClass::Shape: exec_shape(*this, op); return;
    case OpClass::Memory: exec_memory(*this, op); return;
    case OpClass::Dot:
    case OpClass::Reduce:
    case OpClass::Scan: exec_reduce(*this, op); return;
    case OpClass::Sort: exec_sort(*this, op); return;
    case OpClass::Control: exec_control(op); return;
    case OpClass::Struct: exec_struct(*this, op); return;
    case OpClass::Raw: {
      std::string n = op.has_attr("name") ? op.attr_string("name") : "?";
      throw TesseraError(op.loc, "raw op '" + n + "' cannot run on the interpreter");
    }
    case OpClass::Terminator:
      throw TesseraError(op.loc, "yield is only allowed as the last op of a region");
    case OpClass::Constant:
    case OpClass::Index: break;
  }
  if (op.results.size() != 1 || !op.result()->type.is_scalar())
    throw TesseraError(op.loc, std::string(op.name()) + " must have one scalar result");
  const Type& rt = op.result()->type;
  RValue r = RValue::make(rt.elem, true, {});
  switch (op.kind) {
    case OpKind::Const: {
      const Attr* a = op.find_attr("value");
      if (!a) throw TesseraError(op.loc, "const needs attribute 'value'");
      if (auto* iv = std::get_if<int64_t>(a)) {
        r.set_i(0, *iv);
      } else if (auto* dv = std::get_if<double>(a)) {
        if (!is_float(rt.elem))
          throw TesseraError(op.loc, "const of integer type " + std::string(scalar_name(rt.elem)) +
                                         " has a float value");
        r.f[0] = round_to_float(rt.elem, *dv);
      } else {
        throw TesseraError(op.loc, "const needs a number 'value'");
      }
      break;
    }
    case OpKind::Param: {
      std::string n = op.has_attr("name") ? op.attr_string("name") : "?";
      throw TesseraError(op.loc, "kernel '" + k_.name + "' is not bound: constexpr '" + n +
                                     "' is still a param op; bind its constexprs before running it");
    }
    case OpKind::ProgramId: r.set_i(0, pid_[axis_attr(op)]); break;
    case OpKind::NumPrograms: r.set_i(0, nprog_[axis_attr(op)]); break;
    case OpKind::Dim: {
      ViewArg& v = view(op, op.operand(0));
      int64_t a = op.attr_int("axis");
      if (a < 0 || a >= static_cast<int64_t>(v.shape.size()))
        throw TesseraError(op.loc, "dim axis " + std::to_string(a) + " is out of range for view '" +
                                       v.param->name + "' of rank " + std::to_string(v.shape.size()));
      r.set_i(0, v.shape[a]);
      break;
    }
    default: throw TesseraError(op.loc, "interpreter: unexpected op " + std::string(op.name()));
  }
  set(op.result(), std::move(r));
}

void Machine::exec_control(const Op& op) {
  auto set_results = [&](std::vector<RValue> vals) {
    if (vals.size() != op.results.size())
      throw TesseraError(op.loc, std::string(op.name()) + " region yields " +
                                     std::to_string(vals.size()) + " values for " +
                                     std::to_string(op.results.size()) + " results");
    for (size_t i = 0; i < vals.size(); ++i) set(op.results[i], std::move(vals[i]));
  };
  switch (op.kind) {
    case OpKind::For: {
      int64_t lb = scalar_int(*this, op, 0), ub = scalar_int(*this, op, 1),
              step = scalar_int(*this, op, 2);
      if (step <= 0) throw TesseraError(op.loc, struct_fault_message(op, StructFault::ForStep));
      std::vector<RValue> carried;
      for (size_t i = 3; i < op.operands.size(); ++i) carried.push_back(val(op, op.operand(i)));
      const Block& body = op.region(0);
      ScalarKind iv_kind = body.args.empty() ? ScalarKind::I32 : body.args[0]->type.elem;
      for (int64_t iv = lb; iv < ub; iv += step) {
        std::vector<RValue> args;
        args.reserve(carried.size() + 1);
        RValue ivv = RValue::make(iv_kind, true, {});
        ivv.set_i(0, iv);
        args.push_back(std::move(ivv));
        for (auto& c : carried) args.push_back(std::move(c));
        carried = run_region(body, std::move(args));
      }
      set_results(std::move(carried));
      return;
    }
    case OpKind::If: {
      int64_t c = scalar_int(*this, op, 0);
      set_results(run_region(op.region(c ? 0 : 1), {}));
      return;
    }
    case OpKind::While: {
      std::vector<RValue> carried;
      for (const Value* v : op.operands) carried.push_back(val(op, v));
      // A loop that never ends would hang `tessera run`: past the limit it is reported.
      for (int64_t iter = 0;; ++iter) {
        if (iter == opts_.max_while_iterations)
          throw TesseraError(op.loc, while_limit_message(iter));
        auto cond = run_region(op.region(0), carried);
        if (cond.size() != 1 || cond[0].floats() || cond[0].numel() != 1)
          throw TesseraError(op.loc, "while condition region must yield one i1 scalar");
        if (!cond[0].i[0]) break;
        carried = run_region(op.region(1), std::move(carried));
      }
      set_results(std::move(carried));
      return;
    }
    default: throw TesseraError(op.loc, "interpreter: unexpected op " + std::string(op.name()));
  }
}

std::array<int64_t, 3> Machine::grid() {
  // The grid block: its yields are the grid sizes.
  std::vector<RValue> g = run_region(*k_.grid, {});
  if (g.empty() || g.size() > 3)
    throw TesseraError(k_.loc, "grid of kernel '" + k_.name + "' yields " + std::to_string(g.size()) +
                                   " sizes, expected 1 to 3");
  for (size_t a = 0; a < g.size(); ++a) {
    if (g[a].floats() || g[a].numel() != 1)
      throw TesseraError(k_.loc, "grid size " + std::to_string(a) + " is not an integer scalar");
    int64_t n = g[a].i[0];  // 0: no programs run
    if (n < 0) throw TesseraError(k_.grid->terminator()->loc, grid_negative_message(k_, static_cast<int>(a)));
    nprog_[a] = n;
  }
  return {nprog_[0], nprog_[1], nprog_[2]};
}

void Machine::run() {
  grid();
  int64_t programs = 0;
  if (__builtin_mul_overflow(nprog_[0] * nprog_[1], nprog_[2], &programs))
    throw TesseraError(k_.grid->terminator()->loc, grid_too_large_message(k_));
  for (int64_t z = 0; z < nprog_[2]; ++z)
    for (int64_t y = 0; y < nprog_[1]; ++y)
      for (int64_t x = 0; x < nprog_[0]; ++x) {
        pid_[0] = x;
        pid_[1] = y;
        pid_[2] = z;
        run_ops(*k_.body);
        end_program_struct(*this);
      }
}

}  // namespace interp

void run_interp(const Kernel& bound_kernel, std::vector<KernelArg>& args, const InterpOptions& opts) {
  interp::Machine m(bound_kernel, args, opts);
  m.run();
}

std::array<int64_t, 3> interp_grid(const Kernel& bound_kernel, std::vector<KernelArg>& args) {
  interp::Machine m(bound_kernel, args, {});
  return m.grid();
}

}  // namespace tessera
