// `tessera compile --stats` for a cuda target: the emitter's statistics (dot paths, conversions)
// follow the passes' statistics on stderr, for any --emit.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

namespace {

using ::testing::HasSubstr;
using ::testing::Not;

struct Outcome {
  int status = -1;
  std::string out, err;
};

Outcome compile(const std::string& args) {
  static int n = 0;
  std::string err_path = testing::TempDir() + "/tessera_stats_err_" + std::to_string(::getpid()) + "_" + std::to_string(n++);
  std::string cmd = std::string("cd '") + TESSERA_SOURCE_DIR + "' && '" + TESSERA_BINARY_DIR + "/bin/tessera' compile " +
                    args + " 2>'" + err_path + "'";
  Outcome r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, got);
  int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  std::ifstream in(err_path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  r.err = ss.str();
  std::filesystem::remove(err_path);
  return r;
}

TEST(CliCompileStats, CudaTargetPrintsTheEmittersStatistics) {
  Outcome r = compile("matmul --dtype bf16 --target cuda:sm_90a --emit cuda --stats");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("tsr::warp_mma_swz<true"));
  EXPECT_THAT(r.err, HasSubstr("// ----- statistics for matmul -----\n"));
  EXPECT_THAT(r.err, HasSubstr("// ----- cuda emitter statistics for matmul (cuda:sm_90a) -----\n"));
  EXPECT_THAT(r.err, HasSubstr("\ndot.mma_pipelined = 1\n"));
  EXPECT_THAT(r.err, HasSubstr("\nmma-direct-epilogues = 1\n"));
  EXPECT_THAT(r.err, HasSubstr("\nthreads = 256\n"));
  // --emit ir with a cuda target still reports what the emitter would choose.
  Outcome ir = compile("matmul --dtype f32 --target cuda:sm_80 --stats");
  ASSERT_EQ(ir.status, 0) << ir.err;
  EXPECT_THAT(ir.out, HasSubstr("kernel @matmul("));
  EXPECT_THAT(ir.err, HasSubstr("\ndot.fma = 1\n"));
}

TEST(CliCompileStats, CpuTargetHasNoEmitterSection) {
  Outcome r = compile("matmul --dtype f32 --stats");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("// ----- statistics for matmul -----\n"));
  EXPECT_THAT(r.err, Not(HasSubstr("cuda emitter statistics")));
}

}  // namespace
