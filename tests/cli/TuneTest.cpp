// `tessera tune`: a small tune on the cpu backend, the space, the database that `run` then
// consults, JSON Lines export, and each bad input as one message and exit status 1.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "Subprocess.h"
#include "cuda/CudaBackend.h"

namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

TEST(CliTune, TunesStoresAndRunUsesIt) {
  const std::string db = testing::TempDir() + "/tune_cli_" + std::to_string(::getpid()) + ".db";
  std::filesystem::remove(db);
  ::setenv("TESSERA_TUNE_DB", db.c_str(), 1);

  Result s = tessera("tune vector_add --size N=3001 --space");
  EXPECT_EQ(s.status, 0) << s.err;
  EXPECT_THAT(s.out, HasSubstr("  BLOCK                tile     all          1024     256 512 1024 2048 4096\n"));
  EXPECT_THAT(s.out, HasSubstr("size 5, pruned 5\n"));
  EXPECT_FALSE(std::filesystem::exists(db));  // --space measures and stores nothing

  Result t = tessera("tune vector_add --size N=3001 --budget 3 --rounds 1");
  EXPECT_EQ(t.status, 0) << t.err;
  EXPECT_THAT(t.out, StartsWith("vector_add cpu N=3001 dtype=f32: measured 3 of 5 configs (space 5)"));
  EXPECT_THAT(t.out, HasSubstr("\n  best     BLOCK="));
  EXPECT_THAT(t.out, HasSubstr("\n  default  BLOCK=1024 "));
  EXPECT_THAT(t.err, StartsWith("tune: default 1/3 measured, best "));  // piped: plain lines

  Result r = tessera("run vector_add -b cpu --check --size N=3001");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("PASS vector_add cpu N=3001"));
  EXPECT_THAT(r.err, HasSubstr("note: vector_add: tuned config BLOCK="));
  // Another shape of the same bucket (N in 2049..4096) takes it too; one of another bucket, the defaults.
  Result r2 = tessera("run vector_add -b cpu --check --size N=2500");
  EXPECT_EQ(r2.status, 0) << r2.err;
  EXPECT_THAT(r2.err, HasSubstr(" (tuned at N=3001, the nearest shape of its bucket) from the tuning database "));
  EXPECT_EQ(tessera("run vector_add -b cpu --check --size N=4097").err, "");

  Result j = tessera("tune vector_add --size N=3001 --budget 2 --rounds 1 --json");
  EXPECT_EQ(j.status, 0) << j.err;
  EXPECT_THAT(j.out, StartsWith("{\"kernel\": \"vector_add\", \"backend\": \"cpu\", \"dtype\": \"f32\", \"sizes\": {\"N\": 3001}, "
                                "\"space\": 5, \"pruned\": 5, \"measured\": 2, "));
  Result e = tessera("tune --export -");
  EXPECT_EQ(e.status, 0) << e.err;
  // 3 + 2 measurements, and for each tune its finalists (those of its measured configs within
  // 10% of its best, the default among them) confirmed in two rounds: 1-3 and 1-2 configs.
  const size_t rows = lines(e.out).size();
  EXPECT_TRUE(rows >= 9 && rows <= 15) << e.out;
  EXPECT_THAT(e.out, HasSubstr(", \"confirmed\": 1}\n"));
  EXPECT_THAT(e.out, HasSubstr("{\"kernel\": \"vector_add\", \"kernel_hash\": \""));

  // The lookup keys on the kernel as declared: a --config codegen knob (which `run` sets on a
  // copy) does not hide the tuned config, and what --config gives wins.
  Result m = tessera("tune matmul --size M=9,N=7,K=5 --config BLOCK_K=16,BLOCK_N=16,cpu_dot_mr=0,cpu_dot_nr=0 --budget 1 --rounds 1");
  EXPECT_EQ(m.status, 0) << m.err;
  Result mc = tessera("run matmul -b cpu --check --size M=9,N=7,K=5 --config cpu_dot_nr=8");
  EXPECT_EQ(mc.status, 0) << mc.err;
  EXPECT_THAT(mc.err, HasSubstr("note: matmul: tuned config BLOCK_K=16,BLOCK_M="));
  EXPECT_THAT(mc.err, HasSubstr(",cpu_dot_mr=0 from"));  // cpu_dot_nr: --config's

  // A codegen knob the kernel does not declare, by hand (as a tuned config applies it).
  Result c = tessera("compile matmul --emit cpp --config cpu_dot_mr=2,cpu_dot_nr=16");
  EXPECT_EQ(c.status, 0) << c.err;
  EXPECT_THAT(c.out, HasSubstr("tsr::dot_f32<64, 64, 128, 2, 16>("));  // cpu f32: BLOCK_K 128

  // Bad input: one message, exit status 1.
  auto fails = [](const std::string& args, const std::string& msg, bool output = false) {
    Result b = tessera(args);
    EXPECT_EQ(b.status, 1) << args;
    EXPECT_THAT(b.err, HasSubstr(msg)) << args;
    if (!output) {
      EXPECT_EQ(b.out, "") << args;
    }
  };
  fails("tune vector_add --size N=3001 --budget 0", "error: --budget 0 measures nothing: give at least 1");
  fails("tune vector_add --size N=0", "error: bad --size N=0: a dim must be in [1, 2147483647]");
  // sort takes rows of one tile, at most 4096: the default fails its check, and so does all else.
  fails("tune sort --size M=2,N=5000 --budget 1 --rounds 1",
        "error: no configuration of 'sort' passed its check at M=2,N=5000 (the default's neither: a shape the "
        "kernel cannot take?)", true);
  std::string why;
  if (!tessera::cuda_device_available(&why)) {
    fails("tune vector_add -b cuda --size N=3001", "error: tessera tune: cannot measure on cuda here: ");
  }
  fails("tune vector_add --size N=3001 --compile-only", "error: tessera tune: --compile-only is for --backend cuda");
  if (tessera::nvrtc_available(&why)) {  // compiling for cuda needs no GPU
    Result cc = tessera("tune vector_add -b cuda --size N=3001 --config num_warps=4,whole_tile_checks=0,prefetch_programs=0 "
                        "--compile-only");
    EXPECT_EQ(cc.status, 0) << cc.err;
    EXPECT_THAT(cc.out, StartsWith("vector_add cuda:sm_90a N=3001: compiled 5 configs in "));
    EXPECT_THAT(cc.out, HasSubstr(" registers per thread\n  ok 5\n"));
  }
  const std::string head = "kernel @copy(%x: view<f32, [N]>, %y: view<f32, [N]>) {\n";
  const std::string body =
      "  grid {\n    %n = dim %x {axis = 0} : i32\n    yield %n\n  }\n  %i = program_id {axis = 0} : i32\n"
      "  %t = load_tile %x, %i : tile<f32, [BLOCK]>\n  store_tile %y, %t, %i\n}\n";
  std::string none = write_temp("tune_none.tile", head + "  constexpr BLOCK = 256\n" + body);
  fails("tune " + none + " --size N=100", "error: kernel 'copy' has no knobs to tune on cpu");
  std::string huge = write_temp("tune_huge.tile", head + "  constexpr BLOCK = 2097152 in [2097152, 4194304]\n" + body);
  fails("tune " + huge + " --size N=100",
        "error: kernel 'copy' at N=100: no configuration of its 2 is left after pruning (cpu-tile-bytes removed 1, "
        "tile-cover removed 1)");
  std::string garbage = write_temp("tune_garbage.db", std::string(4096, 'x'));
  ::setenv("TESSERA_TUNE_DB", garbage.c_str(), 1);
  fails("tune vector_add --size N=3001 --budget 2", "error: tuning database " + garbage + ": ");
  fails("run vector_add -b cpu --size N=3001", "error: tuning database " + garbage + ": ");
  ::unsetenv("TESSERA_TUNE_DB");
}

// Several shapes in one process (--shapes: what the cuda figure runs, one CUDA context for
// all), a JSON line each with where the time went; --exhaustive measures the whole pruned space
// and re-times its finalists; a config that hung at a shape before is left out there.
TEST(CliTune, ShapesInOneProcessExhaustiveAndHungConfigs) {
  const std::string db = testing::TempDir() + "/tune_shapes_" + std::to_string(::getpid()) + ".db";
  std::filesystem::remove(db);
  ::setenv("TESSERA_TUNE_DB", db.c_str(), 1);
  // matmul's reference runs on the rows of M (b read in place) at ragged sizes: a wrong row
  // would fail every config's check.
  std::string mm = write_temp("tune_shapes_mm.txt", "# two ragged shapes\nM=37,N=29,K=19\n\n  M=5,N=40,K=33  # small M\n");
  Result t = tessera("tune matmul --shapes " + mm + " --config BLOCK_K=16,cpu_dot_mr=0,cpu_dot_nr=0 --budget 2 --rounds 1 --json");
  EXPECT_EQ(t.status, 0) << t.err;
  std::vector<std::string> ls = lines(t.out);
  ASSERT_EQ(ls.size(), 2u) << t.out;
  EXPECT_THAT(ls[0], StartsWith("{\"kernel\": \"matmul\", \"backend\": \"cpu\", \"dtype\": \"f32\", \"sizes\": {\"M\": 37, \"K\": 19, \"N\": 29}"));
  EXPECT_THAT(ls[1], HasSubstr("\"sizes\": {\"M\": 5, \"K\": 33, \"N\": 40}"));
  for (const std::string& l : ls) {
    EXPECT_THAT(l, HasSubstr("\"measured\": 2, "));
    EXPECT_THAT(l, HasSubstr("\"best\": {\"config\": {"));
    EXPECT_THAT(l, HasSubstr(", \"phases\": {\"inputs_s\": "));
    EXPECT_THAT(l, HasSubstr(", \"failures\": {}"));
  }

  // Exhaustive: vector_add's 5 configs at two shapes, the 2 fastest (and the default) again.
  std::string va = write_temp("tune_shapes_va.txt", "N=3001\nN=4000\n");
  Result e = tessera("tune vector_add --shapes " + va + " --exhaustive --rounds 2 --finalists 2 --json");
  EXPECT_EQ(e.status, 0) << e.err;
  ls = lines(e.out);
  ASSERT_EQ(ls.size(), 2u) << e.out;
  for (const std::string& l : ls) {
    EXPECT_THAT(l, HasSubstr("\"pruned\": 5, \"measured\": 5, \"ranker\": \"exhaustive\""));
    EXPECT_THAT(l, HasSubstr("\"forks\": "));
    EXPECT_THAT(l, Not(HasSubstr("\"timed\": 0,")));
  }
  Result x = tessera("tune --export -");
  EXPECT_EQ(x.status, 0) << x.err;
  int at3001 = 0, confirmed = 0;
  for (const std::string& l : lines(x.out)) {
    if (l.find("\"shape\": \"N=3001\"") == std::string::npos) continue;
    ++at3001;
    confirmed += l.find("\"confirmed\": 1}") != std::string::npos;
  }
  EXPECT_EQ(at3001 - confirmed, 5);                  // the sweep
  EXPECT_TRUE(confirmed == 2 || confirmed == 3) << x.out;  // the finalists, and the default when not one

  // A config stored as a timeout at N=3001 (what the cuda watchdog stores for a hung candidate)
  // is not measured there again; at N=4000 it is.
  std::string rows;
  for (const std::string& l : lines(x.out))
    if (l.find("\"shape\": \"N=3001\"") != std::string::npos && l.find("\"BLOCK\": 256}") != std::string::npos &&
        l.find("\"confirmed\": 0}") != std::string::npos) {
      std::string h = l;
      h.replace(h.find("\"status\": \"ok\""), 14, "\"status\": \"timeout\"");
      rows += h + "\n";
    }
  ASSERT_FALSE(rows.empty()) << x.out;
  const std::string db2 = db + ".hung";
  std::filesystem::remove(db2);
  Result imp = tessera("tune --db " + db2 + " --import " + write_temp("tune_hung.jsonl", rows));
  EXPECT_EQ(imp.status, 0) << imp.err;
  Result h = tessera("tune vector_add --db " + db2 + " --shapes " + va + " --exhaustive --rounds 1 --json");
  EXPECT_EQ(h.status, 0) << h.err;
  ls = lines(h.out);
  ASSERT_EQ(ls.size(), 2u) << h.out;
  EXPECT_THAT(ls[0], HasSubstr("\"pruned\": 4, \"measured\": 4, "));
  EXPECT_THAT(ls[1], HasSubstr("\"pruned\": 5, \"measured\": 5, "));
  EXPECT_THAT(h.err, HasSubstr("note: tune: 1 config(s) that timed out or failed to run at N=3001 before are left out\n"));

  // --missing: only the configs without a row at the shape are swept, beside the default (and
  // the finalists re-timed); the earlier rows count as measured. With every config there,
  // nothing is measured.
  auto swept_at_4000 = [&](const std::string& d) {
    int n = 0;
    for (const std::string& l : lines(tessera("tune --db " + d + " --export -").out))
      n += l.find("\"shape\": \"N=4000\"") != std::string::npos && l.find("\"confirmed\": 0}") != std::string::npos;
    return n;
  };
  const std::string va4000 = write_temp("tune_va4000.txt", "N=4000\n");
  const int before = swept_at_4000(db2);
  Result mi = tessera("tune vector_add --db " + db2 + " --shapes " + va4000 + " --exhaustive --missing --rounds 1 --json");
  EXPECT_EQ(mi.status, 0) << mi.err;
  EXPECT_THAT(mi.out, HasSubstr("\"pruned\": 5, \"measured\": 5, "));
  EXPECT_EQ(swept_at_4000(db2), before);
  std::string all_but_256;
  for (const std::string& l : lines(tessera("tune --db " + db2 + " --export -").out))
    if (l.find("\"BLOCK\": 256}") == std::string::npos) all_but_256 += l + "\n";
  const std::string db3 = db + ".missing";
  std::filesystem::remove(db3);
  EXPECT_EQ(tessera("tune --db " + db3 + " --import " + write_temp("tune_missing.jsonl", all_but_256)).status, 0);
  const int kept = swept_at_4000(db3);
  mi = tessera("tune vector_add --db " + db3 + " --shapes " + va4000 + " --exhaustive --missing --rounds 1 --json");
  EXPECT_EQ(mi.status, 0) << mi.err;
  EXPECT_THAT(mi.out, HasSubstr("\"pruned\": 5, \"measured\": 5, "));
  EXPECT_EQ(swept_at_4000(db3), kept + 2);  // BLOCK = 256 and the default
  EXPECT_NE(tessera("tune vector_add --size N=4000 --missing").status, 0);  // needs --exhaustive

  // Rows written before a codegen knob existed (here cpu_dot_nr, stripped from every row) were
  // measured with its default: --missing counts them as the configs with the default, so only
  // the config without a row (cpu_dot_mr = 8) and the default are measured.
  const std::string mm_small = " matmul --dtype f32 --config BLOCK_M=16,BLOCK_N=16,BLOCK_K=16,cpu_dot_nr=0 --size M=33,N=33,K=33";
  const std::string db4 = db + ".knob", db5 = db + ".oldrows";
  std::filesystem::remove(db4), std::filesystem::remove(db5);
  ASSERT_EQ(tessera("tune" + mm_small + " --db " + db4 + " --exhaustive --rounds 1 --json").status, 0);
  std::string old_rows;
  int swept = 0;
  for (std::string l : lines(tessera("tune --db " + db4 + " --export -").out)) {
    if (l.find("\"confirmed\": 0}") == std::string::npos || l.find("\"cpu_dot_mr\": 8") != std::string::npos) continue;
    const size_t at = l.find(", \"cpu_dot_nr\": 0");
    ASSERT_NE(at, std::string::npos) << l;
    old_rows += l.erase(at, std::string(", \"cpu_dot_nr\": 0").size()) + "\n";
    ++swept;
  }
  ASSERT_GE(swept, 2);
  ASSERT_EQ(tessera("tune --db " + db5 + " --import " + write_temp("tune_old_rows.jsonl", old_rows)).status, 0);
  Result again = tessera("tune" + mm_small + " --db " + db5 + " --exhaustive --missing --rounds 1 --json");
  EXPECT_EQ(again.status, 0) << again.err;
  int unconfirmed = 0;
  for (const std::string& l : lines(tessera("tune --db " + db5 + " --export -").out))
    unconfirmed += l.find("\"confirmed\": 0}") != std::string::npos;
  EXPECT_EQ(unconfirmed, swept + 2) << again.err;  // cpu_dot_mr = 8 and the default
  // --compare: the configs of a file (knobs not named keep the default's values) side by side
  // in --rounds rounds, every round's rows stored confirmed; bad lines are located errors.
  const std::string pair = write_temp("tune_compare.txt", "# two configs\ncpu_dot_mr=8\n\ncpu_dot_mr=0  # the default\n");
  const std::string db7 = db + ".compare";
  std::filesystem::remove(db7);
  Result cmp = tessera("tune" + mm_small + " --db " + db7 + " --compare " + pair + " --rounds 2 --json");
  EXPECT_EQ(cmp.status, 0) << cmp.err;
  EXPECT_THAT(cmp.out, HasSubstr("\"compare\": [{\"config\": {\"BLOCK_K\": 16, \"BLOCK_M\": 16, \"BLOCK_N\": 16, "
                                 "\"cpu_dot_mr\": 8, \"cpu_dot_nr\": 0}, \"status\": \"ok\""));
  EXPECT_THAT(cmp.out, HasSubstr("}, {\"config\": {\"BLOCK_K\": 16, \"BLOCK_M\": 16, \"BLOCK_N\": 16, \"cpu_dot_mr\": 0, "));
  int compared = 0;
  for (const std::string& l : lines(tessera("tune --db " + db7 + " --export -").out)) {
    compared += l.find("\"confirmed\": 1}") != std::string::npos;
    EXPECT_THAT(l, HasSubstr("\"rounds\": 1,"));  // one timed round per measure() call
  }
  EXPECT_EQ(compared, 4);
  EXPECT_NE(tessera("tune" + mm_small + " --compare " + pair + " --space").status, 0);
  auto cmp_err = [&](const std::string& text) {
    return tessera("tune" + mm_small + " --db " + db7 + " --compare " + write_temp("tune_compare_bad.txt", text)).err;
  };
  EXPECT_THAT(cmp_err("cpu_dot_mr=8\nwarps=4\n"), HasSubstr("tune_compare_bad.txt:2: 'warps' is not a knob of this kernel's space"));
  EXPECT_THAT(cmp_err("cpu_dot_mr=4\n"), HasSubstr("tune_compare_bad.txt:1: not a config of the pruned space"));
  EXPECT_THAT(cmp_err("# nothing\n"), HasSubstr("no config in it"));
  EXPECT_NE(tessera("tune" + mm_small + " --compare " + pair + " --exhaustive").status, 0);

  // They count as the knob's table default (0), not as what --config asks for now: with
  // cpu_dot_nr = 8 fixed, none of them is that config, and every config is measured.
  const std::string mm_nr8 = " matmul --dtype f32 --config BLOCK_M=16,BLOCK_N=16,BLOCK_K=16,cpu_dot_nr=8 --size M=33,N=33,K=33";
  const std::string db6 = db + ".oldrows8";
  std::filesystem::remove(db6);
  ASSERT_EQ(tessera("tune --db " + db6 + " --import " + write_temp("tune_old_rows8.jsonl", old_rows)).status, 0);
  Result nr8 = tessera("tune" + mm_nr8 + " --db " + db6 + " --exhaustive --missing --rounds 1 --json");
  EXPECT_EQ(nr8.status, 0) << nr8.err;
  unconfirmed = 0;
  for (const std::string& l : lines(tessera("tune --db " + db6 + " --export -").out))
    unconfirmed += l.find("\"confirmed\": 0}") != std::string::npos;
  const size_t at = nr8.out.find("\"pruned\": ");
  ASSERT_NE(at, std::string::npos) << nr8.out;
  const int pruned8 = std::stoi(nr8.out.substr(at + std::string("\"pruned\": ").size()));
  EXPECT_EQ(unconfirmed, swept + pruned8) << nr8.err;  // every config of the space, none taken from the old rows

  // Bad input: one message; a shape that fails says so in its line and the others go on.
  auto fails = [](const std::string& args, const std::string& msg) {
    Result b = tessera(args);
    EXPECT_EQ(b.status, 1) << args;
    EXPECT_THAT(b.err, HasSubstr(msg)) << args;
    EXPECT_EQ(b.out, "") << args;
  };
  fails("tune vector_add --shapes " + va + " --size N=5", "error: --shapes and --size: give one of them");
  fails("tune vector_add --shapes /no/such/file", "error: cannot read --shapes file /no/such/file");
  std::string bad = write_temp("tune_shapes_bad.txt", "N=100\nhello\n");
  fails("tune vector_add --shapes " + bad, "error: " + bad + ":2: not a shape (NAME=VALUE,...): 'hello'");
  fails("tune vector_add --size N=100 --exhaustive --budget 3", "error: --budget excludes --exhaustive");
  fails("tune vector_add --size N=100 --exhaustive --finalists 0", "error: --finalists must be at least 1");
  std::string some = write_temp("tune_shapes_some.txt", "N=0\nN=500\n");
  Result p = tessera("tune vector_add --shapes " + some + " --exhaustive --rounds 1 --json");
  EXPECT_EQ(p.status, 1);
  ls = lines(p.out);
  ASSERT_EQ(ls.size(), 2u) << p.out;
  EXPECT_THAT(ls[0], StartsWith("{\"shape\": \"N=0\", \"error\": \"bad --size N=0: "));
  EXPECT_THAT(ls[1], HasSubstr("\"sizes\": {\"N\": 500}"));
  ::unsetenv("TESSERA_TUNE_DB");
}

// On a GPU: a small cuda tune (compiles, --check, do_bench timings) whose best config `run -b
// cuda` then takes; skipped without a device (the message is tested above).
TEST(CliTune, TunesOnCudaWhereThereIsAGpu) {
  std::string why;
  if (!tessera::nvrtc_available(&why) || !tessera::cuda_device_available(&why)) GTEST_SKIP() << why;
  const std::string db = testing::TempDir() + "/tune_cuda_" + std::to_string(::getpid()) + ".db";
  std::filesystem::remove(db);
  ::setenv("TESSERA_TUNE_DB", db.c_str(), 1);
  Result t = tessera("tune vector_add -b cuda --size N=300001 --config num_warps=4,whole_tile_checks=0 --budget 3 --rounds 2");
  EXPECT_EQ(t.status, 0) << t.err;
  EXPECT_THAT(t.out, StartsWith("vector_add cuda N=300001 dtype=f32: measured 3 of "));
  EXPECT_THAT(t.out, HasSubstr("\n  best     BLOCK="));
  Result r = tessera("run vector_add -b cuda --check --size N=300001");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("note: vector_add: tuned config BLOCK="));
  ::unsetenv("TESSERA_TUNE_DB");
}

}  // namespace
