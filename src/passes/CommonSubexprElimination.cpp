// cse: an op that computes what an op before it (in the same block or an enclosing one)
// already computed is replaced by that op's results. Only ops without memory effects or
// regions take part: two loads of one address may differ across a store.
#include <algorithm>
#include <map>
#include <unordered_map>

#include "ir/IR.h"
#include "passes/Passes.h"

namespace tessera {

namespace {

bool cse_candidate(const Op& op) {
  if (!op.regions.empty() || op.results.empty()) return false;
  switch (op.info().cls) {
    case OpClass::Memory:
    case OpClass::Control:
    case OpClass::Terminator:
    case OpClass::Raw:
    case OpClass::Struct:  // storage and its reads: two allocs or two pops are never the same
      return false;
    default:
      return true;
  }
}

// Everything that makes two ops compute the same thing, as one comparable key.
struct Key {
  OpKind kind;
  std::vector<const Value*> operands;
  std::vector<std::pair<std::string, std::string>> attrs;
  std::vector<std::string> types;
  auto operator<=>(const Key&) const = default;
};

Key key_of(const Op& op) {
  Key key{op.kind, {}, {}, {}};
  for (const Value* v : op.operands) key.operands.push_back(v);
  for (const NamedAttr& a : op.attrs) key.attrs.emplace_back(a.name, attr_str(a.value));
  std::sort(key.attrs.begin(), key.attrs.end());
  for (const Value* r : op.results) key.types.push_back(r->type.str());
  return key;
}

class Cse {
 public:
  int64_t run(Kernel& k) {
    // The grid and the body are separate scopes: grid values are not visible in the body.
    std::vector<std::map<Key, Op*>> scopes;
    block(*k.grid, scopes);
    block(*k.body, scopes);
    return removed_;
  }

 private:
  std::unordered_map<Value*, Value*> replaced_;
  int64_t removed_ = 0;

  void block(Block& b, std::vector<std::map<Key, Op*>>& scopes) {
    scopes.emplace_back();
    for (size_t i = 0; i < b.ops.size();) {
      Op& op = *b.ops[i];
      // Uses always follow definitions in this walk, so rewriting operands here is complete.
      for (Value*& v : op.operands)
        if (auto it = replaced_.find(v); it != replaced_.end()) v = it->second;
      if (cse_candidate(op)) {
        Key key = key_of(op);
        Op* prior = nullptr;
        for (auto s = scopes.rbegin(); s != scopes.rend() && !prior; ++s)
          if (auto it = s->find(key); it != s->end()) prior = it->second;
        if (prior) {
          for (size_t r = 0; r < op.results.size(); ++r) replaced_[op.results[r]] = prior->results[r];
          b.ops.erase(b.ops.begin() + static_cast<std::ptrdiff_t>(i));
          ++removed_;
          continue;
        }
        scopes.back().emplace(std::move(key), &op);
      }
      for (auto& r : op.regions) block(*r, scopes);
      ++i;
    }
    scopes.pop_back();
  }
};

}  // namespace

void cse(Kernel& k, PassStats& stats) { stats["cse.removed"] += Cse().run(k); }

}  // namespace tessera
