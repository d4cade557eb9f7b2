// The cubin disk cache: atomic entries with a checksum, corruption detected and rebuilt, and
// compile_cuda's memory and disk caches (no GPU needed: modules load at the first launch).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "CudaTestUtil.h"
#include "runtime/DiskCache.h"

namespace tessera::cudatest {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  std::string path;
  TempDir() {
    static int n = 0;
    path = (fs::temp_directory_path() / ("tessera-cuda-test-" + std::to_string(::getpid()) + "-" + std::to_string(n++))).string();
    fs::remove_all(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

std::string random_bytes(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

TEST(DiskCache, StoresAndFindsAnEntry) {
  TempDir d;
  DiskCache c(d.path, "tessera-test-cache", ".bin");
  EXPECT_FALSE(c.lookup("k1").has_value());
  std::string bytes = random_bytes(5000, 1);
  c.store("k1", bytes);
  auto got = c.lookup("k1");
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, bytes);
  EXPECT_TRUE(fs::exists(c.artifact_path("k1")));
  // No temporaries are left behind.
  for (auto& e : fs::directory_iterator(d.path)) EXPECT_NE(e.path().filename().string().rfind(".tmp", 0), 0u) << e.path();
}

TEST(DiskCache, TruncatedOrAlteredEntryIsDroppedAndRebuilt) {
  TempDir d;
  DiskCache c(d.path, "tessera-test-cache", ".bin");
  std::string bytes = random_bytes(4096, 2);
  c.store("k", bytes);
  fs::resize_file(c.artifact_path("k"), 100);
  EXPECT_FALSE(c.lookup("k").has_value());
  EXPECT_FALSE(fs::exists(c.artifact_path("k")));
  EXPECT_FALSE(fs::exists(c.meta_path("k")));

  c.store("k", bytes);
  {
    std::fstream f(c.artifact_path("k"), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(1234);
    f.put(static_cast<char>(bytes[1234] ^ 0x40));
  }
  EXPECT_FALSE(c.lookup("k").has_value());
  c.store("k", bytes);
  EXPECT_EQ(c.lookup("k").value_or(""), bytes);
}

// Another key's valid entry copied under this key's names is a miss (and removed), since the
// sidecar names its key and hashes it with the bytes.
TEST(DiskCache, AnotherKeysEntryIsAMiss) {
  TempDir d;
  DiskCache c(d.path, "tessera-test-cache", ".bin");
  std::string bytes = random_bytes(3000, 4);
  c.store("other", bytes);
  fs::copy_file(c.artifact_path("other"), c.artifact_path("mine"));
  fs::copy_file(c.meta_path("other"), c.meta_path("mine"));
  EXPECT_FALSE(c.lookup("mine").has_value());
  EXPECT_FALSE(fs::exists(c.meta_path("mine")));
  EXPECT_FALSE(fs::exists(c.artifact_path("mine")));
  EXPECT_EQ(c.lookup("other").value_or(""), bytes);  // the original is untouched
}

// Files that never end or are not the cache's own are never read: a symlink to /dev/zero and
// a FIFO (opening it blocking would wait for a writer) are misses, removed.
TEST(DiskCache, SymlinksAndFifosAreMissesNotReads) {
  TempDir d;
  DiskCache c(d.path, "tessera-test-cache", ".bin");
  std::string bytes = random_bytes(2000, 5);
  c.store("k", bytes);
  fs::remove(c.artifact_path("k"));
  fs::create_symlink("/dev/zero", c.artifact_path("k"));
  EXPECT_FALSE(c.lookup("k").has_value());
  EXPECT_FALSE(fs::is_symlink(fs::symlink_status(c.artifact_path("k"))));
  c.store("k", bytes);
  fs::remove(c.meta_path("k"));
  ASSERT_EQ(::mkfifo(c.meta_path("k").c_str(), 0600), 0);
  EXPECT_FALSE(c.lookup("k").has_value());
  EXPECT_FALSE(fs::exists(fs::symlink_status(c.meta_path("k"))));
  c.store("k", bytes);
  fs::remove(c.meta_path("k"));
  fs::create_symlink("/dev/zero", c.meta_path("k"));
  EXPECT_FALSE(c.lookup("k").has_value());
  c.store("k", bytes);
  EXPECT_EQ(c.lookup("k").value_or(""), bytes);
}

TEST(DiskCache, OtherKindsSidecarIsAMiss) {
  TempDir d;
  DiskCache a(d.path, "tessera-a-cache", ".bin"), b(d.path, "tessera-b-cache", ".bin");
  a.store("k", "hello");
  EXPECT_FALSE(b.lookup("k").has_value());
}

TEST(DiskCache, UnwritableDirectoryIsANamedError) {
  if (::geteuid() == 0) {
    // root writes anywhere; a path under a regular file cannot be a directory for anyone.
    TempDir d;
    fs::create_directories(d.path);
    std::ofstream(d.path + "/file") << "x";
    try {
      DiskCache c(d.path + "/file/sub", "m", ".bin");
      FAIL();
    } catch (const TesseraError& e) {
      EXPECT_NE(std::string(e.what()).find(d.path + "/file/sub"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("TESSERA_CACHE_DIR"), std::string::npos) << e.what();
    }
    return;
  }
  EXPECT_THROW(DiskCache("/proc/tessera-no", "m", ".bin"), TesseraError);
}

TEST(DiskCache, HashesDiffer) {
  EXPECT_NE(content_hash("a"), content_hash("b"));
  EXPECT_EQ(content_hash("abc"), content_hash("abc"));
  EXPECT_EQ(content_hash("").size(), 32u);
}

std::unique_ptr<Kernel> vector_add(ScalarKind dt) {
  const LibraryKernel* lk = find_library_kernel("vector_add");
  EXPECT_NE(lk, nullptr);
  return bind_constexprs(*lk->build(dt), {});
}

TEST(CompileCuda, MemoryThenDiskThenRebuildAfterCorruption) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  TempDir d;
  CudaOptions o;
  o.cache_dir = d.path;
  o.target = CudaTarget::parse("sm_80");
  o.target_from_device = false;
  auto k = vector_add(ScalarKind::F32);
  clear_cuda_memory_cache();

  auto first = compile_cuda(*k, o);
  EXPECT_FALSE(first->from_cache);
  EXPECT_GT(first->compile_seconds, 0);
  EXPECT_FALSE(first->cubin().empty());
  EXPECT_EQ(first->target.str(), "sm_80");
  EXPECT_NE(first->source().find("tessera/"), std::string::npos);

  auto mem = compile_cuda(*k, o);
  EXPECT_TRUE(mem->from_cache);
  EXPECT_TRUE(mem->from_memory_cache);
  EXPECT_EQ(mem->cubin(), first->cubin());

  clear_cuda_memory_cache();
  auto disk = compile_cuda(*k, o);
  EXPECT_TRUE(disk->from_cache);
  EXPECT_FALSE(disk->from_memory_cache);
  EXPECT_EQ(disk->compile_seconds, 0);
  EXPECT_EQ(disk->cubin(), first->cubin());

  // Damage every cubin in the cache: the next compile notices and rebuilds.
  int damaged = 0;
  for (auto& e : fs::directory_iterator(d.path))
    if (e.path().extension() == ".cubin") {
      fs::resize_file(e.path(), fs::file_size(e.path()) / 2);
      ++damaged;
    }
  EXPECT_EQ(damaged, 1);
  clear_cuda_memory_cache();
  auto rebuilt = compile_cuda(*k, o);
  EXPECT_FALSE(rebuilt->from_cache);
  EXPECT_EQ(rebuilt->cubin(), first->cubin());

  // Another target or dtype is another entry.
  o.target = CudaTarget::parse("sm_90a");
  auto other = compile_cuda(*k, o);
  EXPECT_FALSE(other->from_cache);
  EXPECT_NE(other->cubin(), first->cubin());
}

// The memory cache is also keyed before emission (what the kernel prints as, the target, the
// TESSERA_ switches), so a hit costs no emission: each thing the emission depends on must
// still tell entries apart.
TEST(CompileCuda, MemoryHitsKeyedBeforeEmissionTellKernelsAndSwitchesApart) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  CudaOptions o;
  o.disk_cache = false;
  o.target = CudaTarget::parse("sm_80");
  o.target_from_device = false;
  const LibraryKernel* lk = find_library_kernel("vector_add");
  ASSERT_NE(lk, nullptr);
  auto k1024 = bind_constexprs(*lk->build(ScalarKind::F32), {{"BLOCK", 1024}});
  auto k512 = bind_constexprs(*lk->build(ScalarKind::F32), {{"BLOCK", 512}});
  ::unsetenv("TESSERA_CUDA_INLINE_EDGES");
  clear_cuda_memory_cache();

  auto first = compile_cuda(*k1024, o);
  EXPECT_FALSE(first->from_memory_cache);
  auto again = compile_cuda(*k1024->clone(), o);  // another object, the same kernel
  EXPECT_TRUE(again->from_memory_cache);
  EXPECT_EQ(again->source(), first->source());
  EXPECT_EQ(again->block_threads, first->block_threads);

  auto other = compile_cuda(*k512, o);  // another constexpr value: another kernel
  EXPECT_FALSE(other->from_memory_cache);
  EXPECT_NE(other->source(), first->source());

  ::setenv("TESSERA_CUDA_INLINE_EDGES", "1", 1);  // a switch the emitter reads as it prints
  auto switched = compile_cuda(*k1024, o);
  ::unsetenv("TESSERA_CUDA_INLINE_EDGES");
  EXPECT_FALSE(switched->from_memory_cache);
  EXPECT_NE(switched->source().find("#define TSR_INLINE_EDGES 1"), std::string::npos);
  EXPECT_EQ(compile_cuda(*k1024, o)->source(), first->source());

  CudaOptions o90 = o;
  o90.target = CudaTarget::parse("sm_90");
  EXPECT_FALSE(compile_cuda(*k1024, o90)->from_memory_cache);
}

TEST(CompileCuda, NoDiskCacheWritesNothing) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  TempDir d;
  CudaOptions o;
  o.cache_dir = d.path;
  o.disk_cache = false;
  o.target_from_device = false;
  clear_cuda_memory_cache();
  auto k = vector_add(ScalarKind::BF16);
  auto kk = compile_cuda(*k, o);
  EXPECT_FALSE(kk->cubin().empty());
  EXPECT_FALSE(fs::exists(d.path));
}

TEST(CompileCuda, RunningWithoutADeviceIsAnError) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  if (cuda_device_available()) GTEST_SKIP() << "a CUDA device is present";
  TempDir d;
  CudaOptions o;
  o.cache_dir = d.path;
  auto k = vector_add(ScalarKind::F32);
  auto kk = compile_cuda(*k, o);  // compiling needs no device
  EXPECT_EQ(kk->target.str(), "sm_90");  // the default target without a device
  std::vector<Tensor> ts = make_random_tensors(*k, {{"N", 1000}}, 3);
  auto args = make_args(*k, ts);
  try {
    kk->run_host(args);
    FAIL() << "ran without a device";
  } catch (const TesseraError& e) {
    std::string m = e.what();
    EXPECT_TRUE(m.find("no CUDA device") != std::string::npos || m.find("CUDA driver") != std::string::npos) << m;
  }
}

}  // namespace
}  // namespace tessera::cudatest
