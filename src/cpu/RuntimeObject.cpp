// The runtime object: the runtime header's out-of-line helpers (load_row, store_row, the sort,
// the histogram, the row reductions and exps: the TSR_RUNTIME_OBJECT list at the end of
// tessera_cpu.h) compiled once per compiler and flags, so that a kernel's cold compile is spent
// on the kernel's own code. A kernel compiled with TSR_PREBUILT_RUNTIME declares those
// instances `extern template` and links the object into its shared object, which stays
// self-contained (nothing to load beside it, no symbol shared between kernels).
//
// Where it comes from, first found: this process's memo; the kernel disk cache (an entry like a
// kernel's, verified the same way); the build's own copy (the CMake target
// tessera_cpu_runtime_object writes one into <build>/cpu-runtime for the default compiler and
// flags); else it is compiled (~2-2.7 s of CPU, once) and stored in the disk cache. Without a
// disk cache and without the build's copy, kernels are compiled self-contained as before (a
// per-process object would cost every one-off compile more than it saves). Its key holds the
// compiler's predefined macros, so an object made for another CPU (a build folder or a cache
// carried to another host) is never taken for this one's.
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>

#include "cpu/CpuInternal.h"
#include "runtime/DiskCache.h"

namespace tessera::cpu {

namespace {

constexpr const char* kRuntimeMagic = "tessera-cpu-runtime";

#ifdef TESSERA_CPU_RUNTIME_DIR
const char* const kBuildRuntimeDir = TESSERA_CPU_RUNTIME_DIR;
#else
const char* const kBuildRuntimeDir = "";
#endif

}  // namespace

std::vector<std::string> runtime_object_flags(const std::vector<std::string>& kernel_flags) {
  std::vector<std::string> f;
  for (const std::string& s : kernel_flags)
    if (s != "-shared" && s.rfind("-fuse-ld=", 0) != 0) f.push_back(s);
  f.push_back("-c");
  f.push_back("-DTSR_RUNTIME_OBJECT");
  // Each helper in a section of its own and not exported: a kernel linked with --gc-sections
  // keeps only the helpers it calls (the whole object added ~85 KB to every cached kernel).
  f.push_back("-ffunction-sections");
  f.push_back("-fvisibility=hidden");
  return f;
}

std::string runtime_object_key(const std::string& cxx, const std::vector<std::string>& kernel_flags) {
  std::string in = std::string(kRuntimeMagic) + "\n" + kCodegenVersion + "\n" + cxx + "\n" + compiler_identity(cxx) + "\n";
  for (const std::string& f : runtime_object_flags(kernel_flags)) in += f + "\n";
  // The target the flags resolve to here (-march=native names no CPU): an object made on
  // another host (a build folder or a cache carried over) is not this one's.
  in += compiler_macros(cxx, runtime_object_flags(kernel_flags));
  in += kRuntimeHeader;
  return content_hash(in);
}

namespace {

// The object compiled in the private folder `work`; nullopt when the compiler fails.
std::optional<std::string> compile_runtime_object(const std::string& cxx, const std::vector<std::string>& kernel_flags,
                                                  const std::string& work) {
  write_whole_file(work + "/tessera_cpu.h", kRuntimeHeader, false);
  write_whole_file(work + "/runtime.cpp", "#include \"tessera_cpu.h\"\n", false);
  const std::string out = work + "/runtime.o";
  CompileResult r = run_compiler(cxx, runtime_object_flags(kernel_flags), work + "/runtime.cpp", out, work);
  if (!r.ok) return std::nullopt;
  return read_file(out);
}

}  // namespace

std::string build_runtime_dir() { return kBuildRuntimeDir; }

namespace {

// compile_runtime_object in a private work directory inside `dir`, removed afterwards.
std::optional<std::string> compile_in(const std::string& cxx, const std::vector<std::string>& kernel_flags,
                                      const std::string& dir) {
  const std::string work = make_work_dir(dir);
  std::optional<std::string> bytes;
  try {
    bytes = compile_runtime_object(cxx, kernel_flags, work);
  } catch (...) {
    remove_tree(work);
    throw;
  }
  remove_tree(work);
  return bytes;
}

std::mutex g_runtime_mu;
std::map<std::string, std::shared_ptr<const RuntimeObject>> g_runtime_memo;

}  // namespace

void forget_runtime_objects() {
  std::lock_guard<std::mutex> lock(g_runtime_mu);
  g_runtime_memo.clear();
}

void drop_runtime_object(const RuntimeObject& o, const std::string& cache_dir) {
  std::lock_guard<std::mutex> lock(g_runtime_mu);
  g_runtime_memo[o.key] = nullptr;
  // Wherever it came from: the disk cache, or the build's copy (where that folder is writable).
  for (const std::string& dir : {cache_dir, build_runtime_dir()}) {
    if (dir.empty()) continue;
    try {
      DiskCache(dir, kRuntimeMagic, ".o").remove(o.key);
    } catch (const TesseraError&) {
    }
  }
}

std::shared_ptr<const RuntimeObject> find_runtime_object(const std::string& cxx,
                                                         const std::vector<std::string>& kernel_flags,
                                                         const std::string& cache_dir) {
  // TESSERA_CPU_RUNTIME_OBJECT=0: every kernel self-contained (the A/B switch of the cold
  // compile figures).
  static const bool off = [] {
    const char* e = std::getenv("TESSERA_CPU_RUNTIME_OBJECT");
    return e && std::string(e) == "0";
  }();
  if (off) return nullptr;
  auto& memo = g_runtime_memo;
  const std::string key = runtime_object_key(cxx, kernel_flags);
  std::lock_guard<std::mutex> lock(g_runtime_mu);
  if (auto it = memo.find(key); it != memo.end()) return it->second;
  auto found = [&](std::string bytes) {
    auto o = std::make_shared<RuntimeObject>();
    o->key = key;
    o->bytes = std::move(bytes);
    return memo[key] = o;
  };
  std::optional<DiskCache> cache;
  if (!cache_dir.empty()) {
    cache.emplace(cache_dir, kRuntimeMagic, ".o");
    if (auto b = cache->lookup(key)) return found(std::move(*b));
  }
  const std::string built = build_runtime_dir();
  std::error_code ec;
  if (!built.empty() && std::filesystem::is_directory(built, ec)) {
    try {
      if (auto b = DiskCache(built, kRuntimeMagic, ".o").lookup(key)) return found(std::move(*b));
    } catch (const TesseraError&) {
      // A build folder the cache cannot use (DiskCache wants to write: a read-only one counts
      // as none): as if it had no copy.
    }
  }
  if (!cache) return nullptr;
  compiler_version(cxx);  // a compiler that does not run is a clear error, before any build
  std::optional<std::string> bytes = compile_in(cxx, kernel_flags, cache->dir());
  // Flags the object cannot be built with (the kernel's own compile will say what is wrong, if
  // anything): kernels are compiled self-contained; remembered so it is not tried again.
  if (!bytes) return memo[key] = nullptr;
  cache->store(key, *bytes);
  return found(std::move(*bytes));
}

void store_runtime_object(const std::string& cxx, const std::vector<std::string>& kernel_flags, const std::string& dir) {
  DiskCache cache(dir, kRuntimeMagic, ".o");
  const std::string key = runtime_object_key(cxx, kernel_flags);
  if (cache.lookup(key)) return;
  std::optional<std::string> bytes = compile_in(cxx, kernel_flags, dir);
  if (!bytes) throw TesseraError("cpu backend: the runtime object does not compile with '" + cxx + "'");
  cache.store(key, *bytes);
}

}  // namespace tessera::cpu
