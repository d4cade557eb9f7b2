// --check-passes (src/check/PassCheck.h): the pipeline checked pass by pass on the
// interpreter over the library kernels and every .tile corpus file of the tests, and a
// deliberately broken pass, injected into the list, is caught and named.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "check/PassCheck.h"
#include "ir/Verifier.h"
#include "kernels/Library.h"
#include "passes/Passes.h"
#include "text/Text.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

const std::vector<uint64_t> kSeeds{1, 2};

PassCheckOptions options_for(const LibraryKernel& lk, const Sizes& sizes, const ConstexprConfig& config) {
  PassCheckOptions o;
  o.config = config;
  o.sizes = sizes;
  o.seeds = kSeeds;
  for (const auto& [name, v] : lk.scalars) o.scalars[name] = v;
  return o;
}

// Small tiles and sizes that leave partial tiles and loop more than once.
struct LibCase {
  std::string kernel;
  Sizes sizes;
  ConstexprConfig config;
};
const std::vector<LibCase> kLibCases = {
    {"vector_add", {{"N", 300}}, {{"BLOCK", 256}}},
    {"softmax", {{"M", 5}, {"N", 300}}, {{"BLOCK_N", 256}}},
    {"layernorm", {{"M", 5}, {"N", 300}}, {{"BLOCK_N", 256}, {"BLOCK_M", 2}}},
    {"rmsnorm", {{"M", 5}, {"N", 300}}, {{"BLOCK_N", 256}}},
    {"matmul", {{"M", 37}, {"N", 23}, {"K", 40}}, {{"BLOCK_M", 16}, {"BLOCK_N", 16}, {"BLOCK_K", 16}}},
    {"matmul_fp8", {{"M", 37}, {"N", 23}, {"K", 40}}, {{"BLOCK_M", 16}, {"BLOCK_N", 16}, {"BLOCK_K", 16}}},
    {"matmul_struct", {{"M", 37}, {"N", 23}, {"K", 40}},
     {{"BLOCK_M", 16}, {"BLOCK_N", 16}, {"BLOCK_K", 16}, {"STAGES", 2}}},
    {"sort", {{"M", 5}, {"N", 300}}, {{"BLOCK_N", 512}}},
    {"topk", {{"M", 5}, {"N", 700}, {"K", 7}}, {{"K", 7}, {"BLOCK_N", 256}}},
};

TEST(CheckPasses, EveryLibraryKernelIsUnchangedByEveryPass) {
  ASSERT_EQ(kLibCases.size(), library().size());
  int passes_run = 0;
  for (const LibCase& c : kLibCases) {
    const LibraryKernel* lk = find_library_kernel(c.kernel);
    ASSERT_NE(lk, nullptr) << c.kernel;
    auto k = lk->build(lk->dtypes.front());
    PassCheckResult r = check_passes(*k, pipeline_passes(c.config), options_for(*lk, c.sizes, c.config));
    EXPECT_TRUE(r.ok()) << r.message;
    EXPECT_EQ(r.seeds_checked, kSeeds) << c.kernel << ": " << r.unchecked;
    passes_run += static_cast<int>(r.passes_run.size());
  }
  EXPECT_GE(passes_run, 5);  // canonicalize, cse, dce and pipes-to-loads change some of them
}

// prefetch-loop-loads (a GPU lowering pass, target-independent in what it does) keeps the row
// kernels' results on the interpreter with the knob prefetch_loads = 1, at rows of three
// column tiles, the last one partial (the loads one iteration ahead, the first before the loop).
TEST(CheckPasses, PrefetchLoopLoadsKeepsTheRowKernelsResults) {
  for (const char* name : {"softmax", "layernorm", "rmsnorm"}) {
    const LibraryKernel* lk = find_library_kernel(name);
    auto k = lk->build(lk->dtypes.front());
    k->set_constexpr("prefetch_loads", 1);
    ConstexprConfig config{{"BLOCK_N", 256}};
    if (std::string(name) == "layernorm") config["BLOCK_M"] = 2;
    std::vector<Pass> passes = pipeline_passes(config);
    passes.push_back({"prefetch-loop-loads", prefetch_loop_loads});
    PassCheckResult r = check_passes(*k, passes, options_for(*lk, {{"M", 5}, {"N", 700}}, config));
    EXPECT_TRUE(r.ok()) << r.message;
    EXPECT_EQ(r.seeds_checked, kSeeds) << name << ": " << r.unchecked;
    EXPECT_EQ(std::count(r.passes_run.begin(), r.passes_run.end(), "prefetch-loop-loads"), 1) << name;
  }
}

// The kernels of a .tile file, from the part of tests/passes/data files before their expected
// output; null when the file is an error case (it does not parse or verify).
std::unique_ptr<Module> load(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  auto cut = text.find("// ----- expect\n");
  if (cut != std::string::npos) text = text.substr(0, cut);
  try {
    auto m = parse_module(text, p.string());
    for (auto& k : m->kernels) verify_or_throw(*k);
    return m;
  } catch (const TesseraError&) {
    return nullptr;
  }
}

TEST(CheckPasses, EveryCorpusKernelIsUnchangedByEveryPass) {
  int files = 0, checked = 0;
  for (const char* dir : {"tests/text/data", "tests/cli/data", "tests/passes/data", "tests/cuda_codegen/data"}) {
    std::vector<fs::path> paths;
    for (const auto& e : fs::directory_iterator(fs::path(TESSERA_SOURCE_DIR) / dir))
      if (e.path().extension() == ".tile") paths.push_back(e.path());
    std::sort(paths.begin(), paths.end());
    for (const fs::path& p : paths) {
      SCOPED_TRACE(p.string());
      auto m = load(p);
      if (!m) continue;
      ++files;
      for (auto& k : m->kernels) {
        bool has_ptr = false;
        for (const Value* v : k->params) has_ptr |= v->type.is_ptr();
        if (has_ptr) continue;  // the interpreter takes no pointers
        PassCheckOptions o;
        o.sizes = ragged_check_sizes(*k);
        o.seeds = kSeeds;
        PassCheckResult r = check_passes(*k, pipeline_passes({}), o);
        EXPECT_TRUE(r.ok()) << r.message;
        // Some kernels want structured inputs (indices in range) or hold raw ops.
        checked += !r.seeds_checked.empty();
      }
    }
  }
  EXPECT_GE(files, 30);
  EXPECT_GE(checked, 25);
}

// A test-only pass that multiplies every finite nonzero float constant by 1.01 (softmax has
// one in each branch: 1.0 / sum).
Pass perturb_constant() {
  return {"perturb-constant", [](Kernel& k, PassStats& stats) {
            walk(k, [&](Op& op) {
              if (op.kind != OpKind::Const || !is_float(op.result()->type.elem)) return;
              const Attr* v = op.find_attr("value");
              if (!v || !std::holds_alternative<double>(*v)) return;
              double x = std::get<double>(*v);
              if (x == 0 || !std::isfinite(x)) return;
              op.set_attr("value", x * 1.01);
              ++stats["perturb-constant.changed"];
            });
          }};
}

// The broken pass is named wherever it stands: after canonicalize, and before bind-constexprs,
// where the kernel is still unbound (each state is bound with the same config to run).
TEST(CheckPasses, NamesABrokenPassWithKernelSeedAndElement) {
  const LibCase& c = kLibCases[1];  // softmax
  const LibraryKernel* lk = find_library_kernel(c.kernel);
  auto k = lk->build(ScalarKind::F32);
  PassCheckOptions o = options_for(*lk, c.sizes, c.config);
  ASSERT_TRUE(check_passes(*k, pipeline_passes(c.config), o).ok());
  for (const char* after : {"canonicalize", "verify"}) {
    SCOPED_TRACE(std::string("after ") + after);
    std::vector<Pass> passes = pipeline_passes(c.config);
    auto at = std::find_if(passes.begin(), passes.end(), [&](const Pass& p) { return p.name == after; });
    ASSERT_NE(at, passes.end());
    passes.insert(at + 1, perturb_constant());
    PassCheckResult r = check_passes(*k, passes, o);
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(r.failed_pass, "perturb-constant");
    EXPECT_EQ(r.message.rfind("pass 'perturb-constant' on kernel 'softmax' (seed 1, sizes M=5,N=300): the output "
                              "differs in ",
                              0),
              0u)
        << r.message;
    EXPECT_NE(r.message.find("; first y["), std::string::npos) << r.message;
    EXPECT_NE(r.message.find("(got: after the pass, want: before)"), std::string::npos) << r.message;
  }
}

// A pass after which the kernel cannot be bound with the config any more (it dropped the
// constexpr declarations) is named too, with what broke.
TEST(CheckPasses, NamesAPassWhoseOutputNoLongerBinds) {
  const LibCase& c = kLibCases[4];  // matmul
  const LibraryKernel* lk = find_library_kernel(c.kernel);
  auto k = lk->build(ScalarKind::F32);
  std::vector<Pass> passes = pipeline_passes(c.config);
  passes.insert(passes.begin() + 1, Pass{"drop-constexprs", [](Kernel& k, PassStats&) { k.constexprs.clear(); }});
  PassCheckResult r = check_passes(*k, passes, options_for(*lk, c.sizes, c.config));
  EXPECT_EQ(r.failed_pass, "drop-constexprs");
  EXPECT_EQ(r.message.rfind("pass 'drop-constexprs' on kernel 'matmul': its output no longer binds: ", 0), 0u)
      << r.message;
  EXPECT_NE(r.message.find("unknown constexpr 'BLOCK_K'"), std::string::npos) << r.message;
}

}  // namespace
}  // namespace tessera
