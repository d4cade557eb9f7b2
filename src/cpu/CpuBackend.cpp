// compile_cpu: options, cache lookup (memory, then disk), compiling, and running a kernel.
#include "cpu/CpuBackend.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <regex>
#include <sstream>
#include <unordered_map>

#include "cpu/CpuInternal.h"
#include "ir/Struct.h"
#include "runtime/DiskCache.h"

namespace tessera {

namespace {

using namespace cpu;

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

std::string resolve_compiler(const CpuOptions& o) {
  if (!o.compiler.empty()) return o.compiler;
  return env_or("TESSERA_CXX", "c++");
}

// -mprefer-vector-width=512: where the CPU has AVX-512, loops vectorize over 512-bit registers
// (GCC's tuning otherwise keeps 256 on most such CPUs). On an Intel Xeon with AVX-512 (session
// 14, bench/RESULTS.md) it made the row kernels 10-40% and the f32 matmul 45% faster; without
// AVX-512 it changes nothing. (An x86 option: other hosts do without it.)
//
// -fuse-ld=gold where an ld.gold is on PATH (binutils ships it beside ld.bfd): it links the
// kernel's shared object faster, 0.02-0.04 s of CPU of the 0.46-0.59 s a library kernel's cold
// compile takes here (topk f32 0.57 -> 0.55, layernorm bf16 0.50 -> 0.46; lld was slower,
// bench/RESULTS.md session 22). Looked up once per process, without running anything.
bool gold_on_path() {
  static const bool found = !find_program("ld.gold").empty();
  return found;
}

std::vector<std::string> resolve_flags(const CpuOptions& o) {
  if (!o.flags.empty()) return o.flags;
#if defined(__x86_64__) || defined(__i386__)
  std::vector<std::string> f = {"-O3", "-march=native", "-mprefer-vector-width=512", "-fopenmp", "-fPIC", "-shared",
                                "-std=c++20", "-w"};
#else
  std::vector<std::string> f = {"-O3", "-march=native", "-fopenmp", "-fPIC", "-shared", "-std=c++20", "-w"};
#endif
  if (gold_on_path()) f.push_back("-fuse-ld=gold");
  return f;
}

std::mutex g_mu;
std::unordered_map<std::string, std::shared_ptr<SharedObject>> g_memory;

class CpuKernelImpl : public CpuKernel {
 public:
  CpuKernelImpl(std::shared_ptr<SharedObject> so, const Kernel& k, int threads)
      : so_(std::move(so)), sig_(k.clone()), threads_(threads) {}

  void run(std::vector<KernelArg>& args) override {
    const Kernel& k = *sig_;
    if (args.size() != k.params.size())
      throw TesseraError(k.loc, "kernel @" + k.name + " takes " + std::to_string(k.params.size()) +
                                    " arguments, got " + std::to_string(args.size()));
    bind_dims(k, args);  // dtypes, ranks and dim agreement
    std::vector<void*> bufs;
    std::vector<int64_t> dims, is;
    std::vector<double> fs;
    for (size_t j = 0; j < k.params.size(); ++j) {
      const Value* p = k.params[j];
      KernelArg& a = args[j];
      if (p->type.is_view()) {
        Tensor* t = a.tensor;
        if (!t) throw TesseraError(k.loc, "argument %" + p->name + " needs a tensor");
        size_t need = static_cast<size_t>(t->numel()) * scalar_bytes(t->dtype);
        if (t->data.size() < need)
          throw TesseraError(k.loc, "tensor for %" + p->name + " holds " + std::to_string(t->data.size()) +
                                        " bytes, its shape needs " + std::to_string(need));
        bufs.push_back(t->data.data());
        dims.insert(dims.end(), t->shape.begin(), t->shape.end());
      } else if (p->type.is_ptr()) {
        bufs.push_back(a.tensor ? a.tensor->data.data() : nullptr);
      } else {
        if (std::holds_alternative<int64_t>(a.scalar)) {
          is.push_back(std::get<int64_t>(a.scalar));
          fs.push_back(static_cast<double>(std::get<int64_t>(a.scalar)));
        } else {
          fs.push_back(std::get<double>(a.scalar));
          is.push_back(static_cast<int64_t>(std::get<double>(a.scalar)));
        }
      }
    }
    bufs.push_back(nullptr);
    dims.push_back(0);
    is.push_back(0);
    fs.push_back(0);
    if (int rc = so_->run(bufs.data(), dims.data(), is.data(), fs.data(), threads_); rc != 0)
      throw struct_fault_error(k, rc);
  }

 private:
  std::shared_ptr<SharedObject> so_;
  std::unique_ptr<Kernel> sig_;
  int threads_;
};

// Map the first error in the compiler output back to the IR op that produced the line.
[[noreturn]] void compile_failed(const std::string& cxx, const std::string& diag, const EmittedCpp& src) {
  std::string msg = "cpu backend: compiling the generated C++ with '" + cxx + "' failed:\n";
  std::istringstream in(diag);
  int shown = 0;
  const Op* op = nullptr;
  static const std::regex re(R"(kernel\.cpp:(\d+):\d+: (fatal )?error:)");
  for (std::string l; std::getline(in, l);) {
    std::smatch m;
    if (!op && std::regex_search(l, m, re)) {
      size_t n = std::stoul(m[1].str());
      if (n >= 1 && n <= src.line_op.size()) op = src.line_op[n - 1];
    }
    if (shown++ < 25) msg += l + "\n";
  }
  if (op) {
    auto t = src.op_texts.find(op);
    msg += "generated from: " + (t != src.op_texts.end() ? t->second : std::string(op->name())) + " at " + op->loc.str();
    throw TesseraError(op->loc, msg);
  }
  throw TesseraError(msg);
}

}  // namespace

std::string cpu_cache_dir(const CpuOptions& o) { return default_cache_dir(o.cache_dir); }

void build_cpu_runtime_object(const std::string& dir, const CpuOptions& o) {
  store_runtime_object(resolve_compiler(o), resolve_flags(o), dir);
}

void clear_cpu_memory_cache() {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_memory.clear();
  }
  forget_runtime_objects();
}

std::shared_ptr<CpuKernel> compile_cpu(const Kernel& k, const CpuOptions& opts) {
  EmittedCpp src = emit_cpp_detailed(k);
  std::string cxx = resolve_compiler(opts);
  std::vector<std::string> flags = resolve_flags(opts);
  std::string keyin = std::string(kCodegenVersion) + "\n" + cxx + "\n" + compiler_identity(cxx) + "\n";
  for (const auto& f : flags) keyin += f + "\n";
  keyin += kRuntimeHeader;
  keyin += src.source;
  std::string key = content_hash(keyin);

  auto make = [&](std::shared_ptr<SharedObject> so) {
    return std::make_shared<CpuKernelImpl>(std::move(so), k, opts.num_threads);
  };
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = g_memory.find(key);
    if (it != g_memory.end()) {
      auto kk = make(it->second);
      kk->from_memory_cache = true;
      return kk;
    }
  }
  // The shared disk-cache policy (src/runtime/DiskCache.h): atomic entries with a checksum
  // sidecar; a verified entry's bytes are loaded from a private copy (load_shared_bytes), never
  // from the entry's path, which another process could swap after the check.
  std::optional<DiskCache> disk;
  if (opts.disk_cache) {
    disk.emplace(cpu_cache_dir(opts), "tessera-cpu-cache", ".so");
    std::shared_ptr<SharedObject> so;
    if (std::optional<std::string> bytes = disk->lookup(key)) {
      // The verified bytes themselves are loaded (not the path, which another process may
      // replace after the check); an entry that does not load is removed and rebuilt, one whose
      // copy could not be written (a full disk) only rebuilt.
      try {
        so = load_shared_bytes(*bytes, disk->artifact_path(key), disk->dir());
      } catch (const TesseraError&) {
        disk->remove(key);
      }
    }
    if (so) {
      {
        std::lock_guard<std::mutex> lock(g_mu);
        g_memory[key] = so;
      }
      auto kk = make(so);
      kk->from_disk_cache = true;
      return kk;
    }
  }
  auto t0 = std::chrono::steady_clock::now();
  compiler_version(cxx);  // a compiler that does not run is a clear error, before any build
  // The runtime header's helpers come compiled (src/cpu/RuntimeObject.cpp) where there is a
  // copy or a disk cache to keep one; the kernel is the same either way, so the key does not
  // say which.
  const std::string cache_dir = disk ? disk->dir() : "";
  std::shared_ptr<const RuntimeObject> runtime = find_runtime_object(cxx, flags, cache_dir);
  std::string work = make_work_dir(disk ? cache_dir : env_or("TMPDIR", "/tmp"));
  std::shared_ptr<SharedObject> so;
  try {
    write_whole_file(work + "/tessera_cpu.h", kRuntimeHeader, false);
    write_whole_file(work + "/kernel.cpp", src.source, false);
    // (A rebuild gets a new name: the object's name is never one the process loaded.)
    std::string out = work + "/" + unique_object_name();
    const std::string rt = work + "/runtime.o";
    if (runtime) write_whole_file(rt, runtime->bytes, false);
    auto build = [&](bool with_runtime) {
      std::vector<std::string> kernel_flags = flags, inputs;
      if (with_runtime) {
        kernel_flags.push_back("-DTSR_PREBUILT_RUNTIME");
        kernel_flags.push_back("-Wl,--gc-sections");  // the object's helpers the kernel does not call
        inputs.push_back(rt);
      }
      return run_compiler(cxx, kernel_flags, work + "/kernel.cpp", out, work, inputs);
    };
    CompileResult r = build(runtime != nullptr);
    // A runtime object the kernel does not link with (a bad entry that verified) or that lacks
    // one of its helpers (an object made for another CPU: dlopen names the missing tsr::
    // symbol) is dropped and the kernel compiled self-contained. Loaded before it is stored, so
    // such a kernel never reaches the disk cache.
    auto drop_and_rebuild = [&] {
      drop_runtime_object(*runtime, cache_dir);
      runtime = nullptr;
      out = work + "/" + unique_object_name();
      r = build(false);
    };
    if (!r.ok && runtime && r.diagnostics.find(rt) != std::string::npos) drop_and_rebuild();
    if (!r.ok) compile_failed(cxx, r.diagnostics, src);
    try {
      so = load_shared(out);  // this build's own file: the entry may be replaced or removed meanwhile
    } catch (const TesseraError& e) {
      if (!runtime || std::string(e.what()).find("_ZN3tsr") == std::string::npos) throw;
      drop_and_rebuild();
      if (!r.ok) compile_failed(cxx, r.diagnostics, src);
      so = load_shared(out);
    }
    if (disk) disk->store(key, read_file(out));
  } catch (...) {
    remove_tree(work);
    throw;
  }
  remove_tree(work);
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_memory[key] = so;
  }
  auto kk = make(so);
  kk->compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  kk->linked_runtime_object = runtime != nullptr;
  return kk;
}

}  // namespace tessera
