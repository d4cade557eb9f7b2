// Program prefetch: a row kernel (one program per row or block of rows) whose programs each read
// a large tile spends, with one CTA per SM, the time from its loads' issue to their arrival with
// nothing else in flight on that SM, and the time of its reductions, barriers and stores with no
// loads in flight. Here the kernel runs persistent instead: gridDim.x CTAs (as many as fit at
// once) loop over the programs t = blockIdx.x, blockIdx.x + gridDim.x, ...; right after program
// t has read a prefetched tile, it issues program t + gridDim.x's tile as cp.async copies into
// shared memory, so that the next row is in flight during this row's computation.
//
//   int64_t tag_i = -1;                              // whose tile buffer i holds
//   for (t = blockIdx.x; t < programs; t += gridDim.x) {
//     pids of t, pids of t + gridDim.x (tsr_npid*)
//     cp.async.wait_all                                // the copies program t - gridDim.x issued
//     ... body; at load i:  hit = tag_i == t
//                           each in-bounds aligned vector: hit ? from the buffer : from global
//                           (ragged and unaligned vectors: from global, as without prefetch)
//     ... at the first __syncthreads() after load i in its block (or one added at the block's
//     end): if t + gridDim.x < programs: the index arithmetic again with the next pids, each
//     such vector of that tile -> the buffer (cp.async); commit; tag_i = t + gridDim.x
//   }
//   cp.async.wait_all
//
// Each thread copies exactly the vectors it reads itself (chunk c's slot is c * T + tid, each
// chunk one or more 16-byte copies), and the barrier before the copies orders this program's
// reads of the buffer (bar.sync performs the thread's prior memory accesses) before them. With
// prefetch_buffers = 2 the copies go right after the load into a second buffer instead (the two
// alternate); one buffer is the default: it leaves shared memory and L1 to the kernel's other
// loads. The tag makes a load whose branch the previous program did not take (or whose copies
// were never issued) read from global memory. The reads of program t + gridDim.x move earlier,
// to during program t: the kernel must not write what its programs read (a prefetched view that
// the kernel also stores to is not prefetched).
//
// Chosen for loads at the top level or in branches (not in loops) whose indices are pure scalar
// arithmetic on the program ids, constants and dims, over vectors of 16-byte multiples, in
// kernels without dots, Struct or Raw ops (which own cp.async groups or may read blockIdx), not
// clustered. The kernel constexpr prefetch_programs = 1 / 0 forces it on / off; by default it
// is on when the prefetched tiles are at least kProgramPrefetchMinBytes per program (rows of one
// CTA per SM).
#include <set>

#include "cuda/EmitterInternal.h"
#include "passes/Passes.h"

namespace tessera::cudagen {

namespace {

// H200 (bench/RESULTS.md, session 6): the default threshold. Smaller tiles run several CTAs per
// SM, which already overlap one CTA's loads with another's reductions.
constexpr int64_t kProgramPrefetchMinBytes = 32768;

}  // namespace

bool Emitter::index_chain(const Op& load, ProgramPrefetch& pf) const {
  bool on_pid = false;
  if (!program_index_chain(k_, load, &pf.chain, &on_pid)) return false;
  pf.load = &load;
  pf.invariant = !on_pid;
  return true;
}

bool Emitter::lowered_program_prefetch() {
  const Op* y = k_.grid ? k_.grid->terminator() : nullptr;
  if (ws_loop_ || !y || !y->has_attr("persistent") || y->attr_int("persistent") != 1) return false;
  pf_buffers_ = y->has_attr("prefetch_buffers") ? static_cast<int>(y->attr_int("prefetch_buffers")) : 1;
  // The marks are prefetch-programs' or written by hand: what the copies rely on is checked
  // again here, each a located error.
  const Op* first_mark = nullptr;
  walk(*k_.body, [&](Op& o) {
    if (!first_mark && o.kind == OpKind::LoadTile && o.has_attr("prefetch")) first_mark = &o;
  });
  if (!first_mark) return false;
  // What prefetch-programs declines (program_prefetch_blocker).
  if (const std::string why = program_prefetch_blocker(k_); !why.empty())
    fail(*first_mark, "prefetch where " + why + ", which program prefetch cannot run beside");
  const std::set<const Value*> written = tessera::written_views(k_);
  std::vector<ProgramPrefetch> plan;
  std::vector<std::pair<int64_t, int64_t>> ranges;  // [at, end) of each tile in the buffer
  walk(*k_.body, [&](Op& o) {
    if (o.kind != OpKind::LoadTile || !o.has_attr("prefetch")) return;
    const std::string how = o.attr_string("prefetch");
    ProgramPrefetch pf;
    if (inside_loop(o)) fail(o, "prefetch of a load inside a loop (only loads that run once a program can be prefetched)");
    if (written.count(o.operand(0))) fail(o, "prefetch of a view the kernel also writes (its reads would move earlier)");
    if (!index_chain(o, pf)) fail(o, "prefetch: its indices are not pure scalar arithmetic on the program ids, constants and dims");
    if (pf.invariant != (how == "once"))
      fail(o, "prefetch = \"" + how + "\" on a tile that " + (pf.invariant ? "is the same for every program" : "depends on the program ids"));
    if (how == "once" && pf_buffers_ != 1)
      fail(o, "prefetch = \"once\" needs prefetch_buffers = 1 (a tile copied once stays in the one buffer)");
    const Value* t = o.result();
    if (lowered_vector_width(t) * scalar_bytes(t->type.elem) != 16)
      fail(o, "prefetch of a tile whose layout does not give each thread runs of 16 bytes along the last dim");
    pf.offset = o.attr_int("prefetch_at");
    ranges.push_back({pf.offset, pf.offset + dist_of(t).slots() * scalar_bytes(t->type.elem) * T_});
    plan.push_back(std::move(pf));
  });
  if (plan.empty()) return false;
  int64_t bytes = 0;
  for (size_t i = 0; i < ranges.size(); ++i) {
    for (size_t j = 0; j < i; ++j)
      if (ranges[i].first < ranges[j].second && ranges[j].first < ranges[i].second)
        fail(*plan[i].load, "prefetch_at = " + std::to_string(ranges[i].first) + ": its " +
                                std::to_string(ranges[i].second - ranges[i].first) + " bytes overlap those of the load at " +
                                plan[j].load->loc.str());
    bytes = std::max(bytes, ranges[i].second);
  }
  for (auto& pf : plan) pf.tag = fresh("tsr_pf_tag");
  prog_pf_ = std::move(plan);
  prog_pf_bytes_ = bytes;
  return true;
}

bool Emitter::plan_program_prefetch() {
  const ConstexprDecl* knob_decl = k_.find_constexpr("prefetch_programs");
  if (knob_decl && knob_decl->value == 0) return false;
  if (!k_.grid) return false;
  bool allowed = true;
  const std::set<const Value*> written = tessera::written_views(k_);
  std::vector<const Op*> loads;
  walk(*k_.body, [&](Op& o) {
    const OpClass c = o.info().cls;
    if (c == OpClass::Raw || c == OpClass::Struct || o.kind == OpKind::Dot) allowed = false;
    if (o.kind == OpKind::LoadTile && !inside_loop(o)) loads.push_back(&o);
  });
  if (!allowed) return false;
  struct Candidate {
    ProgramPrefetch pf;
    int64_t bytes = 0;
  };
  std::vector<Candidate> cands;
  for (const Op* l : loads) {
    const Value* view = l->operand(0);
    const Value* tile = l->result();
    if (!views_.count(view) || written.count(view) || !tile->type.is_tile() || !shape_is_static(tile->type.shape)) continue;
    const Layout L = layout_of(tile);
    const std::vector<int64_t> S = static_shape(tile->type.shape);
    const int64_t chunk_bytes = int64_t(L.vec) * scalar_bytes(view->type.elem);
    if (L.replicated || L.vec < 2 || S.empty() || S.back() % L.vec != 0 || chunk_bytes % 16 != 0) continue;
    Candidate c;
    if (!index_chain(*l, c.pf)) continue;
    c.bytes = L.chunks * T_ * chunk_bytes;
    cands.push_back(std::move(c));
  }
  int64_t program_bytes = 0;
  for (const auto& c : cands) program_bytes += c.pf.invariant ? 0 : c.bytes;
  if (program_bytes == 0) return false;
  const bool forced = knob_decl && knob_decl->value == 1;
  if (!forced && program_bytes < kProgramPrefetchMinBytes) return false;
  if (const ConstexprDecl* d = k_.find_constexpr("prefetch_buffers")) {
    if (d->value != 1 && d->value != 2)
      throw TesseraError(d->loc, "cuda backend: constexpr prefetch_buffers of kernel @" + k_.name + " is " +
                                     std::to_string(d->value) + "; it must be 1 or 2");
    pf_buffers_ = static_cast<int>(d->value);
  }
  // By default, leave 32 KiB of shared memory to the ops' scratch.
  const int64_t budget = smem_limit(tg_) - 32768;
  if (!forced && pf_buffers_ * program_bytes > budget) return false;
  // The loads of every program, then (one buffer only) the tiles that are the same for every
  // program (layernorm's w and b) while they fit: copied once, by the CTA's first program, and
  // read from shared memory by all later ones, instead of from L1 or L2 by every row (at 32768
  // columns w and b are 128 KiB per row, as much L2 traffic as the row's own read and write).
  // prefetch_invariant = 0 turns that off. (Copying them again for every program, an earlier
  // version, cost layernorm 2% on the H200: the L2 traffic stayed and L1 shrank.)
  const bool invariant = pf_buffers_ == 1 && knob("prefetch_invariant", 1) != 0;
  std::vector<ProgramPrefetch> plan;
  int64_t bytes = 0;
  for (int pass = 0; pass < 2; ++pass)
    for (auto& c : cands) {
      if (c.pf.invariant != (pass == 1)) continue;
      if (pass == 1 && (!invariant || pf_buffers_ * (bytes + c.bytes) > budget)) continue;
      c.pf.offset = bytes;
      bytes += c.bytes;
      plan.push_back(std::move(c.pf));
    }
  for (auto& pf : plan) pf.tag = fresh("tsr_pf_tag");
  prog_pf_ = std::move(plan);
  prog_pf_bytes_ = bytes;
  return true;
}

void Emitter::barrier() {
  // Under a producer warpgroup, which never joins, the compute warps synchronise among themselves.
  if (ws_consumers_) line("tsr::named_barrier(" + std::to_string(kComputeBarrier) + "u, " + std::to_string(T_) + "u);");
  else line("__syncthreads();");
  written_views_.clear();
  // (Not from a barrier a loop prints in its own body, where cur_ is still the loop: copies
  // there would run every iteration.)
  if (!pending_pf_.empty() && cur_ && loop_callbacks_ == 0) issue_pending_prefetches(cur_->parent);
}

void Emitter::issue_pending_prefetches(const Block* b) {
  std::vector<const ProgramPrefetch*> later;
  for (const ProgramPrefetch* pf : pending_pf_)
    if (pf->load->parent == b) issue_program_prefetch(*pf);
    else later.push_back(pf);
  pending_pf_ = std::move(later);
}

void Emitter::flush_program_prefetch(const Block& b) {
  for (const ProgramPrefetch* pf : pending_pf_)
    if (pf->load->parent == &b) {
      line("__syncthreads();  // this program's reads of the prefetch buffer are done");
      issue_pending_prefetches(&b);
      return;
    }
}

const Emitter::ProgramPrefetch* Emitter::program_prefetch_of(const Op& load) const {
  for (const auto& pf : prog_pf_)
    if (pf.load == &load) return &pf;
  return nullptr;
}

void Emitter::issue_program_prefetch(const ProgramPrefetch& pf) {
  if (pf.invariant) {
    line("// the copy of this tile (the same for every program) that the CTA's later programs read");
    open("if (tsr_tn < tsr_programs && " + pf.tag + " < 0) {");
  } else {
    line("// the next program's copy of this tile");
    open("if (tsr_tn < tsr_programs) {");
  }
  // The index arithmetic again, on the next program's ids, under fresh names.
  std::unordered_map<const Value*, std::string> saved;
  for (const Op* o : pf.chain)
    for (const Value* r : o->results)
      if (auto it = name_.find(r); it != name_.end()) saved[r] = it->second;
  pf_mode_ = PfMode::Issue;
  pid_prefix_ = "tsr_npid";
  for (const Op* o : pf.chain) emit_op(*o);
  if (lowered_) lowered_load_store(*pf.load);
  else emit_load_store(*pf.load);
  pf_mode_ = PfMode::None;
  pid_prefix_ = "tsr_pid";
  for (const auto& [v, n] : saved) name_[v] = n;
  line("tsr::cp_async_commit();");
  line(pf.tag + " = tsr_tn;");
  close();
}

void Emitter::emit_program_loop(const Block& body) {
  const std::string B = std::to_string(prog_pf_bytes_);
  line("const int64_t tsr_programs = int64_t(tsr_grid0) * int64_t(tsr_grid1) * int64_t(tsr_grid2);");
  line(std::string("constexpr int tsr_pf_off = ") + kProgramPrefetchOffset + ";  // the prefetch buffers' offset in tsr_smem");
  if (pf_buffers_ == 2) line("int tsr_pf_at = 0;  // the byte offset of the buffer this program's prefetched tiles are in");
  for (const auto& pf : prog_pf_) {
    std::string what = text_of(*pf.load).substr(0, 40);
    std::erase(what, '\\');  // (a backslash would continue the comment onto the next line)
    line("int64_t " + pf.tag + " = -1;  // the program whose tile of " + what + "... is prefetched");
  }
  open("for (int64_t tsr_t = blockIdx.x; tsr_t < tsr_programs; tsr_t += gridDim.x) {");
  auto ids = [&](const std::string& p, const std::string& t) {
    line("const int32_t " + p + "0 = int32_t(" + t + " % tsr_grid0), " + p + "1 = int32_t(" + t + " / tsr_grid0 % tsr_grid1), " +
         p + "2 = int32_t(" + t + " / tsr_grid0 / tsr_grid1);");
    line("(void)" + p + "0; (void)" + p + "1; (void)" + p + "2;");
  };
  ids("tsr_pid", "tsr_t");
  line("const int64_t tsr_tn = tsr_t + gridDim.x;  // the program this CTA runs next");
  ids("tsr_npid", "tsr_tn");
  if (pf_buffers_ == 2) {
    line("unsigned char* const tsr_pf_cur = tsr_smem + tsr_pf_off + tsr_pf_at;");
    line("unsigned char* const tsr_pf_nxt = tsr_smem + tsr_pf_off + (tsr_pf_at ^ " + B + ");");
    line("tsr_pf_at ^= " + B + ";");
  } else {
    line("unsigned char* const tsr_pf_cur = tsr_smem + tsr_pf_off;  // (one buffer: refilled after a barrier)");
    line("unsigned char* const tsr_pf_nxt = tsr_pf_cur;");
  }
  line("tsr::cp_async_wait<0>();  // the copies the previous program issued");
  emit_block(body);
  close();
  line("tsr::cp_async_wait<0>();  // nothing in flight when the CTA exits");
}

}  // namespace tessera::cudagen
