// The measurement harness of the cpu backend: parallel compiles, then rounds of timings, each
// candidate in a child process with a timeout (Measure.h).
#include "tune/Measure.h"

#include <poll.h>
#include <sys/prctl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <set>
#include <iostream>
#include <mutex>
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
  MeasureStats stats() const override { return stats_; }

  std::vector<Measurement> measure(const std::vector<Config>& configs) override {
    std::vector<Measurement> out;
    // Compiles in parallel: each child fills the disk cache, which the timing children hit.
    auto t0 = Clock::now();
    Compiled c = bind_and_compile(p_, o_, configs, out, [](const Kernel& b) {
      compile_cpu(b);
      return std::string();
    });
    std::vector<std::unique_ptr<Kernel>> bound = std::move(c.bound);
    stats_.forks += c.forks;
    stats_.compile_s += std::chrono::duration<double>(Clock::now() - t0).count();
    // Rounds, one candidate at a time; the order alternates so that a drift of the machine's
    // speed does not favour the first candidates. (A child's first round checks too: its time
    // counts as timing.)
    measure_rounds(out, o_.rounds, [&](size_t i, bool first, Measurement& m) {
      auto t1 = Clock::now();
      auto res = run_in_children(1, 1, o_.timeout_s, [&](int) { return time_one(*bound[i], first); });
      stats_.time_s += std::chrono::duration<double>(Clock::now() - t1).count();
      ++stats_.timed;
      stats_.checked += first;
      stats_.forks += 1;
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
  MeasureStats stats_;
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
                          std::vector<Measurement>& out, const std::function<std::string(const Kernel&)>& compile,
                          const std::function<std::string(const Kernel&)>& known) {
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
  for (int i = 0; i < n; ++i) {
    if (!out[i].ok()) continue;
    if (known)
      if (std::string a = known(*c.bound[i]); !a.empty()) {
        c.answers[i] = a;
        continue;
      }
    todo.push_back(i);
  }
  c.forks = static_cast<int64_t>(todo.size());
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

bool is_written_view(const Kernel& k, size_t i) {
  std::vector<Value*> views = k.view_params();
  if (i >= views.size()) return false;
  const Value* v = views[i];
  bool written = false;
  std::function<void(const Block&)> walk = [&](const Block& b) {
    for (const auto& op : b.ops) {
      if (written) return;
      switch (op->kind) {
        case OpKind::StoreTile:
        case OpKind::Scatter:
        case OpKind::Atomic:
        case OpKind::AtomicCas: written = !op->operands.empty() && op->operands[0] == v; break;
        case OpKind::Raw: written = std::find(op->operands.begin(), op->operands.end(), v) != op->operands.end(); break;
        default: break;
      }
      for (const auto& r : op->regions) walk(*r);
    }
  };
  if (k.body) walk(*k.body);
  return written;
}

namespace {

// Compared: the views the kernel writes, on the sampled rows (the views without the row dim are
// then inputs: LibraryKernel::row_dim); the others empty on both sides. `rows_cut`: got's
// compared views hold only the sampled rows already.
std::string check_views(const Problem& p, const Kernel& bound, const std::vector<Tensor>& got, bool rows_cut) {
  std::vector<Tensor> g, w;
  ErrorBounds b;
  for (size_t i = 0; i < got.size(); ++i) {
    const bool compared = is_written_view(bound, i) && (p.rows.empty() || is_row_view(p, bound, i));
    g.push_back(!compared ? no_rows() : p.rows.empty() || rows_cut ? got[i] : take_rows(got[i], p.rows));
    w.push_back(compared && i < p.want.size() ? p.want[i] : no_rows());
    b.push_back(compared && i < p.bounds.size() ? p.bounds[i] : std::vector<double>{});
  }
  Comparison c = compare_outputs(bound, g, w, b);
  if (c.ok()) return "";
  return one_line(std::to_string(c.mismatches) + "/" + std::to_string(c.elements) + " mismatches" +
                  (p.rows.empty() ? "" : " (on " + std::to_string(p.rows.size()) + " sampled rows of " + p.row_dim + ")") +
                  ", first: " + c.first_mismatch);
}

}  // namespace

std::string check_against_reference(const Problem& p, const Kernel& bound, const std::vector<Tensor>& got) {
  return check_views(p, bound, got, false);
}

std::string check_rows_against_reference(const Problem& p, const Kernel& bound, const std::vector<Tensor>& got) {
  return check_views(p, bound, got, true);
}

void parallel_for(int64_t n, int threads, const std::function<void(int64_t)>& fn) {
  if (n <= 0) return;
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads = static_cast<int>(std::min<int64_t>(threads, n));
  std::atomic<int64_t> next{0};
  std::exception_ptr error;
  std::mutex mu;
  auto work = [&] {
    for (int64_t i; (i = next.fetch_add(1)) < n;) {
      try {
        fn(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!error) error = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

std::vector<Tensor> random_inputs(const Kernel& k, const Sizes& sizes, uint64_t seed) {
  constexpr int64_t kChunk = int64_t{1} << 20;
  std::vector<Tensor> out;
  std::vector<std::pair<size_t, int64_t>> chunks;  // (view, first element)
  for (const Value* p : k.view_params()) {
    out.emplace_back(p->type.elem, view_shape(k, *p, sizes));
    for (int64_t at = 0; at < out.back().numel(); at += kChunk) chunks.emplace_back(out.size() - 1, at);
  }
  auto mix = [](uint64_t x) {  // splitmix64's finalizer
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  };
  parallel_for(static_cast<int64_t>(chunks.size()), 0, [&](int64_t c) {
    auto [v, at] = chunks[static_cast<size_t>(c)];
    Tensor& t = out[v];
    // splitmix64's stream (a generator per chunk; mt19937_64 took a quarter of the time).
    uint64_t state = mix(seed ^ mix(v * 0x100000001b3ull + static_cast<uint64_t>(at / kChunk)));
    auto rng = [&] { return mix(state += 0x9e3779b97f4a7c15ull); };
    // Uniform in [-1, 1) from 53 random bits; f32 and bf16 (rounded to nearest even) written
    // directly, the other dtypes through Tensor::set's exact rounding (slower: 50 ns a value).
    auto uni = [&] { return static_cast<double>(static_cast<int64_t>(rng() >> 11)) * 0x1.0p-52 - 1.0; };
    const ScalarKind dt = t.dtype;
    uint8_t* data = t.data.data();
    for (int64_t i = at, end = std::min(t.numel(), at + kChunk); i < end; ++i) {
      if (dt == ScalarKind::F32) {
        const float f = static_cast<float>(uni());
        std::memcpy(data + 4 * i, &f, 4);
      } else if (dt == ScalarKind::BF16) {
        uint32_t x = std::bit_cast<uint32_t>(static_cast<float>(uni()));
        const uint16_t h = static_cast<uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
        std::memcpy(data + 2 * i, &h, 2);
      } else if (is_float(dt)) {
        t.set(i, uni());
      } else if (is_bool(dt)) {
        t.set_int(i, static_cast<int64_t>(rng() & 1));
      } else if (is_unsigned_int(dt)) {
        t.set_int(i, static_cast<int64_t>(rng() % 16));
      } else {
        t.set_int(i, static_cast<int64_t>(rng() % 16) - 8);
      }
    }
  });
  for (Tensor& t : out) {
    // Never all zeros (a tensor of more than one chunk never is: 2^20 draws).
    bool all_zero = t.numel() > 0 && t.numel() <= kChunk;
    for (int64_t i = 0; i < t.numel() && all_zero; ++i) all_zero = t.get(i) == 0;
    if (all_zero) t.set_int(0, 1);
  }
  return out;
}

struct Watchdog::State {
  std::mutex mu;
  std::condition_variable cv;
  bool armed = false, stop = false;
  Clock::time_point deadline;
  std::string what;
  std::function<void(const std::string&)> expired;
  std::thread thread;
};

Watchdog::Watchdog(std::function<void(const std::string&)> expired) : s_(std::make_unique<State>()) {
  s_->expired = expired ? std::move(expired) : [](const std::string& what) {
    std::fprintf(stderr, "error: tune: %s ran past --timeout on the GPU; ending the tune (what was measured "
                         "before it is stored)\n", what.c_str());
    std::_Exit(1);
  };
  s_->thread = std::thread([s = s_.get()] {
    std::unique_lock<std::mutex> lock(s->mu);
    while (!s->stop) {
      if (!s->armed) {
        s->cv.wait(lock);
      } else if (s->cv.wait_until(lock, s->deadline) == std::cv_status::timeout && s->armed &&
                 Clock::now() >= s->deadline) {
        s->armed = false;
        std::string what = s->what;
        lock.unlock();
        s->expired(what);
        lock.lock();
      }
    }
  });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(s_->mu);
    s_->stop = true;
  }
  s_->cv.notify_all();
  s_->thread.join();
}

void Watchdog::arm(double timeout_s, std::string what) {
  {
    std::lock_guard<std::mutex> lock(s_->mu);
    s_->armed = true;
    s_->deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
    s_->what = std::move(what);
  }
  s_->cv.notify_all();
}

void Watchdog::disarm() {
  std::lock_guard<std::mutex> lock(s_->mu);
  s_->armed = false;  // the thread wakes at the old deadline, finds it disarmed and waits again
}

std::string kernel_ir_hash(const Kernel& k) { return content_hash(print_kernel(k)); }

std::string kernel_identity_hash(const Kernel& unbound) {
  auto k = unbound.clone();
  for (ConstexprDecl& c : k->constexprs) {
    c.value = 0;
    c.candidates.clear();
  }
  return kernel_ir_hash(*k);
}

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
