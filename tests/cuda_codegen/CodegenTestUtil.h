// Helpers shared by the cuda codegen tests (no GPU needed).
#pragma once

#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "cuda/CudaBackend.h"
#include "cuda/CudaEmitter.h"
#include "kernels/Library.h"
#include "passes/Passes.h"

namespace tessera::codegentest {

inline CudaEmission emit(const Kernel& k, const char* arch = "sm_90a") {
  return emit_cuda_with_info(k, CudaTarget::parse(arch));
}

// The emitter's notes (which path each dot took and why), one per line.
inline std::string notes(const CudaEmission& em) {
  std::string s;
  for (const auto& n : em.notes) s += n + "\n";
  return s;
}

// The library matmul for a dtype, its constexprs bound (defaults where `cfg` says nothing).
inline std::unique_ptr<Kernel> lib_matmul(ScalarKind dt, const ConstexprConfig& cfg = {}) {
  return bind_constexprs(*find_library_kernel("matmul")->build(dt), cfg);
}

// NVRTC compiles the kernel's emitted code for sm_80 and sm_90a (skips where NVRTC is missing).
inline void expect_compiles(const Kernel& k, const std::string& what) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  for (const char* arch : {"sm_80", "sm_90a"}) {
    CudaTarget t = CudaTarget::parse(arch);
    CudaEmission em = emit_cuda_with_info(k, t);
    try {
      NvrtcResult r = nvrtc_compile(em.source, t, k.name + ".cu");
      EXPECT_FALSE(r.cubin.empty()) << what << " " << arch;
    } catch (const TesseraError& e) {
      ADD_FAILURE() << what << " " << arch << ":\n" << e.what() << "\n--- source ---\n" << em.source;
    }
  }
}

}  // namespace tessera::codegentest
