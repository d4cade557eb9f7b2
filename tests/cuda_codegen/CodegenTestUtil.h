// Helpers shared by the cuda codegen tests (no GPU needed).
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <string>

#include <gtest/gtest.h>

#include "cuda/CudaBackend.h"
#include "cuda/CudaEmitter.h"
#include "kernels/Library.h"
#include "passes/Passes.h"

namespace tessera::codegentest {

// The cuda_codegen tests are the planning emitter's (its plans, knobs and printed source): their
// targets ask for it, where the default (CudaTarget::Emitter::Auto) would give most kernels
// to the layout emitter (tests/cuda/layout_emitter_test.cpp tests that one).
inline CudaTarget planning_target(const std::string& arch) {
  CudaTarget t = CudaTarget::parse(arch);
  t.emitter = CudaTarget::Emitter::Planning;
  return t;
}

inline CudaEmission emit(const Kernel& k, const char* arch = "sm_90a") {
  return emit_cuda_with_info(k, planning_target(arch));
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
    CudaTarget t = planning_target(arch);
    CudaEmission em = emit_cuda_with_info(k, t);
    try {
      NvrtcResult r = nvrtc_compile(em.source, t, k.name + ".cu");
      EXPECT_FALSE(r.cubin.empty()) << what << " " << arch;
    } catch (const TesseraError& e) {
      ADD_FAILURE() << what << " " << arch << ":\n" << e.what() << "\n--- source ---\n" << em.source;
    }
  }
}

// ptxas -v's report on the PTX NVRTC makes of `source` for `arch` (registers, spills), or
// why there is none: "" when it ran, else the reason to skip (no NVRTC, no toolkit ptxas).
struct PtxasReport {
  std::string out, skip;
  int registers() const {
    std::smatch m;
    return std::regex_search(out, m, std::regex("Used ([0-9]+) registers")) ? std::stoi(m[1].str()) : -1;
  }
  bool spills() const { return out.find(" 0 bytes spill stores, 0 bytes spill loads") == std::string::npos; }
};
inline PtxasReport ptxas_report(const std::string& source, const char* arch) {
  PtxasReport r;
  if (!nvrtc_available(&r.skip)) return r;
  const char* home = std::getenv("CUDA_HOME");
  std::filesystem::path ptxas = std::filesystem::path(home ? home : "/usr/local/cuda") / "bin" / "ptxas";
  if (!std::filesystem::exists(ptxas)) return r.skip = "no " + ptxas.string(), r;
  std::filesystem::path dir = std::filesystem::temp_directory_path() / ("tessera_ptxas_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::filesystem::path ptx = dir / "k.ptx";
  std::ofstream(ptx) << nvrtc_compile(source, CudaTarget::parse(arch), "k.cu").ptx;
  std::string cmd = ptxas.string() + " -arch=" + arch + " -v " + ptx.string() + " -o /dev/null 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r.skip = "popen failed", r;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p)) r.out += buf;
  if (::pclose(p) != 0) r.out = "ptxas failed:\n" + r.out;
  std::filesystem::remove_all(dir);
  return r;
}

}  // namespace tessera::codegentest
