#include "ir/Ops.h"

#include <cassert>

namespace tessera {

namespace {

constexpr AttrSpec req(std::string_view n, AttrKind k) { return {n, k, true}; }
constexpr AttrSpec opt(std::string_view n, AttrKind k) { return {n, k, false}; }

struct Extra {
  std::vector<AttrSpec> attrs;
  std::string_view doc;
};

// Attributes and documentation, one entry per op, in the order of Ops.def.
Extra extra(OpKind k) {
  using A = AttrKind;
  switch (k) {
    case OpKind::Const: return {{req("value", A::Number)}, "a scalar constant of the result type"};
    case OpKind::Param: return {{req("name", A::String)}, "the value of a kernel constexpr (i32)"};
    case OpKind::ProgramId: return {{req("axis", A::Int)}, "index of this program instance along a grid axis (i32)"};
    case OpKind::NumPrograms: return {{req("axis", A::Int)}, "number of program instances along a grid axis (i32)"};
    case OpKind::Dim: return {{req("axis", A::Int)}, "size of a view along an axis (i32)"};
    case OpKind::Arange: return {{opt("start", A::Int)}, "tile<i32, [N]> holding start, start+1, ..., start+N-1"};
    case OpKind::Splat: return {{}, "a tile whose every element is the scalar operand"};
    case OpKind::LoadTile: return {{opt("pad", A::Number), opt("l2_hint", A::String), opt("readers", A::IntList), opt("l2_prefetch", A::Int), opt("prefetch", A::String), opt("prefetch_at", A::Int), opt("multicast", A::Int)}, "load tile number (i0, i1, ...) of a view; out-of-bounds elements read as pad (default 0)"};
    case OpKind::StoreTile: return {{opt("tma_store", A::Int), opt("l2_hint", A::String), opt("tma_buffers", A::Int), opt("overlap", A::Int), opt("staged", A::Int)}, "store a tile at tile number (i0, i1, ...) of a view; out-of-bounds elements are dropped"};
    case OpKind::Gather: return {{opt("pad", A::Number)}, "load view[idx0, idx1, ...] elementwise from index tiles, with an optional i1 mask; masked-off or out-of-bounds elements read as pad"};
    case OpKind::Scatter: return {{}, "store a value tile to view[idx0, ...] elementwise, with an optional i1 mask; masked-off elements are skipped, out-of-bounds ones are an error"};
    case OpKind::Atomic: return {{req("kind", A::String)}, "atomic add/max/min of a value tile into view[idx0, ...]; returns the old values"};
    case OpKind::AtomicCas: return {{}, "atomic compare-and-swap view[idx] (cmp, value); returns the old values"};
    case OpKind::Neg: return {{}, "-x"};
    case OpKind::Not: return {{}, "bitwise not (logical not on i1)"};
    case OpKind::Exp: return {{opt("max_rel_error", A::Number)}, "e^x (within relative error max_rel_error where given: a backend may compute it faster)"};
    case OpKind::Exp2: return {{}, "2^x"};
    case OpKind::Log: return {{}, "natural logarithm"};
    case OpKind::Log2: return {{}, "base-2 logarithm"};
    case OpKind::Log1p: return {{}, "log(1 + x), accurate for small x"};
    case OpKind::Expm1: return {{}, "e^x - 1, accurate for small x"};
    case OpKind::Sqrt: return {{}, "square root"};
    case OpKind::Rsqrt: return {{}, "1 / sqrt(x)"};
    case OpKind::Abs: return {{}, "absolute value"};
    case OpKind::Sin: return {{}, "sine"};
    case OpKind::Cos: return {{}, "cosine"};
    case OpKind::Tanh: return {{}, "hyperbolic tangent"};
    case OpKind::Sigmoid: return {{}, "1 / (1 + e^-x)"};
    case OpKind::Erf: return {{}, "error function"};
    case OpKind::Floor: return {{}, "round toward -infinity"};
    case OpKind::Ceil: return {{}, "round toward +infinity"};
    case OpKind::Add: return {{}, "a + b (integers wrap around)"};
    case OpKind::Sub: return {{}, "a - b (integers wrap around)"};
    case OpKind::Mul: return {{}, "a * b (integers wrap around)"};
    case OpKind::Div: return {{}, "a / b (integers round toward zero; division by zero is an error)"};
    case OpKind::Cdiv: return {{}, "ceiling division of integers: (a + b - 1) / b, + and - wrapping, / as div (ceil(a / b) for a >= 0, b > 0)"};
    case OpKind::Rem: return {{}, "remainder with the sign of a (C fmod / %)"};
    case OpKind::Min: return {{}, "minimum (NaN if either is NaN)"};
    case OpKind::Max: return {{}, "maximum (NaN if either is NaN)"};
    case OpKind::Pow: return {{}, "a^b (floats; special cases as C pow)"};
    case OpKind::And: return {{}, "bitwise and"};
    case OpKind::Or: return {{}, "bitwise or"};
    case OpKind::Xor: return {{}, "bitwise xor"};
    case OpKind::Shl: return {{}, "shift left (shift >= width gives 0)"};
    case OpKind::Shr: return {{}, "shift right: arithmetic for signed, logical for unsigned"};
    case OpKind::Cmp: return {{req("pred", A::String)}, "comparison eq/ne/lt/le/gt/ge, result i1"};
    case OpKind::Fma: return {{}, "a * b + c with one rounding"};
    case OpKind::Where: return {{}, "cond ? a : b elementwise (cond is i1)"};
    case OpKind::Cast: return {{}, "convert to the result element type (layout and space stay)"};
    case OpKind::ConvertLayout: return {{}, "the same tile in the result's layout and memory space"};
    case OpKind::Bitcast: return {{}, "the same bits as the result element type, of the same width (a NaN: the canonical NaN's bits)"};
    case OpKind::Broadcast: return {{}, "expand size-1 dims (or a scalar) to the result shape"};
    case OpKind::ExpandDims: return {{req("axis", A::Int)}, "insert a size-1 dim at axis"};
    case OpKind::Reshape: return {{}, "same elements in row-major order, new shape"};
    case OpKind::Permute: return {{req("dims", A::IntList)}, "result dim i is operand dim dims[i]"};
    case OpKind::ExtractTile: return {{}, "sub-tile number (i0, i1, ...) of the result shape"};
    case OpKind::InsertTile: return {{}, "the tile with sub-tile number (i0, ...) replaced"};
    case OpKind::Dot: return {{opt("in_flight", A::Int), opt("fragments_ahead", A::Int), opt("early_last_step", A::Int)}, "acc + a @ b for a [M, K], b [K, N], acc [M, N]"};
    case OpKind::Reduce: return {{req("axis", A::Int), req("kind", A::String)}, "reduce along axis: sum, prod, max, min, argmax, argmin"};
    case OpKind::ReduceWith: return {{req("axis", A::Int)}, "reduce along axis with a combiner region (a, b) -> c, left to right"};
    case OpKind::Scan: return {{req("axis", A::Int), req("kind", A::String)}, "inclusive scan along axis: sum, prod, max, min"};
    case OpKind::ScanWith: return {{req("axis", A::Int)}, "inclusive scan along axis with a combiner region (a, b) -> c"};
    case OpKind::Sort: return {{req("axis", A::Int), opt("descending", A::Bool)}, "stable sort along axis (ascending unless descending; NaN above +inf, -0 below +0); with an i32 index tile, results (values, the indices moved alike), else values or (values, positions)"};
    case OpKind::Topk: return {{req("axis", A::Int), opt("largest", A::Bool)}, "the k = result-dim largest (smallest unless largest, default true) along axis, best first, ties by smaller position; results (values[, indices]): the index tile's elements, or positions"};
    case OpKind::Histogram: return {{}, "counts of the integer operand's values (any shape) in bins 0 .. B-1, B = the result's dim: tile<i32, [B]>; values outside [0, B) are not counted"};
    case OpKind::For: return {{opt("pipeline", A::Int), opt("warp_specialize", A::Int), opt("consumers", A::Int), opt("refill_in_dot", A::Int), opt("refill_parts", A::Int), opt("split_k", A::Int), opt("split_skip_rows", A::Int), opt("stream_k", A::Int)}, "for iv = lb; iv < ub; iv += step, with loop-carried values"};
    case OpKind::If: return {{}, "if cond then region 0 else region 1, each yielding the results"};
    case OpKind::While: return {{}, "while region 0 (carried) yields true, run region 1 (carried) -> carried"};
    case OpKind::Yield:
      return {{opt("persistent", A::Int), opt("group_rows", A::Int), opt("num_warps", A::Int), opt("prefetch_buffers", A::Int),
               opt("program_pairs", A::Int), opt("stream_k", A::Int), opt("num_ctas", A::Int)},
              "end a region, passing its values out"};
    case OpKind::Alloc: return {{}, "a buffer in the result type's memory space (\"shared\"), live for the whole program; a slot is read only after something wrote it"};
    case OpKind::AsyncCopy: return {{opt("pad", A::Number)}, "start copying tile (i0, ...) of a view into buffer slot (s0, ...), as load_tile reads it (pad); done at the next async_wait"};
    case OpKind::AsyncWait: return {{}, "wait until this program's async copies have landed (a barrier of the program's threads)"};
    case OpKind::BufferRead: return {{}, "read buffer slot (s0, ...) as a tile of the buffer's trailing dims"};
    case OpKind::BufferWrite: return {{}, "write a tile into buffer slot (s0, ...)"};
    case OpKind::Pipe: return {{}, "a FIFO of tiles in a ring of STAGES shared slots (type pipe<T, [STAGES, dims...]>), empty"};
    case OpKind::PipePush: return {{opt("pad", A::Number)}, "producer: take a free slot, fill it with tile (i0, ...) of a view (as load_tile) or with a tile value, commit it"};
    case OpKind::PipePop: return {{}, "consumer: wait for the oldest full slot, read it as a tile, free it"};
    case OpKind::WarpRole: return {{req("role", A::String)}, "a region run by the warps of one role (\"producer\", \"consumer\"); sequentially, in program order"};
    case OpKind::Raw: return {{req("name", A::String), opt("cpp", A::String), opt("cuda", A::String)}, "inline native code, one body per backend"};
  }
  return {};
}

std::vector<OpInfo> build_table() {
  std::vector<OpInfo> t;
#define OP(Enum, text, cls, minops, maxops, results, regions)                            \
  {                                                                                      \
    Extra e = extra(OpKind::Enum);                                                       \
    t.push_back(OpInfo{OpKind::Enum, text, OpClass::cls, minops, maxops, results, regions, \
                       std::move(e.attrs), e.doc});                                      \
  }
#include "ir/Ops.def"
#undef OP
  return t;
}

}  // namespace

const AttrSpec* OpInfo::find_attr(std::string_view n) const {
  for (const auto& a : attrs)
    if (a.name == n) return &a;
  return nullptr;
}

const std::vector<OpInfo>& all_ops() {
  static const std::vector<OpInfo> table = build_table();
  return table;
}

const OpInfo& op_info(OpKind k) {
  const auto& t = all_ops();
  assert(static_cast<size_t>(k) < t.size());
  return t[static_cast<size_t>(k)];
}

std::optional<OpKind> op_from_name(std::string_view name) {
  for (const auto& info : all_ops())
    if (info.name == name) return info.kind;
  return std::nullopt;
}

}  // namespace tessera
