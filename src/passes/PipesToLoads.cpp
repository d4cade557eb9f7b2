// pipes-to-loads: a Struct pipe whose every tile is pushed from a view by the producer role and
// popped by the consumer role of the same loop iteration is, by the pipe's sequential meaning,
// a load of that tile where it is popped. This pass rewrites such loops into the Lite form the
// backends already compile well (on cuda: the cp.async ring, or on sm_90a the TMA + mbarrier
// ring with a producer warpgroup feeding wgmma), keeping the pipe's STAGES as the loop's
// `pipeline` annotation:
//
//   %p = pipe : pipe<T, [S, R, C]>                 (removed)
//   for ... {                                       for ... {pipeline = S} {
//     warp_role producer {                            ...
//       pipe_push %p, %v, %i, %j                       %t = load_tile %v, %i, %j : tile<T, [R, C]>
//     }                                                ...consumer ops using %t...
//     %r = warp_role consumer {                     }
//       %t = pipe_pop %p : tile<T, [R, C]>
//       ...
//     }
//   }
//
// Conditions (anything else is left alone, keeping the Struct meaning and its checks): the loop
// is at the top level and its body holds, besides index arithmetic, exactly one producer role
// (only pushes from views, indices defined outside the role) followed by one consumer role;
// every pipe the loop touches is defined at the top level, used nowhere else, pushed once and
// popped once (at the consumer role's top level) per iteration; and nothing in the loop writes
// memory, so loading at the pop reads what the push would have copied.
#include <algorithm>

#include "ir/IR.h"
#include "passes/BlockEdit.h"
#include "passes/Passes.h"

namespace tessera {

namespace {

bool writes_memory(Block& b) {
  bool w = false;
  walk(b, [&](Op& o) {
    switch (o.kind) {
      case OpKind::StoreTile:
      case OpKind::Scatter:
      case OpKind::Atomic:
      case OpKind::AtomicCas:
      case OpKind::Raw:
      case OpKind::BufferWrite:
      case OpKind::AsyncCopy: w = true; break;
      default: break;
    }
  });
  return w;
}

// Uses of `v` anywhere in the kernel body.
int uses_of(Kernel& k, const Value* v) {
  int n = 0;
  walk(*k.body, [&](Op& o) {
    for (const Value* x : o.operands) n += x == v;
  });
  return n;
}

std::unique_ptr<Op> take(Block& b, const Op* op) {
  for (auto it = b.ops.begin(); it != b.ops.end(); ++it)
    if (it->get() == op) {
      std::unique_ptr<Op> o = std::move(*it);
      b.ops.erase(it);
      return o;
    }
  return nullptr;
}

// Rewrites one loop; true when it did.
bool rewrite(Kernel& k, Op& loop) {
  Block& body = loop.region(0);
  Op *producer = nullptr, *consumer = nullptr;
  for (const auto& o : body.ops) {
    if (o->kind != OpKind::WarpRole) continue;
    const std::string& role = o->attr_string("role");
    if (role == "producer" && !producer && !consumer) producer = o.get();
    else if (role == "consumer" && producer && !consumer) consumer = o.get();
    else return false;
  }
  if (!producer || !consumer || writes_memory(body)) return false;
  // The producer: pushes of view tiles only, one per pipe, with indices from outside it.
  std::vector<Op*> pushes;
  for (const auto& o : producer->region(0).ops) {
    if (o->kind == OpKind::Yield) continue;
    if (o->kind != OpKind::PipePush || o->operands.size() < 2 || !o->operand(1)->type.is_view()) return false;
    for (size_t i = 2; i < o->operands.size(); ++i)
      if (defined_inside(o->operand(i), *producer)) return false;
    pushes.push_back(o.get());
  }
  if (pushes.empty()) return false;
  // Each pushed pipe: a top-level `pipe`, popped exactly once at the consumer's top level, and
  // used by nothing else.
  std::vector<std::pair<Op*, Op*>> pairs;  // push, pop
  int64_t stages = 0;
  for (Op* push : pushes) {
    Value* p = push->operand(0);
    if (!p->def || p->def->kind != OpKind::Pipe || p->def->parent != k.body.get() || uses_of(k, p) != 2) return false;
    Op* pop = nullptr;
    for (const auto& o : consumer->region(0).ops)
      if (o->kind == OpKind::PipePop && o->operand(0) == p) pop = o.get();
    if (!pop) return false;
    for (const auto& [q, _] : pairs)
      if (q->operand(0) == p) return false;  // two pushes onto one pipe
    pairs.push_back({push, pop});
    if (p->type.shape.empty() || !p->type.shape[0].is_static()) return false;
    stages = std::max(stages, p->type.shape[0].value);
  }
  std::vector<const Op*> pipe_defs;
  for (auto [push, pop] : pairs) pipe_defs.push_back(push->operand(0)->def);
  // Pops become loads of what was pushed.
  for (auto [push, pop] : pairs) {
    std::vector<Value*> operands(push->operands.begin() + 1, push->operands.end());
    std::vector<NamedAttr> attrs;
    if (const Attr* pad = push->find_attr("pad")) attrs.push_back({"pad", *pad});
    Block& cb = consumer->region(0);
    Op* load = k.create_op(cb, OpKind::LoadTile, operands, {pop->result()->type}, attrs, pop->loc, 0, pop);
    load->result()->name = pop->result()->name;
    replace_all_uses(k, pop->result(), load->result());
    take(cb, pop);
  }
  // The consumer's ops move into the loop body before the role; its results become what it
  // yielded. The producer role goes.
  Block& cb = consumer->region(0);
  std::unique_ptr<Op> y = take(cb, cb.terminator());
  auto at = std::find_if(body.ops.begin(), body.ops.end(), [&](const auto& o) { return o.get() == consumer; });
  for (auto& o : cb.ops) {
    o->parent = &body;
    at = body.ops.insert(at, std::move(o)) + 1;
  }
  cb.ops.clear();
  for (size_t i = 0; i < consumer->results.size(); ++i) replace_all_uses(k, consumer->result(i), y->operand(i));
  take(body, consumer);
  take(body, producer);  // (destroys the pushes)
  for (const Op* d : pipe_defs) take(*k.body, d);
  if (!loop.has_attr("pipeline") && stages >= 2) loop.set_attr("pipeline", stages);
  return true;
}

}  // namespace

void pipes_to_loads(Kernel& k, PassStats& stats) {
  std::vector<Op*> loops;
  for (const auto& o : k.body->ops)
    if (o->kind == OpKind::For) loops.push_back(o.get());
  for (Op* loop : loops)
    if (rewrite(k, *loop)) stats["pipes-to-loads.loops"] += 1;
}

}  // namespace tessera
