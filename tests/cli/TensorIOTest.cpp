// `tessera run --input NAME=FILE.npy --output DIR --reference NAME=FILE.npy`: a kernel fed its
// own inputs, its views written out, and checked against given data.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "runtime/Npy.h"
#include "Subprocess.h"

namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using tessera::ScalarKind;
using tessera::Tensor;

const std::string kVadd = "tests/cli/data/vadd_i32.tile";

// The folders temp_dir made, removed when the test binary exits (each run made its own, named
// by the process id, and left them in the temp folder).
struct TempDirs {
  std::vector<std::string> made;
  ~TempDirs() {
    std::error_code ec;
    for (const std::string& d : made) std::filesystem::remove_all(d, ec);
  }
};
TempDirs temp_dirs;

std::string temp_dir(const std::string& name) {
  std::string d = testing::TempDir() + "/tensorio_" + std::to_string(::getpid()) + "_" + name;
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  temp_dirs.made.push_back(d);
  return d;
}

Tensor random_i32(int64_t n, uint64_t seed) {
  Tensor t(ScalarKind::I32, {n});
  std::mt19937_64 rng(seed);
  for (int64_t i = 0; i < n; ++i) t.set_int(i, static_cast<int64_t>(rng() % 2000001) - 1000000);
  return t;
}

std::string save(const std::string& path, const Tensor& t) {
  tessera::write_npy(path, t);
  return path;
}

Tensor load(const std::string& path, ScalarKind dt) {
  return tessera::npy_to_tensor(tessera::read_npy(path), dt, path);
}

// Scalars at the ends of their types reach the kernel as given (u64's top value as its bits,
// -0 as 0) on interp and cpu: the kernel stores a (u8), b (i1) and c (u64) cast to i64.
TEST(CliTensorIO, ScalarsAtTheEndsOfTheirTypes) {
  const std::string d = temp_dir("scalars");
  for (const char* backend : {"interp", "cpu"}) {
    Result r = tessera(std::string("run tests/cli/data/scalar_kinds.tile --size N=3 --scalar a=255,b=-0,c=18446744073709551615 ") +
                       "--backend " + backend + " --output " + d + "/" + backend);
    ASSERT_EQ(r.status, 0) << r.err;
    Tensor y = load(d + "/" + backend + "/y.npy", ScalarKind::I64);
    EXPECT_EQ(y.get_int(0), 255) << backend;
    EXPECT_EQ(y.get_int(1), 0) << backend;
    EXPECT_EQ(y.get_int(2), -1) << backend;  // 2^64 - 1 cast to i64 wraps
  }
}

// Given inputs, interp and cpu write the same files, and c is a + b + k computed here.
TEST(CliTensorIO, InputsAndOutputsAgreeOnInterpAndCpu) {
  const std::string d = temp_dir("vadd");
  Tensor a = random_i32(300, 1), b = random_i32(300, 2);
  std::string args = "run " + kVadd + " --size N=300 --scalar k=5 --input a=" + save(d + "/a.npy", a) +
                     " --input b=" + save(d + "/b.npy", b);
  for (const char* backend : {"interp", "cpu"}) {
    Result r = tessera(args + " --backend " + backend + " --output " + d + "/out_" + backend + "/nested");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_THAT(r.out, StartsWith(std::string("RAN vadd ") + backend + " N=300 time_ms="));
  }
  for (const char* view : {"a", "b", "c"})
    EXPECT_EQ(slurp(d + "/out_interp/nested/" + view + ".npy"), slurp(d + "/out_cpu/nested/" + view + ".npy")) << view;
  EXPECT_EQ(load(d + "/out_cpu/nested/a.npy", ScalarKind::I32).data, a.data);
  Tensor c = load(d + "/out_cpu/nested/c.npy", ScalarKind::I32);
  for (int64_t i = 0; i < 300; ++i) ASSERT_EQ(c.get_int(i), a.get_int(i) + b.get_int(i) + 5) << i;
}

// --reference implies --check, names the views it checked, and FAILs on one wrong element.
TEST(CliTensorIO, ReferencePassesAndFails) {
  const std::string d = temp_dir("ref");
  Tensor a = random_i32(300, 3), b = random_i32(300, 4), c(ScalarKind::I32, {300});
  for (int64_t i = 0; i < 300; ++i) c.set_int(i, a.get_int(i) + b.get_int(i) + 5);
  std::string args = "run " + kVadd + " --size N=300 --scalar k=5 --input a=" + save(d + "/a.npy", a) +
                     " --input b=" + save(d + "/b.npy", b);
  Result r = tessera(args + " --backend interp --reference c=" + save(d + "/c.npy", c));
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "PASS vadd interp N=300 max_abs_err=0 max_rel_err=0 reference=npy:c\n");
  c.set_int(17, c.get_int(17) + 1);
  r = tessera(args + " --backend cpu --check --reference c=" + save(d + "/c_bad.npy", c));
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.out, StartsWith("FAIL vadd cpu N=300 max_abs_err=1 "));
  EXPECT_THAT(r.out, HasSubstr(" reference=npy:c mismatches=1/900 first: c[17]: got "));
}

// A float kernel's interp outputs as the cpu run's inputs and reference, under the .tile
// tolerance; a library kernel's bf16 views are written as their raw bits.
TEST(CliTensorIO, InterpOutputsCheckTheCpuBackend) {
  const std::string d = temp_dir("gelu");
  Result r = tessera("run tests/cli/data/gelu.tile --backend interp --size N=1000 --output " + d);
  ASSERT_EQ(r.status, 0) << r.err;
  r = tessera("run tests/cli/data/gelu.tile --backend cpu --size N=1000 --input x=" + d + "/x.npy --reference y=" + d +
              "/y.npy");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("PASS gelu cpu N=1000 max_abs_err="));
  EXPECT_THAT(r.out, HasSubstr(" reference=npy:y\n"));
  r = tessera("run vector_add --dtype bf16 --backend interp --size N=100 --check --output " + d + "/bf16");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr(" dtype=bf16\n"));  // a library kernel has its own reference
  tessera::NpyArray z = tessera::read_npy(d + "/bf16/z.npy");
  EXPECT_EQ(z.descr, "<u2");
  EXPECT_EQ(z.shape, std::vector<int64_t>{100});
}

TEST(CliTensorIO, BadFilesAndNamesAreOneMessage) {
  const std::string d = temp_dir("bad");
  const std::string base = "run " + kVadd + " --size N=300 --backend interp ";
  struct Case {
    std::string args, err;
  };
  Tensor f(ScalarKind::F32, {300});
  const std::vector<Case> cases = {
      {"--input a=" + save(d + "/short.npy", random_i32(299, 1)),
       "error: --input a=" + d + "/short.npy: the file holds shape [299], view 'a' of kernel 'vadd' is [N] = [300] at these sizes\n"},
      {"--input b=" + save(d + "/f.npy", f),
       "error: --input b=" + d + "/f.npy: the file holds dtype '<f4', view 'b' of kernel 'vadd' is i32 (read as '<i4')\n"},
      {"--reference q=" + d + "/f.npy", "error: --reference q=" + d + "/f.npy: kernel 'vadd' has no view 'q' (its views: a, b, c)\n"},
      {"--input a=" + d + "/f.npy --input a=" + d + "/f.npy", "error: --input names view 'a' twice\n"},
      {"--input a", "error: bad --input 'a': expected NAME=FILE.npy\n"},
      {"--input a=" + d + "/missing.npy", "error: cannot open '" + d + "/missing.npy': No such file or directory (--input a)\n"},
      {"--input a=" + write_temp("junk.npy", std::string("\x93NUMPY\x01\x00\x50\x00{'x':", 15)),
       testing::TempDir() + "/junk.npy:1:11: error: truncated .npy file: the header is 80 bytes"},
  };
  for (const Case& c : cases) {
    Result r = tessera(base + c.args);
    EXPECT_EQ(r.status, 1) << c.args;
    EXPECT_EQ(r.out, "") << c.args;
    EXPECT_THAT(r.err, StartsWith(c.err));
  }
  // Several kernels: the views of which one?
  Result r = tessera("run tests/cli/data/two_kernels.tile --size N=300,M=3 --config BLOCK=64 --output " + d);
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.err, HasSubstr("name the views of one kernel, and tests/cli/data/two_kernels.tile has several (scale, row_max): "
                               "pick one with --kernel"));
}

}  // namespace
