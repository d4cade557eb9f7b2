// The compile cache (memory, disk, corruption) and the errors of the compiler driver.
#include <sys/stat.h>

#include <filesystem>

#include "CpuTestUtil.h"
#include "cpu/CpuInternal.h"
#include "kernels/Library.h"
#include "runtime/DiskCache.h"

namespace tessera::cputest {
namespace {

namespace fs = std::filesystem;

const char* kScale = R"(kernel @scale(%x: view<f32, [N]>, %y: view<f32, [N]>, %s: f32) {
  grid {
    %n = dim %x {axis = 0} : i32
    %b = const {value = 16} : i32
    %b1 = const {value = 15} : i32
    %nb = add %n, %b1 : i32
    %g = div %nb, %b : i32
    yield %g
  }
  %pid = program_id {axis = 0} : i32
  %t = load_tile %x, %pid : tile<f32, [16]>
  %ss = splat %s : tile<f32, [16]>
  %r = mul %t, %ss : tile<f32, [16]>
  store_tile %y, %r, %pid
}
)";

std::unique_ptr<Kernel> bound(const std::string& text) {
  auto m = parse_module(text, "t.tile");
  return bind_constexprs(*m->kernels.at(0), {});
}

void check_scale(CpuKernel& ck, const Kernel& k) {
  std::vector<Tensor> ts = make_random_tensors(k, {{"N", 37}}, 5);
  auto args = args_for(k, ts);
  ck.run(args);
  for (int64_t i = 0; i < 37; ++i) ASSERT_FLOAT_EQ(ts[1].get(i), static_cast<float>(ts[0].get(i) * 0.75f));
}

std::vector<fs::path> files_with_ext(const std::string& dir, const std::string& ext) {
  std::vector<fs::path> out;
  for (auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ext) out.push_back(e.path());
  return out;
}

TEST(CpuCache, MemoryThenDiskThenCorruptRebuilt) {
  std::string dir = test_cache_dir() + "/cache-test";
  CpuOptions o;
  o.cache_dir = dir;
  auto k = bound(kScale);
  {
    auto cold = compile_cpu(*k, o);
    EXPECT_FALSE(cold->from_memory_cache);
    EXPECT_FALSE(cold->from_disk_cache);
    EXPECT_GT(cold->compile_seconds, 0);
    check_scale(*cold, *k);
    auto warm = compile_cpu(*k, o);
    EXPECT_TRUE(warm->from_memory_cache);
    check_scale(*warm, *k);
  }
  ASSERT_EQ(files_with_ext(dir, ".so").size(), 1u);
  ASSERT_EQ(files_with_ext(dir, ".meta").size(), 1u);
  clear_cpu_memory_cache();
  {
    auto disk = compile_cpu(*k, o);
    EXPECT_TRUE(disk->from_disk_cache);
    EXPECT_EQ(disk->compile_seconds, 0);
    check_scale(*disk, *k);
  }
  // Truncate the entry: the checksum sidecar catches it and the kernel is rebuilt.
  clear_cpu_memory_cache();
  fs::path so = files_with_ext(dir, ".so").at(0);
  fs::resize_file(so, fs::file_size(so) / 2);
  {
    auto rebuilt = compile_cpu(*k, o);
    EXPECT_FALSE(rebuilt->from_disk_cache);
    EXPECT_GT(rebuilt->compile_seconds, 0);
    check_scale(*rebuilt, *k);
  }
  // No temporary files are left behind.
  for (auto& e : fs::directory_iterator(dir)) EXPECT_EQ(e.path().filename().string().rfind(".tmp", 0), std::string::npos) << e.path();
  clear_cpu_memory_cache();
}

// An entry that verifies but does not load (here: its object replaced, sidecar and all, by a
// verified non-ELF file, as when the entry goes between the check and dlopen) is rebuilt.
TEST(CpuCache, EntryThatNoLongerLoadsIsRebuilt) {
  std::string dir = test_cache_dir() + "/cache-unloadable";
  CpuOptions o;
  o.cache_dir = dir;
  auto k = bound(kScale);
  compile_cpu(*k, o);
  auto metas = files_with_ext(dir, ".meta");
  ASSERT_EQ(metas.size(), 1u);
  std::string key = metas[0].stem().string();
  DiskCache(dir, "tessera-cpu-cache", ".so").store(key, "not an ELF object, but its sidecar is right");
  clear_cpu_memory_cache();
  auto again = compile_cpu(*k, o);
  EXPECT_FALSE(again->from_disk_cache);
  EXPECT_GT(again->compile_seconds, 0);
  check_scale(*again, *k);
  clear_cpu_memory_cache();
  EXPECT_TRUE(compile_cpu(*k, o)->from_disk_cache);  // the rebuilt entry is used
  clear_cpu_memory_cache();  // later tests expect kScale not to be loaded
}

// A disk-cache hit loads the bytes it verified, from a private copy, not the entry's path
// (which another process could replace between the check and dlopen): the bytes of a built
// entry load, with their entry point, with the entry's files gone; bytes that are no shared
// object are an error naming the entry.
TEST(CpuCache, AHitLoadsTheBytesItChecked) {
  std::string dir = test_cache_dir() + "/cache-bytes";
  CpuOptions o;
  o.cache_dir = dir;
  auto k = bound(kScale);
  clear_cpu_memory_cache();
  compile_cpu(*k, o);
  auto sos = files_with_ext(dir, ".so");
  ASSERT_EQ(sos.size(), 1u);
  const std::string bytes = cpu::read_file(sos[0].string());
  fs::remove_all(dir);
  std::shared_ptr<cpu::SharedObject> so = cpu::load_shared_bytes(bytes, "the entry", test_cache_dir());
  ASSERT_NE(so->handle, nullptr);
  EXPECT_NE(so->run, nullptr);
  try {
    cpu::load_shared_bytes("not an ELF object", "the entry", test_cache_dir());
    FAIL() << "loaded bytes that are no shared object";
  } catch (const TesseraError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot load 'the entry'"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("kernel-"), std::string::npos) << e.what();
  }
  clear_cpu_memory_cache();
}

TEST(CpuCache, BrokenCompilerIsAClearError) {
  auto k = bound(kScale);
  CpuOptions o = test_options();
  o.compiler = "/bin/false";
  try {
    compile_cpu(*k, o);
    FAIL() << "expected an error";
  } catch (const TesseraError& e) {
    EXPECT_NE(std::string(e.what()).find("'/bin/false'"), std::string::npos) << e.what();
  }
  o.compiler = "/nonexistent/tessera-cxx";
  try {
    compile_cpu(*k, o);
    FAIL() << "expected an error";
  } catch (const TesseraError& e) {
    EXPECT_NE(std::string(e.what()).find("not found"), std::string::npos) << e.what();
  }
}

TEST(CpuCache, EnvironmentCompilerIsUsed) {
  auto k = bound(kScale);
  ::setenv("TESSERA_CXX", "/bin/false", 1);
  EXPECT_THROW(compile_cpu(*k, test_options()), TesseraError);
  ::unsetenv("TESSERA_CXX");
}

TEST(CpuCache, UnwritableCacheDirIsAnError) {
  auto k = bound(kScale);
  CpuOptions o;
  o.cache_dir = "/proc/tessera-no-such-dir/cache";
  try {
    compile_cpu(*k, o);
    FAIL() << "expected an error";
  } catch (const TesseraError& e) {
    EXPECT_NE(std::string(e.what()).find("not writable"), std::string::npos) << e.what();
  }
}

TEST(CpuCache, CompileErrorPointsAtTheIrOp) {
  auto k = bound(R"(kernel @bad(%x: view<f32, [N]>) {
  grid {
    %n = dim %x {axis = 0} : i32
    yield %n
  }
  %c0 = const {value = 0} : i32
  %t = load_tile %x, %c0 : tile<f32, [8]>
  %r = raw %t {name = "oops", cpp = "out0[0] = this_is_not_declared;"} : tile<f32, [8]>
  store_tile %x, %r, %c0
}
)");
  try {
    compile_cpu(*k, test_options());
    FAIL() << "expected an error";
  } catch (const TesseraError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("this_is_not_declared"), std::string::npos) << m;
    EXPECT_NE(m.find("generated from: %r = raw %t"), std::string::npos) << m;
    EXPECT_NE(m.find("at t.tile:8:"), std::string::npos) << m;
  }
}

TEST(CpuCache, WrongArgumentsAreErrors) {
  auto k = bound(kScale);
  auto ck = compile_cpu(*k, test_options());
  std::vector<Tensor> ts = make_random_tensors(*k, {{"N", 37}}, 5);
  auto args = args_for(*k, ts);
  args.pop_back();
  EXPECT_THROW(ck->run(args), TesseraError);
  Tensor wrong(ScalarKind::I32, {37});
  auto args2 = args_for(*k, ts);
  args2[1].tensor = &wrong;
  EXPECT_THROW(ck->run(args2), TesseraError);
}

// The C++ API: one compiled kernel (a constexpr config bound once) serves every size: dims are
// runtime arguments, so changing them between calls compiles nothing.
TEST(CpuCache, DimsChangeBetweenCallsWithoutRecompiling) {
  const LibraryKernel& lk = *find_library_kernel("softmax");
  auto k = bind_constexprs(*lk.build(ScalarKind::F32), {{"BLOCK_N", 256}});
  auto ck = compile_cpu(*k, test_options());
  for (int64_t n : {1, 37, 256, 999}) {
    SCOPED_TRACE(n);
    Sizes sz = {{"M", 5}, {"N", n}};
    std::vector<Tensor> got = make_random_tensors(*k, sz, 40 + n), want = got;
    auto ga = args_for(*k, got), wa = args_for(*k, want);
    ck->run(ga);
    run_interp(*k, wa);
    for (int64_t i = 0; i < got[1].numel(); ++i) ASSERT_NEAR(got[1].get(i), want[1].get(i), 1e-6);
    // Asking again for the same kernel is a memory-cache hit, whatever the sizes were.
    EXPECT_TRUE(compile_cpu(*k, test_options())->from_memory_cache);
  }
}

TEST(CpuCache, EmitCppIsReadable) {
  auto k = bound(kScale);
  std::string src = emit_cpp(*k);
  // Each op's comment is its line of `tessera compile --emit ir` (print_op_lines).
  EXPECT_NE(src.find("// %r = mul %t, %ss : tile<f32, [16]>"), std::string::npos) << src;
  EXPECT_NE(src.find("#pragma omp parallel for"), std::string::npos);
}

}  // namespace
}  // namespace tessera::cputest
