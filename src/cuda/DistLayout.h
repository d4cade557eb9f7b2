// Where a distributed layout encoding (ir/Layout.h) puts a tile's elements, as the layout
// emitter (EmitLowered.cpp) needs it: which element each register slot of each thread holds.
//
// Every layout the emitter prints is of one form. A thread's slot s holds the element whose
// coordinate along each tile dim d is
//     const_d(s) + thread_d(lane, warp)
// where const_d is a sum of the slot's mixed-radix digits times coefficients (each digit
// feeds one dim) and thread_d a sum of the lane's and warp's bits times coefficients (each bit
// feeds one dim, or none: then threads that differ in it hold copies). The digits and bits of
// one dim cover disjoint powers of two, so no sum carries and an element has one slot.
//
// Digit order is slot order (digit 0 fastest), which fixes how a tensor-core fragment's
// registers sit in the slot array: the mma v2 accumulator's four registers of an m16n8 tile are
// consecutive slots in the PTX order c0..c3, then the n tiles, then the m tiles; a 16-bit A
// operand's eight (a0..a3 in pairs) per k16 step, then the k steps, then the m tiles; B's four
// (b0, b1 in pairs) per k16 step, then the k steps, then the n tiles.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ir/Layout.h"

namespace tessera::cudagen {

// Thrown by the layout emitter for what it cannot print yet; the kernel is then emitted by the
// planning emitter, with `why` as a note.
// The most elements of one tile a thread holds in the layout emitter's code (make_dist).
inline constexpr int64_t kMaxSlots = 256;

struct NotLowerable {
  std::string why;
};
// Thrown by the layout emitter when a `warp_specialize = 1` loop cannot be printed with a
// producer warpgroup (the compute warps' code needs a whole-program barrier); the kernel is
// then printed again without one, with `why` as a note.
struct NotWarpSpecializable {
  std::string why;
};

struct Dist {
  std::vector<int64_t> shape;
  struct Digit {
    int64_t radix = 1;
    int dim = 0;
    int64_t coef = 1;
  };
  std::vector<Digit> digits;  // slot order, fastest first
  struct Bit {
    int dim = -1;  // -1: none (the threads differing in this bit hold copies)
    int64_t coef = 0;
  };
  std::vector<Bit> lane_bits;  // 5
  std::vector<Bit> warp_bits;  // log2(warps)

  int64_t slots() const;
  int rank() const { return static_cast<int>(shape.size()); }
  // Coordinates of slot s in the thread of this lane and warp.
  std::vector<int64_t> coord(int64_t s, int lane, int warp) const;
  void coord_into(int64_t s, int lane, int warp, std::vector<int64_t>& c) const;  // (no allocation)
  // C++ expressions: the slot part of dim d for a slot given by expression `s` (a compile-time
  // loop variable), the thread part (of `tsr_lane`, `tsr_warp`), and whether this thread is
  // the one of its copies that performs side effects (lane and warp bits of no dim are 0).
  std::string const_expr(int d, const std::string& s) const;
  std::string thread_expr(int d) const;
  std::string owner_expr() const;
  // Of the row-major flat index of slot s's element.
  std::string flat_expr(const std::string& s) const;
};

// The placement of `layout` over a tile of static `shape` in a program of `warps` warps.
// Throws NotLowerable for what the form above cannot say (yet): a wgmma B operand in
// registers, shared layouts, warps or threads that are not powers of two. (A wgmma
// accumulator, and its RS A operand, place as mma.sync's with all warps along M; an FMA dot's
// operand, of a blocked parent, holds the parent's rows of A or columns of B, all of K.)
Dist make_dist(const Layout& layout, const std::vector<int64_t>& shape, int warps);

// For each slot of `to`, the slot of `from` that holds, in the same thread, the element
// `src_coord` maps `to`'s coordinate to, when that holds for every thread (checked by
// evaluating every thread); empty otherwise (the data must cross threads).
std::vector<int64_t> same_thread_slots(const Dist& from, const Dist& to, int threads,
                                       const std::function<std::vector<int64_t>(const std::vector<int64_t>&)>& src_coord);

}  // namespace tessera::cudagen
