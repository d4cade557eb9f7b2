// prefetch-programs (GPU lowering, after persist-programs): a row kernel's programs read the
// next program's tiles while they compute.
//
// A kernel without dots whose programs each read a large tile (a softmax or layernorm row) runs,
// with one CTA per SM, the time from its loads' issue to their arrival with nothing else in
// flight on that SM, then its reductions, barriers and stores with no loads in flight. Here its
// grid's yield gets `persistent = 1` (and `prefetch_buffers`): as many CTAs as fit at once loop
// over the programs t = blockIdx.x, + gridDim.x, ... in launch order, and each load marked
//   prefetch = "next_program", prefetch_at = BYTES
// reads its tile from a shared buffer (at byte offset BYTES) when the CTA's previous program
// copied it there, and then copies program t + gridDim.x's tile into it (cp.async: right after
// the load with two buffers, else after the first barrier that follows it in its block, so that
// the CTA's reads of the buffer are done). A load whose tile is the same for every program
// (layernorm's weight and bias) is marked `prefetch = "once"`: the CTA's first program copies it
// and all later ones read it from shared memory. The planning emitter's program prefetch
// (cuda/EmitProgramPrefetch.cpp) made the same decision inside the emitter; here it is in the
// IR for the layout emitter to print.
//
// Which loads: those at the top level or in branches (not in loops: a loop's loads are
// pipeline-loops' work), of a view the kernel does not write (the next program's reads move
// earlier), into a blocked tile (or a slice of one) whose pattern divides its shape, with 16-byte
// runs along the last dim (each thread copies exactly the runs it reads, so a thread needs no
// barrier between reading its part of the buffer and refilling it with two buffers, and the
// buffer holds an element once for each thread that reads it), whose indices are pure scalar arithmetic on
// the program ids, constants and dims. Not in kernels with dots, Struct or Raw ops (which own
// cp.async groups or read blockIdx), pipelined loops or loads into shared memory (which wait for
// all of the thread's copies), or with a yield that says how its programs run (persistent or
// group_rows: written marks stay as they are). Not before sm_80 (cp.async). Where the knob
// asks for prefetch and the kernel cannot have it, a note says why.
//
// When: the prefetched tiles of one program make at least 32 KiB (kMinBytes: smaller tiles run
// several CTAs per SM, which already overlap one CTA's loads with another's reductions; H200,
// bench/RESULTS.md session 6), in the shared memory a program may use less 32 KiB left to the
// kernel's own scratch. The kernel's constexprs decide where written: prefetch_programs (1 on,
// 0 off), prefetch_buffers (1 or 2; the second buffer lets the copies start right after the
// load), prefetch_invariant (0: tiles the same for every program are not kept).
#include <functional>
#include <set>

#include "ir/IR.h"
#include "passes/Passes.h"

namespace tessera {

namespace {

constexpr int64_t kMinBytes = 32768;

// The bytes the threads hold of `tile` (an element held by several threads counts for each)
// when its layout is blocked, or a slice of a blocked layout, whose pattern divides the shape
// and gives every thread runs of 16-byte multiples along the last dim, fastest; else 0.
int64_t runs_of_16_bytes(const Type& tile) {
  if (!shape_is_static(tile.shape)) return 0;
  Layout l = tile.layout;
  int64_t copies = 1;  // threads holding each element
  if (l.kind == Layout::Kind::Slice && l.parent && l.parent->kind == Layout::Kind::Blocked) {
    // The parent without dim `dim`, whose threads and warps hold copies.
    const Layout& p = *l.parent;
    const size_t k = static_cast<size_t>(l.dim);
    if (k >= p.per_thread.size()) return 0;
    copies = p.threads[k] * p.warps[k];
    l = Layout::of(Layout::Kind::Blocked);
    for (size_t d = 0; d < p.per_thread.size(); ++d)
      if (d != k) {
        l.per_thread.push_back(p.per_thread[d]);
        l.threads.push_back(p.threads[d]);
        l.warps.push_back(p.warps[d]);
      }
    for (int64_t d : p.order)
      if (d != int64_t(k)) l.order.push_back(d > int64_t(k) ? d - 1 : d);
  }
  const std::vector<int64_t> S = static_shape(tile.shape);
  const size_t R = S.size();
  if (l.kind != Layout::Kind::Blocked || R == 0 || l.per_thread.size() != R || l.order.empty() ||
      l.order[0] != int64_t(R - 1))
    return 0;
  int64_t n = copies;
  for (size_t d = 0; d < R; ++d) {
    const int64_t cover = l.per_thread[d] * l.threads[d] * l.warps[d];
    if (S[d] % cover != 0) return 0;
    n *= S[d];
  }
  const int64_t eb = scalar_bytes(tile.elem);
  return (l.per_thread[R - 1] * eb) % 16 == 0 ? n * eb : 0;
}

int64_t knob(const Kernel& k, const char* name, int64_t otherwise) {
  const ConstexprDecl* d = k.find_constexpr(name);
  return d ? d->value : otherwise;
}

}  // namespace

bool inside_loop(const Op& op) {
  for (const Block* b = op.parent; b && b->parent; b = b->parent->parent)
    if (b->parent->kind == OpKind::For || b->parent->kind == OpKind::While) return true;
  return false;
}

std::set<const Value*> written_views(const Kernel& k) {
  std::set<const Value*> written;
  walk(*k.body, [&](Op& op) {
    if (op.info().cls == OpClass::Memory && op.kind != OpKind::LoadTile && op.kind != OpKind::Gather && !op.operands.empty())
      written.insert(op.operand(0));
  });
  return written;
}

std::string program_prefetch_blocker(const Kernel& k) {
  std::string why, ring;
  walk(*k.body, [&](Op& op) {
    const OpClass c = op.info().cls;
    if (why.empty() && (c == OpClass::Raw || c == OpClass::Struct || op.kind == OpKind::Dot))
      why = "the kernel has " + std::string(op.kind == OpKind::Dot ? "a dot" : "Struct or Raw ops") + " (at " + op.loc.str() + ")";
    // A ring of its own (pipeline-loops) or a load into shared memory waits for every cp.async
    // group of the thread (the next program's copies with it), and a TMA ring's barriers would
    // be set up again by every program.
    if (ring.empty() && op.kind == OpKind::For && op.has_attr("pipeline") && op.attr_int("pipeline") >= 2)
      ring = "the pipelined loop at " + op.loc.str() + " has a ring of its own";
    if (ring.empty() && op.kind == OpKind::LoadTile && op.result()->type.layout.kind == Layout::Kind::Shared)
      ring = "the load at " + op.loc.str() + " goes to shared memory";
  });
  if (why.empty() && ring.empty() && launch_ctas(k) > 1)
    why = "each program runs on a cluster of " + std::to_string(launch_ctas(k)) + " CTAs (cluster-programs)";
  return why.empty() ? ring : why;
}

bool program_index_chain(const Kernel& k, const Op& load, std::vector<const Op*>* chain, bool* on_pid) {
  const std::set<const Value*> params(k.params.begin(), k.params.end());
  std::set<const Op*> ops;
  bool ok = true, dep_any = false;
  std::function<bool(const Value*)> depends = [&](const Value* v) -> bool {
    const Op* d = v->def;
    if (!d) {
      ok &= params.count(v) > 0;
      return false;
    }
    if (!pure_scalar_op(*d)) {  // (program_id and dim are pure scalar ops)
      ok = false;
      return false;
    }
    bool dep = d->kind == OpKind::ProgramId;
    for (const Value* x : d->operands) dep |= depends(x);
    if (dep) ops.insert(d);
    return dep;
  };
  for (size_t i = 1; i < load.operands.size(); ++i) dep_any |= depends(load.operand(i));
  if (!ok) return false;
  if (on_pid) *on_pid = dep_any;
  if (chain) {
    chain->clear();
    walk(*k.body, [&](Op& o) {
      if (ops.count(&o)) chain->push_back(&o);
    });
  }
  return true;
}

void prefetch_programs(Kernel& k, const GpuLoweringOptions& o, PassStats& stats) {
  if (!k.grid) return;
  Op* yield = k.grid->terminator();
  if (!yield || yield->operands.empty() || yield->has_attr("persistent") || yield->has_attr("group_rows")) return;
  const int64_t wanted = knob(k, "prefetch_programs", -1);
  if (wanted == 0) return;
  if (o.sm < 80) {
    if (wanted == 1) stats.notes.push_back("prefetch_programs = 1 of kernel @" + k.name + " not taken: cp.async needs sm_80");
    return;
  }
  const int64_t buffers = knob(k, "prefetch_buffers", 1);
  if (buffers != 1 && buffers != 2)
    throw TesseraError(k.find_constexpr("prefetch_buffers")->loc,
                       "constexpr prefetch_buffers of kernel @" + k.name + " is " + std::to_string(buffers) +
                           "; it must be 1 or 2 (shared buffers of the next program's tiles)");
  auto decline = [&](const std::string& reason) {
    if (wanted == 1)
      stats.notes.push_back("prefetch_programs = 1 of kernel @" + k.name + " not taken: " + reason);
  };
  // Why the kernel cannot prefetch: said in a note where the knob asked for it.
  if (const std::string why = program_prefetch_blocker(k); !why.empty()) return decline(why);
  const std::set<const Value*> written = written_views(k);
  struct Candidate {
    Op* load;
    bool invariant;
    int64_t bytes;
  };
  std::vector<Candidate> cands;
  walk(*k.body, [&](Op& l) {
    if (l.kind != OpKind::LoadTile || inside_loop(l)) return;
    const int64_t bytes = runs_of_16_bytes(l.result()->type);
    bool on_pid = false;
    if (bytes == 0 || written.count(l.operand(0)) || !program_index_chain(k, l, nullptr, &on_pid)) return;
    cands.push_back({&l, !on_pid, bytes});
  });
  int64_t program_bytes = 0;
  for (const auto& c : cands) program_bytes += c.invariant ? 0 : c.bytes;
  if (program_bytes == 0)
    return decline("no load outside loops reads a tile of 16-byte runs per thread, from a view the kernel does not "
                   "write, at indices computed from the program ids");
  if (wanted != 1 && program_bytes < kMinBytes) return;
  const int64_t budget = shared_memory_per_program(o.sm) - 32768;
  if (buffers * program_bytes > budget)
    return decline("the next program's tiles (" + std::to_string(program_bytes) + " bytes, " + std::to_string(buffers) +
                   " buffer(s)) leave less than 32 KiB of " + std::to_string(shared_memory_per_program(o.sm)) +
                   " bytes of shared memory");
  // Every program's own tiles first, then (one buffer only) the tiles that are the same for all
  // of them while they fit: read from shared memory by every program after the CTA's first
  // instead of from L1 or L2 by each (at 32768 columns layernorm's weight and bias are as much L2
  // traffic as the row's own read and write).
  const bool keep_invariant = buffers == 1 && knob(k, "prefetch_invariant", 1) != 0;
  int64_t at = 0;
  for (int pass = 0; pass < 2; ++pass)
    for (const Candidate& c : cands) {
      if (c.invariant != (pass == 1)) continue;
      if (pass == 1 && (!keep_invariant || at + c.bytes > budget)) continue;
      c.load->set_attr("prefetch", std::string(c.invariant ? "once" : "next_program"));
      c.load->set_attr("prefetch_at", at);
      at += c.bytes;
      ++stats[c.invariant ? "prefetch-programs.once" : "prefetch-programs.next-program"];
    }
  yield->set_attr("persistent", int64_t{1});
  yield->set_attr("prefetch_buffers", buffers);
}

}  // namespace tessera
