// NVRTC accepts the generated CUDA C++ of every library kernel (f32, bf16, f16) and of every
// kernel of the op corpus, for sm_80 and sm_90a, and the compiled entry point takes exactly the
// parameters the emitter promised (checked in the PTX). No GPU needed.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>

#include "CudaTestUtil.h"
#include "ir/Verifier.h"

namespace tessera::cudatest {
namespace {

const char* const kArchs[] = {"sm_80", "sm_90a"};

struct Tally {
  std::atomic<int> compiled{0}, unsupported{0};
  std::vector<std::string> reasons;
};
Tally& tally() {
  static Tally t;
  return t;
}

// Prints what the emitter rejected, so that coverage gaps are visible in every CI log.
class TallyPrinter : public ::testing::Environment {
 public:
  void TearDown() override {
    Tally& t = tally();
    std::printf("[cuda codegen] compiled %d kernel/arch pairs; emitter rejected %d as unsupported\n",
                t.compiled.load(), t.unsupported.load());
    for (const auto& r : t.reasons) std::printf("[cuda codegen]   unsupported: %s\n", r.c_str());
  }
};
const auto* const kPrinter = ::testing::AddGlobalTestEnvironment(new TallyPrinter);

// Emit and compile one bound kernel for one arch; false when the emitter says unsupported.
bool compile_one(const Kernel& k, const char* arch, const std::string& what) {
  CudaTarget t = CudaTarget::parse(arch);
  CudaEmission em;
  try {
    em = emit_cuda_with_info(k, t);
  } catch (const TesseraError& e) {
    if (!is_unsupported(e)) throw;
    ++tally().unsupported;
    tally().reasons.push_back(what + " " + arch + ": " + e.what());
    return false;
  }
  EXPECT_EQ(em.line_op.size(), static_cast<size_t>(std::count(em.source.begin(), em.source.end(), '\n')) +
                                   (em.source.empty() || em.source.back() == '\n' ? 0 : 1))
      << what << ": one line_op entry per source line";
  NvrtcResult r;
  try {
    r = nvrtc_compile(em.source, t, "kernel.cu", em.line_op);
  } catch (const TesseraError& e) {
    ADD_FAILURE() << what << " " << arch << ": NVRTC rejected the generated code:\n" << e.what();
    return false;
  }
  EXPECT_FALSE(r.cubin.empty());
  EXPECT_GT(em.info.block_threads, 0);
  EXPECT_EQ(em.info.block_threads % 32, 0) << what;
  EXPECT_LE(em.info.block_threads, 1024) << what;
  expect_abi_matches(em, r, what + " " + arch);
  ++tally().compiled;
  return true;
}

struct LibCase {
  std::string kernel;
  ScalarKind dtype;
};
// Printed by name: gtest would print the raw bytes (a heap pointer), which ctest's discovered
// test names would then carry, different in every build.
void PrintTo(const LibCase& c, std::ostream* os) { *os << c.kernel << "/" << scalar_name(c.dtype); }

std::vector<LibCase> library_cases() {
  std::vector<LibCase> out;
  for (const auto& lk : library())
    for (ScalarKind dt : {ScalarKind::F32, ScalarKind::BF16, ScalarKind::F16})
      if (std::find(lk.dtypes.begin(), lk.dtypes.end(), dt) != lk.dtypes.end()) out.push_back({lk.name, dt});
  return out;
}

class LibraryCodegen : public ::testing::TestWithParam<LibCase> {};

TEST_P(LibraryCodegen, NvrtcAcceptsBothArchitectures) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  const LibCase& c = GetParam();
  auto k = bind_constexprs(*find_library_kernel(c.kernel)->build(c.dtype), {});
  std::string what = c.kernel + "/" + std::string(scalar_name(c.dtype));
  for (const char* arch : kArchs) {
    // The library is what users run: the emitter must support all of it.
    bool ok = false;
    try {
      ok = compile_one(*k, arch, what);
    } catch (const TesseraError& e) {
      FAIL() << what << " " << arch << ": " << e.what();
    }
    EXPECT_TRUE(ok) << what << " " << arch << " was rejected";
  }
}

INSTANTIATE_TEST_SUITE_P(Library, LibraryCodegen, ::testing::ValuesIn(library_cases()), [](const auto& info) {
  return info.param.kernel + "_" + std::string(scalar_name(info.param.dtype));
});

TEST(LibraryCodegen, CoversTheLibrary) {
  EXPECT_GE(library().size(), 5u);
  EXPECT_GE(library_cases().size(), library().size());
}

class CorpusCodegen : public ::testing::TestWithParam<std::string> {};

TEST_P(CorpusCodegen, NvrtcAcceptsOrEmitterSaysUnsupported) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  auto m = parse_file(GetParam());
  ASSERT_FALSE(m->kernels.empty());
  for (auto& k : m->kernels) {
    auto b = bind_constexprs(*k, {});
    // A kernel the verifier rejects (tests/text has some, for the parser: a ptr<f32>
    // parameter) is no kernel to compile: every command stops at the verifier's error.
    if (!verify(*b).empty()) continue;
    for (const char* arch : kArchs) compile_one(*b, arch, GetParam() + " @" + k->name);
  }
}

INSTANTIATE_TEST_SUITE_P(Corpus, CorpusCodegen, ::testing::ValuesIn(corpus_files()),
                         [](const auto& info) { return file_stem(info.param); });

}  // namespace
}  // namespace tessera::cudatest
