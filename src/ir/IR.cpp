#include "ir/IR.h"

#include <cmath>
#include <charconv>
#include <unordered_map>

namespace tessera {

std::string attr_str(const Attr& a) {
  struct V {
    std::string operator()(int64_t v) const { return std::to_string(v); }
    std::string operator()(double v) const {
      if (std::isnan(v)) return "nan";
      if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
      char buf[64];
      auto r = std::to_chars(buf, buf + sizeof buf, v);  // shortest text that reads back exactly
      std::string s(buf, r.ptr);
      if (s.find_first_of(".eE") == std::string::npos) s += ".0";
      return s;
    }
    std::string operator()(const std::string& v) const {
      std::string out = "\"";
      for (char c : v) {
        switch (c) {
          case '"': out += "\\\""; break;
          case '\\': out += "\\\\"; break;
          case '\n': out += "\\n"; break;
          case '\t': out += "\\t"; break;
          default: out += c;
        }
      }
      return out + "\"";
    }
    std::string operator()(const std::vector<int64_t>& v) const {
      std::string out = "[";
      for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
      return out + "]";
    }
    std::string operator()(bool v) const { return v ? "true" : "false"; }
  };
  return std::visit(V{}, a);
}

Op* Block::terminator() const {
  if (ops.empty() || ops.back()->kind != OpKind::Yield) return nullptr;
  return ops.back().get();
}

const Attr* Op::find_attr(std::string_view n) const {
  for (const auto& a : attrs)
    if (a.name == n) return &a.value;
  return nullptr;
}

namespace {
[[noreturn]] void bad_attr(const Op& op, std::string_view n, const char* want) {
  throw TesseraError(op.loc, std::string(op.name()) + " needs attribute '" + std::string(n) +
                                 "' of kind " + want);
}
}  // namespace

int64_t Op::attr_int(std::string_view n) const {
  const Attr* a = find_attr(n);
  if (!a || !std::holds_alternative<int64_t>(*a)) bad_attr(*this, n, "integer");
  return std::get<int64_t>(*a);
}

double Op::attr_number(std::string_view n) const {
  const Attr* a = find_attr(n);
  if (a && std::holds_alternative<int64_t>(*a)) return static_cast<double>(std::get<int64_t>(*a));
  if (!a || !std::holds_alternative<double>(*a)) bad_attr(*this, n, "number");
  return std::get<double>(*a);
}

const std::string& Op::attr_string(std::string_view n) const {
  const Attr* a = find_attr(n);
  if (!a || !std::holds_alternative<std::string>(*a)) bad_attr(*this, n, "string");
  return std::get<std::string>(*a);
}

const std::vector<int64_t>& Op::attr_ints(std::string_view n) const {
  const Attr* a = find_attr(n);
  if (!a || !std::holds_alternative<std::vector<int64_t>>(*a)) bad_attr(*this, n, "integer list");
  return std::get<std::vector<int64_t>>(*a);
}

bool Op::attr_bool(std::string_view n) const {
  const Attr* a = find_attr(n);
  if (!a || !std::holds_alternative<bool>(*a)) bad_attr(*this, n, "bool");
  return std::get<bool>(*a);
}

void Op::set_attr(std::string_view n, Attr v) {
  for (auto& a : attrs)
    if (a.name == n) {
      a.value = std::move(v);
      return;
    }
  attrs.push_back({std::string(n), std::move(v)});
}

Kernel::Kernel() : grid(std::make_unique<Block>()), body(std::make_unique<Block>()) {}

Value* Kernel::new_value(Type t, std::string name) {
  values_.push_back(std::make_unique<Value>());
  Value* v = values_.back().get();
  v->type = std::move(t);
  v->name = std::move(name);
  return v;
}

Value* Kernel::add_param(Type t, std::string name) {
  Value* v = new_value(std::move(t), std::move(name));
  v->index = static_cast<int>(params.size());
  params.push_back(v);
  return v;
}

Value* Kernel::add_block_arg(Block& b, Type t, std::string name) {
  Value* v = new_value(std::move(t), std::move(name));
  v->block = &b;
  v->index = static_cast<int>(b.args.size());
  b.args.push_back(v);
  return v;
}

Op* Kernel::create_op(Block& b, OpKind kind, std::vector<Value*> operands,
                      const std::vector<Type>& result_types, std::vector<NamedAttr> attrs, Loc loc,
                      size_t num_regions, const Op* before) {
  auto op = std::make_unique<Op>();
  op->kind = kind;
  op->loc = std::move(loc);
  op->operands = std::move(operands);
  op->attrs = std::move(attrs);
  op->parent = &b;
  for (size_t i = 0; i < result_types.size(); ++i) {
    Value* r = new_value(result_types[i]);
    r->def = op.get();
    r->index = static_cast<int>(i);
    op->results.push_back(r);
  }
  for (size_t i = 0; i < num_regions; ++i) {
    op->regions.push_back(std::make_unique<Block>());
    op->regions.back()->parent = op.get();
  }
  Op* raw = op.get();
  auto pos = b.ops.end();
  if (before)
    for (auto it = b.ops.begin(); it != b.ops.end(); ++it)
      if (it->get() == before) pos = it;
  b.ops.insert(pos, std::move(op));
  return raw;
}

const ConstexprDecl* Kernel::find_constexpr(std::string_view n) const {
  for (const auto& c : constexprs)
    if (c.name == n) return &c;
  return nullptr;
}

ConstexprDecl* Kernel::find_constexpr(std::string_view n) {
  for (auto& c : constexprs)
    if (c.name == n) return &c;
  return nullptr;
}

void Kernel::set_constexpr(std::string_view n, int64_t value) {
  if (ConstexprDecl* d = find_constexpr(n)) {
    d->value = value;
    return;
  }
  constexprs.push_back({std::string(n), value, {value}, loc});
}

std::vector<Value*> Kernel::view_params() const {
  std::vector<Value*> out;
  for (Value* p : params)
    if (p->type.is_view()) out.push_back(p);
  return out;
}

namespace {
void clone_block(Kernel& dst, const Block& src, Block& out, std::unordered_map<const Value*, Value*>& map) {
  for (const Value* a : src.args) map[a] = dst.add_block_arg(out, a->type, a->name);
  for (const auto& op : src.ops) {
    std::vector<Value*> operands;
    for (const Value* v : op->operands) {
      auto it = map.find(v);
      operands.push_back(it == map.end() ? const_cast<Value*>(v) : it->second);
    }
    std::vector<Type> types;
    for (const Value* r : op->results) types.push_back(r->type);
    Op* c = dst.create_op(out, op->kind, std::move(operands), types, op->attrs, op->loc,
                          op->regions.size());
    for (size_t i = 0; i < op->results.size(); ++i) {
      c->results[i]->name = op->results[i]->name;
      map[op->results[i]] = c->results[i];
    }
    for (size_t i = 0; i < op->regions.size(); ++i) clone_block(dst, *op->regions[i], *c->regions[i], map);
  }
}
}  // namespace

std::unique_ptr<Kernel> Kernel::clone() const {
  auto k = std::make_unique<Kernel>();
  k->name = name;
  k->loc = loc;
  k->constexprs = constexprs;
  std::unordered_map<const Value*, Value*> map;
  for (const Value* p : params) map[p] = k->add_param(p->type, p->name);
  clone_block(*k, *grid, *k->grid, map);
  clone_block(*k, *body, *k->body, map);
  return k;
}

Kernel* Module::find(std::string_view n) const {
  for (const auto& k : kernels)
    if (k->name == n) return k.get();
  return nullptr;
}

void walk(Block& b, const std::function<void(Op&)>& fn) {
  for (auto& op : b.ops) {
    fn(*op);
    for (auto& r : op->regions) walk(*r, fn);
  }
}

void walk(Kernel& k, const std::function<void(Op&)>& fn) {
  walk(*k.grid, fn);
  walk(*k.body, fn);
}

void replace_all_uses(Kernel& k, Value* from, Value* to) {
  walk(k, [&](Op& op) {
    for (auto& v : op.operands)
      if (v == from) v = to;
  });
}

std::optional<int64_t> const_int(const Value* v) {
  if (!v || !v->def || v->def->kind != OpKind::Const || !v->type.is_scalar() || is_float(v->type.elem)) return std::nullopt;
  const Attr* a = v->def->find_attr("value");
  if (!a || !std::holds_alternative<int64_t>(*a)) return std::nullopt;
  return std::get<int64_t>(*a);
}

bool const_positive(const Value* v) {
  std::optional<int64_t> c = const_int(v);
  return c && *c > 0;
}

bool has_runtime_subtile_index(const Op& op) {
  if (op.kind != OpKind::ExtractTile && op.kind != OpKind::InsertTile) return false;
  for (size_t i = op.kind == OpKind::ExtractTile ? 1 : 2; i < op.operands.size(); ++i)  // (after the tile[s])
    if (!const_int(op.operands[i])) return true;
  return false;
}

bool may_divide_by_zero(const Op& op) {
  if (op.kind != OpKind::Div && op.kind != OpKind::Rem && op.kind != OpKind::Cdiv) return false;
  if (is_float(op.result()->type.elem)) return false;
  const Value* d = op.operand(1);
  if (d->def && d->def->kind == OpKind::Splat) d = d->def->operand(0);
  const std::optional<int64_t> c = const_int(d);
  return !c || *c == 0;
}

std::string constexpr_range_error(const std::string& name, int64_t value) {
  if (value >= INT32_MIN && value <= INT32_MAX) return {};
  return "constexpr " + name + " = " + std::to_string(value) +
         " is outside the i32 range [-2147483648, 2147483647] that constexprs take";
}

}  // namespace tessera
