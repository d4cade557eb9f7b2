// pipeline-loops (GPU lowering, after stage-mma-operands): a `for` whose body loads tiles into
// shared memory at indices it can compute one iteration ahead gets `pipeline = 2`, unless the
// program says otherwise (a `pipeline` it wrote stays; `pipeline = 1` turns it off). The
// layout emitter prints such a loop with a ring of that many buffers per load: iteration i's
// copies go out while iteration i - 1 computes (cp.async on sm_80+), so that the loop waits
// for memory only where the copies are slower than its arithmetic. A ring of S stages (written
// or chosen) that the target's shared memory cannot hold, with room for the exchanges' scratch,
// gets as many stages as it can (at least 2; stat pipeline-loops.stages-cut, with a note): the
// library matmul's 4 stages of 128 x 64 and 64 x 256 bf16 tiles are 3 on sm_80.
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

int64_t shared_memory_per_program(int sm) {
  if (sm >= 90) return 227 * 1024;
  if (sm == 80 || sm == 87) return 163 * 1024;
  return 99 * 1024;
}

namespace {

// The bytes of one stage of a ring load's shared tile: rows padded by the layout's pad (the
// layout emitter pads unswizzled rows of 16-bit tiles by 8 elements), a swizzled tile from a
// 1024-byte boundary.
int64_t stage_bytes(const Op& load) {
  const Type& t = load.result()->type;
  if (!shape_is_static(t.shape)) return 0;
  const std::vector<int64_t> s = static_shape(t.shape);
  const int64_t eb = std::max(1, scalar_bits(t.elem) / 8), last = s.back(), rows = shape_numel(t.shape) / std::max<int64_t>(1, last);
  if (t.layout.swizzle != 0) return (rows * last * eb + 1023) / 1024 * 1024;
  return rows * (last + std::max<int64_t>(t.layout.pad, 8)) * eb;
}

}  // namespace

void pipeline_loops(Kernel& k, const GpuLoweringOptions& o, PassStats& stats) {
  // Room for what else the program keeps in shared memory: the exchanges' scratch (8 KiB at a
  // time) and a swizzled base's alignment.
  const int64_t room = shared_memory_per_program(o.sm) - 8192 - 1024;
  walk(*k.body, [&](Op& op) {
    if (op.kind != OpKind::For) return;
    const std::vector<const Op*> loads = ring_loads(op, nullptr);
    if (loads.empty()) return;
    if (!op.has_attr("pipeline")) {
      op.set_attr("pipeline", int64_t{2});
      ++stats["pipeline-loops.pipelined"];
    }
    const int64_t S = op.attr_int("pipeline");
    int64_t bytes = 0;
    for (const Op* l : loads) bytes += stage_bytes(*l);
    if (S <= 2 || bytes == 0 || S * bytes <= room) return;
    const int64_t fit = std::max<int64_t>(2, room / bytes);
    op.set_attr("pipeline", fit);
    ++stats["pipeline-loops.stages-cut"];
    stats.notes.push_back("loop at " + op.loc.str() + ": pipeline = " + std::to_string(S) + " cut to " + std::to_string(fit) +
                          " (a stage of its ring is " + std::to_string(bytes) + " bytes of shared memory)");
  });
}

}  // namespace tessera
