// The `tessera` command line, run as a subprocess: exit codes, stdout and stderr exactly as
// the contracts in DESIGN.md and `tessera --help` state them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

#include "cuda/CudaBackend.h"
#include "cuda/Driver.h"
#include "ir/Ops.h"
#include "kernels/Library.h"
#include "passes/Passes.h"
#include "text/Text.h"
#include "Subprocess.h"

namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(std::string(TESSERA_BINARY_DIR) + "/bin/tessera"))
        << "build the `tessera` target first";
  }
};

TEST_F(Cli, ListPrintsEveryLibraryKernelOnePerLine) {
  Result r = tessera("list");
  EXPECT_EQ(r.status, 0) << r.err;
  std::string want;
  for (const auto& k : tessera::library()) want += k.name + "\n";
  EXPECT_EQ(r.out, want);
  EXPECT_THAT(r.out, HasSubstr("vector_add\n"));
  EXPECT_THAT(r.out, HasSubstr("softmax\n"));
}

TEST_F(Cli, OpsListsEveryOpOfTheTable) {
  Result r = tessera("ops");
  EXPECT_EQ(r.status, 0) << r.err;
  for (const auto& info : tessera::all_ops())
    EXPECT_THAT(r.out, HasSubstr("\n" + std::string(info.name) + " ")) << info.name;
}

TEST_F(Cli, NoCommandIsAnError) {
  Result r = tessera("");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.err, StartsWith("error: "));
}

TEST_F(Cli, HelpExitsZero) {
  Result r = tessera("run --help");
  EXPECT_EQ(r.status, 0);
  EXPECT_THAT(r.out, HasSubstr("--backend"));
}

TEST_F(Cli, CheckValidFilePrintsOk) {
  Result r = tessera("check tests/cli/data/softmax.tile");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "ok\n");
  EXPECT_EQ(r.err, "");
}

TEST_F(Cli, CheckSyntaxErrorIsLocated) {
  Result r = tessera("check tests/cli/data/bad_syntax.tile");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, "");
  auto l = lines(r.err);
  ASSERT_EQ(l.size(), 1u) << r.err;
  EXPECT_TRUE(std::regex_match(l[0], std::regex(R"(tests/cli/data/bad_syntax\.tile:[78]:\d+: error: .+)")))
      << l[0];
}

TEST_F(Cli, CheckReportsEveryVerifierError) {
  Result r = tessera("check tests/cli/data/bad_verify.tile");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, "");
  auto l = lines(r.err);
  ASSERT_GE(l.size(), 2u) << r.err;
  EXPECT_THAT(l[0], StartsWith("tests/cli/data/bad_verify.tile:10:"));
  EXPECT_THAT(l[0], HasSubstr(": error: "));
  EXPECT_THAT(r.err, HasSubstr("tests/cli/data/bad_verify.tile:12:"));
}

TEST_F(Cli, CheckMissingFile) {
  Result r = tessera("check tests/cli/data/no_such_file.tile");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "error: cannot open 'tests/cli/data/no_such_file.tile': No such file or directory\n");
}

TEST_F(Cli, CheckEmptyFile) {
  std::string path = write_temp("empty.tile", "  \n\n");
  Result r = tessera("check '" + path + "'");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, path + ":1:1: error: empty file: expected at least one kernel\n");
}

TEST_F(Cli, CheckFileWithOnlyACommentHasNoKernel) {
  std::string path = write_temp("comment.tile", "// nothing here\n");
  Result r = tessera("check '" + path + "'");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, path + ":1:1: error: no kernel in file\n");
}

TEST_F(Cli, CheckBinaryFileNamesTheFirstControlByte) {
  std::string path = write_temp("binary.tile", std::string("kernel @k\n  \x7f" "ELF\0\x01", 18));
  Result r = tessera("check '" + path + "'");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, path + ":2:3: error: not a text file (byte 0x7f)\n");
}

// A source that never ends (a device, a FIFO) is refused without reading it, and a file past
// the size limit without parsing it.
TEST_F(Cli, CheckRefusesNonRegularAndOversizedFiles) {
  Result r = tessera("check /dev/zero");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "error: cannot open '/dev/zero': not a regular file\n");
  std::string fifo = testing::TempDir() + "/tessera_cli_fifo.tile";
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  r = tessera("check '" + fifo + "'");  // would wait for a writer if it were opened blocking
  ::unlink(fifo.c_str());
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "error: cannot open '" + fifo + "': not a regular file\n");
  // A sparse file of 17 MiB: refused by its size, before its bytes are read.
  std::string big = write_temp("big.tile", "kernel @k");
  ASSERT_EQ(::truncate(big.c_str(), 17 << 20), 0);
  r = tessera("check '" + big + "'");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "error: cannot read '" + big + "': larger than the limit of 16 MiB for a .tile file\n");
  ::unlink(big.c_str());
}

// --check keeps the inputs for the reference: two copies of the tensors count against the
// budget (10 GiB of tensors are 20 GiB held). Refused before anything is allocated.
TEST_F(Cli, RunCheckCountsTheReferencesCopy) {
  Result r = tessera("run softmax --backend interp --check --size M=40960,N=32768");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "error: the tensors of 'softmax' at M=40960,N=32768 need 30 GiB (2 copies at once: the run's, and "
                   "the reference's or data read from files, and a double per output element for its error bounds); the limit is 16 GiB\n");
  // Two copies of the tensors alone would fit (12 GiB); the bounds of y (6 GiB) do not.
  r = tessera("run softmax --backend interp --check --size M=24576,N=32768");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "error: the tensors of 'softmax' at M=24576,N=32768 need 18 GiB (2 copies at once: the run's, and "
                   "the reference's or data read from files, and a double per output element for its error bounds); the limit is 16 GiB\n");
}

// The sizes field of a PASS line, in the order the kernel's views first name the dims.
std::string sizes_field(const std::string& kernel, const tessera::Sizes& sizes) {
  auto k = tessera::find_library_kernel(kernel)->build(tessera::find_library_kernel(kernel)->dtypes[0]);
  std::vector<std::string> seen;
  std::string out;
  for (const auto* p : k->params)
    if (p->type.is_view())
      for (const auto& d : p->type.shape)
        if (!d.is_static() && std::find(seen.begin(), seen.end(), d.symbol) == seen.end()) {
          seen.push_back(d.symbol);
          out += (out.empty() ? "" : ",") + d.symbol + "=" + std::to_string(sizes.at(d.symbol));
        }
  return out;
}

// Small ragged sizes: every dim of the kernel gets an odd value that no tile size divides.
std::pair<std::string, std::string> ragged_sizes(const std::string& kernel) {
  const auto* lk = tessera::find_library_kernel(kernel);
  tessera::Sizes s;
  std::string args;
  int64_t v = 37;
  for (const auto& [name, def] : lk->default_sizes) {
    s[name] = v;
    args += " --size " + name + "=" + std::to_string(v);
    v += 26;
  }
  return {args, sizes_field(kernel, s)};
}

void expect_pass(const std::string& kernel) {
  ASSERT_NE(tessera::find_library_kernel(kernel), nullptr) << kernel << " is not in the library";
  auto [args, field] = ragged_sizes(kernel);
  Result r = tessera("run " + kernel + " --backend interp --check --seed 7" + args);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  std::regex line("PASS " + kernel + " interp " + field +
                  R"( max_abs_err=[0-9.e+-]+ max_rel_err=[0-9.e+-]+ dtype=\w+\n)");
  EXPECT_TRUE(std::regex_match(r.out, line)) << r.out << r.err;
}

// Issue 17: an f32 matmul over K = 1000 or 4000 rounds by more than the dtype's 1e-5; the
// check allows its dot's bound (gamma_K * (|a| @ |b|)) and passes, on interp and cpu.
TEST_F(Cli, RunMatmulAtLongKPassesWithinItsBound) {
  for (const char* backend : {"interp", "cpu"})
    for (const char* K : {"1000", "4000"}) {
      Result r = tessera(std::string("run matmul --check --backend ") + backend + " --size M=64,N=128,K=" + K);
      EXPECT_EQ(r.status, 0) << r.out << r.err;
      EXPECT_THAT(r.out, StartsWith(std::string("PASS matmul ") + backend + " M=64,K=" + K + ",N=128 max_abs_err="));
    }
  // A .tile file on cpu against the interpreter, under the .tile rule.
  Result r = tessera("run tests/text/data/matmul.tile --backend cpu --check --size M=64,N=128,K=4000");
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_THAT(r.out, StartsWith("PASS matmul cpu M=64,K=4000,N=128 "));
}

// --check-passes: one line on stderr per kernel; stdout keeps its contract (the run's one line,
// the compiled output); a kernel the interpreter cannot run is an error.
TEST_F(Cli, CheckPassesReportsOnStderr) {
  Result r = tessera("run matmul --check --check-passes --size M=33,N=17,K=40");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("PASS matmul interp M=33,K=40,N=17 "));
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  EXPECT_EQ(r.err, "check-passes: PASS matmul sizes M=33,K=40,N=17 seeds 1,2,3 passes that changed the IR: cse\n");
  r = tessera("compile layernorm --check-passes --config BLOCK_N=256");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("kernel @layernorm("));
  EXPECT_EQ(r.err, "check-passes: PASS layernorm sizes M=97,N=127 seeds 1,2,3 passes that changed the IR: "
                   "canonicalize,cse,dce\n");
  r = tessera("compile tests/cli/data/two_kernels.tile --check-passes --emit cpp");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 2) << r.err;
  // BLOCK = 32: 97 / 32 = 3 programs reach the raw op (at the default 256 the grid has 0
  // programs, which run nothing and are not an error: docs/semantics.md, "Grid").
  r = tessera("compile tests/text/data/raw.tile --check-passes --config BLOCK=32");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.err, StartsWith("tests/text/data/raw.tile:1:1: error: --check-passes: kernel 'raw_popcount' does "
                                "not run on the interpreter with random inputs, so nothing can be checked (seed 1: "));
}

TEST_F(Cli, RunVectorAddChecksOnInterp) { expect_pass("vector_add"); }
TEST_F(Cli, RunSoftmaxChecksOnInterp) { expect_pass("softmax"); }
TEST_F(Cli, RunMatmulFp8ChecksOnInterp) { expect_pass("matmul_fp8"); }

// A library kernel's scalars default to its own values; --scalar overrides one of them.
TEST_F(Cli, RunMatmulFp8WithAScale) {
  Result r = tessera("run matmul_fp8 --backend interp --check --size M=5,N=7,K=9 --scalar scale_b=-2.5");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("PASS matmul_fp8 interp M=5,K=9,N=7 "));
  r = tessera("run matmul_fp8 --size M=5,N=7,K=9 --scalar scale=2");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "error: kernel 'matmul_fp8' has no scalar parameter 'scale' (its scalar parameters: "
                   "scale_a, scale_b)\n");
}

// The line says that nothing independent was compared, rather than a bare PASS.
TEST_F(Cli, RunFileOnInterpIsItsOwnReference) {
  Result r = tessera("run tests/cli/data/softmax.tile --backend interp --check --size M=5,N=300");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "PASS softmax interp M=5,N=300 max_abs_err=0 max_rel_err=0 reference=self\n");
}

TEST_F(Cli, RunFileNeedsEverySize) {
  Result r = tessera("run tests/cli/data/softmax.tile --backend interp --size M=5");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "error: kernel 'softmax' needs a size for dim N: add --size N=VALUE\n");
}

TEST_F(Cli, RunFileWithScalarParameter) {
  Result r = tessera("run tests/cli/data/vadd_i32.tile --backend interp --check --size N=300 --scalar k=5");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "PASS vadd interp N=300 max_abs_err=0 max_rel_err=0 reference=self\n");
  Result bad = tessera("run tests/cli/data/vadd_i32.tile --size N=300 --scalar q=5");
  EXPECT_EQ(bad.status, 1);
  EXPECT_EQ(bad.err, "error: kernel 'vadd' has no scalar parameter 'q' (its scalar parameters: k)\n");
}

// A --scalar value must fit its parameter's kind: wrapped in silence, an i32 given 99999999999
// ran with 1215752191, and an i1 given 2 ran as 2 on cpu and as 1 on the interpreter.
TEST_F(Cli, RunScalarOutOfItsKindsRange) {
  Result r = tessera("run tests/cli/data/vadd_i32.tile --size N=3 --scalar k=99999999999");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "error: bad --scalar value for k '99999999999': out of the range of i32 [-2147483648, 2147483647]\n");
  const std::string f = "run tests/cli/data/scalar_kinds.tile --size N=3 --scalar ";
  r = tessera(f + "a=256,b=1,c=1");
  EXPECT_EQ(r.err, "error: bad --scalar value for a '256': out of the range of u8 [0, 255]\n");
  r = tessera(f + "a=1,b=2,c=1");
  EXPECT_EQ(r.err, "error: bad --scalar value for b '2': out of the range of i1 [0, 1]\n");
  r = tessera(f + "a=1,b=1,c=-1");
  EXPECT_EQ(r.err, "error: bad --scalar value for c '-1': out of the range of u64\n");
  r = tessera(f + "a=1,b=1,c=18446744073709551616");
  EXPECT_EQ(r.err, "error: bad --scalar value for c '18446744073709551616': out of the range of u64\n");
  r = tessera("run tests/cli/data/vadd_i32.tile --size N=3 --scalar k=-2147483649");
  EXPECT_EQ(r.err, "error: bad --scalar value for k '-2147483649': out of the range of i32 [-2147483648, 2147483647]\n");
  r = tessera("run tests/cli/data/vadd_i32.tile --size N=3 --scalar k=-2147483648");
  EXPECT_EQ(r.status, 0) << r.err;
}

// Options that would have been taken in silence: --split 0 (no split: the default), an empty
// --output directory (nothing written), --split-k for a target without wgmma (the same code).
TEST_F(Cli, RunAndCompileRefuseOptionsThatWouldDoNothing) {
  Result r = tessera("run tests/corpus/decode_attention.tile --size H=1,T=100,DH=64 --split 0");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "error: --split needs N >= 1 runs per program, not 0\n");
  for (const char* zero : {"0x0", "+0", "-3"}) {
    r = tessera(std::string("run tests/corpus/decode_attention.tile --size H=1,T=100,DH=64 --split ") + zero);
    EXPECT_EQ(r.status, 1) << zero;
    EXPECT_THAT(r.err, StartsWith("error: --split needs N >= 1 runs per program, not ")) << zero;
  }
  r = tessera("run tests/cli/data/vadd_i32.tile --size N=3 --output ''");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "error: --output: needs a directory, not '' (see `tessera run --help`)\n");
  r = tessera("compile matmul --dtype bf16 -t cuda:sm_80 -e cuda --split-k");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "error: --split-k is the split-K compilation of wgmma matmuls: it needs --target cuda:sm_90a, not cuda:sm_80\n");
}

// --split N allocates programs x N partial results: past the 16 GiB tensor limit it stops
// before allocating (it had filled gigabytes element by element until the host ran out).
TEST_F(Cli, RunSplitWithinTheTensorLimit) {
  Result r = tessera("run tests/corpus/decode_attention.tile --size H=1,T=100,DH=64 --split 2147483647");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "error: the split's partial results (1 programs x 2147483647 runs) need 528.0 GiB; the limit is 16 "
                   "GiB: fewer runs\n");
}

// -b cuda:sm_XY[a]: an architecture to compile for (checked before any kernel is read); on a
// machine without a GPU it fails as -b cuda does (tests/gpu: what it runs on a Hopper).
TEST_F(Cli, BackendWithATarget) {
  Result r = tessera("run vector_add -b cuda:sm_7 --size N=100");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "error: --backend: unknown CUDA target 'cuda:sm_7': expected cuda, cuda:sm_XY or sm_XY[a] with XY >= "
                   "70 (e.g. sm_80, sm_90a) (see `tessera run --help`)\n");
  r = tessera("run vector_add -b cuda:sm_80a --size N=100");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "error: --backend: 'cuda:sm_80a': only sm_90 and later have an arch-specific variant (sm_90a), not "
                   "sm_80 (see `tessera run --help`)\n");
  r = tessera("run vector_add -b cuda: --size N=100");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.err, StartsWith("error: --backend: expected interp, cpu, cuda or cuda:sm_XY[a]"));
  r = tessera("bench vector_add -b gpu --size N=100");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "error: --backend: expected interp, cpu, cuda or cuda:sm_XY[a] (e.g. cuda:sm_90), not 'gpu' (see "
                   "`tessera bench --help`)\n");
  std::string why;
  const bool gpu = tessera::nvrtc_available(&why) && tessera::cuda_device_available(&why);
  r = tessera("run matmul -b cuda:sm_90 --dtype bf16 --check --size M=200,N=300,K=136");
  if (gpu && tessera::cuda::device().sm == 90) {
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    EXPECT_THAT(r.out, StartsWith("PASS matmul cuda:sm_90 M=200,K=136,N=300 max_abs_err="));
    r = tessera("run vector_add -b cuda:sm_80 --size N=100");
    EXPECT_EQ(r.status, 1);
    EXPECT_EQ(r.err, "error: backend 'cuda:sm_80': code for sm_80 does not run on this device (sm_90); -b cuda:sm_90 "
                     "compiles its portable path (mma.sync, cp.async), -b cuda its own\n");
  } else if (!gpu) {
    EXPECT_EQ(r.status, 1);
    EXPECT_THAT(r.err, StartsWith("error: backend 'cuda:sm_90' "));
  }
}

TEST_F(Cli, RunUnknownKernel) {
  Result r = tessera("run no_such_kernel --backend interp");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "error: unknown kernel 'no_such_kernel': not a library kernel (see `tessera list`) and no such file\n");
}

TEST_F(Cli, RunBadSizeSyntax) {
  Result r = tessera("run softmax --size M1000");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "error: bad --size 'M1000': expected NAME=VALUE, e.g. --size M=1024\n");
  r = tessera("run softmax --size M=12x");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "error: bad --size value for M '12x': expected an integer\n");
  r = tessera("run softmax --size M=0");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "error: bad --size M=0: a dim must be in [1, 2147483647]\n");
  r = tessera("run softmax --size Q=4");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.err, StartsWith("error: kernel 'softmax' has no dim 'Q' (its dims: "));
}

// topk needs K <= N: the compiled backends would drop the out-of-row stores and return a
// wrong result, so run, bench and tune refuse the sizes with the kernel's own message.
TEST_F(Cli, TopkWithKAboveTheRowLengthIsRefused) {
  const std::string want = "error: topk: K = 3 is more than the row length N = 2 (the k largest of a row need k <= N)\n";
  for (const char* cmd : {"run topk --backend cpu --size M=1,N=2,K=3", "bench topk --backend interp --size M=1,N=2,K=3",
                          "tune topk --backend cpu --size M=1,N=2,K=3 --budget 2"}) {
    SCOPED_TRACE(cmd);
    Result r = tessera(cmd);
    EXPECT_EQ(r.status, 1);
    EXPECT_EQ(r.err, want);
  }
  Result ok = tessera("run topk --backend interp --size M=2,N=5,K=5 --check");
  EXPECT_EQ(ok.status, 0) << ok.err;
}

// A library op of several kernels (LibraryKernel::stages): topk as the segmented top-k
// (segments of 256 by TESSERA_TOPK_SEGMENT) through run --check and bench on the interpreter,
// bench naming the kernels it ran; TESSERA_TOPK_ROW_THRESHOLD=1 starts them from the row
// threshold (three histogram kernels first).
TEST_F(Cli, SegmentedTopkRunsItsStages) {
  ::setenv("TESSERA_TOPK_SEGMENT", "256", 1);
  Result run = tessera("run topk --backend interp --check --size M=2,N=1000,K=300");
  Result bench = tessera("bench topk --backend interp --size M=2,N=1000,K=30 --reps 1");
  ::setenv("TESSERA_TOPK_ROW_THRESHOLD", "1", 1);
  Result run_rt = tessera("run topk --backend interp --check --size M=2,N=1000,K=30");
  Result bench_rt = tessera("bench topk --backend interp --size M=2,N=1000,K=30 --reps 1");
  ::unsetenv("TESSERA_TOPK_ROW_THRESHOLD");
  ::setenv("TESSERA_TOPK_BUCKET_THRESHOLD", "1", 1);
  // (a threshold wants rows of at least 2 x 1024 buckets of two: topk_bucket_bests)
  Result run_bt = tessera("run topk --backend interp --check --size M=2,N=5000,K=30");
  Result bench_bt = tessera("bench topk --backend interp --size M=2,N=5000,K=30 --reps 1");
  ::unsetenv("TESSERA_TOPK_BUCKET_THRESHOLD");
  ::unsetenv("TESSERA_TOPK_SEGMENT");
  EXPECT_EQ(run.status, 0) << run.err;
  EXPECT_THAT(run.out, StartsWith("PASS topk interp M=2,N=1000,K=300 max_abs_err=0 "));
  EXPECT_EQ(bench.status, 0) << bench.err;
  EXPECT_THAT(bench.out, HasSubstr("(2 kernels: topk_segments_tile topk_merge_tile)"));
  EXPECT_EQ(run_rt.status, 0) << run_rt.err;
  EXPECT_THAT(run_rt.out, StartsWith("PASS topk interp M=2,N=1000,K=30 max_abs_err=0 "));
  EXPECT_EQ(bench_rt.status, 0) << bench_rt.err;
  EXPECT_THAT(bench_rt.out, HasSubstr("(5 kernels: topk_histogram_clear topk_histogram_high topk_histogram_low "
                                      "topk_thr_segments_tile topk_thr_merge_tile)"));
  EXPECT_EQ(run_bt.status, 0) << run_bt.err;
  EXPECT_THAT(run_bt.out, StartsWith("PASS topk interp M=2,N=5000,K=30 max_abs_err=0 "));
  EXPECT_EQ(bench_bt.status, 0) << bench_bt.err;
  EXPECT_THAT(bench_bt.out, HasSubstr("(4 kernels: topk_bucket_best topk_bucket_select_tile topk_bkt_segments_tile "
                                      "topk_merge_tile)"));
}

TEST_F(Cli, RunOutOfRangeConstexprIsAnError) {
  Result r = tessera("run softmax --backend interp --config BLOCK_N=3");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(r.err, HasSubstr("error: "));
  EXPECT_THAT(r.err, HasSubstr("BLOCK_N"));
  EXPECT_EQ(lines(r.err).size(), 1u) << r.err;
  r = tessera("run softmax --config BLOCK_N=abc");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "error: bad --config value for BLOCK_N 'abc': expected an integer\n");
}

TEST_F(Cli, RunUnsupportedDtype) {
  const auto* lk = tessera::find_library_kernel("vector_add");
  ASSERT_NE(lk, nullptr);
  ASSERT_EQ(std::count(lk->dtypes.begin(), lk->dtypes.end(), tessera::ScalarKind::U16), 0);
  Result r = tessera("run vector_add --dtype u16");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.err, StartsWith("error: kernel 'vector_add' has no dtype 'u16' (it has: "));
}

// Where there is a GPU the cuda backend must pass; where there is none (CI, laptops) it must
// say why in one line instead of crashing.
TEST_F(Cli, RunOnCudaPassesOrSaysWhyNot) {
  auto [args, field] = ragged_sizes("softmax");
  Result r = tessera("run softmax --backend cuda --check" + args);
  std::string why;
  if (tessera::nvrtc_available(&why) && tessera::cuda_device_available(&why)) {
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    EXPECT_THAT(r.out, StartsWith("PASS softmax cuda " + field + " max_abs_err="));
  } else {
    EXPECT_EQ(r.status, 1);
    EXPECT_EQ(r.out, "");
    EXPECT_THAT(r.err, StartsWith("error: backend 'cuda' "));
    EXPECT_EQ(lines(r.err).size(), 1u) << r.err;
  }
}

TEST_F(Cli, UnknownBackendIsAnError) {
  Result r = tessera("run vector_add --backend tpu");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.err, StartsWith("error: "));
  EXPECT_THAT(r.err, HasSubstr("--backend"));
}

TEST_F(Cli, CompileEmitsIrThatParses) {
  Result r = tessera("compile softmax --emit ir --config BLOCK_N=512");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("kernel @softmax("));
  EXPECT_NO_THROW(tessera::parse_module(r.out, "compiled.tile")) << r.out;
}

TEST_F(Cli, CompileDumpsAfterEveryPass) {
  Result r = tessera("compile tests/cli/data/softmax.tile --dump-after all --stats");
  EXPECT_EQ(r.status, 0) << r.err;
  for (const auto& pass : tessera::pipeline_pass_names())
    EXPECT_THAT(r.err, HasSubstr("// ----- IR after " + pass + " -----\n")) << pass;
}

// repair-reductions fuses the corpus's three-loop attention (one score dot left), reports it
// under --stats, and leaves it alone with --disable-pass; a chain it refuses gets a note.
TEST_F(Cli, RepairReductionsStatsNotesAndDisable) {
  Result r = tessera("compile tests/corpus/attention_three_loops.tile --stats");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("repair-reductions.fused = 1\nrepair-reductions.loops-fused = 3\n"));
  auto dots = [](const std::string& ir) {
    size_t n = 0;
    for (size_t at = ir.find("= dot %qs"); at != std::string::npos; at = ir.find("= dot %qs", at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(dots(r.out), 1u) << r.out;
  r = tessera("compile tests/corpus/attention_three_loops.tile --stats --disable-pass repair-reductions");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.err, Not(HasSubstr("repair-reductions")));
  EXPECT_EQ(dots(r.out), 3u) << r.out;
  r = tessera("compile tests/corpus/softmax_looped.tile --stats");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("note: repair-reductions: tests/corpus/softmax_looped.tile:43:3: loop left as written: "));
  r = tessera("compile softmax --disable-pass verify");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.err, StartsWith("error: --disable-pass verify: not a pass that can be left out (pipes-to-loads, canonicalize"));
  // A pass both left out and dumped: said, not an "unknown pass" (a pipeline pass) or nothing
  // printed (a GPU lowering pass).
  for (const char* pass : {"cse", "swizzle-mma-operands"}) {
    r = tessera(std::string("compile matmul -t cuda:sm_80 --disable-pass ") + pass + " --dump-after " + pass);
    EXPECT_EQ(r.status, 1) << pass;
    EXPECT_THAT(r.err, HasSubstr(std::string("--dump-after ") + pass + ": that pass is left out")) << pass;
  }
}

TEST_F(Cli, CompileUnknownPass) {
  Result r = tessera("compile softmax --dump-after no_such_pass");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.err, StartsWith("error: unknown pass 'no_such_pass' for --dump-after (passes: "));
}

// Emitting CUDA C++ needs neither NVRTC nor a GPU.
TEST_F(Cli, CompileEmitsCudaForATarget) {
  Result r = tessera("compile softmax --target cuda:sm_90a --emit cuda");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("for sm_90a"));
  EXPECT_THAT(r.out, HasSubstr("__global__"));
  r = tessera("compile softmax --target cpu --emit cuda");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "error: --emit cuda needs a cuda target (--target cuda:sm_80 or cuda:sm_90a)\n");
  r = tessera("compile softmax --target cuda:sm_80 --emit cpp");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "error: --emit cpp is the cpu backend's output; use --target cpu\n");
}

TEST_F(Cli, CompileEmitsPtxWhereNvrtcIs) {
  Result r = tessera("compile vector_add --target cuda:sm_80 --emit ptx");
  std::string why;
  if (tessera::nvrtc_available(&why)) {
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_THAT(r.out, HasSubstr(".target sm_80"));
    EXPECT_THAT(r.out, HasSubstr(".entry tessera_vector_add("));
  } else {
    EXPECT_EQ(r.status, 1);
    EXPECT_THAT(r.err, StartsWith("error: --emit ptx needs NVRTC, which is not available here: "));
  }
}

TEST_F(Cli, CompileEmitsCppForTheCpuBackend) {
  Result r = tessera("compile vector_add --target cpu --emit cpp");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("#include \"tessera_cpu.h\""));
  EXPECT_THAT(r.out, HasSubstr("vector_add"));
}

TEST_F(Cli, RunVectorAddChecksOnCpu) {
  auto [args, field] = ragged_sizes("vector_add");
  Result r = tessera("run vector_add --backend cpu --check --dtype bf16" + args);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  std::regex line("PASS vector_add cpu " + field + R"( max_abs_err=[0-9.e+-]+ max_rel_err=[0-9.e+-]+ dtype=bf16\n)");
  EXPECT_TRUE(std::regex_match(r.out, line)) << r.out << r.err;
}

TEST_F(Cli, RunFileWithRawOpOnCpuHasNoReference) {
  std::string path = write_temp("raw.tile", R"(kernel @neg(%x: view<f32, [N]>, %y: view<f32, [N]>) {
  grid {
    %n = dim %x {axis = 0} : i32
    yield %n
  }
  %i = program_id {axis = 0} : i32
  %t = load_tile %x, %i : tile<f32, [16]>
  %r = raw %t {name = "negate", cpp = "for (int64_t i = 0; i < in0_numel; ++i) out0[i] = -in0[i];"} : tile<f32, [16]>
  store_tile %y, %r, %i
}
)");
  Result r = tessera("run '" + path + "' --backend cpu --size N=40");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("RAN neg cpu N=40 time_ms="));
  r = tessera("run '" + path + "' --backend cpu --check --size N=40");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, path + ":8:3: error: raw op 'negate' cannot run on the interpreter (the interpreter is the reference of --check for a .tile file)\n");
}

TEST_F(Cli, BenchPrintsJson) {
  Result r = tessera("bench vector_add --backend interp --reps 2 --json" + ragged_sizes("vector_add").first);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("{\"kernel\": \"vector_add\", \"backend\": \"interp\""));
  EXPECT_THAT(r.out, HasSubstr("\"median_ms\": "));
  EXPECT_THAT(r.out, HasSubstr("\"unit\": \"GB/s\""));
}

}  // namespace
