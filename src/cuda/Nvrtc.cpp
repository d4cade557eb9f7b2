// NVRTC, loaded at run time: compiling generated CUDA C++ to PTX and a cubin in process.
//
// Like the driver, nvrtc.h is not included; the few prototypes are declared here. The device
// headers come from memory (DeviceHeaders.h), so a compile touches no files.
#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>

#include "cuda/CudaBackend.h"
#include "cuda/RuntimeInternal.h"
#include "cuda/DeviceHeaders.h"
#include "support/Env.h"

namespace tessera {

namespace {

using nvrtcResult = int;
using nvrtcProgram = struct _nvrtcProgram*;

struct Nvrtc {
  const char* (*GetErrorString)(nvrtcResult);
  nvrtcResult (*Version)(int*, int*);
  nvrtcResult (*CreateProgram)(nvrtcProgram*, const char*, const char*, int, const char* const*,
                               const char* const*);
  nvrtcResult (*DestroyProgram)(nvrtcProgram*);
  nvrtcResult (*CompileProgram)(nvrtcProgram, int, const char* const*);
  nvrtcResult (*GetPTXSize)(nvrtcProgram, size_t*);
  nvrtcResult (*GetPTX)(nvrtcProgram, char*);
  nvrtcResult (*GetCUBINSize)(nvrtcProgram, size_t*);
  nvrtcResult (*GetCUBIN)(nvrtcProgram, char*);
  nvrtcResult (*GetProgramLogSize)(nvrtcProgram, size_t*);
  nvrtcResult (*GetProgramLog)(nvrtcProgram, char*);
  int major = 0, minor = 0;
  std::string path;          // the library that was loaded
};

struct LoadedNvrtc {
  Nvrtc n{};
  bool ok = false;
  std::string why;
};

LoadedNvrtc load_nvrtc() {
  LoadedNvrtc L;
  std::vector<std::string> names;
  if (const char* e = std::getenv("TESSERA_NVRTC"); e && *e) names.push_back(e);
  for (const char* n : {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"}) names.push_back(n);
  std::vector<std::string> roots;
  for (const char* env : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* e = std::getenv(env); e && *e) roots.push_back(e);
  roots.push_back("/usr/local/cuda");
  for (const auto& r : roots)
    for (const char* n : {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"}) {
      names.push_back(r + "/lib64/" + n);
      names.push_back(r + "/lib/" + n);
    }
  void* h = nullptr;
  std::string first_error;
  for (const auto& n : names) {
    h = ::dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h) break;
    if (first_error.empty()) first_error = ::dlerror();
  }
  if (!h) {
    L.why = "NVRTC is not available (libnvrtc.so cannot be loaded: " + first_error +
            "); install the CUDA toolkit or set TESSERA_NVRTC to the library's path";
    return L;
  }
  Nvrtc& n = L.n;
  bool ok = true;
  auto sym = [&](auto& fn, const char* name) {
    void* p = ::dlsym(h, name);
    if (!p) {
      ok = false;
      if (L.why.empty()) L.why = std::string("NVRTC is not available: the library lacks ") + name;
      return;
    }
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
  };
  sym(n.GetErrorString, "nvrtcGetErrorString");
  sym(n.Version, "nvrtcVersion");
  sym(n.CreateProgram, "nvrtcCreateProgram");
  sym(n.DestroyProgram, "nvrtcDestroyProgram");
  sym(n.CompileProgram, "nvrtcCompileProgram");
  sym(n.GetPTXSize, "nvrtcGetPTXSize");
  sym(n.GetPTX, "nvrtcGetPTX");
  sym(n.GetCUBINSize, "nvrtcGetCUBINSize");
  sym(n.GetCUBIN, "nvrtcGetCUBIN");
  sym(n.GetProgramLogSize, "nvrtcGetProgramLogSize");
  sym(n.GetProgramLog, "nvrtcGetProgramLog");
  if (!ok) return L;
  n.Version(&n.major, &n.minor);
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(n.Version), &info) && info.dli_fname) n.path = info.dli_fname;
  L.ok = true;
  return L;
}

const LoadedNvrtc& nvrtc() {
  static const LoadedNvrtc L = load_nvrtc();
  return L;
}

const Nvrtc& need_nvrtc() {
  const LoadedNvrtc& L = nvrtc();
  if (!L.ok) throw TesseraError("cuda: " + L.why);
  return L.n;
}

// The generated-code line the first error is on: "kernel.cu(12): error: ...", or for an
// error inside a device header, the line of kernel.cu that instantiated it.
int failing_line(const std::string& log, const std::string& name) {
  std::string esc;
  for (char c : name) {
    if (std::string_view(".^$|()[]{}*+?\\").find(c) != std::string_view::npos) esc += '\\';
    esc += c;
  }
  std::smatch m;
  std::regex direct(esc + R"(\((\d+)\): (catastrophic )?error)");
  if (std::regex_search(log, m, direct)) return std::stoi(m[1].str());
  std::regex inst(R"(at line (\d+) of )" + esc);
  if (std::regex_search(log, m, inst)) return std::stoi(m[1].str());
  return 0;
}

}  // namespace

namespace cuda {

std::string nvrtc_version_string() {
  const Nvrtc& n = need_nvrtc();
  return "nvrtc " + std::to_string(n.major) + "." + std::to_string(n.minor);
}

std::vector<std::string> nvrtc_options(const CudaTarget& target) {
  // No include path: the generated code includes only Tessera's embedded headers, which is what
  // keeps a compile independent of where (or whether) the toolkit's headers are installed.
  // No --use_fast_math: IEEE by default; the headers pick fast exp2/rsqrt where that is meant.
  std::vector<std::string> o = {"--gpu-architecture=" + target.str(), "-std=c++17", "-default-device"};
  // --minimal (NVRTC 12.4 and up): the front end leaves out texture / surface functions, the
  // device runtime's cuda* functions and launches from device code, none of which the headers
  // or the generated code use. The same PTX and cubin for every library kernel, 0.02-0.04 s less
  // front end per compile (bench/RESULTS.md, session 20). TESSERA_NVRTC_FULL_FRONT_END=1 leaves
  // it out (the A/B switch of its test and of tools/h200-nvcold-check).
  const Nvrtc& n = need_nvrtc();
  if ((n.major > 12 || (n.major == 12 && n.minor >= 4)) && !env_flag("TESSERA_NVRTC_FULL_FRONT_END"))
    o.push_back("--minimal");
  // For compute-sanitizer and profilers: their reports then name lines of the generated source
  // (written out with TESSERA_CUDA_DUMP_DIR). Part of the options, so of the cache key too.
  if (env_flag("TESSERA_NVRTC_LINEINFO")) o.push_back("-lineinfo");
  return o;
}

std::string op_summary(const Op& op) {
  std::string s;
  for (size_t i = 0; i < op.results.size(); ++i)
    s += (i ? ", %" : "%") + (op.results[i]->name.empty() ? std::string("?") : op.results[i]->name);
  if (!s.empty()) s += " = ";
  s += std::string(op.name());
  for (size_t i = 0; i < op.operands.size(); ++i)
    s += (i ? ", %" : " %") + (op.operands[i]->name.empty() ? std::string("?") : op.operands[i]->name);
  for (size_t i = 0; i < op.results.size(); ++i) s += (i ? ", " : " : ") + op.results[i]->type.str();
  return s;
}

}  // namespace cuda

bool nvrtc_available(std::string* why) {
  const LoadedNvrtc& L = nvrtc();
  if (!L.ok && why) *why = L.why;
  return L.ok;
}

namespace {

// The process's CPU time: NVRTC runs ptxas on a thread of its own.
double process_cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

// NVRTC's --time report: "File name, phase name, metric, unit" then one line per phase, e.g.
// "kernel.cu, NVVM Optimizer, 5262, ms".
void read_phase_times(const std::string& csv, NvrtcResult& out) {
  std::istringstream in(csv);
  for (std::string l; std::getline(in, l);) {
    std::vector<std::string> f;
    std::istringstream fields(l);
    for (std::string x; std::getline(fields, x, ',');) {
      size_t b = x.find_first_not_of(' '), e = x.find_last_not_of(" \r");
      f.push_back(b == std::string::npos ? "" : x.substr(b, e - b + 1));
    }
    if (f.size() < 4 || f[3] != "ms") continue;
    double s = std::atof(f[2].c_str()) / 1000;
    double* slot = f[1] == "CUDA C++ Frontend" ? &out.frontend_seconds
                   : f[1] == "NVVM Optimizer"  ? &out.nvvm_seconds
                   : f[1] == "PTX Translation" ? &out.ptxas_seconds
                                               : nullptr;
    if (slot) *slot = (*slot < 0 ? 0 : *slot) + s;
  }
}

NvrtcResult compile(const std::string& source, const CudaTarget& target, const std::string& name,
                    const std::vector<const Op*>& line_ops, const std::string& time_file) {
  const Nvrtc& n = need_nvrtc();
  auto t0 = std::chrono::steady_clock::now();
  const double cpu0 = process_cpu_seconds();
  std::vector<const char*> hnames, htexts;
  for (size_t i = 0; i < cuda::kNumDeviceHeaders; ++i) {
    hnames.push_back(cuda::kDeviceHeaders[i].name);
    htexts.push_back(cuda::kDeviceHeaders[i].text);
  }
  nvrtcProgram prog = nullptr;
  nvrtcResult r = n.CreateProgram(&prog, source.c_str(), name.c_str(), static_cast<int>(hnames.size()),
                                  htexts.data(), hnames.data());
  if (r != 0) throw TesseraError(std::string("cuda: nvrtcCreateProgram failed: ") + n.GetErrorString(r));
  struct Guard {
    const Nvrtc& n;
    nvrtcProgram& p;
    ~Guard() { n.DestroyProgram(&p); }
  } guard{n, prog};

  std::vector<std::string> opts = cuda::nvrtc_options(target);
  // NVRTC appends its phase times to this file (it does not truncate it).
  if (!time_file.empty()) opts.push_back("--time=" + time_file);
  std::vector<const char*> copts;
  for (const auto& o : opts) copts.push_back(o.c_str());
  nvrtcResult cr = n.CompileProgram(prog, static_cast<int>(copts.size()), copts.data());

  NvrtcResult out;
  size_t size = 0;
  if (n.GetProgramLogSize(prog, &size) == 0 && size > 1) {
    out.log.resize(size);
    n.GetProgramLog(prog, out.log.data());
    out.log.resize(size - 1);
  }
  if (cr != 0) {
    std::string msg = "cuda: NVRTC could not compile the generated CUDA C++ for " + target.str() + " (" +
                      n.GetErrorString(cr) + "):\n";
    std::istringstream in(out.log);
    int shown = 0;
    for (std::string l; std::getline(in, l) && shown < 30; ++shown) msg += l + "\n";
    int line = failing_line(out.log, name);
    const Op* op = line >= 1 && static_cast<size_t>(line) <= line_ops.size() ? line_ops[line - 1] : nullptr;
    if (op) {
      msg += "generated from: " + cuda::op_summary(*op) + " at " + op->loc.str();
      throw TesseraError(op->loc, msg);
    }
    throw TesseraError(msg);
  }
  if (n.GetPTXSize(prog, &size) == 0 && size > 1) {
    out.ptx.resize(size);
    n.GetPTX(prog, out.ptx.data());
    out.ptx.resize(size - 1);
  }
  if (n.GetCUBINSize(prog, &size) == 0 && size > 0) {
    out.cubin.resize(size);
    n.GetCUBIN(prog, out.cubin.data());
  }
  if (out.cubin.empty())
    throw TesseraError("cuda: NVRTC produced no cubin for " + target.str() + " (is the architecture supported by " +
                       cuda::nvrtc_version_string() + "?)");
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out.cpu_seconds = process_cpu_seconds() - cpu0;
  return out;
}

}  // namespace

NvrtcResult nvrtc_compile(const std::string& source, const CudaTarget& target, const std::string& name,
                          const std::vector<const Op*>& line_ops) {
  return compile(source, target, name, line_ops, "");
}

NvrtcResult nvrtc_compile_timed(const std::string& source, const CudaTarget& target, const std::string& name,
                                const std::vector<const Op*>& line_ops) {
  const char* tmp = std::getenv("TMPDIR");
  std::string path = std::string(tmp && *tmp ? tmp : "/tmp") + "/tessera-nvrtc-time-XXXXXX";
  int fd = ::mkstemp(path.data());
  if (fd < 0) throw TesseraError("cuda: cannot create a file for NVRTC's --time report in " + path);
  ::close(fd);
  struct Remove {
    const std::string& p;
    ~Remove() { std::remove(p.c_str()); }
  } remove{path};
  NvrtcResult r = compile(source, target, name, line_ops, path);
  std::ifstream in(path);
  std::stringstream csv;
  csv << in.rdbuf();
  read_phase_times(csv.str(), r);
  return r;
}

NvrtcResult nvrtc_compile(const std::string& source, const CudaTarget& target, const std::string& name) {
  return nvrtc_compile(source, target, name, {});
}

}  // namespace tessera
