// pipeline-loops (GPU lowering, after stage-mma-operands): a `for` whose body loads tiles into
// shared memory at indices it can compute one iteration ahead gets `pipeline = 2`, unless the
// program says otherwise (a `pipeline` it wrote stays; `pipeline = 1` turns it off). The
// layout emitter prints such a loop with a ring of that many buffers per load: iteration i's
// copies go out while iteration i - 1 computes (cp.async on sm_80+), so that the loop waits
// for memory only where the copies are slower than its arithmetic. A ring of S stages (written
// or chosen) that the target's shared memory cannot hold, with room for the exchanges' scratch,
// gets as many stages as it can (stat pipeline-loops.stages-cut, with a note): the library
// matmul's 4 stages of 128 x 64 and 64 x 256 bf16 tiles are 3 on sm_80; where not even 2 fit
// (the f32 matmul's 128 x 128 and 128 x 192 FMA operands on sm_80), 1: no ring.
//
// A wgmma dot (mma v3 accumulator) in such a loop at the kernel's top level, whose accumulator
// the loop only carries (the block argument feeds only the dot, the dot's result only the
// yield, at the same position) and whose operands are both ring stages (or reshapes or permutes
// of them) or made before the loop, gets `in_flight = 1` (not with fewer than 3 stages): its group of wgmma instructions may still run when the next iteration
// begins, which waits for it only after issuing its own (the tensor cores never idle while the
// warps wait for the next stage or release the last). A ring stage is then read until the
// iteration after its own, so such a loop's ring, unless written, gets 4 stages (cut to what
// fits as above): Triton's Hopper matmuls keep 3-4. A loop whose dot can load its fragments
// ahead (below) gets 3 unless written.
//
// An mma.sync dot (mma v2 accumulator) that is the body's only op but the ring's loads and
// index arithmetic, of two of the ring's stages (or permutes of them: f8's B [N, K]) with an
// even number of k steps (of 16 elements, 32 of f8), gets
// `fragments_ahead = 1`: the layout emitter moves the ring's wait and barrier from the top of
// the iteration to before the dot's last k step, and loads the next iteration's first
// fragments from the next stage there, so the tensor cores run the last step's mma
// instructions while those loads are in flight instead of idling after each barrier (the
// planning emitter's ring does the same; on the H100 the mma.sync matmul at 4096^3 went from
// 0.441 to 0.375 ms). With 2 stages only for a dot of 4 or more k steps: there the stage that
// barrier waits for is the one the same iteration's refill began copying, so only the steps
// before the last cover the copy; with 2 steps the loop waited for nearly every copy whole
// (matmul_struct's 2-stage ring of 32-deep tiles at 4096^3 on the H100: 1.49x the planning
// emitter's time, whose ring waits at the iteration's top for copies an iteration old). A
// written 0 stays; a written 1 that does not qualify is set to 0. Where the kernel sets the knob
// mma_early_last_step = 1, such a dot also gets `early_last_step = 1`: the last k step's mma
// instructions go out before that wait and barrier, the next fragments' loads after them (the
// planning emitter's knob of the same name, a tuning knob: its mma.sync matmul at 4096^3 went
// from 438 to 409 TFLOP/s with it, bench/RESULTS.md; a written value stays, a written 1 on a
// dot without fragments_ahead is set to 0 with a note). The knob mma_spread_copies = 1 gives
// the loop of such a dot with KT >= 3 k steps `refill_in_dot = 1, refill_parts = KT - 1`: the
// refill in KT - 1 pieces, piece p in the dot's step p (the planning emitter's knob; it lost
// 17% on its mma.sync matmul at 4096^3: a tuning knob).
//
// The ring's refill (iteration i + S - 1's copies) is printed at the iteration's top, right
// after its barrier, so the copies have the whole iteration to land. A loop with an mma.sync
// dot and a ring stage in padded rows gets `refill_in_dot = 1` instead: the refill in the
// dot's first k step, before its mma instructions. H100 / H200, 4096^3 on cuda:sm_90
// (bench/RESULTS.md, session 42): matmul_struct (swizzled stages) 0.79 -> 0.54 ms at the top,
// the mma.sync matmul and FlashAttention level, matmul_fp8 (f8 stages, padded) 0.487 -> 0.507
// at the top, which is why it keeps the dot's first k step.
#include <algorithm>

#include "ir/IR.h"
#include "passes/Passes.h"

namespace tessera {

namespace {

// The k steps of an mma.sync dot (16 elements of K each, 32 of f8).
int64_t mma_k_steps(const Op& dot) {
  return static_shape(dot.operand(0)->type.shape)[1] / (256 / scalar_bits(dot.operand(0)->type.elem));
}

}  // namespace

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

int64_t stage_bytes(const Op& load) {
  const Type& t = load.result()->type;
  if (!shape_is_static(t.shape)) return 0;
  const std::vector<int64_t> s = static_shape(t.shape);
  const int64_t eb = std::max(1, scalar_bits(t.elem) / 8), last = s.back(), rows = shape_numel(t.shape) / std::max<int64_t>(1, last);
  if (t.layout.swizzle != 0) return (rows * last * eb + 1023) / 1024 * 1024;
  // As the layout emitter lays them out: rows of whole 16-byte chunks and one more chunk.
  const int64_t E = std::max<int64_t>(1, 16 / eb);
  return rows * ((last + E - 1) / E * E + std::max<int64_t>(t.layout.pad, E)) * eb;
}

int64_t uses_in(Block& b, const Value* v) {
  int64_t n = 0;
  walk(b, [&](Op& op) { n += std::count(op.operands.begin(), op.operands.end(), v); });
  return n;
}

bool starts_as_zero_splat(const Value* v) {
  const Op* s = v->def;
  const Op* c = s && s->kind == OpKind::Splat ? s->operand(0)->def : nullptr;
  return c && c->kind == OpKind::Const && c->attr_number("value") == 0.0;
}

Op* in_flight_dot(Op& loop) {
  Block& body = loop.region(0);
  Op* dot = nullptr;
  int dots = 0;
  walk(body, [&](Op& op) {
    if (op.kind == OpKind::Dot) ++dots, dot = &op;
  });
  if (dots != 1 || dot->parent != &body) return nullptr;
  const Layout& L = dot->result()->type.layout;
  if (L.kind != Layout::Kind::Mma || L.version != 3) return nullptr;
  // Both operands in shared memory (SS) and each either a ring load's stage (through
  // reshapes and permutes) or made before the loop: an A fragment in registers (RS), or a
  // shared tile the body writes again each iteration (a computed operand converted into shared
  // memory, a load the ring cannot take), could be overwritten by the next iteration while the
  // group in flight still reads it. A ring stage is released only once the group is done.
  const std::vector<const Op*> ring = ring_loads(loop, nullptr);
  for (int i = 0; i < 2; ++i) {
    const Value* v = dot->operand(i);
    if (v->type.layout.kind != Layout::Kind::Shared) return nullptr;
    // (A reshape or permute of a shared tile is a view of its bytes: an f8 B read K-major.)
    while (v->def && (v->def->kind == OpKind::Reshape || v->def->kind == OpKind::Permute)) v = v->def->operand(0);
    bool outside = true;
    for (const Block* b = v->def ? v->def->parent : v->block; b; b = b->parent ? b->parent->parent : nullptr)
      if (b == &loop.region(0)) outside = false;
    if (!outside && std::find(ring.begin(), ring.end(), v->def) == ring.end()) return nullptr;
  }
  const Op* y = body.terminator();
  const Value* acc = dot->operand(2);
  for (size_t j = 0; y && j < y->operands.size(); ++j)
    if (y->operand(j) == dot->result() && body.args[j + 1] == acc)
      return uses_in(body, acc) == 1 && uses_in(body, dot->result()) == 1 ? dot : nullptr;
  return nullptr;
}

const Op* fragments_ahead_dot(const Op& loop, const std::vector<const Op*>& loads, const std::vector<const Op*>& chain) {
  // A body of the ring's index arithmetic, its loads, one mma.sync dot of two of those stages and
  // the yield: nothing else reads a stage or needs the barrier where the iteration began.
  const Block& body = loop.region(0);
  const Op* dot = nullptr;
  for (const auto& o : body.ops) {
    if (o.get() == body.terminator() || std::find(chain.begin(), chain.end(), o.get()) != chain.end() ||
        std::find(loads.begin(), loads.end(), o.get()) != loads.end())
      continue;
    // A permute of a stage (a view of its bytes, f8's B [N, K]) that only the dot reads.
    if (o->kind == OpKind::Permute && o->operand(0)->def &&
        std::find(loads.begin(), loads.end(), o->operand(0)->def) != loads.end() &&
        uses_in(const_cast<Block&>(body), o->result()) == 1)
      continue;
    if (o->kind != OpKind::Dot || dot) return nullptr;
    dot = o.get();
  }
  if (!dot) return nullptr;
  const Layout& L = dot->result()->type.layout;
  if (L.kind != Layout::Kind::Mma || L.version != 2) return nullptr;
  // Each operand a stage, or a permute of one (a view of its bytes: f8's B [N, K]), of 16-bit or
  // f8 elements.
  const int bits = scalar_bits(dot->operand(0)->type.elem);
  if (bits != 16 && bits != 8) return nullptr;
  for (int i = 0; i < 2; ++i) {
    const Value* v = dot->operand(i);
    if (v->def && v->def->kind == OpKind::Permute && v->def->parent == &body) v = v->def->operand(0);
    if (!v->def || std::find(loads.begin(), loads.end(), v->def) == loads.end()) return nullptr;
  }
  // The next iteration's first step goes to the buffer step 0 reads: an even number of k steps
  // (of 16 elements, 32 of f8).
  if (!shape_is_static(dot->operand(0)->type.shape)) return nullptr;
  const int64_t K = static_shape(dot->operand(0)->type.shape)[1];
  return K % (2 * 256 / bits) == 0 ? dot : nullptr;
}

void pipeline_loops(Kernel& k, const GpuLoweringOptions& o, PassStats& stats) {
  // Knob ring_stages (the planning emitter's, of the same meaning): a top-level wgmma loop's ring
  // gets that many stages (cut to what fits, below) in place of its annotation or the choice
  // here; 0, the default, keeps them. For launches whose few CTAs each stream a long slice of
  // the weights (decode shapes) and want more bytes in flight. Not the split-K compilation's
  // loop, whose 8 split-k-loops wrote.
  const ConstexprDecl* ring_stages = k.find_constexpr("ring_stages");
  if (ring_stages && ring_stages->value != 0 && (ring_stages->value < 2 || ring_stages->value > 16))
    throw TesseraError(ring_stages->loc, "knob ring_stages = " + std::to_string(ring_stages->value) +
                                             ": 0 (the loop's pipeline) or 2..16");
  // The mma.sync ring's 0/1 knobs (another value is an error naming the knob).
  auto switch_knob = [&](const char* name, const char* what) {
    const ConstexprDecl* d = k.find_constexpr(name);
    if (d && d->value != 0 && d->value != 1)
      throw TesseraError(d->loc, std::string("knob ") + name + " = " + std::to_string(d->value) + ": 0 or 1 (" + what + ")");
    return d && d->value == 1;
  };
  const bool early_last_step = switch_knob("mma_early_last_step", "an mma.sync dot's last k step before the ring's wait");
  const bool spread_copies = switch_knob("mma_spread_copies", "a ring's refill in pieces over its mma.sync dot's k steps");
  int64_t early_taken = 0;
  int64_t spread_taken = 0;
  // Room for what else the program keeps in shared memory: the exchanges' scratch (8 KiB at a
  // time) and a swizzled base's alignment.
  const int64_t room = shared_memory_per_program(o.sm) - 8192 - 1024;
  walk(*k.body, [&](Op& op) {
    if (op.kind != OpKind::For) return;
    std::vector<const Op*> chain;
    const std::vector<const Op*> loads = ring_loads(op, &chain);
    if (loads.empty()) return;
    // An mma.sync dot that could load its fragments ahead (below; its structure only).
    const Op* may_ahead = fragments_ahead_dot(op, loads, chain);
    // Only a loop at the kernel's top level: the layout emitter keeps a group in flight across
    // its TMA ring (a nested loop keeps the cp.async ring).
    Op* async_dot = op.parent == k.body.get() ? in_flight_dot(op) : nullptr;
    // A written `in_flight = 1` where the accumulator is read otherwise is taken back.
    walk(op.region(0), [&](Op& d) {
      if (d.kind != OpKind::Dot || &d == async_dot || !d.has_attr("in_flight") || d.attr_int("in_flight") == 0) return;
      d.set_attr("in_flight", int64_t{0});
      stats.notes.push_back("dot at " + d.loc.str() +
                            ": in_flight = 1 needs a wgmma dot whose accumulator the loop only carries; set to 0");
    });
    if (async_dot && async_dot->has_attr("in_flight") && async_dot->attr_int("in_flight") == 0) async_dot = nullptr;
    if (ring_stages && ring_stages->value != 0 && op.parent == k.body.get() && !op.has_attr("split_k") &&
        has_mma_dot(op.region(0), 3)) {
      op.set_attr("pipeline", ring_stages->value);
      ++stats["pipeline-loops.ring-stages-knob"];
    }
    if (!op.has_attr("pipeline")) {
      // A dot that can load its fragments ahead (below) needs 3 stages to, as Triton's Ampere
      // matmuls keep.
      const bool ahead_off = may_ahead && may_ahead->has_attr("fragments_ahead") && may_ahead->attr_int("fragments_ahead") == 0;
      op.set_attr("pipeline", int64_t{async_dot ? 4 : may_ahead && !ahead_off ? 3 : 2});
      ++stats["pipeline-loops.pipelined"];
    }
    const int64_t S = op.attr_int("pipeline");
    int64_t bytes = 0;
    for (const Op* l : loads) bytes += stage_bytes(*l);
    // The knob epilogue_buffers = 4 asks for four 8 KiB TMA-store staging boxes per warpgroup
    // of the GEMM's result (store-epilogues-by-tma's `tma_buffers`): the ring leaves them room,
    // a stage less where it must (as the planning emitter's ring does); the two boxes of the
    // default fit beside a full ring.
    int64_t loop_room = room;
    if (const ConstexprDecl* eb = k.find_constexpr("epilogue_buffers"); eb && eb->value == 4 && async_dot) {
      const Layout& L = async_dot->result()->type.layout;
      int64_t warps = 1;
      for (int64_t w : L.warps) warps *= w;
      loop_room -= 4 * 8192 * std::max<int64_t>(1, warps / 4);
    }
    if (S >= 2 && bytes > 0 && S * bytes > loop_room) {
      // At least 2 stages where 2 fit without the exchanges' scratch (which a kernel with no
      // exchange does not use: bf16 192 x 256 x 128 on sm_90a keeps its 2), else 1: no ring,
      // each iteration's loads waited for at once, rather than shared tiles the target cannot
      // hold.
      const int64_t least = 2 * bytes + 1024 + (room - loop_room) <= shared_memory_per_program(o.sm) ? 2 : 1;
      const int64_t fit = std::max<int64_t>(least, loop_room / bytes);
      if (fit < S) {
        op.set_attr("pipeline", fit);
        ++stats["pipeline-loops.stages-cut"];
        stats.notes.push_back("loop at " + op.loc.str() + ": pipeline = " + std::to_string(S) + " cut to " +
                              std::to_string(fit) + " (a stage of its ring is " + std::to_string(bytes) +
                              " bytes of shared memory)");
      }
    }
    // A group in flight holds its stage one iteration longer: with 2 stages no copy could be
    // ahead of the iteration that waits for it, slower than waiting for each group.
    if (async_dot && op.attr_int("pipeline") < 3) {
      async_dot->set_attr("in_flight", int64_t{0});
      stats.notes.push_back("dot at " + async_dot->loc.str() + ": not in flight: its loop's ring has " +
                            std::to_string(op.attr_int("pipeline")) + " stages (a group in flight needs 3 or more)");
    } else if (async_dot && !async_dot->has_attr("in_flight")) {
      async_dot->set_attr("in_flight", int64_t{1});
      ++stats["pipeline-loops.dots-in-flight"];
    }
    // An mma.sync dot that loads the next iteration's first fragments before its last k step
    // (the ring's barrier moves there: the tensor cores run that step while the loads are in
    // flight). A written 1 where the body does not allow it is taken back.
    const Op* ahead = op.attr_int("pipeline") >= 2 ? may_ahead : nullptr;
    if (ahead && op.attr_int("pipeline") == 2) {
      // With 2 stages the barrier before the last k step waits for the copy the same
      // iteration's refill began: only a dot of 4 or more k steps covers it.
      const int64_t steps = mma_k_steps(*ahead);
      if (steps < 4) ahead = nullptr;
    }
    walk(op.region(0), [&](Op& d) {
      if (d.kind != OpKind::Dot || &d == ahead || !d.has_attr("fragments_ahead") || d.attr_int("fragments_ahead") == 0) return;
      d.set_attr("fragments_ahead", int64_t{0});
      stats.notes.push_back("dot at " + d.loc.str() +
                            ": fragments_ahead = 1 needs a ring loop's one mma.sync dot of two of its stages (or "
                            "permutes of them), with nothing else in the body, an even number of k steps (16 "
                            "elements, 32 of f8), and 4 or more of them where the ring has 2 stages; set to 0");
    });
    if (ahead && !ahead->has_attr("fragments_ahead")) {
      const_cast<Op*>(ahead)->set_attr("fragments_ahead", int64_t{1});
      ++stats["pipeline-loops.fragments-ahead"];
    }
    // The knob mma_early_last_step = 1: the last k step's mma instructions before the wait and
    // barrier that fragments_ahead puts in front of it (a written value stays).
    walk(op.region(0), [&](Op& d) {
      if (d.kind != OpKind::Dot) return;
      const bool is_ahead = d.has_attr("fragments_ahead") && d.attr_int("fragments_ahead") == 1;
      if (d.has_attr("early_last_step")) {
        if (d.attr_int("early_last_step") == 1 && !is_ahead) {
          d.set_attr("early_last_step", int64_t{0});
          stats.notes.push_back("dot at " + d.loc.str() + ": early_last_step = 1 needs fragments_ahead = 1; set to 0");
        }
        early_taken += d.attr_int("early_last_step") == 1;
        return;
      }
      if (early_last_step && is_ahead) {
        d.set_attr("early_last_step", int64_t{1});
        ++stats["pipeline-loops.early-last-steps"];
        ++early_taken;
      }
    });
    // Where the ring's refill goes: at the iteration's top, unless the body has an mma.sync dot
    // and a ring stage in padded rows (not swizzled: f8 operands, rows shorter than 64 bytes),
    // where the copies' writes, issued at the top, met the dot's ldmatrix reads in the banks:
    // there `refill_in_dot = 1`, the refill in the dot's first k step. A written value stays.
    // The knob mma_spread_copies = 1: where the dot loads its fragments ahead and has 3 or more k
    // steps, the refill in the dot, in KT - 1 pieces, piece p in step p (the planning emitter's
    // knob of the same name; written values stay).
    if (spread_copies && ahead && ahead->has_attr("fragments_ahead") && ahead->attr_int("fragments_ahead") == 1 &&
        !op.has_attr("refill_parts")) {
      const int64_t steps = mma_k_steps(*ahead);
      if (steps >= 3 && (!op.has_attr("refill_in_dot") || op.attr_int("refill_in_dot") == 1)) {
        op.set_attr("refill_in_dot", int64_t{1});
        op.set_attr("refill_parts", steps - 1);
        ++stats["pipeline-loops.spread-refills"];
        ++spread_taken;
      }
    }
    if (!op.has_attr("refill_in_dot") && op.attr_int("pipeline") >= 2) {
      bool padded = false;
      for (const Op* l : loads)
        padded |= l->result()->type.layout.kind == Layout::Kind::Shared && l->result()->type.layout.swizzle == 0;
      if (padded && has_mma_dot(op.region(0), 2)) {
        op.set_attr("refill_in_dot", int64_t{1});
        ++stats["pipeline-loops.refills-in-dots"];
      }
    }
  });
  if (spread_copies && spread_taken == 0)
    stats.notes.push_back("knob mma_spread_copies = 1 taken by no loop: it needs an mma.sync dot that loads its "
                          "fragments ahead (pipeline-loops' fragments_ahead = 1) with 3 or more k steps");
  if (early_last_step && early_taken == 0)
    stats.notes.push_back("knob mma_early_last_step = 1 taken by no dot: it needs an mma.sync dot that loads its "
                          "fragments ahead (pipeline-loops' fragments_ahead = 1)");
}

}  // namespace tessera
