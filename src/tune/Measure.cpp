// The measurement harness of the cpu backend: parallel compiles, then rounds of timings, each
// candidate in a child process with a timeout (Measure.h).
#include "tune/Measure.h"

#include <poll.h>
#include <sys/prctl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <set>
#include <iostream>
#include <sstream>
#include <thread>

#include "check/Compare.h"
#include "cpu/CpuBackend.h"
#include "cpu/CpuInternal.h"
#include "runtime/DiskCache.h"
#include "support/Diagnostic.h"
#include "text/Text.h"

namespace tessera::tune {

namespace {

using Clock = std::chrono::steady_clock;

struct Child {
  pid_t pid = -1;
  int fd = -1;
  int index = 0;
  Clock::time_point deadline;
  std::string out;
};

class CpuMeasurer : public Measurer {
 public:
  CpuMeasurer(const Problem& p, const MeasureOptions& o) : p_(p), o_(o) {}

  std::string device() const override { return cpu_device_name(); }
  std::string compiler() const override { return cpu_compiler_version(); }

  std::vector<Measurement> measure(const std::vector<Config>& configs) override {
    std::vector<Measurement> out;
    // Compiles in parallel: each child fills the disk cache, which the timing children hit.
    std::vector<std::unique_ptr<Kernel>> bound = bind_and_compile(p_, o_, configs, out, [](const Kernel& b) {
      compile_cpu(b);
      return std::string();
    }).bound;
    // Rounds, one candidate at a time; the order alternates so that a drift of the machine's
    // speed does not favour the first candidates.
    measure_rounds(out, o_.rounds, [&](size_t i, bool first, Measurement& m) {
      auto res = run_in_children(1, 1, o_.timeout_s, [&](int) { return time_one(*bound[i], first); });
      const std::string& s = res[0];
      if (s.rfind("ok ", 0) == 0) {
        m.round_ms.push_back(std::atof(s.c_str() + 3));
      } else if (s == "timeout") {
        m.status = "timeout";
        m.message = "a round took over " + std::to_string(o_.timeout_s) + " s";
      } else if (s.rfind("check-failed ", 0) == 0) {
        m.status = "check-failed";
        m.message = s.substr(13);
      } else {
        m.status = "run-error";
        m.message = s.rfind("error ", 0) == 0 ? s.substr(6) : s;
      }
    });
    return out;
  }

 private:
  // In the child: load the compiled kernel (a disk cache hit), check its first run against the
  // reference, then time runs until round_ms and min_reps are reached. "ok <median ms>",
  // "check-failed <first mismatch>" or "error <message>".
  std::string time_one(const Kernel& bound, bool check) {
    try {
      auto k = compile_cpu(bound);
      std::vector<Tensor> got = p_.inputs;
      std::vector<KernelArg> args = p_.make_args(bound, got);
      k->run(args);
      if (check)
        if (std::string bad = check_against_reference(p_, bound, got); !bad.empty()) return "check-failed " + bad;
      std::vector<double> ms;
      auto start = Clock::now();
      while (static_cast<int>(ms.size()) < o_.max_reps) {
        auto t0 = Clock::now();
        k->run(args);
        auto t1 = Clock::now();
        ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        if (static_cast<int>(ms.size()) >= o_.min_reps &&
            std::chrono::duration<double, std::milli>(t1 - start).count() >= o_.round_ms)
          break;
      }
      char buf[64];
      std::snprintf(buf, sizeof buf, "ok %.9g", median_of(ms));
      return buf;
    } catch (const TesseraError& e) {
      return "error " + one_line(e.what());
    }
  }

  const Problem& p_;
  MeasureOptions o_;
};

}  // namespace

std::string one_line(std::string s, size_t max) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  if (s.size() > max) s = s.substr(0, max) + "...";
  return s;
}

void write_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t w = ::write(fd, s.data() + off, s.size() - off);
    if (w <= 0) return;
    off += static_cast<size_t>(w);
  }
}

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

Compiled bind_and_compile(const Problem& p, const MeasureOptions& o, const std::vector<Config>& configs,
                          std::vector<Measurement>& out, const std::function<std::string(const Kernel&)>& compile) {
  const int n = static_cast<int>(configs.size());
  out.assign(configs.size(), Measurement{});
  Compiled c;
  c.bound.resize(configs.size());
  c.answers.resize(configs.size());
  for (int i = 0; i < n; ++i) {
    out[i].config = configs[i];
    try {
      c.bound[i] = bind_config(*p.kernel, configs[i]);
      out[i].bound_hash = kernel_ir_hash(*c.bound[i]);
    } catch (const TesseraError& e) {
      out[i].status = "bind-error";
      out[i].message = one_line(e.what());
    }
  }
  std::vector<int> todo;
  for (int i = 0; i < n; ++i)
    if (out[i].ok()) todo.push_back(i);
  const int jobs = o.jobs > 0 ? o.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  auto answers = run_in_children(static_cast<int>(todo.size()), jobs, o.timeout_s, [&](int j) -> std::string {
    auto t0 = Clock::now();
    std::string extra = compile(*c.bound[todo[j]]);
    return "ok " + std::to_string(std::chrono::duration<double>(Clock::now() - t0).count()) + " " + extra;
  });
  for (size_t j = 0; j < todo.size(); ++j) {
    Measurement& m = out[todo[j]];
    const std::string& a = answers[j];
    if (a.rfind("ok ", 0) == 0) {
      char* end = nullptr;
      m.compile_s = std::strtod(a.c_str() + 3, &end);
      c.answers[todo[j]] = end && *end == ' ' ? std::string(end + 1) : std::string();
    } else {
      m.status = a == "timeout" ? "timeout" : "compile-error";
      m.message = a == "timeout" ? "compiling took over " + std::to_string(o.timeout_s) + " s"
                                 : one_line(a.rfind("error ", 0) == 0 ? a.substr(6) : a);
    }
  }
  return c;
}

void measure_rounds(std::vector<Measurement>& out, int rounds,
                    const std::function<void(size_t i, bool first, Measurement& m)>& one) {
  for (int r = 0; r < rounds; ++r) {
    std::vector<size_t> alive;
    for (size_t i = 0; i < out.size(); ++i)
      if (out[i].ok()) alive.push_back(i);
    if (r % 2) std::reverse(alive.begin(), alive.end());
    for (size_t i : alive) one(i, r == 0, out[i]);
  }
  for (Measurement& m : out) {
    if (!m.ok() || m.round_ms.empty()) continue;
    auto [lo, hi] = std::minmax_element(m.round_ms.begin(), m.round_ms.end());
    m.ms = *lo;
    m.noise = m.ms > 0 ? (*hi - *lo) / m.ms : 0;
  }
}

std::vector<std::string> run_in_children(int n, int jobs, double timeout_s, const std::function<std::string(int)>& fn) {
  std::vector<std::string> results(static_cast<size_t>(std::max(n, 0)));
  std::vector<Child> running;
  int next = 0;
  auto finish = [&](Child& c, bool killed) {
    if (killed) {
      ::kill(-c.pid, SIGKILL);  // the child's group: it and the compiler it may be running
      ::kill(c.pid, SIGKILL);   // in case it had not made its group yet
    }
    ::close(c.fd);
    int status = 0;
    ::waitpid(c.pid, &status, 0);
    std::string& r = results[static_cast<size_t>(c.index)];
    if (killed) r = "timeout";
    else if (!c.out.empty()) r = c.out;
    else if (WIFSIGNALED(status)) r = "crash: killed by signal " + std::to_string(WTERMSIG(status));
    else r = "crash: exited with status " + std::to_string(WEXITSTATUS(status)) + " and no answer";
  };
  while (next < n || !running.empty()) {
    while (next < n && static_cast<int>(running.size()) < std::max(jobs, 1)) {
      int fds[2];
      if (::pipe(fds) != 0) throw TesseraError("tune: cannot create a pipe");
      std::cout.flush();
      std::cerr.flush();
      const pid_t parent = ::getpid();
      pid_t pid = ::fork();
      if (pid < 0) throw TesseraError("tune: cannot fork");
      if (pid == 0) {
        // A group of its own, so that a timeout also ends the compiler it started; and it dies
        // with the tuner (a hung kernel must not outlive an interrupted tune).
        ::setpgid(0, 0);
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != parent) std::_Exit(1);
        ::close(fds[0]);
        std::string r;
        try {
          r = fn(next);
        } catch (const std::exception& e) {
          r = "error " + one_line(e.what());
        } catch (...) {
          r = "error (an exception that is not a std::exception)";  // never back into the parent's code
        }
        if (r.empty()) r = "error (no answer)";
        write_all(fds[1], r);
        ::close(fds[1]);
        std::_Exit(0);  // no atexit handlers or static destructors of the parent's state
      }
      ::close(fds[1]);
      running.push_back({pid, fds[0], next, Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                                  std::chrono::duration<double>(timeout_s)),
                         {}});
      ++next;
    }
    std::vector<pollfd> pfds;
    auto now = Clock::now();
    int wait_ms = 1000;
    for (const Child& c : running) {
      pfds.push_back({c.fd, POLLIN, 0});
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(c.deadline - now).count();
      wait_ms = static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(wait_ms, left + 1)));
    }
    ::poll(pfds.data(), pfds.size(), wait_ms);
    now = Clock::now();
    for (size_t i = running.size(); i-- > 0;) {
      Child& c = running[i];
      bool done = false, killed = false;
      if (pfds[i].revents & (POLLIN | POLLHUP | POLLERR)) {
        char buf[4096];
        ssize_t r = ::read(c.fd, buf, sizeof buf);
        if (r > 0) c.out.append(buf, static_cast<size_t>(r));
        else done = true;  // EOF: the child closed its end (or died)
      }
      if (!done && now >= c.deadline) done = killed = true;
      if (done) {
        finish(c, killed);
        running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
      }
    }
  }
  return results;
}

std::unique_ptr<Measurer> make_cpu_measurer(const Problem& p, const MeasureOptions& o) {
  if (!p.kernel) throw TesseraError("tune: no kernel to measure");
  if (o.rounds < 1) throw TesseraError("tune: rounds must be at least 1");
  return std::make_unique<CpuMeasurer>(p, o);
}

std::vector<int64_t> sample_rows(int64_t n, int extra, uint64_t seed) {
  std::set<int64_t> rows;
  if (n > 0) rows = {0, n - 1};
  std::mt19937_64 rng(seed);
  for (int i = 0; i < extra && static_cast<int64_t>(rows.size()) < n; ++i) rows.insert(static_cast<int64_t>(rng() % static_cast<uint64_t>(n)));
  return {rows.begin(), rows.end()};
}

Tensor no_rows() { return Tensor(ScalarKind::F32, {0}); }

Tensor take_rows(const Tensor& t, const std::vector<int64_t>& rows) {
  std::vector<int64_t> shape = t.shape;
  if (shape.empty()) return t;
  const int64_t n = shape[0];
  shape[0] = static_cast<int64_t>(rows.size());
  Tensor out(t.dtype, shape);
  const size_t row_bytes = n > 0 ? t.data.size() / static_cast<size_t>(n) : 0;
  for (size_t i = 0; i < rows.size(); ++i)
    std::memcpy(out.data.data() + i * row_bytes, t.data.data() + static_cast<size_t>(rows[i]) * row_bytes, row_bytes);
  return out;
}

bool is_row_view(const Problem& p, const Kernel& bound, size_t i) {
  std::vector<Value*> views = bound.view_params();
  return !p.row_dim.empty() && i < views.size() && !views[i]->type.shape.empty() &&
         !views[i]->type.shape[0].is_static() && views[i]->type.shape[0].symbol == p.row_dim;
}

std::string check_against_reference(const Problem& p, const Kernel& bound, const std::vector<Tensor>& got) {
  Comparison c;
  if (p.rows.empty()) {
    c = compare_outputs(bound, got, p.want, p.bounds);
  } else {
    // The views without the row dim are inputs (LibraryKernel::row_dim): empty on both sides.
    std::vector<Tensor> sub;
    for (size_t i = 0; i < got.size(); ++i) sub.push_back(is_row_view(p, bound, i) ? take_rows(got[i], p.rows) : no_rows());
    c = compare_outputs(bound, sub, p.want, p.bounds);
  }
  if (c.ok()) return "";
  return one_line(std::to_string(c.mismatches) + "/" + std::to_string(c.elements) + " mismatches" +
                  (p.rows.empty() ? "" : " (on " + std::to_string(p.rows.size()) + " sampled rows of " + p.row_dim + ")") +
                  ", first: " + c.first_mismatch);
}

std::string kernel_ir_hash(const Kernel& k) { return content_hash(print_kernel(k)); }

std::string cpu_device_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, model = "unknown cpu";
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) model = line.substr(line.find_first_not_of(" \t", colon + 1));
      break;
    }
  return model + " x" + std::to_string(cpu_threads());
}

int cpu_threads() {
  if (const char* env = std::getenv("OMP_NUM_THREADS"); env && std::atoi(env) > 0) return std::atoi(env);
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

std::string cpu_compiler_version() {
  const char* cxx = std::getenv("TESSERA_CXX");
  std::string v = cpu::compiler_version(cxx && *cxx ? cxx : "c++");
  return std::string(cpu::kCodegenVersion) + " " + v.substr(0, v.find('\n'));
}

}  // namespace tessera::tune
