// Names and conversions shared by the code generators that emit C++ (cpu) and CUDA C++
// (cuda). Both runtimes (src/cpu/runtime/tessera_cpu.h.inc, src/cuda/device/core.cuh) define
// the same `tsr::` conversion functions, so the emitted expressions are the same text.
#pragma once

#include <string>

#include "ir/Type.h"

namespace tessera::codegen {

// (is_narrow, f16, bf16 and the f8 kinds: ir/Type.h.)
// The C++ type values of kind `k` have while computing (float for narrow floats).
std::string ctype(ScalarKind k);
// The C++ type elements of kind `k` are stored as in memory.
std::string stype(ScalarKind k);
// A stored element (expression of stype) as a compute value, and back.
std::string load_conv(ScalarKind k, const std::string& storage_expr);
std::string store_conv(ScalarKind k, const std::string& compute_expr);
// A float expression (float or double) rounded to float kind `k`, as a compute-type value.
std::string fround(ScalarKind k, const std::string& e);
// A double expression rounded once to float kind `k` (casts from f64 and from integers).
std::string dround(ScalarKind k, const std::string& e);
// `bitcast` of compute value `e` of kind `from` to kind `to` of the same width, as a compute
// value of `to`: through the unsigned word of that width, a float's NaN made canonical
// (docs/semantics.md) by the runtimes' tsr::<kind>_bits.
std::string bitcast_expr(ScalarKind from, ScalarKind to, const std::string& e);

}  // namespace tessera::codegen
