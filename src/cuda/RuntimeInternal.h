// Internals of the cuda runtime side shared by its files (NVRTC, cache, launch, bench).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cuda/CudaBackend.h"

namespace tessera::cuda {

// "nvrtc 13.0"; throws TesseraError when NVRTC is not available.
std::string nvrtc_version_string();
// The NVRTC options used for a target (part of the cache key).
std::vector<std::string> nvrtc_options(const CudaTarget& target);
// One op on one line in the style of the text format, for "generated from:" messages.
std::string op_summary(const Op& op);

// The grid of a bound kernel for the given runtime dims and scalar arguments, evaluated on the
// host from the kernel's grid block (scalar ops only). Missing axes are 1; a size of 0 means an
// empty launch. Throws TesseraError at the grid op that cannot be evaluated (an unsupported op,
// division by zero) and for a negative size.
struct Grid {
  int64_t x = 1, y = 1, z = 1;
};
Grid eval_grid(const Kernel& k, const std::vector<KernelArg>& args);

}  // namespace tessera::cuda
