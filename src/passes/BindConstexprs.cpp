// bind-constexprs: give every constexpr its value. After this pass the kernel has no `param`
// ops and no symbolic tile dims, so later passes and backends see static shapes only.
#include <algorithm>

#include "ir/IR.h"
#include "passes/Passes.h"

namespace tessera {

namespace {

std::string list_str(const std::vector<int64_t>& v) { return attr_str(v); }

// Folds each constexpr dim and shape expression to its value. A name that is not a
// constexpr is left for the verifier to report; an expression that has no value (a `/` that
// does not divide evenly, a zero divisor) or a non-positive one is an error at `loc`: with the
// expression folded away, the verifier could no longer say where the size came from.
void bind_type(const Kernel& k, Type& t, const Loc& loc) {
  // View dims are runtime sizes, not constexprs: only tiles, buffers and pipes carry
  // constexpr dims.
  if (!t.has_static_dims()) return;
  for (Dim& d : t.shape) {
    if (d.is_static()) continue;
    DimValue v = eval_dim(d, [&](const std::string& n) -> std::optional<int64_t> {
      if (const ConstexprDecl* c = k.find_constexpr(n)) return c->value;
      return std::nullopt;
    });
    if (v.unknown_name) continue;
    std::string with;
    for (const std::string& n : dim_names(d))
      with += (with.empty() ? " with " : ", ") + n + " = " + std::to_string(k.find_constexpr(n)->value);
    if (!v.error.empty())
      throw TesseraError(loc, "tile dim " + d.symbol + with + ": " + v.error);
    if (v.value <= 0)
      throw TesseraError(loc, "tile dim " + d.symbol + " is " + std::to_string(v.value) + with +
                                  "; tile dims must be positive");
    d = Dim(v.value);
  }
}

void bind_block(Kernel& k, Block& b, const Loc& loc) {
  for (Value* a : b.args)
    if (a) bind_type(k, a->type, loc);
  for (auto& op : b.ops) {
    if (!op) continue;
    for (Value* r : op->results)
      if (r) bind_type(k, r->type, op->loc);
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
      if (r) bind_block(k, *r, op->loc);
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
  if (k.grid) bind_block(k, *k.grid, k.loc);
  if (k.body) bind_block(k, *k.body, k.loc);
}

std::unique_ptr<Kernel> bind_constexprs(const Kernel& k, const ConstexprConfig& config) {
  auto out = k.clone();
  bind_constexprs_in_place(*out, config);
  return out;
}

}  // namespace tessera
