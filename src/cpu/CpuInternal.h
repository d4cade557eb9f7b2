// Internals of the cpu backend shared by its files (emitter, compiler driver, cache).
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <memory>
#include <string_view>
#include <string>
#include <vector>

#include "ir/IR.h"

namespace tessera::cpu {

// Bumped whenever the generated code changes meaning, so old disk cache entries are not reused.
inline constexpr const char* kCodegenVersion = "tessera-cpu-codegen-11";

// The runtime header the generated code includes as "tessera_cpu.h" (embedded at build time).
extern const char* const kRuntimeHeader;

struct EmittedCpp {
  std::string source;
  // line_op[i] is the IR op whose code line i+1 of `source` belongs to (null: none).
  std::vector<const Op*> line_op;
  std::unordered_map<const Op*, std::string> op_texts;  // as written in the comments
};

// Generated code ABI (entry points of the shared object):
//   extern "C" int tessera_run(void** buffers, const int64_t* dims, const int64_t* iscalars,
//                              const double* fscalars, int num_threads);
// buffers: one pointer per view parameter (in order); dims: the shapes of the view
// parameters, concatenated; iscalars/fscalars: one slot per scalar parameter (in order), the
// integer and the float reading of the argument. Returns 0, or the first Struct fault's code
// (src/ir/Struct.h: struct_fault_error turns it into the located error).
inline constexpr const char* kRunSymbol = "tessera_run";
using RunFn = int (*)(void**, const int64_t*, const int64_t*, const double*, int);

EmittedCpp emit_cpp_detailed(const Kernel& k);

}  // namespace tessera::cpu

namespace tessera::cpu {

// `CXX --version` output, memoized per compiler. Throws TesseraError naming the compiler when it
// cannot be run. Run only before a compile (a cache miss): a fork + exec per process cost a
// warm cache hit ~5 ms.
const std::string& compiler_version(const std::string& cxx);
// The compiler's predefined macros under `flags` (`CXX flags -E -dM -x c++ /dev/null`): the
// instruction sets -march=native resolves to on this host.
// Memoized per compiler and flags; "" when it fails.
const std::string& compiler_macros(const std::string& cxx, const std::vector<std::string>& flags);
// What the cache key knows of the compiler without running it: the binary `cxx` resolves to
// ($PATH, symlinks) with its size, mtime and inode, so an upgraded or switched compiler misses
// the cache. Not memoized (stat only); throws TesseraError ("not found") when there is none.
std::string compiler_identity(const std::string& cxx);
// The program execvp would run for `name`: `name` itself when it holds a '/', else the first
// executable regular file of that name on $PATH (an empty entry is "."); "" when there is none.
// stat only.
std::string find_program(const std::string& name);

struct CompileResult {
  bool ok = false;
  std::string diagnostics;  // the compiler's stderr
};
// Compile `src_path` into `out_path` (what the flags make: a shared object, or an object with
// -c); `include_dir` holds tessera_cpu.h; `inputs` are linked in after the source.
CompileResult run_compiler(const std::string& cxx, const std::vector<std::string>& flags,
                           const std::string& src_path, const std::string& out_path,
                           const std::string& include_dir, const std::vector<std::string>& inputs = {});

// The runtime object (src/cpu/RuntimeObject.cpp): tessera_cpu.h's out-of-line helpers compiled
// once per compiler and flags, linked into every kernel compiled with TSR_PREBUILT_RUNTIME.
struct RuntimeObject {
  std::string key;    // runtime_object_key
  std::string bytes;  // the verified object file
};
// The flags that compile it: a kernel's, less -shared and -fuse-ld=, plus -c and the macro.
std::vector<std::string> runtime_object_flags(const std::vector<std::string>& kernel_flags);
std::string runtime_object_key(const std::string& cxx, const std::vector<std::string>& kernel_flags);
// The object for kernels compiled by `cxx` with `kernel_flags`: from this process's memo, the
// disk cache in `cache_dir` (none when empty), or the build's copy; else compiled and stored in
// the disk cache. Null when there is no disk cache and no copy, or when it does not compile.
std::shared_ptr<const RuntimeObject> find_runtime_object(const std::string& cxx,
                                                         const std::vector<std::string>& kernel_flags,
                                                         const std::string& cache_dir);
// A runtime object a kernel would not link with (a verified entry that is not an object): it
// is removed from `cache_dir`'s disk cache and not used again in this process.
void drop_runtime_object(const RuntimeObject& o, const std::string& cache_dir);
// Forget the memo (clear_cpu_memory_cache: as a new process would).
void forget_runtime_objects();
// Compiles it into `dir` (disk-cache format) unless an entry is there; throws when it fails.
void store_runtime_object(const std::string& cxx, const std::vector<std::string>& kernel_flags, const std::string& dir);
// Where the build keeps its copy (<build>/cpu-runtime; "" when the library was built without).
std::string build_runtime_dir();

// A loaded shared object and its entry point; dlclose on destruction.
struct SharedObject {
  void* handle = nullptr;
  RunFn run = nullptr;
  ~SharedObject();
};
std::shared_ptr<SharedObject> load_shared(const std::string& path);
// The shared object whose file's bytes are `bytes` (a disk-cache entry's, verified), loaded
// from a private copy (in a fresh directory inside `parent`), so that the bytes checked are the
// bytes run; `what` names it in errors. Null where the copy cannot be written (the bytes were
// not tried); a TesseraError where they do not load.
std::shared_ptr<SharedObject> load_shared_bytes(std::string_view bytes, const std::string& what,
                                               const std::string& parent);
// A file name for a shared object this process has not loaded under that name before.
std::string unique_object_name();

// A fresh private directory inside `parent`; throws TesseraError on failure.
std::string make_work_dir(const std::string& parent);
void remove_tree(const std::string& dir);
// The whole file; throws TesseraError when it cannot be read or is empty.
std::string read_file(const std::string& path);

}  // namespace tessera::cpu
