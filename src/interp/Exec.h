// The interpreter's machine: value environment, bound views and the per-concern op
// evaluators (each concern lives in its own .cpp file).
#pragma once

#include <array>
#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

#include "interp/Interpreter.h"
#include "interp/Values.h"
#include "ir/IR.h"
#include "runtime/Tensor.h"

namespace tessera::interp {

// A view parameter bound to its argument tensor.
struct ViewArg {
  const Value* param = nullptr;
  Tensor* tensor = nullptr;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // row-major, in elements
};

// The Struct layer's storage of the running program instance (Struct.cpp): buffers with, per
// element, whether something wrote it and which async_copy still fills it; pipes as FIFOs.
struct BufferState {
  RValue data;
  std::vector<uint8_t> written;
  std::vector<const Op*> pending;  // the async_copy in flight into the element, or null
};
struct PipeState {
  const Op* op = nullptr;  // the `pipe` op
  int64_t stages = 0;
  std::deque<RValue> tiles;
};
struct StructState {
  std::unordered_map<const Value*, BufferState> buffers;
  std::unordered_map<const Value*, PipeState> pipes;
};

class Machine {
 public:
  Machine(const Kernel& k, std::vector<KernelArg>& args, const InterpOptions& opts);
  void run();
  // The grid's sizes (1 for the axes it does not yield), evaluated as run() does.
  std::array<int64_t, 3> grid();

  // --- used by the evaluators ---
  const RValue& val(const Op& op, const Value* v) const;
  void set(const Value* v, RValue r);
  ViewArg& view(const Op& op, const Value* v);
  // Run a block whose arguments are `args`; returns the values its yield passes out.
  std::vector<RValue> run_region(const Block& b, std::vector<RValue> args);
  // A combiner region (a, b) -> c on two scalars of `elem`.
  double combine_f(const Op& op, ScalarKind elem, double a, double b);
  int64_t combine_i(const Op& op, ScalarKind elem, int64_t a, int64_t b);
  StructState& structs() { return structs_; }

 private:
  void number(const Block& b);
  void check_bound(const Block& b);
  void run_ops(const Block& b);
  void exec(const Op& op);
  void exec_control(const Op& op);

  const Kernel& k_;
  std::vector<KernelArg>& args_;
  InterpOptions opts_;
  std::unordered_map<const Value*, int> slot_;
  std::vector<RValue> env_;
  std::vector<char> defined_;
  std::unordered_map<const Value*, ViewArg> views_;
  Sizes sizes_;
  int64_t pid_[3] = {0, 0, 0};
  int64_t nprog_[3] = {1, 1, 1};
  StructState structs_;
};

// Per-concern evaluators: compute the op's results and Machine::set them.
void exec_elementwise(Machine& m, const Op& op);  // Elementwise.cpp: unary, binary, cmp, fma, where, cast
void exec_shape(Machine& m, const Op& op);        // Shape.cpp: splat, arange, broadcast, ... insert_tile
void exec_memory(Machine& m, const Op& op);       // Memory.cpp: load/store, gather/scatter, atomics
void exec_reduce(Machine& m, const Op& op);       // Reduce.cpp: dot, reduce(_with), scan(_with)
void exec_sort(Machine& m, const Op& op);         // Sort.cpp: sort, topk, histogram
void exec_struct(Machine& m, const Op& op);       // Struct.cpp: buffers, async copies, pipes, warp roles
// The end of a program instance: every pipe must be empty; the storage is dropped.
void end_program_struct(Machine& m);

// The tile at tile index (operands first...) of view operand `view_i` of `op`, padded as
// load_tile pads it (the op's `pad` attribute).
RValue load_view_tile(Machine& m, const Op& op, size_t view_i, size_t first, const std::vector<int64_t>& shape);

// Rounding helpers shared by the evaluators.
// a*b + c with one rounding to float kind k (exact for every kind the IR has).
double fma_round(ScalarKind k, double a, double b, double c);
// Float min/max: NaN if either operand is NaN.
double fmin_nan(double a, double b);
double fmax_nan(double a, double b);

}  // namespace tessera::interp
