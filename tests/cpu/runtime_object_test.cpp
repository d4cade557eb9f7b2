// The runtime object (src/cpu/RuntimeObject.cpp): the runtime header's helpers compiled once and
// linked into every kernel, from the build's copy or the disk cache; a bad entry is rebuilt.
#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "CpuTestUtil.h"
#include "cpu/CpuInternal.h"
#include "kernels/Library.h"
#include "runtime/DiskCache.h"

namespace tessera::cputest {
namespace {

namespace fs = std::filesystem;

// A ragged bf16 row kernel: its loads and stores go through load_row / store_row / store_bf16,
// instances the runtime object holds.
const char* kRows = R"(kernel @rows(%x: view<bf16, [M, N]>, %y: view<bf16, [M, N]>) {
  grid {
    %m = dim %x {axis = 0} : i32
    yield %m
  }
  %pid = program_id {axis = 0} : i32
  %z = const {value = 0} : i32
  %t = load_tile %x, %pid, %z : tile<bf16, [1, 64]>
  %r = add %t, %t : tile<bf16, [1, 64]>
  store_tile %y, %r, %pid, %z
}
)";

std::unique_ptr<Kernel> bound(const std::string& text) {
  auto m = parse_module(text, "t.tile");
  return bind_constexprs(*m->kernels.at(0), {});
}

// The kernel on ragged rows (N = 37 of the tile's 64) against the interpreter.
void check_rows(std::shared_ptr<CpuKernel> ck, const Kernel& k) {
  EXPECT_GT(expect_same_as_interp(k, {{"M", 3}, {"N", 37}}, 7, std::move(ck)), 0);
}

// Flags of their own (no build copy matches them), light enough to compile the object fast.
CpuOptions own_flags(const std::string& dir) {
  CpuOptions o;
  o.cache_dir = dir;
  o.flags = {"-O1", "-fopenmp", "-fPIC", "-shared", "-std=c++20", "-w"};
  return o;
}

size_t runtime_entries(const std::string& dir) {
  size_t n = 0;
  for (auto& e : fs::directory_iterator(dir)) n += e.path().extension() == ".o";
  return n;
}

TEST(CpuRuntimeObject, TheDefaultFlagsLinkTheBuildsCopy) {
  if (std::getenv("TESSERA_CXX")) GTEST_SKIP() << "the build's copy is for the default compiler";
  const std::string dir = test_cache_dir() + "/runtime-default";
  CpuOptions o;
  o.cache_dir = dir;
  clear_cpu_memory_cache();
  auto k = bound(kRows);
  auto ck = compile_cpu(*k, o);
  EXPECT_TRUE(ck->linked_runtime_object);
  check_rows(ck, *k);
  // The build step made the copy, so nothing was compiled into this cache but the kernel.
  ASSERT_FALSE(cpu::build_runtime_dir().empty());
  EXPECT_TRUE(fs::exists(cpu::build_runtime_dir())) << "the build's tessera_cpu_runtime step did not run";
  EXPECT_EQ(runtime_entries(dir), 0u);
  // The link keeps only the helpers the kernel calls (the whole object is ~110 KB) and exports
  // none of them.
  std::vector<fs::path> sos;
  for (auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".so") sos.push_back(e.path());
  ASSERT_EQ(sos.size(), 1u);
  EXPECT_LT(fs::file_size(sos[0]), 64u * 1024u);
  void* h = ::dlopen(sos[0].c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << ::dlerror();
  EXPECT_NE(::dlsym(h, "tessera_run"), nullptr);
  EXPECT_EQ(::dlsym(h, "_ZN3tsr10sort_linesIdEEvPKT_PKiPS1_PixxxxbPmS7_"), nullptr);
  ::dlclose(h);
  clear_cpu_memory_cache();
}

TEST(CpuRuntimeObject, OtherFlagsKeepTheirOwnInTheCacheAndABadOneIsRebuilt) {
  const std::string dir = test_cache_dir() + "/runtime-own";
  CpuOptions o = own_flags(dir);
  clear_cpu_memory_cache();
  auto k = bound(kRows);
  auto ck = compile_cpu(*k, o);
  EXPECT_TRUE(ck->linked_runtime_object);
  check_rows(ck, *k);
  ASSERT_EQ(runtime_entries(dir), 1u);
  const char* cxx = std::getenv("TESSERA_CXX");
  const std::string key = cpu::runtime_object_key(cxx && *cxx ? cxx : "c++", o.flags);
  ASSERT_TRUE(fs::exists(dir + "/" + key + ".o"));
  const auto good = fs::file_size(dir + "/" + key + ".o");
  // An entry that verifies but is no object (forged sidecar and all): the kernel does not link
  // with it, so it is dropped and the kernel compiled on its own: still right.
  DiskCache(dir, "tessera-cpu-runtime", ".o").store(key, "not an object file, but its sidecar is right");
  clear_cpu_memory_cache();
  auto with = [](const char* op) {
    std::string t = kRows;
    return bound(t.replace(t.find("add"), 3, op));
  };
  auto k2 = with("mul");
  auto ck2 = compile_cpu(*k2, o);
  EXPECT_FALSE(ck2->linked_runtime_object);
  check_rows(ck2, *k2);
  EXPECT_FALSE(fs::exists(dir + "/" + key + ".o"));
  // A new process (the memo forgotten) builds a good one again.
  clear_cpu_memory_cache();
  auto k3 = with("max");
  auto ck3 = compile_cpu(*k3, o);
  EXPECT_TRUE(ck3->linked_runtime_object);
  check_rows(ck3, *k3);
  ASSERT_TRUE(fs::exists(dir + "/" + key + ".o"));
  EXPECT_EQ(fs::file_size(dir + "/" + key + ".o"), good);
  // An object that links but lacks the helpers (as one made for another CPU would lack some):
  // dlopen names the missing tsr:: symbol, and the kernel is compiled on its own, not cached
  // broken.
  const std::string empty = dir + "/empty.o";
  ASSERT_EQ(std::system(((cxx && *cxx ? std::string(cxx) : "c++") + " -c -x c++ /dev/null -o " + empty).c_str()), 0);
  std::ifstream in(empty, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  DiskCache(dir, "tessera-cpu-runtime", ".o").store(key, bytes);
  clear_cpu_memory_cache();
  auto k4 = with("min");
  auto ck4 = compile_cpu(*k4, o);
  EXPECT_FALSE(ck4->linked_runtime_object);
  check_rows(ck4, *k4);
  EXPECT_FALSE(fs::exists(dir + "/" + key + ".o"));
  clear_cpu_memory_cache();
  check_rows(compile_cpu(*k4, o), *k4);  // from the disk cache: the self-contained build
  clear_cpu_memory_cache();
}

}  // namespace
}  // namespace tessera::cputest
