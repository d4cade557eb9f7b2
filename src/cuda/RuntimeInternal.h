// Internals of the cuda runtime side shared by its files (NVRTC, cache, launch, bench).
#pragma once

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

}  // namespace tessera::cuda
