// Shared by tests/cuda (NVRTC only, runs without a GPU) and tests/gpu (needs a device): the
// kernel corpus, binding, and checking the emitted parameter ABI against the PTX.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "cuda/CudaBackend.h"
#include "cuda/CudaEmitter.h"
#include "kernels/Library.h"
#include "passes/Passes.h"
#include "text/Text.h"

namespace tessera::cudatest {

// The op corpus: the text format's test kernels, the CLI's sample kernels and tests/cuda/data.
inline std::vector<std::string> corpus_files() {
  std::vector<std::string> out;
  std::string root = TESSERA_SOURCE_DIR;
  for (const char* dir : {"/tests/text/data", "/tests/cuda/data"}) {
    if (!std::filesystem::is_directory(root + dir)) continue;
    for (auto& e : std::filesystem::directory_iterator(root + dir))
      if (e.path().extension() == ".tile") out.push_back(e.path().string());
  }
  for (const char* f : {"/tests/cli/data/softmax.tile", "/tests/cli/data/vadd_i32.tile"})
    if (std::filesystem::exists(root + f)) out.push_back(root + f);
  std::sort(out.begin(), out.end());
  return out;
}

inline std::string file_stem(const std::string& path) {
  std::string s = std::filesystem::path(path).parent_path().parent_path().filename().string() + "_" +
                  std::filesystem::path(path).stem().string();
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

inline std::unique_ptr<Module> parse_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_module(ss.str(), path);
}

// A rejection by the emitter that is a documented limitation, not a bug: the message says so.
inline bool is_unsupported(const TesseraError& e) {
  std::string m = e.message();
  std::transform(m.begin(), m.end(), m.begin(), [](unsigned char c) { return std::tolower(c); });
  return m.find("unsupported") != std::string::npos || m.find("not supported") != std::string::npos ||
         m.find("cuda body") != std::string::npos;
}

// Bytes of a by-value kernel parameter under the emitter's ABI (CudaEmitter.h).
inline int abi_bytes(const CudaParam& p) {
  if (p.kind == CudaParam::Kind::Pointer || p.kind == CudaParam::Kind::SplitWorkspace) return 8;
  if (p.kind == CudaParam::Kind::Dim || p.kind == CudaParam::Kind::GridSize) return 4;
  if (p.kind == CudaParam::Kind::TensorMap) return 128;  // a __grid_constant__ CUtensorMap
  switch (p.elem) {
    case ScalarKind::I1: case ScalarKind::U8: case ScalarKind::I8: return 1;
    case ScalarKind::I16: case ScalarKind::U16: return 2;
    case ScalarKind::I32: case ScalarKind::U32: return 4;
    case ScalarKind::I64: case ScalarKind::U64: case ScalarKind::F64: return 8;
    default: return 4;  // f32 and the narrow floats travel as float
  }
}

// The byte sizes of the parameters of `.entry symbol(...)` in PTX; empty when not found.
inline std::vector<int> ptx_param_bytes(const std::string& ptx, const std::string& symbol) {
  std::vector<int> out;
  size_t at = ptx.find(".entry " + symbol + "(");
  if (at == std::string::npos) return out;
  size_t end = ptx.find(')', at);
  std::string params = ptx.substr(at, end - at);
  // `.param .u64 name`, or an array (a tensor map: `.param .align 64 .b8 name[128]`).
  static const std::regex re(R"(\.param\s+(?:\.align\s+\d+\s+)?\.[usbf](\d+)\s+\w+(?:\[(\d+)\])?)");
  for (auto it = std::sregex_iterator(params.begin(), params.end(), re); it != std::sregex_iterator(); ++it)
    out.push_back(std::stoi((*it)[1].str()) / 8 * ((*it)[2].matched ? std::stoi((*it)[2].str()) : 1));
  return out;
}

// The parameters the emitter promises must be what the compiled entry point takes: this is the
// contract the launcher relies on, checked without a GPU.
inline void expect_abi_matches(const CudaEmission& em, const NvrtcResult& r, const std::string& what) {
  std::vector<int> got = ptx_param_bytes(r.ptx, em.info.symbol);
  ASSERT_FALSE(got.empty() && !em.info.params.empty()) << what << ": no .entry " << em.info.symbol << " in the PTX";
  ASSERT_EQ(got.size(), em.info.params.size()) << what << ": parameter count";
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i], abi_bytes(em.info.params[i])) << what << ": parameter " << i << " (" << em.info.params[i].name << ")";
    EXPECT_EQ(em.info.params[i].bytes, abi_bytes(em.info.params[i])) << what << ": CudaParam::bytes of " << em.info.params[i].name;
  }
}

// NVRTC compiles the emitted source to a cubin; a rejection is a test failure with NVRTC's log.
inline void expect_nvrtc_accepts(const CudaEmission& em, const CudaTarget& t) {
  try {
    NvrtcResult r = nvrtc_compile(em.source, t, "kernel.cu", em.line_op);
    EXPECT_FALSE(r.cubin.empty());
  } catch (const TesseraError& e) {
    ADD_FAILURE() << "NVRTC rejected the generated code:\n" << e.what();
  }
}

}  // namespace tessera::cudatest
