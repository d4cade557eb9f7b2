// The launch grid on the host: evaluates a kernel's grid block (scalar ops over dims,
// constexprs and scalar parameters) for concrete arguments; and, the same way, the reduction
// length of the loop a split-K launch splits.
#include <cmath>
#include <optional>
#include <unordered_map>

#include "cuda/CudaEmitter.h"
#include "ir/Struct.h"
#include "support/Float.h"

namespace tessera {

namespace {

struct Num {
  bool f = false;
  int64_t i = 0;
  double d = 0;
  double as_d() const { return f ? d : static_cast<double>(i); }
  int64_t as_i() const { return f ? static_cast<int64_t>(d) : i; }
};

// The scalar parameters of `k` that `args` gives (by parameter index): where host evaluation starts.
std::unordered_map<const Value*, Num> scalar_params(const Kernel& k, const std::vector<KernelArg>& args) {
  std::unordered_map<const Value*, Num> val;
  for (size_t j = 0; j < k.params.size() && j < args.size(); ++j) {
    const Value* p = k.params[j];
    if (!p->type.is_scalar()) continue;
    Num n;
    if (std::holds_alternative<double>(args[j].scalar)) {
      n.f = true;
      n.d = std::get<double>(args[j].scalar);
    } else {
      n.i = std::get<int64_t>(args[j].scalar);
    }
    if (is_float(p->type.elem) && !n.f) n = Num{true, 0, static_cast<double>(n.i)};
    if (!is_float(p->type.elem) && n.f) n = Num{false, static_cast<int64_t>(n.d), 0};
    val[p] = n;
  }
  return val;
}

// One scalar op of a grid block, or of a kernel body's top level, over dims (`sizes`),
// constexprs and the values `get(op, i)` gives its operands (get throws for one it lacks);
// nullopt for an op of another kind (program ids, loads, tiles).
template <class Get>
std::optional<Num> eval_host_op(const Kernel& k, const Sizes& sizes, const Op& op, Get get) {
  if (op.results.size() != 1) throw TesseraError(op.loc, "cuda backend: unsupported op in the grid");
  ScalarKind t = op.result()->type.elem;
  bool f = is_float(t);
  Num r;
  r.f = f;
  auto fin = [&](Num n) {
    if (f) n.d = round_to_float(t, n.as_d()), n.f = true;
    else n.i = wrap_int(t, n.as_i()), n.f = false;
    return n;
  };
  switch (op.kind) {
    case OpKind::Const: {
      const Attr* a = op.find_attr("value");
      if (a && std::holds_alternative<int64_t>(*a)) r = Num{false, std::get<int64_t>(*a), 0};
      else r = Num{true, 0, op.attr_number("value")};
      break;
    }
    case OpKind::Param: {
      const ConstexprDecl* d = k.find_constexpr(op.attr_string("name"));
      if (!d) throw TesseraError(op.loc, "cuda backend: unknown constexpr '" + op.attr_string("name") + "'");
      r = Num{false, d->value, 0};
      break;
    }
    case OpKind::Dim: {
      const Value* v = op.operand(0);
      int64_t axis = op.attr_int("axis");
      if (!v->type.is_view() || axis < 0 || axis >= v->type.rank())
        throw TesseraError(op.loc, "cuda backend: dim of a non-view or out of range");
      const Dim& d = v->type.shape[static_cast<size_t>(axis)];
      if (!d.is_static() && !sizes.count(d.symbol))
        throw TesseraError(op.loc, "cuda backend: the grid reads dim " + d.symbol + ", which has no size");
      r = Num{false, d.is_static() ? d.value : sizes.at(d.symbol), 0};
      break;
    }
    case OpKind::Add: case OpKind::Sub: case OpKind::Mul: case OpKind::Div: case OpKind::Rem:
    case OpKind::Cdiv: case OpKind::Min: case OpKind::Max: {
      Num a = get(op, 0), b = get(op, 1);
      if (f) {
        double x = a.as_d(), y = b.as_d(), z = 0;
        switch (op.kind) {
          case OpKind::Add: z = x + y; break;
          case OpKind::Sub: z = x - y; break;
          case OpKind::Mul: z = x * y; break;
          case OpKind::Div: z = x / y; break;
          case OpKind::Rem: z = std::fmod(x, y); break;
          case OpKind::Min: z = std::fmin(x, y); break;
          default: z = std::fmax(x, y); break;
        }
        r = Num{true, 0, z};
      } else {
        int64_t x = a.as_i(), y = b.as_i(), z = 0;
        if ((op.kind == OpKind::Div || op.kind == OpKind::Rem || op.kind == OpKind::Cdiv) && y == 0)
          throw TesseraError(op.loc, struct_fault_message(op, StructFault::GridDivZero));
        switch (op.kind) {
          case OpKind::Add: z = static_cast<int64_t>(static_cast<uint64_t>(x) + static_cast<uint64_t>(y)); break;
          case OpKind::Sub: z = static_cast<int64_t>(static_cast<uint64_t>(x) - static_cast<uint64_t>(y)); break;
          case OpKind::Mul: z = static_cast<int64_t>(static_cast<uint64_t>(x) * static_cast<uint64_t>(y)); break;
          case OpKind::Div: z = y == -1 ? -x : x / y; break;
          case OpKind::Cdiv: {
            // The sum wraps in the element type first, as in the interpreter.
            int64_t s = wrap_int(t, static_cast<int64_t>(static_cast<uint64_t>(x) + static_cast<uint64_t>(y) - 1));
            z = y == -1 ? -s : s / y;
            break;
          }
          case OpKind::Rem: z = y == -1 ? 0 : x % y; break;
          case OpKind::Min: z = std::min(x, y); break;
          default: z = std::max(x, y); break;
        }
        r = Num{false, z, 0};
      }
      r = fin(r);
      break;
    }
    case OpKind::Cmp: {
      Num a = get(op, 0), b = get(op, 1);
      double x = a.as_d(), y = b.as_d();
      bool useint = !a.f && !b.f;
      int64_t xi = a.as_i(), yi = b.as_i();
      const std::string& p = op.attr_string("pred");
      bool c = p == "eq" ? (useint ? xi == yi : x == y) : p == "ne" ? (useint ? xi != yi : x != y)
             : p == "lt" ? (useint ? xi < yi : x < y) : p == "le" ? (useint ? xi <= yi : x <= y)
             : p == "gt" ? (useint ? xi > yi : x > y) : (useint ? xi >= yi : x >= y);
      r = Num{false, c ? 1 : 0, 0};
      break;
    }
    case OpKind::Where: r = get(op, 0).as_i() ? get(op, 1) : get(op, 2); break;
    case OpKind::Cast: {
      Num a = get(op, 0);
      if (f) r = fin(Num{true, 0, a.as_d()});
      else if (t == ScalarKind::I1) r = Num{false, a.as_d() != 0 ? 1 : 0, 0};
      else if (a.f) r = Num{false, float_to_int(t, a.d), 0};
      else r = fin(a);
      break;
    }
    case OpKind::Bitcast: {
      Num a = get(op, 0);
      ScalarKind from = op.operand(0)->type.elem;
      if (scalar_bits(from) != scalar_bits(t) || from == ScalarKind::I1 || t == ScalarKind::I1)
        throw TesseraError(op.loc, "bitcast needs element types of the same width");
      double d = 0;
      int64_t i = 0;
      bitcast_scalar(from, t, a.as_d(), a.as_i(), &d, &i);
      r = f ? fin(Num{true, 0, d}) : Num{false, i, 0};
      break;
    }
    case OpKind::Neg: r = fin(get(op, 0).f ? Num{true, 0, -get(op, 0).d} : Num{false, -get(op, 0).i, 0}); break;
    default:
      return std::nullopt;
  }
  return r;
}

}  // namespace

std::array<int64_t, 3> cuda_grid_size(const Kernel& k, const std::vector<KernelArg>& args) {
  return cuda_grid_size(k, bind_dims(k, args), args);
}

std::array<int64_t, 3> cuda_grid_size(const Kernel& k, const Sizes& sizes, const std::vector<KernelArg>& args) {
  if (!k.grid) throw TesseraError(k.loc, "cuda backend: kernel @" + k.name + " has no grid");
  std::unordered_map<const Value*, Num> val = scalar_params(k, args);
  auto get = [&](const Op& op, size_t i) {
    auto it = val.find(op.operand(i));
    if (it == val.end()) throw TesseraError(op.loc, "cuda backend: grid operand is not a scalar computed in the grid");
    return it->second;
  };
  for (const auto& up : k.grid->ops) {
    const Op& op = *up;
    if (op.kind == OpKind::Yield) {
      std::array<int64_t, 3> g{1, 1, 1};
      if (op.operands.empty() || op.operands.size() > 3)
        throw TesseraError(op.loc, "cuda backend: the grid must yield 1 to 3 sizes");
      for (size_t i = 0; i < op.operands.size(); ++i) {
        g[i] = get(op, i).as_i();
        if (g[i] < 0) throw TesseraError(op.loc, grid_negative_message(k, static_cast<int>(i)));  // 0: no programs
      }
      return g;
    }
    std::optional<Num> r = eval_host_op(k, sizes, op, get);
    if (!r) throw TesseraError(op.loc, "cuda backend: op '" + std::string(op.name()) + "' cannot be evaluated in the grid");
    val[op.result()] = *r;
  }
  throw TesseraError(k.loc, "cuda backend: the grid block has no yield");
}

int64_t cuda_split_loop_k(const Kernel& k, const Sizes& sizes, const std::vector<KernelArg>& args) {
  if (!k.body) return -1;
  std::unordered_map<const Value*, Num> val = scalar_params(k, args);
  struct Unknown {};
  auto get = [&](const Op& op, size_t i) {
    auto it = val.find(op.operand(i));
    if (it == val.end()) throw Unknown{};
    return it->second;
  };
  for (const auto& up : k.body->ops) {
    const Op& op = *up;
    if (op.kind == OpKind::For && !op.regions.empty()) {
      const Op* dot = nullptr;
      walk(*op.regions[0], [&](Op& o) {
        if (!dot && o.kind == OpKind::Dot) dot = &o;
      });
      if (!dot) continue;
      // The dot's reduction length per step: its first operand's last dim.
      const Type& a = dot->operand(0)->type;
      if (a.rank() < 1 || !a.shape.back().is_static()) return -1;
      try {
        const int64_t lo = get(op, 0).as_i(), hi = get(op, 1).as_i(), step = get(op, 2).as_i();
        return (step > 0 && hi > lo ? (hi - lo + step - 1) / step : 0) * a.shape.back().value;
      } catch (const Unknown&) {
        return -1;
      }
    }
    if (op.results.size() != 1 || !op.result()->type.is_scalar()) continue;
    try {
      // (program ids, loads, tiles: not known before the programs run)
      if (std::optional<Num> r = eval_host_op(k, sizes, op, get)) val[op.result()] = *r;
    } catch (const Unknown&) {   // an operand computed per program (program_id) or in a tile
    } catch (const TesseraError&) {  // a dim without a size, a division by zero
    }
  }
  return -1;
}

}  // namespace tessera
