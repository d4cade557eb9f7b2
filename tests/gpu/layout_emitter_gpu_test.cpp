// The layout emitter (CudaTarget::Emitter::Layouts: kernels printed from the GPU lowering's
// layouts) on the GPU against the interpreter: every kernel of tests/corpus at its ragged
// '// sizes:', and the bf16 FlashAttention at head size 128 too. (Not at sizes of our own
// choosing: some kernels take structured inputs, decode_attention_merge's partial maxima say,
// that random ones at other sizes push past the tolerance.) The layout emitter prints every
// corpus kernel (the test fails where one falls back to the planning emitter); then every
// library kernel it prints, in each dtype, at ragged sizes.
#include <fstream>
#include <sstream>

#include "GpuTestUtil.h"
#include "check/Compare.h"

namespace tessera::gputest {
namespace {

std::vector<std::string> corpus_tiles() {
  std::vector<std::string> out;
  for (auto& e : std::filesystem::directory_iterator(std::string(TESSERA_SOURCE_DIR) + "/tests/corpus"))
    if (e.path().extension() == ".tile") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

// The file's "// sizes: A=1,B=2" line.
Sizes file_sizes(const std::string& path) {
  std::ifstream in(path);
  std::string l;
  Sizes s;
  while (std::getline(in, l))
    if (l.rfind("// sizes: ", 0) == 0) {
      std::stringstream ss(l.substr(10));
      std::string kv;
      while (std::getline(ss, kv, ','))
        if (auto eq = kv.find('='); eq != std::string::npos) s[kv.substr(0, eq)] = std::stoll(kv.substr(eq + 1));
    }
  return s;
}

CudaOptions layout_options() {
  CudaOptions o = test_options();
  o.target.emitter = CudaTarget::Emitter::Layouts;
  return o;
}

// The same for the device without its arch-specific features (sm_90 on Hopper: no wgmma or
// TMA), the mma.sync path that sm_80 runs.
CudaOptions mma_sync_options() {
  CudaOptions o = layout_options();
  o.target = CudaTarget::parse("sm_90");
  o.target.emitter = CudaTarget::Emitter::Layouts;
  return o;
}

// Whether the layout emitter prints `k` (for the device's target), else why not.
std::string printed_by(const Kernel& k, const CudaOptions& o = layout_options()) {
  CudaTarget t = cuda_target_for(o);
  CudaEmission em = emit_cuda_with_info(*run_pipeline(k, {}), t);
  for (const std::string& n : em.notes)
    if (n.find("layout emitter") != std::string::npos) return n;
  return "?";
}

void expect_matches(const Kernel& k, const Sizes& sizes, const CudaOptions& o = layout_options()) {
  const std::vector<Tensor> in = make_random_tensors(k, sizes, 11);
  std::vector<Tensor> want = in, got = in;
  try {
    auto a = args_for(k, want);
    run_interp(k, a);
  } catch (const TesseraError&) {
    return;  // structured inputs (ids in range): nothing to compare
  }
  auto ga = args_for(k, got);
  compile_cuda(k, o)->run_host(ga);
  EXPECT_GT(testutil::expect_tensors_match(want, got, k.name + " [" + sizes_str(sizes) + "]", "gpu", {},
                                           tile_error_bounds(k, sizes, want)),
            0);
}

class LayoutEmitterGpu : public ::testing::TestWithParam<std::string> {};

TEST_P(LayoutEmitterGpu, MatchesInterpreter) {
  REQUIRE_GPU();
  auto m = parse_file(GetParam());
  const Sizes ragged = file_sizes(GetParam());
  for (auto& k : m->kernels) {
    auto b = bind_constexprs(*k, {});
    std::printf("[layout emitter] @%s: %s\n", k->name.c_str(), printed_by(*b).c_str());
    EXPECT_NE(printed_by(*b).find("printed from"), std::string::npos) << k->name;
    expect_matches(*b, ragged);
  }
}

INSTANTIATE_TEST_SUITE_P(Corpus, LayoutEmitterGpu, ::testing::ValuesIn(corpus_tiles()),
                         [](const auto& info) { return std::filesystem::path(info.param).stem().string(); });

// The corpus kernels with dots on the mma.sync path (assign-layouts' warp grids: along M where
// a row is reduced or a dot reads another's accumulator, else the squarest), which the
// device's own target (wgmma on sm_90a) does not take; the library's bf16 matmul at a
// ragged size (2 x 4 warps of 64 x 64); and matmul_fp8 (m16n8k32 e4m3, B [N, K] read K-major
// through its permute, the fragments loaded ahead; fp8 tensor-core sums held to the bf16 bound,
// as LibraryGpu holds fp8 wgmma's).
TEST(LayoutEmitterGpu, MmaSyncPathMatchesInterpreter) {
  REQUIRE_GPU();
  for (const std::string& path : corpus_tiles()) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    if (text.str().find(" dot ") == std::string::npos) continue;
    auto m = parse_file(path);
    for (auto& k : m->kernels) {
      auto b = bind_constexprs(*k, {});
      SCOPED_TRACE(k->name);
      EXPECT_NE(printed_by(*b, mma_sync_options()).find("printed from"), std::string::npos);
      expect_matches(*b, file_sizes(path), mma_sync_options());
    }
  }
  auto mm = bind_constexprs(*find_library_kernel("matmul")->build(ScalarKind::BF16), {});
  expect_matches(*mm, {{"M", 300}, {"N", 520}, {"K", 200}}, mma_sync_options());
  auto f8 = bind_constexprs(*find_library_kernel("matmul_fp8")->build(ScalarKind::BF16), {});
  EXPECT_NE(printed_by(*f8, mma_sync_options()).find("printed from"), std::string::npos) << printed_by(*f8, mma_sync_options());
  EXPECT_GT(expect_gpu_matches_interp(*f8, {{"M", 300}, {"N", 520}, {"K", 200}}, 41, tolerance_for(ScalarKind::BF16),
                                      mma_sync_options()),
            0);
}

// The tuner's small blocks (16 x 16, 16 x 32 and 32 x 16 on 4 warps; since session 56): an
// mma.sync warp grid of fewer warps than the program's, the rest holding copies of the
// accumulator, for the bf16 matmul and matmul_fp8 on the device's mma.sync target at a ragged
// size.
TEST(LayoutEmitterGpu, SmallMmaTilesWithCopyWarpsMatchTheInterpreter) {
  REQUIRE_GPU();
  for (const char* name : {"matmul", "matmul_fp8"})
    for (const auto& [bm, bn] : {std::pair{16, 16}, {16, 32}, {32, 16}}) {
      auto k = bind_constexprs(*find_library_kernel(name)->build(ScalarKind::BF16), {{"BLOCK_M", bm}, {"BLOCK_N", bn}});
      SCOPED_TRACE(std::string(name) + " " + std::to_string(bm) + " x " + std::to_string(bn));
      EXPECT_NE(printed_by(*k, mma_sync_options()).find("printed from"), std::string::npos) << printed_by(*k, mma_sync_options());
      EXPECT_GT(expect_gpu_matches_interp(*k, {{"M", 70}, {"N", 90}, {"K", 200}}, 43, tolerance_for(ScalarKind::BF16),
                                          mma_sync_options()),
                0);
    }
  // FlashAttention at 16 x 16 and 16 x 32 blocks: the softmax's reductions over the copy warps.
  const std::string path = std::string(TESSERA_SOURCE_DIR) + "/tests/corpus/flash_attention_bf16.tile";
  auto fa = parse_file(path);
  for (int bn : {16, 32}) {
    auto k = bind_constexprs(*fa->kernels.at(0), {{"BM", 16}, {"BN", bn}});
    SCOPED_TRACE("flash_attention_bf16 16 x " + std::to_string(bn));
    EXPECT_NE(printed_by(*k, mma_sync_options()).find("printed from"), std::string::npos) << printed_by(*k, mma_sync_options());
    expect_matches(*k, file_sizes(path), mma_sync_options());
  }
}

// An f8 dot of B [K, N] as loaded, B stored K-major into shared memory by a conversion
// (tests/cuda_codegen/data/f8_dot_kn.tile; since session 56), on the device's own target and
// on mma.sync, at a ragged size.
TEST(LayoutEmitterGpu, F8DotOfBAsLoadedKNMatchesTheInterpreter) {
  REQUIRE_GPU();
  if (cuda_target_for(layout_options()).sm < 89) GTEST_SKIP() << "fp8 mma.sync needs sm_89 or newer";
  auto m = parse_file(std::string(TESSERA_SOURCE_DIR) + "/tests/cuda_codegen/data/f8_dot_kn.tile");
  const Kernel& k = *m->kernels.at(0);
  for (const CudaOptions& o : {layout_options(), mma_sync_options()}) {
    EXPECT_NE(printed_by(k, o).find("printed from"), std::string::npos) << printed_by(k, o);
    EXPECT_GT(expect_gpu_matches_interp(k, {{"M", 70}, {"N", 90}, {"K", 200}}, 47, tolerance_for(ScalarKind::BF16), o), 0);
  }
}

TEST(LayoutEmitterGpu, FlashAttentionBf16HeadSize128) {
  REQUIRE_GPU();
  auto m = parse_file(std::string(TESSERA_SOURCE_DIR) + "/tests/corpus/flash_attention_bf16.tile");
  for (int64_t bm : {64, 128}) {
    auto b = bind_constexprs(*m->find("flash_attention_bf16"), {{"D", 128}, {"BM", bm}});
    EXPECT_NE(printed_by(*b).find("printed from"), std::string::npos) << printed_by(*b);
    expect_matches(*b, {{"H", 3}, {"S", 257}, {"T", 333}, {"DH", 128}});
  }
}

// A cp.async ring loop inside another loop (linear_cross_entropy's K loop, one per vocabulary
// tile) enters its prologue again: with an odd number of K tiles (HID = 96, BK = 32) the
// prologue refills the stage the last iteration read, which needs the barrier after the loop
// (the ring has one barrier an iteration, at its top). On the device's target and on mma.sync.
TEST(LayoutEmitterGpu, RingLoopEnteredAgainInsideALoop) {
  REQUIRE_GPU();
  auto m = parse_file(std::string(TESSERA_SOURCE_DIR) + "/tests/corpus/linear_cross_entropy.tile");
  auto b = bind_constexprs(*m->find("linear_cross_entropy"), {});
  for (const CudaOptions& o : {layout_options(), mma_sync_options()}) {
    EXPECT_NE(printed_by(*b, o).find("printed from"), std::string::npos);
    expect_matches(*b, {{"M", 37}, {"HID", 96}, {"V", 300}}, o);
  }
}

// persist-programs on sm_90a: matmul + bias + GELU with a producer warpgroup runs on persistent
// CTAs, each looping over several programs (9 x 17 tiles of 128 x 128 against the GPU's SMs).
// At K = 400 each program runs 7 iterations of the 4-stage ring, so a CTA's second program
// waits on stages released by its first, across barrier phases; K = 40 is one partial tile.
TEST(LayoutEmitterGpu, PersistentCtasRunSeveralPrograms) {
  REQUIRE_GPU();
  auto m = parse_file(std::string(TESSERA_SOURCE_DIR) + "/tests/corpus/matmul_bias_gelu.tile");
  auto b = bind_constexprs(*m->find("matmul_bias_gelu"), {{"BM", 128}, {"BN", 128}, {"BK", 64}});
  EXPECT_NE(printed_by(*b).find("printed from"), std::string::npos) << printed_by(*b);
  CudaEmission em = emit_cuda_with_info(*run_pipeline(*b, {}), cuda_target_for(layout_options()));
  if (cuda_target_for(layout_options()).str() == "sm_90a") EXPECT_TRUE(em.info.persistent);
  // N = 2104: rows of whole 16-byte chunks, so the operands and the result take TMA.
  for (int64_t k : {400, 40}) expect_matches(*b, {{"M", 1040}, {"N", 2104}, {"K", k}});
}

// pingpong-consumers on sm_90a: the same kernel with `consumers = 2` written on its K loop, so
// that two consumer warpgroups take alternate programs of each persistent CTA. 9 x 17 programs
// (some CTAs run two, one per consumer), 16 x 17 (two or three: consumer 0 runs one more than
// consumer 1 on some CTAs, across order-barrier phases) and 3 x 5 (fewer than the SMs: every
// consumer 1 has none); K = 400 is 7 iterations of the ring per program, K = 40 one partial.
TEST(LayoutEmitterGpu, PingPongConsumersTakeAlternatePrograms) {
  REQUIRE_GPU();
  std::ifstream in(std::string(TESSERA_SOURCE_DIR) + "/tests/corpus/matmul_bias_gelu.tile");
  std::stringstream text;
  text << in.rdbuf();
  std::string src = text.str();
  const std::string loop = "%acc = for %c0, %ktiles, %c1, %acc0 :";
  ASSERT_NE(src.find(loop), std::string::npos);
  src.replace(src.find(loop), loop.size(), "%acc = for %c0, %ktiles, %c1, %acc0 {consumers = 2} :");
  auto m = parse_module(src, "matmul_bias_gelu.tile");
  auto b = bind_constexprs(*m->find("matmul_bias_gelu"), {{"BM", 128}, {"BN", 128}, {"BK", 64}});
  CudaEmission em = emit_cuda_with_info(*run_pipeline(*b, {}), cuda_target_for(layout_options()));
  if (cuda_target_for(layout_options()).str() == "sm_90a") EXPECT_EQ(em.stats["pingpong-consumers"], 1);
  for (const Sizes& s : {Sizes{{"M", 1040}, {"N", 2104}, {"K", 400}}, Sizes{{"M", 2000}, {"N", 2104}, {"K", 200}},
                         Sizes{{"M", 300}, {"N", 520}, {"K", 40}}})
    expect_matches(*b, s);
}

// Runs `k` compiled once at each of `sizes` against the interpreter and checks that no launch
// fell back from the TMA compilation (a row stride of a view that is not a multiple of 16
// bytes has no tensor map: the runtime then runs the kernel compiled without TMA, which is not
// the path under test; found by review: the first forms of the two tests below ran that one).
void expect_tma_path_matches(const Kernel& k, const std::vector<Sizes>& sizes, uint64_t seed, Tolerance floor = {}) {
  auto ck = compile_cuda(k, layout_options());
  // (The compilation itself copies by TMA: a count of fallbacks says nothing of one that never had it.)
  EXPECT_NE(ck->source().find("tsr::tma_load_2d"), std::string::npos) << "no TMA copies in the compiled kernel";
  for (const Sizes& s : sizes) {
    std::vector<Tensor> want = make_random_tensors(k, s, seed), got = want;
    auto wa = args_for(k, want), ga = args_for(k, got);
    run_interp(k, wa);
    ck->run_host(ga);
    EXPECT_GT(testutil::expect_tensors_match(want, got, k.name + " [" + sizes_str(s) + "]", "gpu", floor,
                                             tile_error_bounds(k, s, want)),
              0);
    ++seed;
  }
  EXPECT_EQ(ck->launches_without_tma, 0) << "a launch fell back from the TMA compilation";
}

// overlap-epilogues on the device's target: the library matmul's persistent CTAs run several
// programs each (33 x 9 tiles of 128 x 256, 297 programs) and each leaves its block's four
// boxes to the next program's K loop, which has 1 or 3 iterations here: the boxes it has too
// few iterations for follow it. BLOCK_N = 192: three boxes a block, an odd count (the stores
// alternate the two buffers across programs, InFlight 0). N = 2104 and K = 40 / 136: row
// strides of whole 16 bytes, as TMA needs, and partial tiles in every dim.
TEST(LayoutEmitterGpu, OverlappedEpiloguesAcrossPrograms) {
  REQUIRE_GPU();
  const CudaTarget t = cuda_target_for(layout_options());
  if (!t.arch_specific || !t.tma) GTEST_SKIP() << "TMA stores need sm_90a";
  const LibraryKernel& lk = *find_library_kernel("matmul");
  for (int64_t bn : {int64_t{0}, int64_t{192}}) {
    std::map<std::string, int64_t> cfg = library_config(lk, ScalarKind::BF16, "cuda:" + t.str());
    if (bn) cfg["BLOCK_N"] = bn;
    auto k = bind_constexprs(*lk.build(ScalarKind::BF16), cfg);
    SCOPED_TRACE("BLOCK_N " + std::to_string(cfg["BLOCK_N"]));
    EXPECT_NE(printed_by(*k).find("printed from"), std::string::npos) << printed_by(*k);
    expect_tma_path_matches(*k, {{{"M", 4100}, {"N", 2104}, {"K", 40}}, {{"M", 4100}, {"N", 2104}, {"K", 136}}}, 71);
  }
}

// matmul_fp8 on wgmma (sm_90a: f8 tiles TMA-copied into 128-byte swizzled rows of 128
// elements, m64n256k32 e4m3 with B read K-major through its permute), for a bf16 and an f16
// result, at ragged sizes that TMA can describe (K 208: a partial 128-wide K tile the TMA fills
// with zeros; N 296 / 2104: whole 16-byte rows of c) and with more programs than SMs
// (persistent CTAs; the overlapped epilogue's boxes after 1- and 3-step loops, K 112 and 272). fp8 wgmma's
// reduced internal precision: held to the bf16 bound, as LibraryGpu does.
TEST(LayoutEmitterGpu, MatmulFp8OnWgmma) {
  REQUIRE_GPU();
  const CudaTarget t = cuda_target_for(layout_options());
  if (!t.arch_specific || !t.tma) GTEST_SKIP() << "wgmma needs sm_90a";
  const LibraryKernel& lk = *find_library_kernel("matmul_fp8");
  for (ScalarKind dt : {ScalarKind::BF16, ScalarKind::F16}) {
    auto k = bind_constexprs(*lk.build(dt), library_config(lk, dt, "cuda:" + t.str()));
    SCOPED_TRACE(scalar_name(dt));
    EXPECT_NE(printed_by(*k).find("printed from"), std::string::npos) << printed_by(*k);
    expect_tma_path_matches(*k,
                            {{{"M", 193}, {"N", 296}, {"K", 208}},
                             {{"M", 4100}, {"N", 2104}, {"K", 112}},
                             {{"M", 4100}, {"N", 2104}, {"K", 272}}},
                            91, tolerance_for(ScalarKind::BF16));
  }
}

// Each GPU lowering pass that --disable-pass may leave out (CudaTarget::disabled_passes) leaves
// a kernel the layout emitter still prints and that still matches the interpreter: the bf16
// matmul on the device's target (wgmma, TMA, persistent programs) and on mma.sync (rings,
// swizzled operands, staged epilogue stores), FlashAttention bf16 (two dots, a carried
// softmax) on mma.sync, and softmax (row reductions).
TEST(LayoutEmitterGpu, EachLoweringPassLeftOutStillMatches) {
  REQUIRE_GPU();
  auto mm = bind_constexprs(*find_library_kernel("matmul")->build(ScalarKind::BF16), {});
  auto sm = bind_constexprs(*find_library_kernel("softmax")->build(ScalarKind::F32), {});
  const std::string fa_path = std::string(TESSERA_SOURCE_DIR) + "/tests/corpus/flash_attention_bf16.tile";
  auto fa_m = parse_file(fa_path);
  auto fa = bind_constexprs(*fa_m->kernels.at(0), {});
  for (const std::string& pass : gpu_lowering_pass_names()) {
    if (!disableable_gpu_lowering_pass(pass)) continue;
    SCOPED_TRACE("--disable-pass " + pass);
    CudaOptions own = layout_options(), mma = mma_sync_options();
    own.target.disabled_passes = mma.target.disabled_passes = {pass};
    for (const CudaOptions* o : {&own, &mma})
      expect_matches(*mm, {{"M", 300}, {"N", 520}, {"K", 200}}, *o);
    expect_matches(*fa, file_sizes(fa_path), mma);
    expect_matches(*sm, {{"M", 77}, {"N", 3000}}, own);
  }
}

// The default (CudaTarget::Emitter::Auto) on sm_90a: the library's bf16 matmul at the target's
// config is the layout emitter's wgmma kernel, and the runtime's other compilations of it come
// from elsewhere: without TMA (K = 1001: rows of 2002 bytes, which no tensor map describes)
// the layout emitter's mma.sync lowering; split over K (2 x 2 programs, K = 4096) its split-K
// compilation (split-k-loops).
// Each against the interpreter, and the launch counters say which compilation ran.
TEST(LayoutEmitterGpu, TheDefaultsOtherCompilationsMatchTheInterpreter) {
  REQUIRE_GPU();
  const CudaOptions o = test_options();
  const CudaTarget t = cuda_target_for(o);
  if (t.str() != "sm_90a") GTEST_SKIP() << "the wgmma kernel and its split-K compilation are sm_90a's";
  if (t.emitter != CudaTarget::Emitter::Auto) GTEST_SKIP() << "the default's compilations: run without TESSERA_CUDA_FROM_LAYOUTS";
  const LibraryKernel& lk = *find_library_kernel("matmul");
  auto k = bind_constexprs(*lk.build(ScalarKind::BF16), library_config(lk, ScalarKind::BF16, "cuda:sm_90a"));
  EXPECT_NE(printed_by(*k, o).find("printed from"), std::string::npos) << printed_by(*k, o);
  uint64_t seed = 51;
  for (const Sizes& s : {Sizes{{"M", 200}, {"N", 264}, {"K", 1001}}, Sizes{{"M", 200}, {"N", 400}, {"K", 4096}}}) {
    SCOPED_TRACE(sizes_str(s));
    std::vector<Tensor> want = make_random_tensors(*k, s, seed++), got = want;
    auto wa = args_for(*k, want), ga = args_for(*k, got);
    run_interp(*k, wa);
    auto ck = compile_cuda(*k, o);
    ck->run_host(ga);
    testutil::expect_tensors_match(want, got, "matmul [" + sizes_str(s) + "]", "gpu, default emitter");
    if (s.at("K") == 1001) {
      EXPECT_EQ(ck->launches_without_tma, 1);
    } else {
      EXPECT_EQ(ck->launches_split_k, 1);
    }
  }
}


// split-k-loops: the layout emitter's own split-K compilation (Emitter::Layouts). At the
// library's tiles for large M (128 x 256, two compute warpgroups) and for M <= 64 (64 x 128,
// one, its split ring 8 stages deep): the runtime's rule where the programs are few, forced 3
// ways over 22 k steps (slices of 8, 8 and 6) at ragged M and N, and 4 ways over 2 k steps
// (two empty slices, whose partial sums are 0), each launched twice (the arrival counters must
// be left at 0); the partial sums added within a cluster (what the runtime launches for so few
// CTAs) or, with CudaOptions::split_k_cluster off, through the workspace.
TEST(LayoutEmitterGpu, SplitKMatchesTheInterpreter) {
  REQUIRE_GPU();
  if (cuda_target_for(layout_options()).str() != "sm_90a") GTEST_SKIP() << "split-K is the wgmma kernel's (sm_90a)";
  const LibraryKernel& lk = *find_library_kernel("matmul");
  struct Case {
    Sizes sizes;
    int ways;  // 0: the runtime's rule
    bool cluster;
  };
  struct Tiles {
    ConstexprConfig config;
    std::vector<Case> cases;
  };
  uint64_t seed = 71;
  for (const Tiles& tiles :
       {Tiles{library_config(lk, ScalarKind::BF16, "cuda:sm_90a"),
              {{{{"M", 200}, {"N", 400}, {"K", 4096}}, 0, true}, {{{"M", 136}, {"N", 264}, {"K", 1400}}, 3, false},
               {{{"M", 72}, {"N", 256}, {"K", 72}}, 4, true}, {{{"M", 72}, {"N", 256}, {"K", 72}}, 4, false}}},
        Tiles{{{"BLOCK_M", 64}, {"BLOCK_N", 128}, {"BLOCK_K", 64}},
              {{{{"M", 64}, {"N", 520}, {"K", 2000}}, 0, false}, {{{"M", 40}, {"N", 264}, {"K", 1400}}, 3, true}}}}) {
    auto k = bind_constexprs(*lk.build(ScalarKind::BF16), tiles.config);
    // (The device's target, then its split-K compilation: cuda_target_for takes the device's.)
    CudaTarget split = cuda_target_for(layout_options());
    split.split_k = true;
    const CudaEmission em = emit_cuda_with_info(*run_pipeline(*k, {}), split);
    ASSERT_TRUE(em.info.split_k) << printed_by(*k);
    ASSERT_TRUE(em.info.split_cluster);
    ASSERT_TRUE(em.lowered) << "the split compilation was not the layout emitter's";
    for (const Case& c : tiles.cases) {
      SCOPED_TRACE(sizes_str(c.sizes) + " ways " + std::to_string(c.ways) + " BLOCK_M " +
                   std::to_string(tiles.config.at("BLOCK_M")) + (c.cluster ? " in clusters" : " workspace"));
      CudaOptions o = layout_options();
      o.split_k = c.ways;
      o.split_k_cluster = c.cluster;
      auto ck = compile_cuda(*k, o);
      for (int launch = 1; launch <= 2; ++launch) {
        std::vector<Tensor> want = make_random_tensors(*k, c.sizes, seed++), got = want;
        auto wa = args_for(*k, want), ga = args_for(*k, got);
        run_interp(*k, wa);
        ck->run_host(ga);
        testutil::expect_tensors_match(want, got, "matmul [" + sizes_str(c.sizes) + "]", "gpu, layout split-K");
        EXPECT_EQ(ck->launches_split_k, launch);
        EXPECT_EQ(ck->launches_split_cluster, c.cluster ? launch : 0);
      }
    }
  }
}

// swap-dot-operands: the library's decode config (16 x 64 x 128 tiles, swap_operands = 1) on
// the layout emitter, its dot as c^T = b^T a^T on wgmma (A MN-major), at M = 1 and 13 (ragged),
// N and K that tensor maps describe (else the no-TMA compilation runs: counted), unsplit and
// split 3 ways (the transposed accumulator's partial sums, in clusters and through the
// workspace), and the hand-written form of the corpus (tests/corpus/matmul_decode_swapped.tile).
TEST(LayoutEmitterGpu, SwappedDecodeMatmulMatchesTheInterpreter) {
  REQUIRE_GPU();
  if (cuda_target_for(layout_options()).str() != "sm_90a") GTEST_SKIP() << "the swapped product is wgmma's (sm_90a)";
  const LibraryKernel& lk = *find_library_kernel("matmul");
  uint64_t seed = 91;
  struct Case {
    Sizes sizes;
    int ways;
    bool cluster;
  };
  for (const Case& c : {Case{{{"M", 13}, {"N", 264}, {"K", 1000}}, 1, true}, Case{{{"M", 1}, {"N", 4096}, {"K", 512}}, 1, true},
                        Case{{{"M", 13}, {"N", 264}, {"K", 4096}}, 3, true}, Case{{{"M", 13}, {"N", 264}, {"K", 4096}}, 3, false}}) {
    const Sizes& s = c.sizes;
    SCOPED_TRACE(sizes_str(s) + " ways " + std::to_string(c.ways) + (c.cluster ? "" : " workspace"));
    auto k = lk.build(ScalarKind::BF16);
    const ConstexprConfig cfg = library_config(lk, ScalarKind::BF16, "cuda:sm_90a", {}, &s);
    for (const auto& [name, value] : cfg)
      if (!k->find_constexpr(name)) k->set_constexpr(name, value);
    auto bound = bind_constexprs(*k, cfg);
    ASSERT_EQ(bound->find_constexpr("swap_operands")->value, 1);
    const CudaEmission em = emit_cuda_with_info(*run_pipeline(*bound, {}), cuda_target_for(layout_options()));
    ASSERT_TRUE(em.lowered);
    ASSERT_EQ(em.stats.count("wgmma-mn-major-a"), 1u) << "not the swapped wgmma";
    EXPECT_EQ(em.stats.at("wgmma-mn-major-a"), 1);
    std::vector<Tensor> want = make_random_tensors(*bound, s, seed++), got = want;
    auto wa = args_for(*bound, want), ga = args_for(*bound, got);
    run_interp(*bound, wa);
    CudaOptions o = layout_options();
    o.split_k = c.ways;
    o.split_k_cluster = c.cluster;
    auto ck = compile_cuda(*bound, o);
    ck->run_host(ga);
    testutil::expect_tensors_match(want, got, "matmul [" + sizes_str(s) + "]", "gpu, swapped on the layout emitter");
    EXPECT_EQ(ck->launches_without_tma, 0);
    EXPECT_EQ(ck->launches_split_k, c.ways > 1 ? 1 : 0);
    if (c.ways > 1) EXPECT_EQ(ck->launches_split_cluster, c.cluster ? 1 : 0);
  }
  const std::string path = std::string(TESSERA_SOURCE_DIR) + "/tests/corpus/matmul_decode_swapped.tile";
  auto m = parse_file(path);
  expect_matches(*m->kernels[0], {{"M", 13}, {"N", 264}, {"K", 200}});
}

// Raw code on the layout emitter (since session 55; Auto keeps it on the planning emitter until
// this passes): a popcount of a tile staged into shared memory by its layout, the result
// gathered back into its layout and added to the operand, at a ragged size, against the host.
TEST(LayoutEmitterGpu, RawCodeMatchesTheHost) {
  REQUIRE_GPU();
  auto m = parse_module(R"(kernel @popcount(%x: view<i32, [N]>, %y: view<i32, [N]>) {
  grid {
    %n = dim %x {axis = 0} : i32
    %b = const {value = 1024} : i32
    %g = cdiv %n, %b : i32
    yield %g
  }
  %p = program_id {axis = 0} : i32
  %t = load_tile %x, %p : tile<i32, [1024]>
  %pc = raw %t {name = "popcount", cuda = "for (int64_t i = tsr_tid; i < in0_numel; i += tsr_nthreads) out0[i] = __popc(in0[i]);"} : tile<i32, [1024]>
  %s = add %pc, %t : tile<i32, [1024]>
  store_tile %y, %s, %p
})", "raw.tile");
  const Kernel& k = *m->kernels.at(0);
  EXPECT_NE(printed_by(k).find("printed from the GPU lowering's layouts"), std::string::npos) << printed_by(k);
  std::vector<Tensor> t = make_random_tensors(k, {{"N", 3001}}, 57);
  auto args = args_for(k, t);
  compile_cuda(k, layout_options())->run_host(args);
  int64_t wrong = 0;
  for (int64_t i = 0; i < 3001; ++i) {
    const uint32_t x = static_cast<uint32_t>(t[0].get_int(i));
    wrong += t[1].get_int(i) != static_cast<int32_t>(static_cast<uint32_t>(__builtin_popcount(x)) + x);
  }
  EXPECT_EQ(wrong, 0);
}

// Scans the block scan does not take, scan_with and reduce_with, through shared memory
// (lowered_fold_lines_through_shared, since session 56): a max along rows of 4 x 4096 (nine parts
// along the axis), a sum down columns of 64 x 128 (five), a bf16 sum along rows of 8 x 64, an i32
// min of one line, a log-sum-exp reduce_with of a [16384] line to a scalar (eight parts), a non-associative scan_with and reduce_with along rows of 8 x 512; and an insert_tile
// of a 64 x 64 f32 sub-tile (16 KiB: two parts); a tile carried through a while loop, a tile
// stored in one; all at ragged sizes (tests/cuda_codegen/data/shared_folds.tile).
TEST(LayoutEmitterGpu, SharedFoldsAndLargeInsertsMatchTheInterpreter) {
  REQUIRE_GPU();
  auto m = parse_file(std::string(TESSERA_SOURCE_DIR) + "/tests/cuda_codegen/data/shared_folds.tile");
  for (auto& k : m->kernels) {
    SCOPED_TRACE(k->name);
    EXPECT_NE(printed_by(*k).find("printed from"), std::string::npos) << printed_by(*k);
    const Sizes s = k->name == "cummin_line"   ? Sizes{{"N", 2000}}
                    : k->name == "lse_line"    ? Sizes{{"N", 16000}}
                    : k->name == "halve_while" || k->name == "store_in_while" ? Sizes{{"N", 3000}}
                                               : Sizes{{"M", 101}, {"N", 1000}};
    expect_matches(*k, s);
  }
}

// The library kernels the layout emitter prints (every one since session 55, when topk's
// whole-row kernel, of Struct buffers, began to print; matmul_fp8 above, with the
// bf16 tolerance), in each dtype, bound with the device target's preferred config, at ragged
// sizes (partial tiles in every dim; the wgmma kernels' views there have no tensor maps, so
// they run the compilation without TMA: the TMA path is the two tests above).
class LayoutEmitterLibraryGpu : public ::testing::TestWithParam<std::string> {};

TEST_P(LayoutEmitterLibraryGpu, MatchesInterpreter) {
  REQUIRE_GPU();
  const LibraryKernel& lk = *find_library_kernel(GetParam());
  const std::string key = "cuda:" + cuda_target_for(layout_options()).str();
  uint64_t seed = 31;
  for (ScalarKind dt : lk.dtypes) {
    auto k = bind_constexprs(*lk.build(dt), library_config(lk, dt, key));
    SCOPED_TRACE(std::string(scalar_name(dt)) + " " + key);
    EXPECT_NE(printed_by(*k).find("printed from"), std::string::npos) << printed_by(*k);
    const bool one_dim = lk.default_sizes.size() == 1;
    for (const Sizes& s : {one_dim ? sizes_for(*k, 70001, 0) : sizes_for(*k, 193, 37),
                           one_dim ? sizes_for(*k, 1001, 0) : sizes_for(*k, 67, 30)})
      EXPECT_GT(expect_gpu_matches_interp(*k, s, seed++, {}, layout_options()), 0) << sizes_str(s);
  }
}

INSTANTIATE_TEST_SUITE_P(Library, LayoutEmitterLibraryGpu,
                         ::testing::Values("vector_add", "softmax", "layernorm", "rmsnorm", "matmul", "matmul_struct",
                                           "sort", "topk"));

}  // namespace
}  // namespace tessera::gputest
