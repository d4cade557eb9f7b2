// Tuning spaces: knobs from constexprs and the declared codegen knobs, and pruning.
#include <gtest/gtest.h>

#include "cuda/RuntimeInternal.h"
#include "kernels/Library.h"
#include "support/Diagnostic.h"
#include "text/Text.h"
#include "tune/Space.h"

namespace tessera::tune {
namespace {

std::unique_ptr<Kernel> lib(const std::string& name, ScalarKind dt = ScalarKind::F32) {
  return find_library_kernel(name)->build(dt);
}

const Knob* find(const std::vector<Knob>& ks, const std::string& n) {
  for (const Knob& k : ks)
    if (k.name == n) return &k;
  return nullptr;
}

TEST(Space, MatmulOnCpuIsItsTileKnobsAndTheDotBlock) {
  auto k = lib("matmul");
  Space s = make_space(*k, "cpu", {{"BLOCK_K", 64}});
  ASSERT_EQ(s.knobs.size(), 5u);
  EXPECT_EQ(s.knobs[0].name, "BLOCK_M");
  EXPECT_EQ(s.knobs[0].kind, KnobKind::Tile);
  EXPECT_EQ(s.knobs[3].name, "cpu_dot_mr");
  EXPECT_EQ(s.knobs[3].kind, KnobKind::Codegen);
  EXPECT_EQ(s.knobs[4].targets, std::vector<std::string>{"cpu"});
  EXPECT_EQ(s.size(), 5 * 6 * 4 * 5 * 4);  // BLOCK_M, BLOCK_N with 192 (wgmma's wave fit)
  EXPECT_EQ(static_cast<int64_t>(s.enumerate().size()), s.size());
  EXPECT_EQ(s.defaults().at("BLOCK_K"), 64);  // the given default over the kernel's own (32)
  // The cuda codegen knobs are declared, but for cuda targets only.
  ASSERT_NE(find(s.elsewhere, "cluster_m"), nullptr);
  EXPECT_EQ(find(s.elsewhere, "cluster_m")->targets, std::vector<std::string>{"cuda:sm_90a"});
  // The grid's knobs count programs; BLOCK_K is a loop over K within a program.
  EXPECT_EQ(s.grid_knobs, (std::vector<std::string>{"BLOCK_M", "BLOCK_N"}));
  EXPECT_TRUE(grid_knobs(*lib("softmax")).empty());  // a program per row whatever the tiles
}

TEST(Space, CudaTargetsAddTheirCodegenKnobs) {
  auto k = lib("matmul", ScalarKind::BF16);
  Space s80 = make_space(*k, "cuda:sm_80"), s90a = make_space(*k, "cuda:sm_90a");
  EXPECT_NE(find(s80.knobs, "mma_l2_prefetch"), nullptr);
  EXPECT_EQ(find(s80.knobs, "cluster_m"), nullptr);
  ASSERT_NE(find(s90a.knobs, "cluster_m"), nullptr);
  EXPECT_EQ(find(s90a.knobs, "cluster_m")->kind, KnobKind::Codegen);
  EXPECT_GT(s90a.size(), s80.size());
  // A row kernel gets the row knobs, not the matmul ones; a declared knob keeps its candidates.
  auto ln = lib("layernorm");
  Space r = make_space(*ln, "cuda:sm_90a");
  EXPECT_NE(find(r.knobs, "prefetch_programs"), nullptr);
  EXPECT_EQ(find(r.knobs, "mma_l2_prefetch"), nullptr);
  ASSERT_NE(find(r.knobs, "whole_tile_checks"), nullptr);
  EXPECT_EQ(find(r.knobs, "whole_tile_checks")->default_value, 1);
  // On cpu, whole_tile_checks is fixed at its default.
  EXPECT_EQ(make_space(*ln, "cpu").fixed.at("whole_tile_checks"), 1);
}

TEST(Space, TileCoverKeepsTheLeastTileThatCoversEachDim) {
  auto k = lib("matmul");
  Space s = make_space(*k, "cpu");
  s.knobs.resize(3);  // the tile knobs
  Pruned p = prune(s, *k, {{"M", 20}, {"N", 40}, {"K", 17}});
  // BLOCK_M in {16, 32}, BLOCK_N in {16, 32, 64}, BLOCK_K in {16, 32}.
  EXPECT_EQ(p.configs.size(), 2u * 3u * 2u);
  EXPECT_EQ(p.removed_by.at("tile-cover"), 120 - 12);
  for (const Config& c : p.configs) EXPECT_LE(c.at("BLOCK_N"), 64);
  // A large shape keeps everything (5 x 6 x 4).
  EXPECT_EQ(prune(s, *k, {{"M", 999}, {"N", 999}, {"K", 999}}).configs.size(), 120u);
  // On sm_90a, 64 rows (the least a wgmma dot takes) stay beside the cover of M = 1; 32 and 128
  // only pad. Not for BLOCK_N, nor on sm_80.
  auto b = lib("matmul", ScalarKind::BF16);
  auto kept = [&](const std::string& target, int64_t bm, int64_t bn, int64_t k = 4096) {
    const Config c = {{"BLOCK_M", bm}, {"BLOCK_N", bn}, {"BLOCK_K", 64}};
    auto bound = bind_config(*b, c);
    const Sizes sz = {{"M", 1}, {"N", 40}, {"K", k}};
    return tile_cover_constraint().rejects({c, *bound, sz, target}).empty();
  };
  EXPECT_TRUE(kept("cuda:sm_90a", 64, 64));
  EXPECT_TRUE(kept("cuda:sm_90a", 16, 64));
  EXPECT_FALSE(kept("cuda:sm_90a", 32, 64));
  EXPECT_FALSE(kept("cuda:sm_90a", 128, 64));
  EXPECT_FALSE(kept("cuda:sm_90a", 64, 128));  // N = 40: 64 covers it
  EXPECT_FALSE(kept("cuda:sm_80", 64, 64));
  EXPECT_FALSE(kept("cuda:sm_90a", 64, 64, 20));  // BLOCK_K = 64 at K = 20: K is not the dot's rows
}

TEST(Space, TheDotBlockMustDivideAndDifferFromTheHeadersChoice) {
  auto k = lib("matmul");
  const Sizes sz = {{"M", 999}, {"N", 999}, {"K", 999}};
  auto reason = [&](int64_t bn, int64_t mr, int64_t nr) {
    Config c = {{"BLOCK_M", 64}, {"BLOCK_N", bn}, {"BLOCK_K", 32}, {"cpu_dot_mr", mr}, {"cpu_dot_nr", nr}};
    auto b = bind_config(*k, c);
    const std::string cpu = "cpu";
    return cpu_dot_block_constraint().rejects({c, *b, sz, cpu});
  };
  EXPECT_EQ(reason(64, 0, 0), "");
  EXPECT_EQ(reason(16, 0, 32), "cpu_dot_nr = 32 does not divide N = 16");
  EXPECT_EQ(reason(64, 0, 32), "cpu_dot_nr = 32 is the header's own choice");
  EXPECT_EQ(reason(64, 8, 0), "cpu_dot_mr = 8 is the header's own choice");  // 64 rows, NR 32: MR 8
  EXPECT_EQ(reason(64, 8, 16), "");                                          // with NR 16 it would be 4
  EXPECT_EQ(reason(64, 4, 16), "cpu_dot_mr = 4 is the header's own choice");
  Space s = make_space(*k, "cpu");
  Pruned p = prune(s, *k, sz);
  EXPECT_EQ(p.configs.size(), 1360u);  // of 2400: more than the 500 issue 20's figure asks for
  EXPECT_EQ(p.removed_by.at("cpu-dot-block"), 2400 - 1360);
}

TEST(Space, CpuTileBytesAndCudaSmemConstraints) {
  auto k = lib("matmul");
  Space s = make_space(*k, "cpu");
  s.constraints = {cpu_tile_bytes_constraint(64 * 1024)};
  Pruned p = prune(s, *k, {{"M", 999}, {"N", 999}, {"K", 999}});
  EXPECT_GT(p.removed_by.at("cpu-tile-bytes"), 0);
  for (const Config& c : p.configs) EXPECT_LE(program_tile_bytes(*bind_config(*k, c)), 64 * 1024);
  // bf16 128x256x64 in 4 stages: 192 KiB, over sm_80's 163 KiB, within sm_90a's 227 KiB.
  auto b = lib("matmul", ScalarKind::BF16);
  const Config big = {{"BLOCK_M", 128}, {"BLOCK_N", 256}, {"BLOCK_K", 64}};
  auto bound = bind_config(*b, big);
  const Sizes sz = {{"M", 4096}, {"N", 4096}, {"K", 4096}};
  const std::string t80 = "cuda:sm_80", t90 = "cuda:sm_90a";
  EXPECT_NE(cuda_smem_constraint().rejects({big, *bound, sz, t80}), "");
  EXPECT_EQ(cuda_smem_constraint().rejects({big, *bound, sz, t90}), "");
}

// split_k (read by the runtime at launch) is kept where it changes the launch: a wgmma dot
// (64-row multiples), few programs, and a split the runtime's own rule would not pick.
TEST(Space, SplitKNeedsAWgmmaDotFewProgramsAndADifferentSplit) {
  auto b = lib("matmul", ScalarKind::BF16);
  const std::string t90 = "cuda:sm_90a";
  auto reason = [&](int64_t bm, int64_t bn, int64_t split, const Sizes& sz, int64_t min_blocks = 1,
                    int64_t cluster = 1) {
    Config c = {{"BLOCK_M", bm},   {"BLOCK_N", bn},           {"BLOCK_K", 64},
                {"split_k", split}, {"min_blocks", min_blocks}, {"cluster_m", cluster}};
    auto bound = bind_config(*b, c);
    return cuda_split_k_constraint().rejects({c, *bound, sz, t90});
  };
  const Sizes decode = {{"M", 1}, {"N", 4608}, {"K", 3584}};  // 36 programs of 64 x 128
  EXPECT_EQ(reason(64, 128, 0, decode), "");
  EXPECT_EQ(reason(64, 128, 2, decode), "");
  EXPECT_EQ(reason(64, 128, 3, decode), "split_k = 3 is what the runtime picks for 36 programs (split_k = 0)");
  EXPECT_EQ(reason(64, 128, 4, decode), "");
  EXPECT_EQ(reason(64, 128, 4, decode, 1, 2), "split_k = 4 with cluster_m: the split compilation has no clusters");
  EXPECT_EQ(reason(16, 128, 2, decode), "split_k = 2: no dot of a multiple of 64 rows (wgmma), which a split needs");
  // 18 programs of 64 x 256: the runtime splits 4 ways by itself.
  EXPECT_EQ(reason(64, 256, 4, decode), "split_k = 4 is what the runtime picks for 18 programs (split_k = 0)");
  EXPECT_EQ(reason(64, 256, 3, decode), "");
  // At K = 1024 the runtime does not split (slices under cuda::kMinSplitKSlice): 3 ways is a
  // launch of its own, and 2 ways at K = 1400 (1408 / 640) is what it picks.
  EXPECT_EQ(reason(64, 128, 3, {{"M", 1}, {"N", 4608}, {"K", 1024}}), "");
  EXPECT_EQ(reason(64, 128, 2, {{"M", 1}, {"N", 4608}, {"K", 1400}}),
            "split_k = 2 is what the runtime picks for 36 programs (split_k = 0)");
  const Sizes big = {{"M", 4096}, {"N", 4096}, {"K", 4096}};
  EXPECT_EQ(reason(128, 256, 2, big), "split_k = 2: 512 programs x 2 CTAs are over two waves");
  // Two CTAs per SM double the capacity: 96 programs x 2 fit two waves of 132 x 2.
  const Sizes mid = {{"M", 1024}, {"N", 1536}, {"K", 7168}};
  EXPECT_NE(reason(128, 128, 3, mid), "");
  EXPECT_EQ(reason(128, 128, 3, mid, 2), "");
  // In the space: the knob applies to sm_90a only.
  EXPECT_NE(find(make_space(*b, t90).knobs, "split_k"), nullptr);
  EXPECT_EQ(find(make_space(*b, "cuda:sm_80").knobs, "split_k"), nullptr);
}

// stream_k = 1 is kept where it changes the launch: a partial last wave the kernel shares out
// (cuda::stream_k_tiles), no cluster (not taken with stream-K), no split (the split
// compilation runs instead).
TEST(Space, StreamKNeedsAPartialWaveAndNoClusterOrSplit) {
  auto b = lib("matmul", ScalarKind::BF16);
  const std::string t90 = "cuda:sm_90a";
  auto reason = [&](int64_t bm, int64_t bn, const Sizes& sz, int64_t cluster = 1, int64_t split = 0) {
    Config c = {{"BLOCK_M", bm},     {"BLOCK_N", bn},        {"BLOCK_K", 64},
                {"stream_k", 1},     {"cluster_m", cluster}, {"split_k", split}};
    auto bound = bind_config(*b, c);
    return cuda_stream_k_constraint().rejects({c, *bound, sz, t90});
  };
  const Sizes mid = {{"M", 1024}, {"N", 3584}, {"K", 3584}};  // 224 programs of 128 x 128: a last wave of 92
  EXPECT_EQ(reason(128, 128, mid), "");
  EXPECT_EQ(reason(128, 128, mid, 2), "stream_k = 1 with cluster_m: the clusters are not taken");
  EXPECT_EQ(reason(128, 128, mid, 1, 2), "stream_k = 1 with split_k: the split compilation runs");
  EXPECT_EQ(reason(16, 128, mid), "stream_k = 1: no dot of a multiple of 64 rows (wgmma)");
  // 288 programs: a last wave of 24 CTAs, under half, which the kernel shares out with the
  // full wave before it (cuda::stream_k_tiles: 156 tiles).
  const Sizes short_wave = {{"M", 1024}, {"N", 4608}, {"K", 3584}};
  EXPECT_EQ(cuda::stream_k_tiles(288, 132), 156);
  EXPECT_EQ(reason(128, 128, short_wave), "");
  const Sizes small = {{"M", 128}, {"N", 4096}, {"K", 4096}};  // 16 programs of 128 x 256
  EXPECT_EQ(reason(128, 256, small), "stream_k = 1: the runtime splits 16 programs over K");
  // The same programs over a K loop too short to split: stream-K runs.
  EXPECT_EQ(reason(128, 256, {{"M", 128}, {"N", 4096}, {"K", 1024}}), "");
  // 50 programs, unsplit (over a third of the CTAs): all shared out over the 132 CTAs; 20
  // (under a third, split_k = 1 keeps the runtime from splitting them): over 80, four parts each.
  const Sizes few = {{"M", 256}, {"N", 6400}, {"K", 4096}};
  EXPECT_EQ(reason(128, 256, few), "");
  EXPECT_EQ(cuda::stream_k_ctas(50, 132), 132);
  EXPECT_EQ(cuda::stream_k_tiles(50, 132), 50);
  EXPECT_EQ(reason(128, 256, {{"M", 256}, {"N", 2560}, {"K", 4096}}, 1, 1), "");
  EXPECT_EQ(cuda::stream_k_ctas(20, 132), 80);
  EXPECT_EQ(cuda::stream_k_tiles(20, 80), 20);
  const Sizes whole = {{"M", 1024}, {"N", 4224}, {"K", 4096}};  // 8 x 33 = 264 programs: two whole waves
  EXPECT_NE(reason(128, 128, whole), "");
  Config off = {{"BLOCK_M", 128}, {"BLOCK_N", 128}, {"BLOCK_K", 64}, {"stream_k", 0}};
  EXPECT_EQ(cuda_stream_k_constraint().rejects({off, *bind_config(*b, off), small, t90}), "");
}

// BLOCK_N 96 (16-bit matmuls) is kept where the wgmma plan takes it: sm_90a and a multiple of 64
// rows; on sm_80, in a 16-row tile and on the cpu target it is pruned or left alone as said.
TEST(Space, TilesOf96ColumnsOnlyOnWgmma) {
  auto b = lib("matmul", ScalarKind::BF16);
  const Sizes big = {{"M", 1024}, {"N", 1536}, {"K", 7168}};
  auto reason = [&](int64_t bm, const std::string& target) {
    const Config c{{"BLOCK_M", bm}, {"BLOCK_N", 96}, {"BLOCK_K", 64}};
    return cuda_narrow_b_constraint().rejects({c, *bind_config(*b, c), big, target});
  };
  EXPECT_EQ(reason(128, "cuda:sm_90a"), "");
  EXPECT_EQ(reason(64, "cuda:sm_90a"), "");
  EXPECT_NE(reason(128, "cuda:sm_80").find("96 columns are for sm_90a's wgmma"), std::string::npos);
  EXPECT_NE(reason(16, "cuda:sm_90a").find("a dot of 16 x 96"), std::string::npos);
  EXPECT_EQ(reason(16, "cpu"), "");
  const Config c128{{"BLOCK_M", 128}, {"BLOCK_N", 128}, {"BLOCK_K", 64}};
  EXPECT_EQ(cuda_narrow_b_constraint().rejects({c128, *bind_config(*b, c128), big, "cuda:sm_80"}), "");
}

// swap_operands = 1 is kept for a dot of 8, 16 or 32 rows and 64, 128, 192 or 256 columns (elsewhere the
// same program as 0), without cluster_m (not taken with it); with it such a dot is wgmma's, so
// split_k >= 2 is kept for it.
TEST(Space, SwapOperandsNeedsASmallMTileAndMakesItWgmma) {
  auto b = lib("matmul", ScalarKind::BF16);
  const std::string t90 = "cuda:sm_90a";
  const Sizes decode = {{"M", 1}, {"N", 4608}, {"K", 3584}};
  auto config = [](int64_t bm, int64_t bn, int64_t swap, int64_t cluster = 1, int64_t split = 0) {
    return Config{{"BLOCK_M", bm},      {"BLOCK_N", bn},        {"BLOCK_K", 64},
                  {"swap_operands", swap}, {"cluster_m", cluster}, {"split_k", split}};
  };
  auto reason = [&](const Constraint& k, const Config& c) { return k.rejects({c, *bind_config(*b, c), decode, t90}); };
  EXPECT_EQ(reason(cuda_swap_constraint(), config(16, 128, 1)), "");
  EXPECT_EQ(reason(cuda_swap_constraint(), config(32, 64, 1)), "");
  EXPECT_EQ(reason(cuda_swap_constraint(), config(16, 128, 0)), "");
  const std::string none =
      "swap_operands = 1: no dot of 8, 16 or 32 rows and 64, 128, 192 or 256 columns on 16-bit or fp8 operands (the swap "
      "takes only those)";
  EXPECT_EQ(reason(cuda_swap_constraint(), config(64, 128, 1)), none);
  EXPECT_EQ(reason(cuda_swap_constraint(), config(16, 256, 1)), "");
  EXPECT_EQ(reason(cuda_swap_constraint(), config(16, 32, 1)), none);
  // f32 operands stay off wgmma: nothing to swap.
  auto f32 = lib("matmul", ScalarKind::F32);
  const Config c32 = config(16, 64, 1);
  EXPECT_EQ(cuda_swap_constraint().rejects({c32, *bind_config(*f32, c32), decode, t90}), none);
  EXPECT_NE(reason(cuda_swap_constraint(), config(16, 128, 1, 2)).find("with cluster_m"), std::string::npos);
  // 72 programs of 16 x 64: a split of 2 is two waves' worth at most, and the runtime's rule
  // would not pick it for so many programs; on mma.sync (swap 0) there is nothing to split.
  EXPECT_EQ(reason(cuda_split_k_constraint(), config(16, 64, 1, 1, 2)), "");
  EXPECT_NE(reason(cuda_split_k_constraint(), config(16, 64, 0, 1, 2)), "");
  EXPECT_NE(find(make_space(*b, t90).knobs, "swap_operands"), nullptr);
  EXPECT_EQ(find(make_space(*b, "cuda:sm_80").knobs, "swap_operands"), nullptr);
}

// prune() binds one kernel per tile combination: the swap must count from each config, so that
// with the knob free the swapped splits survive beside the unswapped (mma.sync) config.
TEST(Space, PruningKeepsSwappedSplitsWithTheKnobFree) {
  auto b = lib("matmul", ScalarKind::BF16);
  Space space = make_space(*b, "cuda:sm_90a");
  const Config tile = {{"BLOCK_M", 16}, {"BLOCK_N", 64}, {"BLOCK_K", 128}};
  for (auto it = space.knobs.begin(); it != space.knobs.end();) {
    if (it->name == "swap_operands" || it->name == "split_k") {
      ++it;
      continue;
    }
    space.fixed[it->name] = tile.count(it->name) ? tile.at(it->name) : it->default_value;
    it = space.knobs.erase(it);
  }
  ASSERT_EQ(space.size(), 8);  // swap {0, 1} x split_k {0, 2, 3, 4}
  Pruned pr = prune(space, *b, {{"M", 1}, {"N", 4608}, {"K", 3584}});
  int swapped = 0, split = 0;
  for (const Config& c : pr.configs) {
    swapped += c.at("swap_operands") == 1;
    split += c.at("swap_operands") == 1 && c.at("split_k") >= 2;
  }
  EXPECT_EQ(pr.configs.size() - swapped, 1u);  // mma.sync: nothing to split
  EXPECT_GE(split, 2) << "swapped configs with an explicit split were pruned";
}

TEST(Space, AKernelWithoutCandidatesHasNoKnobs) {
  auto m = parse_module(
      "kernel @copy(%x: view<f32, [N]>, %y: view<f32, [N]>) {\n"
      "  constexpr BLOCK = 256\n"
      "  grid {\n"
      "    %n = dim %x {axis = 0} : i32\n"
      "    yield %n\n"
      "  }\n"
      "  %i = program_id {axis = 0} : i32\n"
      "  %t = load_tile %x, %i : tile<f32, [BLOCK]>\n"
      "  store_tile %y, %t, %i\n"
      "}\n",
      "copy.tile");
  Space s = make_space(*m->kernels[0], "cpu");
  EXPECT_TRUE(s.knobs.empty());
  EXPECT_EQ(s.fixed.at("BLOCK"), 256);
}

TEST(Space, ConfigStringsRoundTrip) {
  Config c = {{"BLOCK_M", 64}, {"BLOCK_N", -2}};
  EXPECT_EQ(config_str(c), "BLOCK_M=64,BLOCK_N=-2");
  EXPECT_EQ(parse_config_str(config_str(c), "x"), c);
  EXPECT_TRUE(parse_config_str("", "x").empty());
  EXPECT_THROW(parse_config_str("BLOCK_M=6x", "x"), TesseraError);
  EXPECT_THROW(parse_config_str("BLOCK_M", "x"), TesseraError);
  // Spaces around names and values are dropped; a name given twice is an error, not the last.
  EXPECT_EQ(parse_config_str(" BLOCK_M = 64 ,split_k=2 ", "x"), (Config{{"BLOCK_M", 64}, {"split_k", 2}}));
  EXPECT_THROW(parse_config_str("BLOCK_M=64,BLOCK_M=128", "x"), TesseraError);
  EXPECT_THROW(parse_config_str("BLOCK_M= ", "x"), TesseraError);
  EXPECT_THROW(parse_config_str("BLOCK_M=6 4", "x"), TesseraError);
}

}  // namespace
}  // namespace tessera::tune
