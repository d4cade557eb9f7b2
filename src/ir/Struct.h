// What the Struct layer's ops share across the interpreter and the backends: how buffer slots
// are numbered, and the run-time faults every backend reports with the same words (the Struct
// faults, and the run-time rules of every kernel: docs/semantics.md, "Control flow" and "Grid").
//
// A buffer `buffer<T, [s0, ..., d0, ...]>` read or written as a tile of rank r has
// rank - r leading *slot* dims: slot (i0, ...) is the tile at those leading indices. A pipe
// `pipe<T, [STAGES, d0, ...]>` is a FIFO of at most STAGES tiles of shape [d0, ...].
// docs/semantics.md ("Struct") states the rules.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/IR.h"

namespace tessera {

// The faults a Struct program can hit at run time. The interpreter reports them all (plus
// reads of slots that were never written or whose copy is still in flight, which only it
// tracks); the cpu backend reports these through its error code, the cuda backend traps.
enum class StructFault : uint8_t {
  PipeFull = 1,      // pipe_push onto a pipe holding STAGES tiles
  PipeEmpty = 2,     // pipe_pop from an empty pipe
  PipeNotEmpty = 3,  // a pipe still holds tiles when the program ends (reported at `pipe`)
  SlotRange = 4,     // a buffer slot index outside the buffer's slot dims
  // The run-time rules of every kernel, Struct or not (reported at the op named):
  ForStep = 5,       // a `for` whose step is 0 or negative
  WhileLimit = 6,    // a `while` still running after kMaxWhileIterations iterations
  GridDivZero = 7,   // an integer `div` / `rem` by zero in the grid block (the interpreter: anywhere)
  GridNegative = 8,  // a negative grid size, at the grid's yield: 8 + axis (8, 9, 10)
  GridTooLarge = 11, // more than kMaxPrograms programs in all, at the grid's yield
  TileAlloc = 12,    // the cpu backend found no memory for a tile it keeps on the heap
};

// The iterations one execution of a `while` may run on any backend before it is an error.
inline constexpr int64_t kMaxWhileIterations = int64_t{1} << 26;
// The programs a grid may have in all (the product of its sizes): 2^63 - 1.
inline constexpr int64_t kMaxPrograms = INT64_MAX;

// The message of a `while` that ran `limit` iterations without ending.
std::string while_limit_message(int64_t limit);
// The messages of the grid rules, for kernel `k` (located at the grid's yield).
std::string grid_negative_message(const Kernel& k, int axis);
std::string grid_too_large_message(const Kernel& k);

// "%name" for a named value, else its type (for messages).
std::string struct_value_desc(const Value* v);

// The message of a fault at `op` (without the location, which is op.loc).
std::string struct_fault_message(const Op& op, StructFault f);

// The shape of one slot of a buffer or pipe type when read as a tile of rank `tile_rank`
// (a pipe's slot drops the stage dim whatever the rank).
Shape struct_slot_shape(const Type& storage, int tile_rank);
// The leading slot dims of a buffer accessed with tiles of rank `tile_rank`.
Shape struct_slot_dims(const Type& buffer, int tile_rank);

// Run-time fault codes for backends without exceptions in generated code: the op's number in
// the kernel's pre-order walk (grid, then body) and the fault, packed in one positive int
// (op number << 4 | fault).
int64_t struct_fault_code(const Kernel& k, const Op& op, StructFault f);
// The located error of a code from struct_fault_code for the same kernel (or a clone of it).
TesseraError struct_fault_error(const Kernel& k, int64_t code);

// The kernel-wide Struct rules (VerifyStruct.cpp); verify() runs them on kernels whose ops
// passed their own checks.
std::vector<TesseraError> verify_struct_rules(const Kernel& k);

}  // namespace tessera
