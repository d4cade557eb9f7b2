// Layout encodings of tiles: how a tile's elements are spread over the threads of a program
// (distributed layouts) or laid out in on-chip memory (shared layouts). After Triton's
// encodings: a tile type may carry one (`tile<f32, [128, 64], layout = blocked<...>>`), and
// only `convert_layout` changes it. Encodings are a GPU lowering's decisions made visible in
// the IR; the interpreter and the cpu backend ignore them (a tile means the same values with or
// without one: docs/semantics.md).
//
// Text forms (every field printed, in this order):
//   replicated                                   every thread holds the whole tile
//   blocked<per_thread = [1, 4], threads = [8, 4], warps = [4, 1], order = [1, 0]>
//       each thread holds per_thread contiguous elements per dim, a warp's 32 threads are
//       arranged threads (product 32), the program's warps warps; order lists the dims from
//       fastest-varying; the pattern repeats over a dim that is a multiple of it, and a dim
//       that divides it is held in copies by the threads beyond it
//   mma<version = 2, warps = [4, 2], instr = [16, 8]>
//       a tensor-core accumulator: version 2 is mma.sync (instr [16, 8]), 3 is wgmma
//       (instr [64, N], N a multiple of 8 up to 256); warps is the warp grid. A tile of higher
//       rank whose leading dims are 1 is placed as its last two dims are
//   dot_operand<operand = 0, k_width = 2, parent = mma<...>>
//       operand 0 (A) or 1 (B) of a dot whose result has layout `parent`, k_width consecutive
//       k elements per thread
//   slice<dim = 1, parent = blocked<...>>
//       the parent layout with dim `dim` removed (a reduction's result)
//   permuted<dims = [1, 0], parent = mma<...>>
//       the parent layout of a tile whose dims are permuted: result dim i is the parent's dim
//       dims[i] (a permute of a tile in an mma or dot_operand layout keeps each element in its
//       thread; a blocked layout permutes into a blocked one instead)
//   shared<swizzle = 128, pad = 0>   shared<swizzle = 128, pad = 0, order = [0, 1]>
//       a tile in shared memory: rows swizzled in `swizzle`-byte atoms (0, 32, 64, 128) or
//       padded by `pad` elements (not both); `order` lists the dims from fastest-varying in
//       memory (printed only when given: without it, row-major, the last dim fastest). A
//       permute of a tile in shared memory is a view of the same bytes in another order.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tessera {

// The most elements a blocked layout gives one thread along one dim (the verifier's bound, so
// that no product of a layout's counts overflows).
inline constexpr int64_t kMaxLayoutPerThread = int64_t{1} << 16;

struct Layout {
  enum class Kind : uint8_t { None, Replicated, Blocked, Mma, DotOperand, Slice, Shared, Permuted };

  Kind kind = Kind::None;
  // Blocked: one entry per tile dim (`order` also for Shared, where it may be empty).
  std::vector<int64_t> per_thread, threads, warps, order;
  // Mma: the version (2 mma.sync, 3 wgmma), `warps` (above) and the instruction's [m, n].
  int64_t version = 0;
  std::vector<int64_t> instr;
  // DotOperand and Slice: the layout they are derived from.
  std::shared_ptr<const Layout> parent;
  int64_t operand = 0, k_width = 0;  // DotOperand
  int64_t dim = 0;                   // Slice
  std::vector<int64_t> dims;         // Permuted: result dim i is the parent's dim dims[i]
  int64_t swizzle = 0, pad = 0;      // Shared

  static Layout replicated() { return of(Kind::Replicated); }
  static Layout blocked(std::vector<int64_t> per_thread, std::vector<int64_t> threads, std::vector<int64_t> warps,
                        std::vector<int64_t> order);
  static Layout mma(int64_t version, std::vector<int64_t> warps, std::vector<int64_t> instr);
  static Layout dot_operand(const Layout& parent, int64_t operand, int64_t k_width);
  static Layout slice(const Layout& parent, int64_t dim);
  // The parent's placement of a tile permuted by `dims` (a permuted parent composes; the
  // identity gives the parent back).
  static Layout permuted(const Layout& parent, const std::vector<int64_t>& dims);
  static Layout shared(int64_t swizzle, int64_t pad, std::vector<int64_t> order = {});

  static Layout of(Kind k) {
    Layout l;
    l.kind = k;
    return l;
  }

  bool empty() const { return kind == Kind::None; }
  bool is_distributed() const { return kind != Kind::None && kind != Kind::Shared; }
  // The text form above ("" for none).
  std::string str() const;
  bool operator==(const Layout& o) const;
  bool operator!=(const Layout& o) const { return !(*this == o); }
};

// The keyword of an encoding kind ("blocked"), and the kind of a keyword (None: not one).
const char* layout_kind_name(Layout::Kind k);
Layout::Kind layout_kind_from_name(const std::string& s);

// Does `l` fit a tile of this static shape? "" when it does, else why not (for the verifier's
// message: "blocked layout covers 128 elements along dim 0, and the tile's 96 is neither a
// multiple nor a divisor of it"). Dims
// that are not yet static (constexpr names before binding) are given as -1 and not checked.
std::string layout_misfit(const Layout& l, const std::vector<int64_t>& shape);

// Do `a` and `b` put every element of a tile of this static shape in the same threads of a
// program of `num_warps` warps? Then a conversion between them moves nothing between threads
// (at most a renaming of registers). Decided for replicated, blocked and slice-of-blocked
// layouts of tiles up to 4096 elements; false for anything else (a tensor-core or shared
// layout, or a larger tile), which is the safe answer.
bool layouts_place_alike(const Layout& a, const Layout& b, const std::vector<int64_t>& shape, int num_warps);

}  // namespace tessera
