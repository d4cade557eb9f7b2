// bind-constexprs: give every constexpr its value. After this pass the kernel has no `param`
// ops and no symbolic tile dims, so later passes and backends see static shapes only.
#include <algorithm>

#include "ir/IR.h"
#include "passes/Passes.h"

namespace tessera {

namespace {

std::string list_str(const std::vector<int64_t>& v) { return attr_str(v); }

void bind_type(const Kernel& k, Type& t) {
  // View dims are runtime sizes, not constexprs: only tiles, buffers and pipes carry
  // constexpr dims.
  if (!t.has_static_dims()) return;
  for (Dim& d : t.shape)
    if (!d.is_static())
      if (const ConstexprDecl* c = k.find_constexpr(d.symbol)) d = Dim(c->value);
}

void bind_block(Kernel& k, Block& b) {
  for (Value* a : b.args)
    if (a) bind_type(k, a->type);
  for (auto& op : b.ops) {
    if (!op) continue;
    for (Value* r : op->results)
      if (r) bind_type(k, r->type);
    if (op->kind == OpKind::Param) {
      const Attr* n = op->find_attr("name");
      const ConstexprDecl* c =
          n && std::holds_alternative<std::string>(*n) ? k.find_constexpr(std::get<std::string>(*n)) : nullptr;
      if (!c)
        throw TesseraError(op->loc, "'param' names " + (n ? attr_str(*n) : std::string("nothing")) +
                                        ", which is not a constexpr of kernel '" + k.name + "'");
      op->kind = OpKind::Const;
      op->attrs = {NamedAttr{"value", c->value}};
    }
    for (auto& r : op->regions)
      if (r) bind_block(k, *r);
  }
}

}  // namespace

void bind_constexprs_in_place(Kernel& k, const ConstexprConfig& config) {
  for (const auto& [name, value] : config) {
    ConstexprDecl* c = k.find_constexpr(name);
    if (!c) {
      std::string have;
      for (const auto& d : k.constexprs) have += (have.empty() ? "" : ", ") + d.name;
      throw TesseraError(k.loc, "unknown constexpr '" + name + "' for kernel '" + k.name + "' (it has: " +
                                    (have.empty() ? "none" : have) + ")");
    }
    if (std::string range = constexpr_range_error(name, value); !range.empty())
      throw TesseraError(c->loc.known() ? c->loc : k.loc, range);
    if (!c->candidates.empty() && std::find(c->candidates.begin(), c->candidates.end(), value) == c->candidates.end())
      throw TesseraError(c->loc.known() ? c->loc : k.loc, "constexpr " + name + " = " + std::to_string(value) +
                                                               " is not one of its candidates " + list_str(c->candidates));
    c->value = value;
  }
  // Defaults are checked too: a default outside the candidates is never a valid binding.
  for (const ConstexprDecl& c : k.constexprs)
    if (!c.candidates.empty() && std::find(c.candidates.begin(), c.candidates.end(), c.value) == c.candidates.end())
      throw TesseraError(c.loc.known() ? c.loc : k.loc, "constexpr " + c.name + " = " + std::to_string(c.value) +
                                                             " is not one of its candidates " + list_str(c.candidates));
  if (k.grid) bind_block(k, *k.grid);
  if (k.body) bind_block(k, *k.body);
}

std::unique_ptr<Kernel> bind_constexprs(const Kernel& k, const ConstexprConfig& config) {
  auto out = k.clone();
  bind_constexprs_in_place(*out, config);
  return out;
}

}  // namespace tessera
