// Internals of the CUDA emitter shared by its files (one concern per file: CudaEmitter.cpp core,
// elementwise and control flow; EmitMemory.cpp; EmitShape.cpp reductions, scans and shape ops;
// EmitDot.cpp).
//
// Layouts (a function of a tile's element count only, so that elementwise ops, casts, reshape
// and expand_dims never move data between threads):
//   replicated: numel <= kReplicateMax; every thread holds every element (slot s = element s).
//     Small tiles such as reduction results are needed by all threads.
//   blocked: flattened row-major elements; thread t owns VEC contiguous elements per chunk,
//     chunks strided by T*VEC (slot s = chunk s/VEC, lane s%VEC). VEC is the largest of 8, 4, 2,
//     1 dividing numel with numel >= VEC*T (so 16-bit loads are 16 bytes).
//   cluster-split (Emitter::cluster_ = C > 1, sm_90+): a program runs on a cluster of C CTAs;
//     CTA rank r holds the blocked tile's elements [r * numel / C, (r + 1) * numel / C),
//     blocked as above within that part. Replicated tiles are held by every thread of every CTA.
// A thread's elements live in a register array indexed only by compile-time slot numbers
// (fully unrolled loops). Data crosses threads only through the shared-memory scratch, and
// every exchange is bracketed by __syncthreads() (the write phase starts with one, so a reader
// of the previous exchange is done; the read phase starts after one). Scalars are uniform:
// every thread computes the same value, so control flow on scalars never diverges and barriers
// inside loops and branches are safe.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "codegen/CTypes.h"
#include "codegen/Shapes.h"
#include "cuda/CudaEmitter.h"
#include "cuda/DistLayout.h"

namespace tessera::cudagen {

inline constexpr int64_t kReplicateMax = 32;

struct Layout {
  bool replicated = true;
  int64_t numel = 1;
  // Elements this CTA holds: numel, or numel / cluster size in a cluster-split kernel (a
  // blocked tile's elements [rank * part, (rank + 1) * part) live on the CTA of that rank).
  int64_t part = 1;
  int vec = 1;
  int64_t chunks = 1;
  int slots = 1;  // register slots per thread
  // The layout emitter: the tile's IR layout encoding placed (slot s holds the element
  // dist->flat_expr(s); copies are written by the threads dist->owner_expr() names).
  const Dist* dist = nullptr;
};

// ctype, stype, load_conv, store_conv, fround, is_narrow: shared with the cpu emitter.
using namespace codegen;

std::string flit(double v);                              // exact float literal
std::string dlit(double v);                              // exact double literal
std::string lit(ScalarKind k, double v);                 // a constant of kind k (value pre-rounded)
std::string ilit(ScalarKind k, int64_t v);

// Thrown while emitting a cluster-split kernel (Emitter::cluster_ > 1) by code that would move
// tile data between threads other than through a reduction: the kernel is emitted again
// without clusters. `why` says which op.
struct NotClusterable {
  std::string why;
};

// How many earlier box stores of a TMA-store epilogue (tsr::epilogue_box_sw128) may still read
// their buffers when a box is staged. Box c uses buffer c % buffers; letting `buffers - 1`
// stores run on protects that buffer only when its last store was that many boxes back, which
// across programs holds only when a program stores a multiple of `buffers` boxes. Otherwise
// every earlier store must be done reading.
inline int64_t epilogue_box_in_flight(int64_t boxes, int64_t buffers) { return boxes % buffers == 0 ? buffers - 1 : 0; }

class Emitter {
 public:
  // `cluster` > 1: every program runs on a cluster of that many CTAs (sm_90+), each holding
  // 1/cluster of every blocked tile; reductions finish with an exchange through distributed
  // shared memory. Only kernels whose tiles cross threads in reductions alone can be split;
  // run() throws NotClusterable for others.
  Emitter(const Kernel& k, const CudaTarget& t, int cluster = 1);
  CudaEmission run();

  // The layout emitter (EmitLowered.cpp): the kernel is the GPU lowering's output, every tile
  // carries a layout encoding, and each op is printed in the layouts it has: no planning. Set
  // before run(); what it cannot print throws NotLowerable.
  bool lowered_ = false;
  int warps_ = 4;
  mutable std::unordered_map<const Value*, Dist> dists_;
  const Dist& dist_of(const Value* v) const;
  bool emit_lowered(const Op& op);  // true when it printed `op`
  void lowered_convert(const Op& op);
  void lowered_load_store(const Op& op);
  // stage-epilogue-stores' `staged = 1`: the tile through shared memory (the kernel's, reused)
  // in 16-byte rows; false (having printed nothing) where that memory is too small.
  bool lowered_store_staged(const Op& op);
  // The width of a load or store's vector accesses of tile `v` from memory (1: element by
  // element): its slots' runs along the last dim, at most 16 bytes of its elements.
  int64_t lowered_vector_width(const Value* v) const;
  void lowered_shape(const Op& op);
  void lowered_reduce(const Op& op);
  void lowered_reduce_to_scalar(const Op& op);
  // A scan: lowered_block_scan, a sum scan of a tile that is one line along its axis, from
  // registers (each thread's runs of consecutive elements, then the CTA's
  // tsr::block_exclusive_sum; false for other scans), else lowered_fold_lines_through_shared.
  // An mma.sync accumulator layout whose warp grid is smaller than the program's warps (a tile
  // smaller than they cover): the warps past the grid hold copies (DistLayout).
  bool has_copy_warps(const tessera::Layout& L) const {
    return L.kind == tessera::Layout::Kind::Mma && L.version == 2 && L.warps.size() == 2 && L.warps[0] * L.warps[1] < warps_;
  }
  void lowered_scan(const Op& op);
  bool lowered_block_scan(const Op& op);
  void lowered_fold_lines_through_shared(const Op& op);  // scans, scan_with, reduce_with
  // The barrier, tsr::block_exclusive_sums and offset adds that end a one-barrier block scan
  // (TESSERA_CUDA_ONE_BARRIER_SCANS) in either emitter.
  void add_block_offsets(const std::string& res, const std::string& C, const std::string& U, const std::string& accs,
                         const std::string& offs, const std::string& part, int64_t R, int64_t run);
  void lowered_arg_reduce(const Op& op);  // argmax, argmin
  void stage_at(const Value* v, const std::string& ptr, const std::function<std::string(const std::string&)>& index, int64_t bound);
  void lowered_insert(const Op& op);      // insert_tile
  void lowered_extract(const Op& op);     // extract_tile
  // acc = fold(acc, the acc of the lane that differs in bit `lane_bit`): one butterfly step.
  void shuffle_fold(const std::string& acc, ScalarKind t, size_t lane_bit,
                    const std::function<std::string(const std::string&, const std::string&)>& fold);
  void lowered_dot(const Op& op);
  void lowered_wgmma(const Op& op);  // a dot with a wgmma (mma v3) accumulator, sm_90a
  std::string wgmma_acc_block(const Value* r, const std::string& n, int64_t mt, int64_t nb);
  void wgmma_fence_acc(const Value* r, const std::string& n);
  const Op* async_dot_ = nullptr;    // the wgmma dot in flight across the TMA ring loop printed now
  void lowered_fma_dot(const Op& op);  // a dot with a blocked accumulator
  void lowered_fma_dot_shared(const Op& op);  // ... whose operands are shared tiles
  bool lowered_wgmma_ = false;       // the kernel has one (then shared tiles that wgmma reads get
                                     // a proxy fence after they are written)
  // Result `r` of `op` gathered through shared memory from `x`: element e of r is element
  // src_flat(e) of x (flat row-major indices, C++ expressions).
  void lowered_exchange(const Op& op, const Value* x, const Value* r,
                        const std::function<std::string(const std::string&)>& src_flat);
  // The most shared memory one exchange takes at a time (larger tiles go in parts).
  static constexpr int64_t kExchangeBytes = 8192;
  // Every smem_ptr call (a use of the exchange scratch) counts here.
  int64_t scratch_uses_ = 0;
  // The last reduction's warp exchange (lowered_reduce): its block, the scratch_uses_ count just
  // after it and its half of the scratch (0 or kReductionHalf); block null when it used more.
  // A reduction that follows it in the same block with no other use of the scratch between
  // writes the other half with no barrier first: the barrier after the last one's writes
  // already ordered the reads of the one before it, which used this half.
  struct LastReduction {
    const Block* block = nullptr;
    int64_t uses = -1, off = 0;
  } last_reduction_;
  static constexpr int64_t kReductionHalf = 1024;
  // A block reduction's warp exchange through shared words of its own (two copies, used in
  // turn, where it runs repeatedly): its writes then need no barrier before them, as the
  // planning emitter's exchange_warp_partials. Returns the words' name, or "" where its bytes
  // are over kReductionHalf or the kernel's own exchanges would pass kOwnExchangeBytes of
  // static shared memory (the caller then exchanges through the scratch).
  std::string own_exchange(const Op& op, const std::string& T, int64_t words, int64_t bytes);
  // Declares `words` shared elements of type C for `op`'s exchange alone (`bytes` of them; two
  // copies used in turn where op runs repeatedly) and returns the name of this run's copy.
  std::string exchange_words(const Op& op, const std::string& C, int64_t words, int64_t bytes);
  static constexpr int64_t kOwnExchangeBytes = 16384;
  // An mma operand kept in shared memory for the dots that read it (16-bit elements, rows of
  // `ld` elements; `dim0_fastest`: stored transposed, dim 0 contiguous). `rows` > 0: swizzled
  // (swizzle-mma-operands), element (row, col) of the stored tile at tsr::sw128_index(row, col,
  // rows) (`atom` 64) or tsr::sw64_index (`atom` 32) instead of row * ld + col.
  struct StagedOperand {
    std::string base;  // shared-space address (uint32_t expression)
    int64_t ld = 0;
    bool dim0_fastest = false;
    int64_t rows = 0;
    int64_t atom = 64;  // elements of a swizzled row: 64 (128 bytes) or 32 (64 bytes, tsr::sw64_index)
  };
  std::unordered_map<const Value*, StagedOperand> staged_;
  // A tile in a shared layout: 16-bit elements at `ptr` (a uint16_t* expression), element
  // (c0, c1, ...) at sum c_d * strides[d]. The fastest dim's rows are padded by 8 elements.
  // Swizzled (`rows` > 0, shared<swizzle = 128>, as wgmma reads and TMA writes): the fastest
  // dim (stride 1) is cut into 64-element blocks of `rows` rows x 128 bytes each, the others'
  // strides count 64 elements per row, and a row's 16-byte chunks are permuted
  // (tsr::sw128_index); the tile starts at a 1024-byte boundary where wgmma or the TMA reads
  // or writes it (the pattern is of address bits there), at a 128-byte one where only the
  // emitter's own addresses do (mma.sync operands: the pattern is of the indices).
  struct SharedView {
    std::string ptr;
    std::vector<int64_t> strides;
    int64_t rows = 0;   // 128-byte swizzled: the 8-row atoms' rows per 128-byte column block (else 0)
    int64_t atom = 64;  // swizzled: elements per swizzled row (128 bytes: 64 of 16 bits, 128 of 8; 64 bytes: 32 of 16 bits)
  };
  // The element index (a C++ expression) of the element at coordinates `c` of view `sv`.
  static std::string shared_index(const SharedView& sv, const std::vector<std::string>& c);
  std::unordered_map<const Value*, SharedView> shared_;
  // A buffer for a tile of `v`'s shape in `order` (dims from fastest; empty: row-major);
  // `stages` such buffers back to back for a ring (*stage_elems: the distance between them).
  SharedView alloc_shared(const Value* v, const std::vector<int64_t>& order, int64_t stages = 1,
                          int64_t* stage_elems = nullptr);
  // The cp.async copies of load_tile `load` into the buffer `dst`, at the indices the load's
  // operands now name.
  void issue_shared_copies(const Op& load, const SharedView& dst);
  // The piece of each tile's copies that issue_shared_copies prints: (part, parts), the rounds
  // of chunks [part * rounds / parts, (part + 1) * rounds / parts) of every thread.
  std::pair<int, int> copy_part_{0, 1};
  // Loops with `pipeline` >= 2 (the pipeline-loops pass) whose body loads into shared memory:
  // each such load gets a ring of that many buffers; iteration i + S - 1's copies go out at
  // the top of iteration i. False when the loop is not one (emit_loop prints it).
  struct Ring {
    SharedView view;
    int64_t stage_elems = 0;
    std::string stage;  // the variable holding this iteration's stage
  };
  std::unordered_map<const Op*, Ring> rings_;
  // A ring stage's pointer expression (lowered_load_shared) -> its 32-bit shared address, the
  // ring's base (loop-invariant) plus the stage's offset in 32 bits. wgmma's descriptors take
  // it (shared_addr): the generic pointer's 64-bit arithmetic and conversion came after each
  // iteration's barrier wait in the SASS, ahead of the first wgmma, where the planning
  // emitter's 32-bit stage address was computed while the wait ran (H100, session 50).
  std::unordered_map<std::string, std::string> stage_u32_;
  // The 32-bit shared address of view `sv`'s first element.
  std::string shared_addr(const SharedView& sv) const;
  // The refill of a cp.async ring's freed stage (iteration i + S - 1's copies), left for an
  // mma.sync dot at the top level of the ring loop's body (ring_refill_loop_) to print in its
  // first k step, before that step's mma instructions (lowered_dot says why); printed at the
  // iteration's end where no such dot took it. Called with (part, parts): the loop's
  // `refill_parts = P` spreads the refill over the dot's first P k steps, piece p in step p
  // (each load's chunk rounds cut in P ranges; the commit with the last piece); (0, 1) the whole.
  std::function<void(int, int)> ring_refill_;
  const Op* ring_refill_loop_ = nullptr;
  // The mma.sync dot of a cp.async ring loop that loads its next iteration's first k step's
  // fragments (from the next stage) before its own last k step, with the ring's wait and barrier
  // moved there from the iteration's top: the tensor cores run the last step's mma instructions
  // while those loads are in flight, instead of idling after each barrier until the first
  // step's fragments arrive (emit_ring_loop, lowered_dot). `fa`, `fb`: the fragment buffers,
  // declared before the loop; `first`: true in the loop's first iteration, which loads its own
  // first step's fragments.
  struct FragmentsAhead {
    const Op* dot = nullptr;
    std::string fa, fb, first;
    int64_t stages = 0;
  };
  FragmentsAhead frags_ahead_;
  bool emit_ring_loop(const Op& op, const std::vector<const Value*>& vals, const std::vector<std::string>& carried);
  // The rings of `loads` (S buffers each, one stage variable for all): rings_.
  void alloc_rings(const std::vector<const Op*>& loads, int64_t S);
  // Every element of register tile `x` written to the view (its owners write; barriers around).
  void store_to_shared(const Value* x, const SharedView& sv);
  // A load_tile into a shared layout: cp.async copies of 16 bytes (zero-filled past the view).
  void lowered_load_shared(const Op& op);
  // The 2-D view as a staged mma operand.
  StagedOperand staged_from(const Op& op, const SharedView& sv) const;
  int64_t lowered_smem_ = 0;  // bytes of the staged operands' buffers, after the scratch
  // Where those buffers begin (a pointer expression): after the scratch, rounded up to a
  // 1024-byte boundary of the shared window in a wgmma kernel (its swizzled tiles need one;
  // 1024 more bytes are reserved for the rounding).
  std::string lowered_base() const;
  // Whether every use of `v` is the value a store_tile stores (and there is one).
  bool only_stored(const Value* v) const;
  // Prints `acc` = the fold of `elems` (C++ expressions of type T): eight partials and a tree
  // where there are 8 or more, else in order (a built-in kind's fold: any order).
  void fold_slots(const std::string& acc, const std::string& T, const std::vector<std::string>& elems,
                  const std::function<std::string(const std::string&, const std::string&)>& fold);
  static constexpr const char* kLoweredBase = "TSR_LO_BASE";
  // --- output ---
  const Kernel& k_;
  CudaTarget tg_;
  // Each op's line as `tessera compile --emit ir` prints it (comments and error messages).
  std::unordered_map<const Op*, std::string> op_texts_;
  std::string text_of(const Op& op) const;
  int T_ = 128;  // threads per CTA
  int cluster_ = 1;  // CTAs per program (a thread-block cluster along x), see the constructor
  // Cluster-split kernels: throws NotClusterable naming `op` (no-op when cluster_ == 1).
  void needs_no_cluster(const Op& op, const std::string& what) const;
  // The threads of a program: a CTA's, times its CTAs on a cluster (the layout emitter's
  // layouts place elements over all of them).
  int program_threads() const { return T_ * cluster_; }
  // Whether warp bit b of a layout's placement is the cluster rank's (at or above a CTA's warps).
  bool cta_warp_bit(size_t b) const { return (int64_t{1} << b) >= warps_; }
  // After a butterfly of shuffles: a float max or min's `acc` (of type t) takes lane 0's value,
  // so that every lane holds the same zero.
  void lane_zeros_agree(const std::string& acc, ScalarKind t, const std::string& kind);
  // Whether a reduction of `X` along `axis` (into `r`, null for a scalar) folds values of
  // several CTAs of the cluster: the warp bits above a CTA's (its rank's) lie on the axis.
  // Throws NotClusterable where they do but the exchange cannot fold them (some of them on
  // other dims or copies, a result of more than one element).
  bool crosses_ctas(const Op& op, const Dist& X, int64_t axis, const Value* r) const;
  // exchange_cluster_partials for the layout emitter's reductions, every lane then holding the
  // same bits.
  void exchange_cluster_value(const Op& op, const std::string& T, const std::string& acc, const std::string& kind,
                              const std::function<std::string(const std::string&, const std::string&)>& fold);
  // The cluster step of a reduction: folds the CTAs' values `acc` (an lvalue, uniform in each
  // CTA) across the cluster, in rank order, into every thread of every CTA (EmitShape.cpp).
  void exchange_cluster_partials(const Op& op, const std::string& C, const std::string& acc,
                                 const std::function<std::string(const std::string&, const std::string&)>& step);
  std::vector<std::string> lines_;
  std::vector<const Op*> line_op_;
  const Op* cur_ = nullptr;
  int ind_ = 0;
  int counter_ = 0;
  int64_t smem_ = 0;  // bytes of scratch needed
  std::map<std::string, int64_t> stats_;
  bool uses_mma_ = false;
  std::unordered_map<const Value*, std::string> name_;
  struct ViewInfo {
    std::string ptr;
    std::vector<std::string> dims, strides;  // C++ expressions (int64)
  };
  std::unordered_map<const Value*, ViewInfo> views_;

  void line(const std::string& s);
  std::string fresh(const std::string& p) { return p + std::to_string(counter_++); }
  [[noreturn]] void fail(const Op& op, const std::string& msg) const;
  const std::string& nm(const Value* v) const;
  std::string bind_new(const Value* v, const std::string& hint = "v");
  std::vector<int64_t> shape_of(const Op& op, const Value* v) const;
  const ViewInfo& view_of(const Op& op, const Value* v) const;

  Layout layout(int64_t numel) const;
  Layout layout_of(const Value* v) const;
  // Expression of the element index of slot `s` (a compile-time loop variable): its index
  // within this CTA's part (local_elem_expr), plus rank * part in a cluster-split kernel.
  std::string elem_expr(const Layout& L, const std::string& s) const;
  std::string local_elem_expr(const Layout& L, const std::string& s) const;
  // Condition that slot `s` holds a real element (blocked tiles may have a partial last chunk).
  std::string valid_expr(const Layout& L, const std::string& s) const;
  // Condition that this thread is the one that performs side effects for element `e`.
  std::string owner_expr(const Layout& L, const std::string& s) const;
  // Declares the register array (tiles) of a result; returns its name.
  std::string declare(const Op& op, const Value* v, const std::string& hint = "v");
  // Emits `for slot` (unrolled) around body(s).
  void slots(const Layout& L, const std::function<void(const std::string&)>& body);
  void open(const std::string& s) { line(s); ++ind_; }
  void close(const std::string& s = "}") { --ind_; line(s); }
  // Shared scratch: pointer expression to `bytes` at `off` as type T; records the need.
  std::string smem_ptr(const std::string& type, int64_t off, int64_t bytes);
  static int64_t align16(int64_t b) { return (b + 15) / 16 * 16; }
  // Writes tile `v` (compute type, flat row-major) to `ptr` (barrier before; none after).
  void stage(const Value* v, const std::string& ptr);
  // Fills result tile array `dst` (layout of `r`) from src_fn(element index expr) (no barrier).
  void gather_into(const Value* r, const std::string& dst,
                   const std::function<std::string(const std::string& e)>& src_fn);
  // Multi-dim coordinate expressions of flat index `e` in static shape `S`.
  static std::vector<std::string> coords(const std::string& e, const std::vector<int64_t>& S);
  static std::string flat(const std::vector<std::string>& c, const std::vector<int64_t>& S);
  // __syncthreads(); then the program prefetch copies waiting for a barrier in this block.
  void barrier();
  // The value of kernel constexpr `name` (a codegen knob), or `fallback` when it has none.
  int64_t knob(std::string_view name, int64_t fallback = 0) const {
    const ConstexprDecl* d = k_.find_constexpr(name);
    return d ? d->value : fallback;
  }
  void count(const std::string& stat, int64_t n = 1) { stats_[stat] += n; }

  // Global memory in program order (docs/semantics.md): a view this program stored to,
  // scattered into or updated atomically since the last barrier() (written_views_) is read by a
  // load_tile or gather only after a barrier, since other threads wrote its elements. A loop or
  // branch counts every write inside it as pending before its body and after it.
  std::unordered_set<const Value*> written_views_;
  void order_global_reads(const Op& op, bool before);
  void emit_block(const Block& b);
  const Op* terminator(const Block& b, const Op& parent) const;
  void emit_op(const Op& op);
  void elementwise(const Op& op, const std::function<std::string(const std::vector<std::string>&)>& fn);
  void emit_unary(const Op& op);
  void emit_binary(const Op& op);
  void emit_cast(const Op& op);
  void emit_load_store(const Op& op);
  // 16-bit float tiles kept packed (EmitMemory.cpp): a load_tile of bf16/f16 through vectors
  // whose every use is a cast to f32 keeps two elements per 32-bit register (tsr::Packed16),
  // and each such cast becomes a view of it that converts at every use. The loaded tile then
  // holds half the registers while it stays live (across a row's reductions, say). A kernel
  // constexpr pack_narrow_loads = 0 turns this off (for comparisons).
  // The layout emitter packs such a load carried one iteration ahead too (prefetch-loop-loads):
  // packs_value answers for the load, the `if` results and the loop's carried values it flows
  // through, all packed or none (declare and copy_value then print Packed16 and copy words).
  bool packs_load(const Op& load);
  bool packs_value(const Value* v);
  // A layout-emitter value held packed (a member of such a class), and its Packed16 type.
  bool packed_in_layouts(const Value* v);
  std::string packed_type(const Value* v);
  bool alias_packed_cast(const Op& cast);
  std::unordered_map<const Value*, std::vector<const Op*>> users_;  // filled on first use
  std::unordered_map<const Value*, bool> packed_;
  // Loads prefetched one iteration ahead (EmitMemory.cpp): in an ordinary `for` whose body
  // writes no memory, each packed load at the body's top level whose indices are the induction
  // variable or values from outside the loop is issued for iteration iv + step before the body
  // of iteration iv runs (into a Packed16 carried across iterations), so that its latency
  // overlaps the body's reductions and barriers. On with a kernel constexpr prefetch_loads = 1
  // only: a row kernel's unused loop branch sets its registers too (softmax BLOCK_N=4096: 64 ->
  // 72 with it). begin_prefetch emits the first loads before the loop opens and returns the
  // loads; prefetch_next, at the top of the body, takes over this iteration's tiles and issues
  // the next ones.
  std::vector<const Op*> begin_prefetch(const Op& for_op);
  void prefetch_next(const Op& for_op, const std::vector<const Op*>& loads, const std::string& iv);
  std::unordered_map<const Op*, std::string> prefetch_buf_;  // load -> its carried Packed16
  std::unordered_map<const Op*, bool> prefetched_;          // loads the body must not emit again
  std::string load_into_;  // when set, emit_load_store fills this Packed16 instead of a new one
  void emit_gather_scatter(const Op& op);
  void emit_atomic(const Op& op);
  void emit_shape(const Op& op);
  void emit_dot(const Op& op);
  // Tensor-core dots whose accumulator is a loop-carried value that only the dot reads and only
  // the yield consumes keep it in mma fragments for the whole loop (EmitDot.cpp).
  struct MmaPlan {
    bool ok = false;
    int64_t M = 0, N = 0, K = 0, wm = 0, wn = 0, mt = 0, nt = 0, lda = 0, ldc = 0;
    bool bf16 = true;
    // fp8 operands (mma.sync m16n8k32, sm_89+): 1 e4m3, 2 e5m2 (mma.cuh's F8); 0: 16-bit. With
    // fp8, K and lda count bytes. `why`: for an fp8 dot that cannot take it, the reason.
    int f8 = 0;
    std::string why;
    int64_t operand_bytes() const { return f8 ? 1 : 2; }
    const char* f8_name() const { return f8 == 1 ? "e4m3" : "e5m2"; }
  };
  // The mma.sync plan of a dot (ok when tensor cores take it).
  MmaPlan plan_mma(const Op& dot) const;
  // The layout of a fragment-carried dot's accumulator: the wgmma plan's (wg_.mma, one warpgroup
  // row block per consumer warpgroup) for the wgmma dot, the mma.sync plan for any other.
  MmaPlan fragment_plan(const Op& dot) const;
  std::unordered_map<const Op*, std::string> frag_of_;  // dot -> fragment array name
  // For `for` ops: carried index -> the dot whose accumulator it is (fragment-carried).
  std::vector<std::pair<size_t, const Op*>> frag_carried(const Op& for_op) const;
  // The dot whose accumulator is carried value j of `for_op` in the way frag_carried needs
  // (whatever its shape), or null.
  const Op* carried_dot(const Op& for_op, size_t j) const;
  void frags_from_tile(const MmaPlan& p, const Value* v, const std::string& frag);
  void frags_to_tile(const MmaPlan& p, const std::string& frag, const Value* r, const std::string& dst);
  // Every fragment element = scalar `x` (an accumulator that starts as a splat: no exchange).
  void frags_fill(const MmaPlan& p, const std::string& frag, const std::string& x);
  // A loop result held in fragments that is only stored (directly, or through one float cast
  // that is only stored) goes from the fragments straight to memory: no exchange through shared
  // memory, no blocked copy of the tile. `cast` is the kind the stored values are rounded to.
  struct FragTile {
    MmaPlan p;
    std::string frag;
    ScalarKind cast = ScalarKind::F32;
    // f32 arithmetic between the loop and the cast, as an expression of one fragment value x_
    // (mul/add/sub by uniform scalars: an fp8 matmul's scales, a bias).
    std::string expr = "x_";
  };
  std::unordered_map<const Value*, FragTile> frag_tiles_;
  // The ops from loop result j to its store when they can run on the fragments (f32 mul, add or
  // sub by a splat scalar, then an optional float cast, then the store), else empty. Found once
  // per loop result (the wgmma loop's is asked for by can_be_persistent and again by emit_for).
  const std::vector<const Op*>& frag_store_chain(const Op& for_op, size_t j) const;
  std::vector<const Op*> find_frag_store_chain(const Op& for_op, size_t j) const;
  mutable std::unordered_map<const Value*, std::vector<const Op*>> frag_store_chains_;
  bool fold_frag_binary(const Op& op);
  // emit_op's hooks: a cast of a fragment-held tile, a store of one (true when handled).
  bool fold_frag_cast(const Op& cast);
  bool store_frag_tile(const Op& store);
  // The converting lambda body of a fragment store (x_ -> the view's storage type).
  std::string frag_store_conv(const FragTile& ft, ScalarKind view_elem) const;
  void emit_wgmma_tma_store(const Op& store, const FragTile& ft);
  // A `for` with pipeline >= 2 whose body only computes scalar indices, loads the two operands
  // of one fragment-carried mma dot and yields its result: the loads become a cp.async ring of
  // swizzled stages read with ldmatrix (Pipelining.cpp). emit_pipelined emits the whole loop
  // (unaligned operands are handled inside it, element by element).
  struct PipePlan {
    bool ok = false;
    int stages = 0;
    // Fragments of k16 step ks + 1 load while step ks's mma run (one CTA per SM: registers allow).
    bool double_buffer = false;
    // Knobs, from kernel constexprs (off by default; cuda_bench times them):
    //   mma_l2_prefetch = 64 | 128 | 256: the ring's cp.async ask L2 to fetch that many bytes
    //     around each chunk (.L2::NB);
    //   mma_spread_copies = 1: with double-buffered fragments and at least 3 k16 steps per stage,
    //     the next stage's copies go out in KS - 1 pieces, one after each of steps 0 .. KS-2's
    //     mma, instead of all after step 0's;
    //   min_blocks = B >= 2: the ring stays within 1/B of shared memory, so that the B CTAs per
    //     SM that __launch_bounds__ then asks registers for also fit in shared memory.
    //   mma_early_last_step = 1: (double-buffered) the last k16 step's mma go out before the
    //     stage's wait and barrier instead of after them.
    int l2_prefetch = 0;
    int copy_parts = 1;
    bool mma_before_wait = false;
    const Op *dot = nullptr, *load_a = nullptr, *load_b = nullptr;
    // fp8: B as the transpose of a load of an [N, K] view (the ring holds B^T, K-major).
    const Op* perm_b = nullptr;
    MmaPlan mma;
    std::string why;  // why the loop is not a ring (when !ok)
  };
  PipePlan plan_pipeline(const Op& for_op, const std::vector<std::pair<size_t, const Op*>>& frags) const;
  // The load_tile in `body` (pad 0, used once) of a 2-D `in` view that produces `v`, or null:
  // what a cp.async or TMA ring can copy instead.
  const Op* ring_operand_load(Block& body, const Value* v, ScalarKind in) const;
  void emit_pipelined(const Op& for_op, const PipePlan& pp, const std::string& frag);
  // sm_90a: a pipelined loop feeding one dot from two 2-D views becomes a TMA + mbarrier ring
  // feeding wgmma, with a producer warpgroup and BM / 64 consumer warpgroups (EmitWgmma.cpp).
  // Planned before anything is emitted: it decides the thread count and adds one tensor-map
  // parameter per operand view. `mma` is the accumulator as warp fragments (wm = BM / 16 warps
  // of 16 rows, one 16 x BN block each), which is exactly wgmma's register layout, so the mma
  // helpers (fill, exchange, direct epilogue) serve it unchanged.
  struct WgmmaPlan {
    bool ok = false;
    std::string why;  // why a candidate loop was not taken (empty when ok or none was found)
    const Op *loop = nullptr, *dot = nullptr, *load_a = nullptr, *load_b = nullptr;
    int stages = 0, consumer_warps = 0;
    int64_t BM = 0, BN = 0, BK = 0;
    bool bf16 = true;
    // Operand element bytes (2: bf16/f16, k16 instructions; 1: fp8, k32), the instruction's type
    // name in wgmma.cuh, and B's layout in shared memory: K-major when the dot reads the
    // transpose of a load of an [N, K] view (perm_b is that permute), else MN-major (16-bit only).
    int eb = 2;
    std::string type = "bf16";
    bool b_kmajor = false;
    const Op* perm_b = nullptr;
    // Bytes of a row of B's swizzle atom: 128, or 64 for an MN-major B tile of N = 32 (mod 64)
    // columns (96: cuBLAS's tile at 1024x1536x7168), copied as boxes of 32 columns (64-byte
    // swizzle). Such a tile has no TMA-store epilogue (its boxes are 64 columns).
    int b_swizzle = 128;
    // The operand-swapped product (knob swap_operands; a dot whose M tile is 8, 16 or 32 rows,
    // under wgmma's 64): the instruction computes C^T = B^T A^T, the dot's B tile (the weights)
    // on wgmma's 64-row blocks and its A tile (the batch) on n = 8-32, so that no 64-row A tile
    // is mostly padding. Then BM and BN below are the instruction's (BM = the dot's N tile, BN =
    // its M tile), load_a is the dot's B load (the weights: K-major from an [N, K] view under
    // perm_b, else MN-major, 16-bit only) and load_b its A load (K-major), and the fragments
    // hold C^T: the epilogue stores them transposed (tsr::store_frags_t).
    bool swapped = false;
    bool a_kmajor = true;
    MmaPlan mma;
    std::string tma_a, tma_b;  // kernel parameter names of the tensor maps
    // Persistent kernels with a 16-bit output (and an N tile of whole 64-column boxes, not
    // swapped, tma_store_epilogue = 1): the epilogue stages each consumer warpgroup's
    // 64 x BN block in 64-column boxes through swizzled 8 KiB buffers and stores them with
    // TMA, so the consumers return to the ring while the copy engine writes.
    const Op* store = nullptr;
    bool tma_store = false;
    std::string tma_c;
    int64_t stage_bytes() const { return (BM * BK + BK * BN) * eb; }
    int64_t ring_bytes() const { return int64_t(stages) * stage_bytes(); }
    // One CTA's f32 accumulators (BM x BN, BN / 2 per consumer thread): a split-K slot.
    int64_t partial_sum_bytes() const { return int64_t(consumer_warps) * 32 * (BN / 2) * 4; }
    // Buffers of 8 KiB per consumer warpgroup (knob epilogue_buffers: 2, or 4 so that no box
    // waits for an earlier box's store; the ring then has a stage less). Reserved in shared
    // memory for every wgmma plan, before it is known whether the kernel is persistent with a
    // TMA-store epilogue (split-K, f32 outputs and tma_store_epilogue = 0 leave them unused).
    int epilogue_buffers = 2;
    // (None for the swapped product, whose fragments are stored transposed from registers, nor
    // for N tiles that are no whole number of 64-column boxes.)
    int64_t staging_bytes() const { return swapped || BN % 64 ? 0 : 8192 * epilogue_buffers * (BM / 64); }
    // How many earlier box stores may still read their buffers when a box is staged (BN / 64
    // boxes: 128 and 256 with two buffers, 256 with four, let buffers - 1 run on).
    int64_t epilogue_in_flight() const { return epilogue_box_in_flight(BN / 64, epilogue_buffers); }
    // Knob cluster_m = 2 (persistent kernels): CTA pairs of a thread-block cluster take the
    // programs (2q, n) and (2q + 1, n) together; each copies half of the B tile (its rows, a
    // box of half height) into both CTAs' rings with TMA multicast, and each consumer warp
    // releases a stage to both CTAs' producers. 1: one CTA per program.
    int cluster_m = 1;
    // Knob epilogue_overlap (1, the default, in persistent kernels with the TMA-store epilogue;
    // 0 turns it off): the producer and consumer warpgroups run separate program loops, and
    // setmaxnreg moves registers from the producer warpgroup to the consumers (targets below;
    // 0 when the kernel has registers enough without). A consumer packs its finished block
    // into 16-bit pairs (BN / 4 registers) and stores box c of it during iteration c of the
    // next program's loop, while that program's first wgmma groups run, instead of stopping
    // the tensor cores for it.
    bool overlap = false;
    int producer_regs = 0, consumer_regs = 0;
  };
  WgmmaPlan wg_;
  WgmmaPlan plan_wgmma() const;
  // cluster_m for the wgmma plan of a persistent kernel (knob cluster_m; a note says why not
  // when it was asked for and cannot be had).
  int plan_wgmma_cluster();
  // wg_.overlap and its register targets (knob epilogue_overlap; a note says why not when it
  // was asked for and cannot be had). Needs persistent_ and wg_.tma_store.
  void plan_epilogue_overlap();
  // Which warpgroups the code being emitted runs on: both (one program loop whose wgmma loop
  // branches on the warp), or, under wg_.overlap, the producer's or the consumers' own loop.
  enum class Role { Both, Producer, Consumer };
  Role role_ = Role::Both;
  // Under wg_.overlap: the kernel's program loop (emitted by program_loop) once in the producer
  // warpgroup's branch and once in the consumers', each with its setmaxnreg, the consumers'
  // pending-block state before theirs and the last block's boxes after it.
  void emit_role_loops(const std::function<void()>& program_loop);
  // Under wg_.overlap: the statement that stages and stores box c of the pending block.
  std::string pending_box(int64_t c) const;
  // The ring's shared memory, barriers and iteration counter (ring_, full_, empty_, ring_it_):
  // at kernel scope before the program loop of a persistent kernel, else just before the loop.
  void emit_wgmma_setup();
  void emit_wgmma_loop(const Op& for_op, const std::string& frag);
  // Its two sides: the producer thread's copies and the consumer warpgroups' wgmma, for `trip`
  // iterations from iteration `first` of the loop.
  void emit_wgmma_producer(const Op& for_op, const std::string& trip, const std::string& first);
  void emit_wgmma_consumer(const std::string& frag, const std::string& trip);
  // Persistent: the kernel body runs in a loop over the programs (tsr_pid0/1 instead of
  // blockIdx), with the wgmma ring and its phases carried from one program to the next, so the
  // producer loads the next program's tiles while the consumers store this one's. Only for
  // kernels whose top level is index arithmetic, the accumulator's splat, the wgmma loop and its
  // direct epilogue (nothing else that needs a CTA barrier).
  bool persistent_ = false;
  bool can_be_persistent();  // also sets wg_.store
  // Split-K compilation (CudaTarget::split_k) of a kernel that could be persistent: blockIdx.z
  // picks a slice of the wgmma loop's iterations; emit_split_k_fixup then combines the slices.
  bool split_k_ = false;
  void emit_split_k_fixup(const std::string& frag);
  // Whether a CTA's partial sums fit in its ring and epilogue staging, for the fixup within a
  // cluster.
  bool cluster_fixup_fits() const;
  // Whether the wgmma loop's accumulator starts as a splat of the constant 0: only then may its
  // K loop be cut into parts (split-K, stream-K) whose partial sums are added.
  bool accumulator_starts_at_zero() const;
  // Stream-K in a persistent kernel (CudaTarget::stream_k): the tiles cuda::stream_k_tiles names
  // (all of them when they are fewer than the CTAs; else a partial last wave, with the full wave
  // before it when it is under half the CTAs) are cut
  // into equal shares of K work, one per CTA (tsr_pb / tsr_pe: the part of tile tsr_t this item
  // covers, in 1/gridDim.x of its K loop); emit_stream_k_fixup hands the parts that end inside
  // a tile to the CTA that ends it.
  bool stream_k_ = false;
  // Stream-K asked for: by the target (CudaTarget::stream_k) or the kernel's stream_k knob.
  bool stream_k_asked() const { return tg_.stream_k || knob("stream_k", 0) == 1; }
  void emit_stream_k_fixup(const std::string& frag);
  // The condition (C++) under which a thread's warp holds rows of the output in a split-K or
  // stream-K fixup: a consumer warp, and (where the store's row is known before the K loop)
  // one whose 16 rows start inside the output.
  std::string fixup_rows_in_output() const;
  // Columns of an earlier part's slot that the stream-K fixup loads at once: as many as the
  // consumers' registers hold beside the accumulators (the packed pending block is dead
  // there), each batch one round of L2 latency (one column at a time: 32 rounds at BN = 256).
  int64_t stream_k_batch() const;
  // One CTA per program, but the programs renumbered into the persistent kernel's grouped
  // order (8 rows of axis 0 at a time): for kernels with a 2-D grid and a pipelined mma.sync
  // matmul loop at the top level, whose CTAs then share operand tiles in L2.
  bool grouped_ = false;
  // Rows of axis 0 per group in the grouped and persistent orders: the kernel constexpr GROUP_M
  // (Triton's GROUP_SIZE_M), else 8. The library matmul does not declare it: on the H200 groups
  // of 4, 16 and 32 rows measured within the run-to-run spread of 8 (bench/RESULTS.md, session 6).
  // The layout emitter: the grid yield's group_rows (persist-programs), else 8.
  int64_t group_rows() const;
  // Program prefetch (EmitProgramPrefetch.cpp): the kernel runs persistent, each CTA looping
  // over programs t, t + gridDim.x, ... (as many CTAs as fit on the device), and each load_tile
  // whose indices are computed from the program ids alone issues, right after this program's
  // tile is read, the next program's tile as per-thread cp.async copies into shared memory. The
  // next program then reads its tile from shared memory: the memory latency of a row kernel's
  // load overlaps the previous row's reductions, barriers and stores instead of stalling the SM
  // between CTAs. Each thread copies exactly the 16-byte chunks it later reads itself, so the
  // buffers need no barrier; two buffers alternate between consecutive programs.
  struct ProgramPrefetch {
    const Op* load = nullptr;
    std::vector<const Op*> chain;  // the pure scalar ops between the program ids and its indices, in order
    int64_t offset = 0;            // its tile's bytes within one buffer
    std::string tag;               // the program whose tile its buffer holds (-1: none)
    bool invariant = false;        // the same tile for every program (indices not on the program ids)
  };
  std::vector<ProgramPrefetch> prog_pf_;
  // Stands for the buffers' offset in shared memory until run() knows the scratch's size.
  static constexpr const char* kProgramPrefetchOffset = "TSR_PF_OFFSET";
  int64_t prog_pf_bytes_ = 0;  // one buffer: every prefetched tile
  bool prog_persistent_ = false;
  enum class PfMode { None, Issue } pf_mode_ = PfMode::None;
  std::string pid_prefix_ = "tsr_pid";  // tsr_npid while issuing the next program's copies
  // Finds the loads (and sets prog_pf_) when the kernel allows it and the constexpr
  // prefetch_programs (default: tiles of at least kProgramPrefetchMinBytes) asks for it.
  bool plan_program_prefetch();
  // The layout emitter's: the loads prefetch-programs marked (`prefetch`, `prefetch_at`), when
  // the grid's yield says persistent = 1 and no loop has a producer warpgroup.
  bool lowered_program_prefetch();
  // After a load the layout emitter printed: its next program's copies, now or at a barrier.
  void after_prefetched_load(const ProgramPrefetch* pf);
  // Sets pf.load, pf.invariant and pf.chain (the pure scalar ops between the program ids and
  // the load's indices); false when an index comes from anything else.
  bool index_chain(const Op& load, ProgramPrefetch& pf) const;
  const ProgramPrefetch* program_prefetch_of(const Op& load) const;
  // After `load` (this program's tile read): the next program's copies of it, if any.
  void issue_program_prefetch(const ProgramPrefetch& pf);
  // The kernel body inside the persistent program loop.
  void emit_program_loop(const Block& body);
  // One buffer (prefetch_buffers = 1, the default): the copies into it wait for the first CTA
  // barrier after the load in the load's block (which orders this program's reads of the buffer
  // before them), or for one added at the block's end; two: right after the load, into the
  // other buffer. One buffer leaves the rest of the SM's shared memory / L1 to the kernel's
  // other loads (layernorm's w and b are read by every row).
  int pf_buffers_ = 1;
  std::vector<const ProgramPrefetch*> pending_pf_;
  int loop_callbacks_ = 0;  // inside emit_loop's top / end callbacks (their barriers are the loop body's)
  // Issues the pending copies of loads in `b` (after the barrier that precedes the call).
  void issue_pending_prefetches(const Block* b);
  // At the end of block `b`: a barrier for the copies still pending there.
  void flush_program_prefetch(const Block& b);
  bool has_pipelined_mma_loop() const;
  std::vector<std::string> notes_;  // CudaEmission::notes
  std::string wgmma_not_taken_;     // CudaEmission::wgmma_not_taken (also in notes_)
  int64_t pipe_frag_regs_ = 0;  // most accumulator registers per thread of a pipelined loop
  int64_t pipe_stage_elems_ = 0;  // most elements per thread one pipeline stage copies
  // `partner`: a reduce op right after `op` that folds_with_next() accepted; both fold in one
  // exchange (one barrier for the two).
  void emit_reduce(const Op& op, const Op* partner = nullptr);
  // Whether `op` runs again and again: inside a for / while, or anywhere in a persistent kernel
  // (an exchange there alternates between two copies of its shared words).
  bool runs_repeatedly(const Op& op) const;
  // Whether reduce `a` and the op `b` right after it are two sum / prod / max / min reductions of
  // the same kind, type and shape to one value each, with b's operand not a's result, over
  // blocked tiles: their cross-warp steps can share one exchange (layernorm's sums of x and x^2).
  bool folds_with_next(const Op& a, const Op& b) const;
  // The cross-warp step of a block reduction (EmitShape.cpp): one barrier, in shared words of
  // the reduction's own (a static __shared__ array; red_smem_ counts their bytes).
  void exchange_warp_partials(const Op& op, const std::string& C, int64_t P, const std::vector<std::string>& accs,
                              const std::function<std::string(const std::string&, const std::string&)>& step);
  int64_t red_smem_ = 0;
  // Declarations the kernel needs at its top (run() puts them after the preamble), e.g. state
  // that must outlive a loop iteration of the code that declares it.
  std::vector<std::string> prologue_;
  void emit_scan(const Op& op);
  void emit_sort(const Op& op);
  void emit_histogram(const Op& op);
  // A sum scan of one line that is the whole blocked tile: in registers, chunk by chunk, with
  // tsr::block_exclusive_sum across the threads (false when the scan is not one).
  bool emit_block_scan(const Op& op);
  void emit_for(const Op& op);
  // The ordinary loop of a `for` (carried values in `carried`); `top` runs at the top of the
  // body (given the induction variable's name; its 64-bit value is that name + "_"), `end`
  // after the carried values are assigned.
  void emit_loop(const Op& op, const std::vector<const Value*>& vals, const std::vector<std::string>& carried,
                 const std::function<void(const std::string&)>& top = {}, const std::function<void()>& end = {});
  void emit_if(const Op& op);
  // Region `reg` of `op`, then its yield's values copied into the result arrays `res`.
  void emit_region_into(const Op& op, int reg, const std::vector<std::string>& res);
  void emit_while(const Op& op);
  void emit_raw(const Op& op);
  // Struct ops (EmitStruct.cpp): buffers and pipe rings live in shared memory after the
  // scratch, at tsr_struct_base, which place_struct_storage defines at line `at` once the
  // scratch size is known.
  void emit_struct(const Op& op);
  void place_struct_storage(size_t at);
  int64_t struct_smem_ = 0;  // bytes of buffers and pipe rings
  // Knob struct_tma = 1 on sm_90a (EmitStruct.cpp, the file comment): the async_copy ops that
  // struct_tma_why_not accepts are one TMA box each, completing on one mbarrier that async_wait
  // waits on. Planned before the body is emitted (each copy's tensor map is a kernel parameter):
  // the copy -> its map's parameter name; a note for each copy not taken.
  std::unordered_map<const Op*, std::string> struct_tma_;
  void plan_struct_tma(std::vector<std::string>& sig, CudaKernelInfo& info);
  std::string struct_tma_why_not(const Op& copy) const;  // empty when TMA can take the copy
  // At the kernel's end: thread 0 waits for the copies no async_wait ended (none may still
  // write into shared memory once the CTA has exited).
  void drain_struct_tma();
  // Adds a TensorMap parameter (CudaEmitter.h) for 2-D kernel parameter `view` with this box
  // and swizzle (128, 64 or 0) unless one exists; returns its name.
  std::string add_tensor_map(std::vector<std::string>& sig, CudaKernelInfo& info, const Value* view,
                             int64_t box_cols, int64_t box_rows, int swizzle);
  // The same for a view of any rank up to 5, `box` innermost first (one entry per view dim).
  std::string add_tensor_map(std::vector<std::string>& sig, CudaKernelInfo& info, const Value* view,
                             const std::vector<int64_t>& box, int swizzle);
  // The layout emitter's TMA rings (sm_90a): each ring load whose tile TMA can write (a
  // 128-byte swizzled tile of a kernel parameter's view) and its tensor map; plan_tma_rings
  // adds the maps to the signature before the body is printed.
  std::unordered_map<const Op*, std::string> tma_loads_;
  void plan_tma_rings(std::vector<std::string>& sig, CudaKernelInfo& info);
  // A ring loop whose loads all have maps: one thread issues each stage's copies on a "full"
  // mbarrier; the warps wait for it, and release the stage on an "empty" one when done.
  void emit_tma_ring_loop(const Op& op, const std::vector<const Value*>& vals, const std::vector<std::string>& carried,
                          const std::vector<const Op*>& loads, const std::vector<const Op*>& chain, int64_t S);
  // The ring's 2 S mbarriers ("full" s at bars + 8 s, one arrival with the stage's bytes;
  // "empty" s at bars + 8 (S + s), one arrival per compute warp), initialised by thread 0
  // before a barrier; returns the name of their base address.
  // `order` > 0: that many more barriers after the ring's, each for `order_count` arrivals.
  // `pairs`: the ring of a CTA pair (program_pairs_): each empty barrier counts both CTAs'
  // compute warps, and a cluster barrier follows the setup.
  std::string init_ring_barriers(int64_t S, int64_t order = 0, int64_t order_count = 0, bool pairs = false);
  // The TMA copies of the iteration numbered `it` (induction value `iv`) of `loop` into its
  // stage, once the warps have released what the stage held S iterations before; only thread
  // 0 issues them unless `one_thread` is false (the caller has chosen the thread).
  void issue_tma_stage(const Op& loop, const std::vector<const Op*>& loads, const std::vector<const Op*>& chain,
                       const std::string& bars, int64_t S, const std::string& iv, const std::string& it,
                       bool one_thread);
  // specialize-warps' `warp_specialize = 1` loop, printed with a producer warpgroup (128
  // threads more than T_, which stays the compute warps' count): its ring and barriers are set
  // up first, then the producer's branch (the loop's bounds and the loads' indices, and one
  // thread issuing every stage) and the compute warps' (the whole kernel, the loop only waiting
  // and releasing). A loop printed without one (plan_warp_specialization's note, or
  // NotWarpSpecializable) is set to `warp_specialize = 0` and the kernel printed again
  // (emit_cuda_with_info), so that the IR it was printed from says so.
  const Op* ws_loop_ = nullptr;
  std::vector<const Op*> ws_slice_;  // the scalar ops the producer computes (producer_slice)
  std::string ws_bars_;
  bool ws_consumers_ = false;  // printing the compute warps' branch: barrier() is a named one
  static constexpr int kComputeBarrier = 8;  // its id (the planning emitter's consumers use 8 too)
  // persist-programs' `persistent = 1` on the grid's yield, for a kernel printed with its
  // producer warpgroup: both branches loop over the programs (tsr_pid0..2 in grouped order,
  // the grid's sizes as parameters tsr_grid0..2), and the ring's counters run on across them.
  bool ws_persistent_ = false;
  std::string ws_rn_;  // the compute warps' count of the loop's iterations begun, over all programs
  // pingpong-consumers' `consumers = 2`: two consumer warpgroups of T_ threads each (warps_
  // warps, the layouts' count), consumer c taking the CTA's programs 2j + c; ws_order_ is their
  // two order barriers (emit_warp_specialized_body says why they make it race-free).
  int consumers_ = 1;
  std::string ws_order_;
  // pair-programs' `program_pairs = 1` on a persistent kernel's yield: clusters of two CTAs
  // (__cluster_dims__(2, 1, 1)) take programs (2q, n) and (2q + 1, n) together; each CTA's
  // producer copies half of every `multicast = 1` ring tile into both CTAs' rings, its compute
  // warps release each stage in both CTAs, and the program past an odd grid stores nothing.
  bool program_pairs_ = false;
  // Whether ring load `l` is copied half by each CTA of the pair.
  bool multicast_load(const Op& l) const {
    return program_pairs_ && l.has_attr("multicast") && l.attr_int("multicast") == 1;
  }
  // store-epilogues-by-tma's `tma_store = 1` store of a persistent kernel: its tensor map, and
  // the compute warpgroup's two 8 KiB staging buffers (a shared address).
  const Op* tma_store_op_ = nullptr;
  std::string tma_store_map_, tma_store_buf_;
  void emit_tma_store(const Op& op);
  // overlap-epilogues' `overlap = 1` on that store: the compute warpgroup's packed blocks (pk[mt]),
  // their first row and column and whether a program's block waits to be stored (pend), kept
  // across the program loop; `iter`, while the compute warps' ring loop is printed, this
  // program's iteration count, which its wgmma dot stores box `iter` of the pending block at.
  struct OverlapStore {
    std::string pk, row, col, pend, iter;
    int64_t MT = 0, boxes = 0, G = 1, in_flight = 1;
  };
  OverlapStore overlap_;
  // The TMA store's staging boxes per compute warpgroup (store-epilogues-by-tma's `tma_buffers`, 2
  // unless it says 4).
  int64_t tma_store_buffers() const;
  // The statement that stores box b (block b / boxes, box b % boxes) of the pending block.
  std::string overlap_box(int64_t b) const;
  void plan_warp_specialization(std::vector<std::string>& sig, CudaKernelInfo& info);
  void emit_warp_specialized_body();
  // split-k-loops' `split_k = 1` loop (the split-K compilation): the SplitWorkspace parameter
  // tsr_ws and the launch's facts (plan_lowered_split_k), and after the loop the fixup that
  // adds the program's partial sums (lowered_split_k_fixup). The unsplit compilation says
  // whether the runtime may launch a split one (CudaKernelInfo::split_k_capable).
  const Op* split_loop_ = nullptr;
  // Where the split's CTAs can also add their partial sums within a cluster
  // (CudaKernelInfo::split_cluster): the ring load whose ring, idle after the loop, holds them.
  const Op* split_cluster_ring_ = nullptr;
  void plan_lowered_split_k(std::vector<std::string>& sig, CudaKernelInfo& info);
  void lowered_split_k_fixup(const Op& loop);
  // stream-k-programs' `stream_k = 1` on the persistent producer's loop (and the grid's yield):
  // the program loop takes whole tiles, then the CTA's units of the shared-out ones
  // (open_program_loop: units [tsr_pb, tsr_pe) of the tile's tsr_G), both branches run the
  // loop's part of its iterations (stream_k_bounds), and the compute warps add the parts after
  // it (lowered_stream_k_fixup). The workspace holds a flag and a slot per CTA.
  const Op* stream_loop_ = nullptr;
  // Declares the first and the end of `loop`'s part as int64_t names: the same rounding in every
  // CTA, so that the parts of a tile cover its iterations exactly once.
  std::pair<std::string, std::string> stream_k_bounds(const Op& loop);
  void lowered_stream_k_fixup(const Op& loop);
  // Quads of registers the stream-K fixup loads together (accumulators of `slots` registers a
  // thread): what the compute threads' registers hold beside them.
  int64_t stream_k_batch(int64_t slots) const;
  // The registers a compute thread of a warp-specialized program has: what setmaxnreg gives it
  // with more than one compute warpgroup, else ptxas's cap for the block.
  int64_t compute_thread_registers() const;
  // The condition under which this thread's warp holds rows of `loop`'s accumulator that are
  // read after it (split_skip_rows; "" when every warp's are).
  std::string skipped_rows_guard(const Op& loop);
  // Bounds emit_loop prints instead of the loop's operands (a stream-K part's).
  std::map<const Op*, std::pair<std::string, std::string>> loop_bounds_;
  // Quads of registers a fixup loads together (of an accumulator of `slots` registers a
  // thread): as many as registers allow beside the accumulators without spills.
  int64_t fixup_batch(int64_t slots) const;
  std::string store_vec_fn(const Op& store);
  // Opens the persistent CTA's loop over the programs and names their ids (ws_persistent_).
  // `pingpong`: consumer tsr_cons's loop, over the CTA's programs 2j + tsr_cons (j is tsr_j).
  void open_program_loop(bool pingpong = false);
  // The ids of program `t` (an expression of index_type) in grouped order: groups of G values of axis 0
  // (G0 of them in all; pairs: CTA pairs of a cluster, each its rank's program), each taken for
  // every value of axis 1 in turn. Needs tsr_in_group = G * (axis 1's size) declared.
  void emit_grouped_ids(const std::string& t, const std::string& G, const std::string& G0, bool pairs,
                        const std::string& index_type = "int64_t");
  // A persistent kernel's grid sizes (the first `axes`) as int32 parameters tsr_grid0, 1, ...
  void add_grid_size_params(std::vector<std::string>& sig, CudaKernelInfo& info, int axes);
  void copy_value(const Value* v, const std::string& dst, const std::string& src);
  void assign_carried(const Op& y, const std::vector<const Value*>& vals, const std::vector<std::string>& carried);
  std::string combine(const Op& op, const std::string& a, const std::string& b);
};

// An op without regions whose results are all scalars, of a class without side effects (index
// arithmetic a pipelined loop may re-emit for another iteration).
bool pure_scalar(const Op& o);

// The fold of a sum, prod, max or min reduction of `t` values in their compute type (empty
// for other kinds), shared by both emitters' reductions.
std::function<std::string(const std::string&, const std::string&)> reduce_fold(const std::string& kind, ScalarKind t);

// Per-warp fragment coordinates warp_, lane_, g_, t_, m0_, n0_ (inside a block the caller opens).
void warp_coords(Emitter& e, const Emitter::MmaPlan& p);
// The note of an fp8 dot on mma.sync m16n8k32: "dot at LOC: mma.sync m16n8k32 e4m3 " + how, and
// what its accumulation means.
std::string fp8_mma_note(const Op& dot, const Emitter::MmaPlan& p, const std::string& how);

// Dynamic shared memory one CTA may use on the target.
int64_t smem_limit(const CudaTarget& t);

// "Is (v1, i1) better than (v2, i2)" for an argmax or argmin reduction (`kind`): NaN is the
// largest for argmax and the smallest for argmin; ties go to the smaller index.
std::string arg_better(const std::string& kind, const std::string& v1, const std::string& i1, const std::string& v2,
                       const std::string& i2);

// One step of an FMA dot into `out`: s + x * y, as the interpreter rounds it (f32 fused, a
// narrow float rounded each step, integers wrapping); "" for a type it has none for.
std::string fma_dot_step(ScalarKind out, const std::string& x, const std::string& y, const std::string& s);

// Whether a pipelined matmul whose threads hold `acc_regs` accumulators and copy `stage_elems`
// elements per stage fits two CTAs per SM (128 registers per thread, without spills) with its
// fragments loaded step by step. Larger ones run one CTA per SM, with room for double-buffered
// fragments and a deeper ring.
inline bool pipe_fits_two_ctas(int64_t acc_regs, int64_t stage_elems) { return acc_regs <= 64 && stage_elems <= 32; }

// The tensor cores' name of a 16-bit or f8 float operand type, as the device library's wgmma
// functions spell it ("bf16", "f16", "e4m3", "e5m2"); null for any other type. Both emitters.
inline const char* tensor_core_type(ScalarKind t) {
  switch (t) {
    case ScalarKind::BF16: return "bf16";
    case ScalarKind::F16: return "f16";
    case ScalarKind::F8E4M3: return "e4m3";
    case ScalarKind::F8E5M2: return "e5m2";
    default: return nullptr;
  }
}

}  // namespace tessera::cudagen
