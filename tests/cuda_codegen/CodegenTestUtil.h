// Helpers shared by the cuda codegen tests (no GPU needed).
#pragma once

#include <memory>
#include <string>

#include "cuda/CudaBackend.h"
#include "cuda/CudaEmitter.h"
#include "kernels/Library.h"
#include "passes/Passes.h"

namespace tessera::codegentest {

inline CudaEmission emit(const Kernel& k, const char* arch = "sm_90a") {
  return emit_cuda_with_info(k, CudaTarget::parse(arch));
}

// The library matmul for a dtype, its constexprs bound (defaults where `cfg` says nothing).
inline std::unique_ptr<Kernel> lib_matmul(ScalarKind dt, const ConstexprConfig& cfg = {}) {
  return bind_constexprs(*find_library_kernel("matmul")->build(dt), cfg);
}

}  // namespace tessera::codegentest
