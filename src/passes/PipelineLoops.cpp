// pipeline-loops (GPU lowering, after stage-mma-operands): a `for` whose body loads tiles into
// shared memory at indices it can compute one iteration ahead gets `pipeline = 2`, unless the
// program says otherwise (a `pipeline` it wrote stays; `pipeline = 1` turns it off). The
// layout emitter prints such a loop with a ring of that many buffers per load: iteration i's
// copies go out while iteration i - 1 computes (cp.async on sm_80+), so that the loop waits
// for memory only where the copies are slower than its arithmetic.
#include <algorithm>

#include "ir/IR.h"
#include "passes/Passes.h"

namespace tessera {

bool pure_scalar_op(const Op& o) {
  if (!o.regions.empty()) return false;
  for (const Value* r : o.results)
    if (!r->type.is_scalar()) return false;
  switch (o.info().cls) {
    case OpClass::Constant:
    case OpClass::Index:
    case OpClass::Unary:
    case OpClass::Binary:
    case OpClass::Compare:
    case OpClass::Cast:
    case OpClass::Ternary: return true;
    default: return false;
  }
}

std::vector<const Op*> ring_loads(const Op& loop, std::vector<const Op*>* chain) {
  std::vector<const Op*> out, index_ops;
  const Block& body = loop.region(0);
  // The body's values an index may use: the induction variable and pure scalar ops of them
  // (values from outside the loop are fine too).
  std::vector<const Value*> ahead = {body.args[0]};
  auto computable = [&](const Value* v) {
    if (v == body.args[0]) return true;
    if (std::find(body.args.begin(), body.args.end(), v) != body.args.end()) return false;  // carried
    if (!v->def) return true;  // a parameter, or an argument of a block around the loop
    return v->def->parent != &body || std::find(ahead.begin(), ahead.end(), v) != ahead.end();
  };
  for (const auto& op : body.ops) {
    if (pure_scalar_op(*op) && std::all_of(op->operands.begin(), op->operands.end(), computable)) {
      ahead.push_back(op->result());
      index_ops.push_back(op.get());
      continue;
    }
    if (op->kind != OpKind::LoadTile || op->result()->type.layout.kind != Layout::Kind::Shared) continue;
    if (std::all_of(op->operands.begin() + 1, op->operands.end(), computable)) out.push_back(op.get());
  }
  if (chain) *chain = index_ops;
  return out;
}

void pipeline_loops(Kernel& k, PassStats& stats) {
  walk(*k.body, [&](Op& op) {
    if (op.kind != OpKind::For || op.has_attr("pipeline") || ring_loads(op, nullptr).empty()) return;
    op.set_attr("pipeline", int64_t{2});
    ++stats["pipeline-loops.pipelined"];
  });
}

}  // namespace tessera
