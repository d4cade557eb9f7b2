// The cpu backend: bound IR -> C++ source -> shared object built by the system compiler
// (-O3 -march=native -fopenmp, OpenMP across the grid) -> loaded and called on host tensors.
// Compiled objects are cached in memory and on disk, keyed by the specialization signature.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/IR.h"
#include "runtime/Tensor.h"

namespace tessera {

struct CpuOptions {
  std::string compiler;             // default: $TESSERA_CXX, else "c++"
  std::vector<std::string> flags;   // default: -O3 -march=native -fopenmp -fPIC -shared
  std::string cache_dir;            // default: $TESSERA_CACHE_DIR, else $XDG_CACHE_HOME/tessera, else ~/.cache/tessera
  bool disk_cache = true;
  int num_threads = 0;              // OpenMP threads; 0: the OpenMP default
};

// Readable C++ for a bound kernel, with the IR ops as comments.
std::string emit_cpp(const Kernel& bound_kernel);

class CpuKernel {
 public:
  virtual ~CpuKernel() = default;
  // Run over the whole grid. Dims come from the tensors (bind_dims); tensors too small for
  // the dims, a wrong dtype or a missing argument throw TesseraError.
  virtual void run(std::vector<KernelArg>& args) = 0;
  double compile_seconds = 0;  // 0 when it came from a cache
  bool from_disk_cache = false;
  bool from_memory_cache = false;
  // A fresh compile that linked the runtime object (src/cpu/RuntimeObject.cpp) rather than
  // compiling the runtime header's helpers itself (false for cache hits).
  bool linked_runtime_object = false;
};

// Compile (or fetch from a cache) a bound kernel. Throws TesseraError with the compiler's
// message and the IR op the failing line came from.
std::shared_ptr<CpuKernel> compile_cpu(const Kernel& bound_kernel, const CpuOptions& opts = {});

// Forget the in-memory cache (as a new process would); the disk cache is untouched.
void clear_cpu_memory_cache();
// The disk cache directory `opts` resolves to (the defaults above applied).
std::string cpu_cache_dir(const CpuOptions& opts = {});
// Compiles the runtime object (the runtime header's helpers, linked into every kernel; see
// src/cpu/RuntimeObject.cpp) for `opts`' compiler and flags into `dir`, unless it is there:
// the CMake build's tessera_cpu_runtime step, so that no kernel compile pays for it.
void build_cpu_runtime_object(const std::string& dir, const CpuOptions& opts = {});

// Notes:
//  - An unwritable cache directory is an error (TesseraError naming it), not a silent fallback.
//  - Raw ops: the `cpp` body is pasted into a block where the operands are `in0, in1, ...`
//    and the results `out0, out1, ...` (scalars, or flat row-major arrays of the compute type
//    with `inN_numel` / `outN_numel` elements; bf16/f16/f8 compute as float).

}  // namespace tessera
