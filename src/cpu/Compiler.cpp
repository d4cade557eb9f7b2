// Running the system C++ compiler and loading what it builds.
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>

#include "cpu/CpuInternal.h"
#include "runtime/DiskCache.h"

namespace tessera::cpu {

namespace {

// Runs argv with stdout+stderr sent to `log_path`; returns the exit status (127: could not exec).
int run_process(const std::vector<std::string>& argv, const std::string& log_path) {
  int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) throw TesseraError("cpu backend: cannot create '" + log_path + "': " + std::strerror(errno));
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fd);
    throw TesseraError(std::string("cpu backend: fork failed: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  ::close(fd);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs argv and returns its stdout+stderr; *rc gets the exit status (127: could not exec).
std::string run_captured(const std::vector<std::string>& argv, int* rc) {
  char tmpl[] = "/tmp/tessera-cxx-out-XXXXXX";
  int fd = ::mkstemp(tmpl);
  if (fd < 0) throw TesseraError(std::string("cpu backend: cannot create a temporary file: ") + std::strerror(errno));
  ::close(fd);
  *rc = run_process(argv, tmpl);
  std::string out = read_all(tmpl);
  ::unlink(tmpl);
  return out;
}

}  // namespace

const std::string& compiler_version(const std::string& cxx) {
  static std::mutex mu;
  static std::map<std::string, std::string> memo;
  std::lock_guard<std::mutex> lock(mu);
  auto it = memo.find(cxx);
  if (it != memo.end()) return it->second;
  int rc = 0;
  std::string out = run_captured({cxx, "--version"}, &rc);
  if (rc == 127)
    throw TesseraError("cpu backend: C++ compiler '" + cxx +
                       "' not found (set TESSERA_CXX or CpuOptions::compiler to a working compiler)");
  if (rc != 0 || out.empty())
    throw TesseraError("cpu backend: C++ compiler '" + cxx + "' does not work: `" + cxx + " --version` exited with status " +
                       std::to_string(rc) + (out.empty() ? "" : ": " + out.substr(0, 400)) +
                       " (set TESSERA_CXX or CpuOptions::compiler to a working compiler)");
  return memo[cxx] = out;
}

const std::string& compiler_macros(const std::string& cxx, const std::vector<std::string>& flags) {
  static std::mutex mu;
  static std::map<std::string, std::string> memo;
  // (-E stops before any link or object flag, -shared, -c, -fuse-ld=, would act.)
  std::vector<std::string> argv{cxx};
  argv.insert(argv.end(), flags.begin(), flags.end());
  for (const char* a : {"-E", "-dM", "-x", "c++", "/dev/null"}) argv.push_back(a);
  std::string id;
  for (const std::string& a : argv) id += a + "\n";
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = memo.find(id); it != memo.end()) return it->second;
  int rc = 0;
  std::string out = run_captured(argv, &rc);
  // A compiler that cannot say: the flags alone stand for the target (as the kernels' keys do).
  if (rc != 0) out.clear();
  return memo[id] = out;
}

std::string find_program(const std::string& name) {
  auto runnable = [](const std::string& p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
  };
  if (name.find('/') != std::string::npos) return runnable(name) ? name : "";
  const char* path = std::getenv("PATH");
  if (!path) return "";
  const std::string all = path;
  for (size_t b = 0; b <= all.size();) {
    size_t e = all.find(':', b);
    if (e == std::string::npos) e = all.size();
    const std::string dir = e > b ? all.substr(b, e - b) : ".";
    if (runnable(dir + "/" + name)) return dir + "/" + name;
    b = e + 1;
  }
  return "";
}

std::string compiler_identity(const std::string& cxx) {
  // The program execvp would run (find_program: stat only, a few microseconds, so a compiler
  // replaced while the process runs is seen).
  const std::string found = find_program(cxx);
  if (found.empty())
    throw TesseraError("cpu backend: C++ compiler '" + cxx +
                       "' not found (set TESSERA_CXX or CpuOptions::compiler to a working compiler)");
  char real[PATH_MAX];
  struct stat st;
  if (!::realpath(found.c_str(), real) || ::stat(real, &st) != 0)
    throw TesseraError("cpu backend: cannot read the C++ compiler '" + found + "': " + std::strerror(errno));
  return std::string(real) + " size=" + std::to_string(st.st_size) + " mtime=" + std::to_string(st.st_mtim.tv_sec) +
         "." + std::to_string(st.st_mtim.tv_nsec) + " inode=" + std::to_string(st.st_ino);
}

CompileResult run_compiler(const std::string& cxx, const std::vector<std::string>& flags,
                           const std::string& src_path, const std::string& out_path,
                           const std::string& include_dir, const std::vector<std::string>& inputs) {
  std::vector<std::string> argv{cxx};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.push_back("-I" + include_dir);
  argv.push_back(src_path);
  argv.insert(argv.end(), inputs.begin(), inputs.end());
  argv.push_back("-o");
  argv.push_back(out_path);
  std::string log = out_path + ".log";
  int rc = run_process(argv, log);
  CompileResult r;
  r.diagnostics = read_all(log);
  ::unlink(log.c_str());
  if (rc == 127) throw TesseraError("cpu backend: C++ compiler '" + cxx + "' could not be run");
  r.ok = rc == 0;
  if (!r.ok && r.diagnostics.empty())
    r.diagnostics = "'" + cxx + "' exited with status " + std::to_string(rc) + " and printed nothing";
  return r;
}

SharedObject::~SharedObject() {
  if (handle) ::dlclose(handle);
}

std::shared_ptr<SharedObject> load_shared(const std::string& path) {
  // Kernels pull in the OpenMP runtime; its worker threads outlive any one kernel, so the
  // runtime must stay loaded when the last kernel is dlclosed.
  static void* gomp = ::dlopen("libgomp.so.1", RTLD_NOW | RTLD_GLOBAL | RTLD_NODELETE);
  (void)gomp;
  void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) throw TesseraError("cpu backend: cannot load '" + path + "': " + ::dlerror());
  auto so = std::make_shared<SharedObject>();
  so->handle = h;
  so->run = reinterpret_cast<RunFn>(::dlsym(h, kRunSymbol));
  if (!so->run) throw TesseraError("cpu backend: '" + path + "' has no entry point " + kRunSymbol);
  return so;
}

std::string unique_object_name() {
  // dlopen returns an object already loaded under the same name without reading the file, and
  // a kernel's object may stay loaded after dlclose (C++'s unique symbols): every object this
  // process loads gets a name it never had before.
  static std::atomic<uint64_t> next{0};
  return "kernel-" + std::to_string(next++) + ".so";
}

std::shared_ptr<SharedObject> load_shared_bytes(std::string_view bytes, const std::string& what,
                                               const std::string& parent) {
  // A copy in a private directory of this process (make_work_dir: mode 0700) is what dlopen
  // reads: nothing else replaces it between the check of `bytes` and the load.
  std::string dir, path;
  try {
    dir = make_work_dir(parent);
    path = dir + "/" + unique_object_name();
    write_whole_file(path, bytes, false);
  } catch (const TesseraError&) {
    if (!dir.empty()) remove_tree(dir);
    return nullptr;
  }
  try {
    std::shared_ptr<SharedObject> so = load_shared(path);
    remove_tree(dir);
    return so;
  } catch (const TesseraError& e) {
    remove_tree(dir);
    std::string m = e.what();
    for (size_t at; (at = m.find(path)) != std::string::npos;) m.replace(at, path.size(), what);
    throw TesseraError(m);
  }
}

}  // namespace tessera::cpu
