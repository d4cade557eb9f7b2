// The generated code of every library kernel, byte for byte: the CUDA of each kernel x dtype x
// target (sm_80, sm_90, sm_90a) x today's knob sets, and the C++ of the cpu backend, against the
// files in tests/golden/data. Moving a decision from an emitter into an IR pass must keep these
// files identical; a change to one is its own commit that says why and what it does to speed.
//
// Each CUDA file is the emitted source followed by a comment block with what else the emitter
// decided (launch shape, shared memory, parameters, statistics, notes), since those are part of
// what a pass that takes over a decision has to reproduce.
//
// The plain `*.cu` files are the planning emitter's (CudaTarget::Emitter::Planning, every
// kernel's before session 48). The layout emitter (the GPU lowering's passes printed,
// Emitter::Layouts; the default's choice for most kernels since session 48) has files of its
// own, `*.layouts.cu`: every library kernel it prints and every kernel of tests/corpus (the
// FlashAttention family among them), for sm_80 and sm_90a. Moving the layout emitter's
// remaining decisions (shared-memory allocation, barriers) into passes must keep those too.
//
// To rewrite the files after a deliberate change:
//   TESSERA_UPDATE_GOLDEN=1 build/bin/tessera_golden_tests
// (tools/update-golden does exactly that), then review `git diff tests/golden`.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "cpu/CpuBackend.h"
#include "cuda/CudaBackend.h"
#include "tune/Space.h"
#include "cuda/CudaEmitter.h"
#include "kernels/Library.h"
#include "passes/Passes.h"
#include "text/Text.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

const fs::path kDir = fs::path(TESSERA_SOURCE_DIR) / "tests" / "golden" / "data";
const fs::path kCorpus = fs::path(TESSERA_SOURCE_DIR) / "tests" / "corpus";

// One generated file: a library kernel at a dtype for a target, with knobs (constexprs declared
// on the built kernel, as tests and cuda_bench set them), target flags and, for kernels whose
// preferred tiles depend on the problem, the sizes they are chosen for.
struct Variant {
  ConstexprConfig knobs = {};
  bool split_k = false, stream_k = false, no_tma = false;
  bool layouts = false;  // printed by the layout emitter
  bool stages = false;   // the kernels LibraryKernel::stages runs at `sizes` (topk's segmented form), in order
  Sizes sizes = {};  // non-empty: size_configs apply too (as for `tessera run`)
};
struct GoldenCase {
  std::string name;    // file name without extension
  std::string kernel;  // library kernel (empty for a corpus file)
  ScalarKind dtype;
  std::string target;  // "cpu", or a CudaTarget ("sm_80", "sm_90", "sm_90a")
  Variant v = {};
  std::string file = {};  // a .tile file of tests/corpus (its constexprs' defaults), or empty: the library
};
// gtest prints a parameter it cannot print as its raw bytes (heap pointers of the strings), and
// gtest_discover_tests puts that text into the ctest names: a name that changes from build to
// build. Printing the case's name keeps ctest's test list stable.
void PrintTo(const GoldenCase& c, std::ostream* os) { *os << c.name; }

const char* dtype_tag(ScalarKind dt) { return scalar_name(dt).data(); }

std::unique_ptr<Module> corpus_module(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return parse_module(text.str(), "tests/corpus/" + path.filename().string());
}

std::vector<GoldenCase> golden_cases() {
  std::vector<GoldenCase> cases;
  // Every kernel x dtype x target with the defaults `tessera compile` gives it.
  for (const LibraryKernel& lib : library())
    for (ScalarKind dt : lib.dtypes)
      for (const char* target : {"cpu", "sm_80", "sm_90", "sm_90a"})
        cases.push_back({lib.name + "." + dtype_tag(dt) + "." + target, lib.name, dt, target, {}});

  // The knob sets the tests and benchmarks use, on the kernels they apply to.
  auto add = [&](const std::string& tag, const std::string& kernel, ScalarKind dt, const std::string& target,
                 Variant v) {
    cases.push_back({kernel + "." + dtype_tag(dt) + "." + target + "." + tag, kernel, dt, target, std::move(v)});
  };
  using SK = ScalarKind;
  // sm_90a wgmma matmul: split-K, stream-K, the no-TMA variant the runtime falls back to,
  // clusters of two, the epilogue knobs, the TMA cache hints and the size-chosen tiles.
  add("split_k", "matmul", SK::BF16, "sm_90a", {.split_k = true});
  add("stream_k", "matmul", SK::BF16, "sm_90a", {.stream_k = true});
  add("no_tma", "matmul", SK::BF16, "sm_90a", {.no_tma = true});
  add("cluster_m2", "matmul", SK::BF16, "sm_90a", {.knobs = {{"cluster_m", 2}}});
  add("cluster_m2_overlap0", "matmul", SK::BF16, "sm_90a", {.knobs = {{"cluster_m", 2}, {"epilogue_overlap", 0}}});
  add("overlap0", "matmul", SK::BF16, "sm_90a", {.knobs = {{"epilogue_overlap", 0}}});
  add("overlap0_buffers4", "matmul", SK::BF16, "sm_90a",
      {.knobs = {{"epilogue_overlap", 0}, {"epilogue_buffers", 4}}});
  add("plain_store", "matmul", SK::BF16, "sm_90a", {.knobs = {{"tma_store_epilogue", 0}}});
  add("hints", "matmul", SK::BF16, "sm_90a", {.knobs = {{"tma_hint_a", 1}, {"tma_hint_b", 3}}});
  add("m16", "matmul", SK::BF16, "sm_90a", {.sizes = {{"M", 16}, {"N", 4096}, {"K", 4096}}});
  add("m16_split_k", "matmul", SK::BF16, "sm_90a", {.split_k = true, .sizes = {{"M", 16}, {"N", 4096}, {"K", 4096}}});
  add("m128", "matmul", SK::BF16, "sm_90a", {.sizes = {{"M", 128}, {"N", 14336}, {"K", 4096}}});
  add("split_k", "matmul_fp8", SK::BF16, "sm_90a", {.split_k = true});
  // The layout emitter's split-K compilation (split-k-loops), which Emitter::Layouts runs.
  add("split_k.layouts", "matmul", SK::BF16, "sm_90a", {.split_k = true, .layouts = true});
  // stream-k-programs (the stream-K compilation) printed by the layout emitter, the default's
  // since session 54.
  add("stream_k.layouts", "matmul", SK::BF16, "sm_90a", {.stream_k = true, .layouts = true});
  // pair-programs (cluster_m = 2) printed by the layout emitter, the default's since session 53.
  add("cluster_m2.layouts", "matmul", SK::BF16, "sm_90a", {.knobs = {{"cluster_m", 2}}, .layouts = true});
  add("no_tma", "matmul_fp8", SK::BF16, "sm_90a", {.no_tma = true});
  // cluster-programs (cluster_size = 8) printed by the layout emitter, since session 55: a row
  // on a cluster of 8 CTAs, its reductions ending in cluster exchanges.
  add("n32768_cluster8.layouts", "softmax", SK::BF16, "sm_90a",
      {.knobs = {{"BLOCK_N", 32768}, {"cluster_size", 8}}, .layouts = true});
  // The mma.sync matmul's knobs (sm_80), and its ordinary (not pipelined) loop.
  add("mma_knobs", "matmul", SK::F16, "sm_80",
      {.knobs = {{"mma_smem_epilogue", 1}, {"mma_l2_prefetch", 128}, {"mma_spread_copies", 1},
                 {"mma_early_last_step", 1}}});
  add("min_blocks2", "matmul", SK::F16, "sm_80", {.knobs = {{"min_blocks", 2}}});
  add("group_m4", "matmul", SK::BF16, "sm_80", {.knobs = {{"GROUP_M", 4}}});
  add("tiles16", "matmul", SK::BF16, "sm_80", {.knobs = {{"BLOCK_M", 16}, {"BLOCK_N", 16}, {"BLOCK_K", 16}}});
  add("tiles64", "matmul", SK::BF16, "sm_90a", {.knobs = {{"BLOCK_M", 64}, {"BLOCK_N", 64}, {"BLOCK_K", 64}}});
  // Struct copies made asynchronous.
  add("cp_async", "matmul_struct", SK::BF16, "sm_80", {.knobs = {{"struct_cp_async", 1}}});
  add("tma", "matmul_struct", SK::BF16, "sm_90a", {.knobs = {{"struct_tma", 1}}});
  // Row kernels: program prefetch and the memory knobs, at the widths the benchmarks use.
  // (cuda_bench gives a row kernel the smallest BLOCK_N that holds a whole row.)
  for (const char* row : {"softmax", "layernorm", "rmsnorm"}) {
    add("n4096", row, SK::BF16, "sm_90a", {.knobs = {{"BLOCK_N", 4096}}});
    add("n32768", row, SK::BF16, "sm_90a", {.knobs = {{"BLOCK_N", 32768}}});
  }
  add("no_prefetch", "softmax", SK::BF16, "sm_90a", {.knobs = {{"prefetch_programs", 0}}});
  add("prefetch2", "softmax", SK::BF16, "sm_90a", {.knobs = {{"prefetch_programs", 1}, {"prefetch_buffers", 2}}});
  add("prefetch_no_invariant", "layernorm", SK::BF16, "sm_90a",
      {.knobs = {{"prefetch_programs", 1}, {"prefetch_invariant", 0}}});
  add("mem_knobs", "softmax", SK::BF16, "sm_80",
      {.knobs = {{"pair_stores", 1}, {"stream_stores", 1}, {"prefetch_loads", 1}}});
  add("unpacked", "rmsnorm", SK::BF16, "sm_80", {.knobs = {{"pack_narrow_loads", 0}}});
  add("whole_tile_checks0", "layernorm", SK::F32, "sm_80", {.knobs = {{"whole_tile_checks", 0}}});
  add("num_warps8", "vector_add", SK::F16, "sm_80", {.knobs = {{"num_warps", 8}}});

  // The segmented top-k (topk's stages at issue 18's shape: the bucket bests, the threshold's
  // select, the segments, the merge), by both emitters: what runs on cuda at 64 x 131072.
  for (ScalarKind dt : {SK::F32, SK::BF16})
    for (bool layouts : {false, true})
      add(layouts ? "stages.layouts" : "stages", "topk", dt, "sm_90a",
          {.layouts = layouts, .stages = true, .sizes = {{"M", 64}, {"N", 131072}, {"K", 64}}});

  // The layout emitter: every library kernel (topk's whole-row kernel, whose ring of row copies
  // is Struct ops, since session 55), and every corpus kernel.
  for (const LibraryKernel& lib : library()) {
    for (ScalarKind dt : lib.dtypes)
      for (const char* target : {"sm_80", "sm_90a"}) add("layouts", lib.name, dt, target, {.layouts = true});
  }
  std::vector<fs::path> tiles;
  for (const auto& e : fs::directory_iterator(kCorpus))
    if (e.path().extension() == ".tile") tiles.push_back(e.path());
  std::sort(tiles.begin(), tiles.end());
  // (One file per .tile file and target, its kernels in order: the cases are listed before
  // main, when the parser's tables may not be made yet.)
  for (const fs::path& f : tiles)
    for (const char* target : {"sm_80", "sm_90a"})
      cases.push_back({"corpus." + f.stem().string() + "." + target + ".layouts", "", ScalarKind::F32, target,
                       {.layouts = true}, f.filename().string()});
  return cases;
}

// The locations the C++ language records (std::source_location) name the file as the compiler
// was given it: "/checkout/src/kernels/Matmul.cpp", or "../src/kernels/Matmul.cpp" through
// ccache's base dir. Both become "src/kernels/Matmul.cpp", so that the files do not depend on
// where the checkout or the build folder is.
std::string relative_paths(std::string s) {
  auto path_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '/' || c == '.' || c == '_' || c == '-'; };
  for (size_t p = s.find("/src/"); p != std::string::npos; p = s.find("/src/", p + 1)) {
    size_t begin = p;
    while (begin > 0 && path_char(s[begin - 1])) --begin;
    s.erase(begin, p + 1 - begin);
    p = begin;
  }
  return s;
}

const char* param_kind(CudaParam::Kind k) {
  switch (k) {
    case CudaParam::Kind::Pointer: return "pointer";
    case CudaParam::Kind::Dim: return "dim";
    case CudaParam::Kind::Scalar: return "scalar";
    case CudaParam::Kind::TensorMap: return "tensor_map";
    case CudaParam::Kind::GridSize: return "grid_size";
    case CudaParam::Kind::SplitWorkspace: return "split_workspace";
  }
  return "?";
}

std::string launch_summary(const CudaEmission& em) {
  const CudaKernelInfo& i = em.info;
  std::ostringstream o;
  o << "\n// ----- golden: what the emitter decided besides the source -----\n";
  o << "// symbol " << i.symbol << ", block_threads " << i.block_threads << ", static_smem " << i.static_smem_bytes
    << ", dynamic_smem " << i.dynamic_smem_bytes << "\n";
  o << "// persistent " << i.persistent << ", persistent_fill " << i.persistent_fill << ", cluster " << i.cluster
    << ", persistent_cluster " << i.persistent_cluster << ", split_k_capable " << i.split_k_capable << ", split_k "
    << i.split_k << ", split_slot_bytes " << i.split_slot_bytes << ", stream_k " << i.stream_k << "\n";
  for (const CudaParam& p : i.params) {
    o << "// param " << param_kind(p.kind) << " " << p.name << " " << scalar_name(p.elem) << " bytes " << p.bytes
      << " index " << p.param_index;
    if (p.kind == CudaParam::Kind::TensorMap)
      o << " box " << p.box[0] << "x" << p.box[1] << " swizzle " << p.swizzle;
    o << "\n";
  }
  for (const std::string& h : em.headers) o << "// header " << h << "\n";
  for (const auto& [k, v] : em.stats) o << "// stat " << k << " = " << v << "\n";
  for (const std::string& n : em.notes) o << "// note " << n << "\n";
  return o.str();
}

std::string generate(const GoldenCase& c) {
  if (!c.file.empty()) {  // a corpus file's kernels at their constexprs' defaults, as `tessera compile FILE` binds them
    std::string out;
    const auto m = corpus_module(kCorpus / c.file);
    for (const auto& k : m->kernels) {
      CudaTarget t = CudaTarget::parse(c.target);
      t.emitter = CudaTarget::Emitter::Layouts;
      CudaEmission em = emit_cuda_with_info(*run_pipeline(*bind_constexprs(*k, {}), {}), t);
      out += em.source + launch_summary(em);
    }
    return relative_paths(out);
  }
  const LibraryKernel* lib = find_library_kernel(c.kernel);
  if (!lib) throw std::runtime_error("no library kernel " + c.kernel);
  if (c.v.stages) {
    CudaTarget t = CudaTarget::parse(c.target);
    t.emitter = c.v.layouts ? CudaTarget::Emitter::Layouts : CudaTarget::Emitter::Planning;
    std::string out;
    for (const LibraryStage& st : lib->stages(c.dtype, "cuda:" + t.str(), c.v.sizes, {}).stages) {
      CudaEmission em = emit_cuda_with_info(*run_pipeline(*bind_constexprs(*st.build(c.dtype), st.config), {}), t);
      out += em.source + launch_summary(em);
    }
    return relative_paths(out);
  }
  auto k = lib->build(c.dtype);
  for (const auto& [name, value] : c.v.knobs)
    if (!k->find_constexpr(name)) k->set_constexpr(name, value);
  const bool cpu = c.target == "cpu";
  const std::string key = cpu ? "cpu" : "cuda:" + CudaTarget::parse(c.target).str();
  PipelineOptions po;
  po.config = library_config(*lib, c.dtype, key, c.v.knobs, c.v.sizes.empty() ? nullptr : &c.v.sizes);
  // (A size rule's codegen knob that the kernel does not declare: a constexpr of the copy.)
  for (const auto& [name, value] : tune::take_codegen_knobs(*k, po.config)) k->set_constexpr(name, value);
  auto bound = run_pipeline(*k, po);
  if (cpu) return relative_paths(emit_cpp(*bound));
  CudaTarget t = CudaTarget::parse(c.target);
  t.split_k = c.v.split_k;
  t.stream_k = c.v.stream_k;
  t.tma = !c.v.no_tma;
  t.emitter = c.v.layouts ? CudaTarget::Emitter::Layouts : CudaTarget::Emitter::Planning;
  CudaEmission em = emit_cuda_with_info(*bound, t);
  return relative_paths(em.source + launch_summary(em));
}

std::string file_of(const GoldenCase& c) { return c.name + (c.target == "cpu" ? ".cpp" : ".cu"); }

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// "line N: expected `...`, got `...`" for the first line that differs.
std::string first_difference(const std::string& want, const std::string& got) {
  std::istringstream a(want), b(got);
  std::string la, lb;
  for (int line = 1;; ++line) {
    bool ha = static_cast<bool>(std::getline(a, la)), hb = static_cast<bool>(std::getline(b, lb));
    if (!ha && !hb) return "same lines, different line ends";
    if (!ha || !hb || la != lb)
      return "line " + std::to_string(line) + ": golden `" + (ha ? la : "<end>") + "`, generated `" +
             (hb ? lb : "<end>") + "`";
  }
}

bool updating() {
  const char* u = std::getenv("TESSERA_UPDATE_GOLDEN");
  return u && std::string(u) == "1";
}

class GoldenFile : public testing::TestWithParam<GoldenCase> {};

TEST_P(GoldenFile, MatchesTheGeneratedCode) {
  const GoldenCase& c = GetParam();
  const fs::path path = kDir / file_of(c);
  const std::string got = generate(c);
  if (updating()) {
    fs::create_directories(kDir);
    std::ofstream(path, std::ios::binary) << got;
    return;
  }
  ASSERT_TRUE(fs::exists(path)) << path << " is missing: TESSERA_UPDATE_GOLDEN=1 build/bin/tessera_golden_tests";
  const std::string want = read(path);
  EXPECT_TRUE(want == got) << file_of(c) << " differs from the generated code, " << first_difference(want, got)
                           << "\n(a deliberate change: TESSERA_UPDATE_GOLDEN=1 build/bin/tessera_golden_tests, "
                              "then commit the new file on its own and say why)";
}

INSTANTIATE_TEST_SUITE_P(Library, GoldenFile, testing::ValuesIn(golden_cases()),
                         [](const testing::TestParamInfo<GoldenCase>& i) {
                           std::string n = i.param.name;
                           for (char& ch : n)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

// Every file in the folder is some case's (a case renamed or dropped leaves no stale file), and
// the cases have distinct names.
TEST(GoldenFiles, EveryFileBelongsToACase) {
  std::set<std::string> names;
  for (const GoldenCase& c : golden_cases()) EXPECT_TRUE(names.insert(file_of(c)).second) << "two cases write " << file_of(c);
  if (updating()) {
    for (const auto& e : fs::directory_iterator(kDir))
      if (!names.count(e.path().filename().string())) fs::remove(e.path());
    return;
  }
  for (const auto& e : fs::directory_iterator(kDir))
    EXPECT_TRUE(names.count(e.path().filename().string())) << e.path() << " belongs to no golden case";
  EXPECT_GE(names.size(), 100u);
}

// The comparison can fail: a changed knob changes the generated code (so the knob sets are not
// dead weight), and the first difference is reported by line.
TEST(GoldenFiles, AKnobChangesTheCode) {
  GoldenCase plain{"x", "matmul", ScalarKind::BF16, "sm_90a", {}};
  GoldenCase knob = plain;
  knob.v.knobs = {{"epilogue_overlap", 0}};
  const std::string a = generate(plain), b = generate(knob);
  EXPECT_NE(a, b);
  EXPECT_NE(first_difference(a, b).find("line "), std::string::npos);
}

}  // namespace
}  // namespace tessera
