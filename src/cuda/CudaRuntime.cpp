// compile_cuda and launching: emit -> (memory cache, disk cache, NVRTC) -> cubin -> module
// loaded into the device at the first launch -> cuLaunchKernel.
//
// The launch follows the emitter's contract in CudaEmitter.h: one CTA per program instance,
// blockDim = info.block_threads, dynamic shared memory = info.dynamic_smem_bytes, and the
// parameters in info.params order (device pointers, then the symbolic view dims as int32, then
// the scalars by value). Every driver call is checked and named in the error.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "cuda/CudaBackend.h"
#include "cuda/CudaEmitter.h"
#include "cuda/Driver.h"
#include "cuda/RuntimeInternal.h"
#include "cuda/DeviceHeaders.h"
#include "runtime/DiskCache.h"
#include "support/Env.h"
#include "support/Float.h"
#include "text/Text.h"

extern char** environ;

namespace tessera {

namespace {

using namespace cuda;

// Default dynamic shared memory a kernel may use without opting in (all architectures).
constexpr int kSmemWithoutOptin = 48 * 1024;

// A compiled cubin and, once launched, its module in the device.
struct Compiled {
  std::vector<char> cubin;
  std::mutex mu;
  CUmodule module = nullptr;
  CUfunction fn = nullptr;
  int max_threads = 0;
  int static_smem = 0;
  int ctas_per_sm = 1;  // resident CTAs per multiprocessor at the launch configuration
};

std::mutex g_mu;
std::unordered_map<std::string, std::shared_ptr<Compiled>> g_memory;

// The memory cache's second index, keyed before emission (emission_key): a kernel compiled
// before in this process gets its emission and cubin without emitting again. Emitting costs
// more than a lookup should: the layout emitter runs the GPU lowering's passes and prints
// (4-74 ms for the row kernels on the H100's host, session 36), the planning emitter 1-3 ms.
struct Emitted {
  CudaEmission em;  // line_op cleared where it pointed into the caller's kernel
  std::string key;  // the cubin's cache key
  std::shared_ptr<Compiled> compiled;
};
std::unordered_map<std::string, Emitted> g_emitted;

// What an emission depends on: the kernel as printed, its ops' locations (the notes quote
// them), every field of the target, and the TESSERA_ switches of the environment (the
// emitters' A/B switches read them where they decide; all of them are taken, so a new switch
// needs no entry here).
std::string emission_key(const Kernel& k, const CudaTarget& t) {
  std::string in = std::string(kCudaCodegenVersion) + "\n" + t.str() + " tma=" + std::to_string(t.tma) +
                   " split_k=" + std::to_string(t.split_k) + " stream_k=" + std::to_string(t.stream_k) +
                   " emitter=" + std::to_string(static_cast<int>(t.emitter)) + "\n";
  for (const std::string& d : t.disabled_passes) in += "disabled " + d + "\n";
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e)
    if (std::strncmp(*e, "TESSERA_", 8) == 0) env.emplace_back(*e);
  std::sort(env.begin(), env.end());
  for (const auto& e : env) in += e + "\n";
  in += print_kernel(k);
  auto locs = [&](const Loc& l) {
    in += l.file ? *l.file : std::string();
    in += ":" + std::to_string(l.line) + ":" + std::to_string(l.col) + "\n";
  };
  locs(k.loc);
  walk(const_cast<Kernel&>(k), [&](Op& op) { locs(op.loc); });
  return "emitted-" + content_hash(in);
}

std::string kname(const Kernel& k) { return "@" + k.name; }

// Serialize one scalar argument as the emitter's ABI wants it into an 8-byte slot.
void put_scalar(uint64_t& slot, ScalarKind t, const KernelArg& a) {
  slot = 0;
  bool is_i = std::holds_alternative<int64_t>(a.scalar);
  int64_t iv = is_i ? std::get<int64_t>(a.scalar) : static_cast<int64_t>(std::get<double>(a.scalar));
  double dv = is_i ? static_cast<double>(std::get<int64_t>(a.scalar)) : std::get<double>(a.scalar);
  auto put = [&](auto v) { std::memcpy(&slot, &v, sizeof v); };
  switch (t) {
    case ScalarKind::I1: put(static_cast<uint8_t>(iv != 0 || (!is_i && dv != 0))); break;
    case ScalarKind::U8: put(static_cast<uint8_t>(wrap_int(t, iv))); break;
    case ScalarKind::I8: put(static_cast<int8_t>(wrap_int(t, iv))); break;
    case ScalarKind::I16: put(static_cast<int16_t>(wrap_int(t, iv))); break;
    case ScalarKind::U16: put(static_cast<uint16_t>(wrap_int(t, iv))); break;
    case ScalarKind::I32: put(static_cast<int32_t>(wrap_int(t, iv))); break;
    case ScalarKind::U32: put(static_cast<uint32_t>(wrap_int(t, iv))); break;
    case ScalarKind::I64: put(static_cast<int64_t>(iv)); break;
    case ScalarKind::U64: put(static_cast<uint64_t>(iv)); break;
    case ScalarKind::F64: put(dv); break;
    default: put(static_cast<float>(round_to_float(t, dv))); break;  // f32 and the narrow floats
  }
}

// The view dims (rows, cols) of 2-D view parameter j for these sizes.
std::vector<int64_t> view_dims(const Kernel& k, int j, const Sizes& sizes) {
  const Shape& sh = k.params.at(static_cast<size_t>(j))->type.shape;
  std::vector<int64_t> d;
  for (const Dim& x : sh) d.push_back(x.is_static() ? x.value : sizes.at(x.symbol));
  return d;
}

// The driver's data type for a tensor map of TensorMap parameter p (CudaEmitter.h) at `base`
// with `dims`, or -1 when TMA cannot describe the operand (base not 16-byte aligned, row stride
// not a multiple of 16 bytes, an element type TMA does not copy, an empty matrix). The driver
// may still refuse what passes. Other elements than bf16 / f16 are copied as unsigned integers
// of their size (the copies convert nothing; zero fill is all bits zero, +0.0 for floats).
int tensor_map_type(const CudaParam& p, uint64_t base, const std::vector<int64_t>& dims) {
  int eb = scalar_bytes(p.elem);
  int type = p.elem == ScalarKind::BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
             : p.elem == ScalarKind::F16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
             : eb == 1                   ? CU_TENSOR_MAP_DATA_TYPE_UINT8
             : eb == 2                   ? CU_TENSOR_MAP_DATA_TYPE_UINT16
             : eb == 4                   ? CU_TENSOR_MAP_DATA_TYPE_UINT32
             : eb == 8                   ? CU_TENSOR_MAP_DATA_TYPE_UINT64
                                         : -1;
  if (type < 0 || base % 16 != 0 || static_cast<int>(dims.size()) < p.rank || p.rank < 2 || p.rank > 5) return -1;
  if ((dims[p.rank - 1] * eb) % 16 != 0) return -1;
  for (int i = 0; i < p.rank; ++i)
    if (dims[i] < 1) return -1;
  return type;
}

// Encodes the tensor map of a TensorMap parameter. False when TMA cannot describe the operand
// (tensor_map_type), there is no cuTensorMapEncodeTiled in the driver, or the driver refuses it:
// the caller then uses the kernel's compilation without TMA.
bool encode_tensor_map(const Driver& d, const CudaParam& p, uint64_t base, const std::vector<int64_t>& dims,
                       CUtensorMap& out) {
  if (!d.cuTensorMapEncodeTiled) return false;
  int type = tensor_map_type(p, base, dims);
  if (type < 0) return false;
  const int r = p.rank;
  const int64_t eb = scalar_bytes(p.elem);
  // Innermost first; the view is dense and row-major.
  uint64_t gdim[5], gstride[4];
  uint32_t box[5], estride[5];
  int64_t stride = eb;
  for (int i = 0; i < r; ++i) {
    gdim[i] = static_cast<uint64_t>(dims[r - 1 - i]);
    box[i] = static_cast<uint32_t>(p.box[i]);
    estride[i] = 1;
    if (i > 0) gstride[i - 1] = static_cast<uint64_t>(stride);
    stride *= dims[r - 1 - i];
  }
  return d.cuTensorMapEncodeTiled(&out, type, static_cast<unsigned>(r), reinterpret_cast<void*>(base), gdim, gstride,
                                  box, estride,
                                  CU_TENSOR_MAP_INTERLEAVE_NONE,
                                  p.swizzle == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
                                  : p.swizzle == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                                                    : CU_TENSOR_MAP_SWIZZLE_NONE,
                                  CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

class CudaKernelImpl : public CudaKernel {
 public:
  CudaKernelImpl(std::shared_ptr<Compiled> c, const Kernel& k, CudaEmission em, CudaOptions opts)
      : c_(std::move(c)), k_(k.clone()), em_(std::move(em)), opts_(std::move(opts)) {}

  const std::vector<char>& cubin() const override { return c_->cubin; }
  const std::string& source() const override { return em_.source; }
  const CudaKernelInfo& info() const { return em_.info; }

  void launch(const std::vector<KernelArg>& args, const std::vector<uint64_t>& ptrs, void* stream) override {
    const Kernel& k = *k_;
    std::vector<int64_t> key = arg_key(args);
    {
      std::lock_guard<std::mutex> lock(prepared_mu_);
      for (auto& p : prepared_)
        if (p->stream == stream && p->ptrs == ptrs && p->args == key) {
          relaunch(*p);
          return;
        }
    }
    Sizes sizes = bind_dims(k, args);
    if (ptrs.size() < k.params.size())
      throw TesseraError(k.loc, "kernel " + kname(k) + ": " + std::to_string(k.params.size()) +
                                    " device pointers needed, got " + std::to_string(ptrs.size()));
    std::array<int64_t, 3> grid = cuda_grid_size(k, args);
    const DeviceInfo& dev = device();
    for (int i = 0; i < 3; ++i) {
      if (grid[i] < 0 || grid[i] > dev.max_grid[i])
        throw TesseraError(k.loc, "kernel " + kname(k) + ": grid size " + std::to_string(grid[i]) + " in " +
                                      "xyz"[i] + " is outside [0, " + std::to_string(dev.max_grid[i]) +
                                      "] on " + dev.name);
    }
    if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0) return;  // nothing to run
    // Which compilation runs is decided before any tensor map is encoded: only the one launched
    // encodes its maps (tens of microseconds each time the prepared launches miss).
    const int splits = split_ways(args, ptrs, sizes, grid, dev);
    CudaKernelImpl& run = splits > 1 ? *split_variant() : *this;
    run.launch_splits(args, ptrs, stream, sizes, grid, splits, std::move(key), *this);
  }

 private:
  // How many CTAs share each program's K loop: more than 1 only for a split-K-capable
  // compilation whose programs are too few to fill the device and whose K loop is long enough
  // to pay for the fixup (split_k_factor, cuda_split_loop_k), or as
  // opts_.split_k or the kernel's split_k knob (kSplitKKnob) asks, and only when TMA can
  // describe the operands (else the compilation without TMA runs, unsplit, and the split one
  // need not be compiled).
  int split_ways(const std::vector<KernelArg>& args, const std::vector<uint64_t>& ptrs, const Sizes& sizes,
                 const std::array<int64_t, 3>& grid, const DeviceInfo& dev) {
    const CudaKernelInfo& info = em_.info;
    int want = opts_.split_k;
    if (const ConstexprDecl* d = k_->find_constexpr(kSplitKKnob); d && want == 0)
      want = static_cast<int>(std::clamp<int64_t>(d->value, 0, kMaxSplitK));
    if (!info.split_k_capable || info.split_k || want == 1) return 1;
    for (const CudaParam& p : info.params)
      if (p.kind == CudaParam::Kind::TensorMap &&
          tensor_map_type(p, ptrs.at(p.param_index), view_dims(*k_, p.param_index, sizes)) < 0)
        return 1;
    if (want >= 2) return !split_variant() ? 1 : std::min(want, kMaxSplitK);
    const int64_t programs = grid[0] * grid[1] * grid[2];
    ensure_loaded(dev);
    const int64_t capacity = int64_t(dev.num_sms) * c_->ctas_per_sm;
    // The loop's length is worked out only where the programs leave room to split.
    int s = split_k_factor(programs, capacity, 3 * programs <= capacity ? cuda_split_loop_k(*k_, sizes, args) : -1);
    if (s < 2) return 1;
    // The split compilation's deeper ring may hold fewer CTAs per SM: no more splits than its
    // CTAs fit at once.
    CudaKernelImpl* sv = split_variant();
    if (!sv) return 1;
    sv->ensure_loaded(dev);
    const int64_t fit = int64_t(dev.num_sms) * sv->c_->ctas_per_sm / programs;
    return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(s, fit)));
  }

  // The launch itself, for checked sizes and grid; `splits` CTAs per program (gridDim.z) when
  // this is a split-K compilation.
  // `root` (the kernel the caller launched) keeps the prepared launch under `key`, counts the
  // launch and provides the compilation without TMA.
  void launch_splits(const std::vector<KernelArg>& args, const std::vector<uint64_t>& ptrs, void* stream,
                     const Sizes& sizes, const std::array<int64_t, 3>& grid, int splits, std::vector<int64_t> key,
                     CudaKernelImpl& root) {
    const Kernel& k = *k_;
    const DeviceInfo& dev = device();
    ensure_loaded(dev);
    const CudaKernelInfo& info = em_.info;
    // A persistent kernel loops over the programs itself: one CTA per multiprocessor (a
    // program-prefetch kernel: as many as fit at once).
    std::array<int64_t, 3> launch_grid = grid;
    if (info.persistent) {
      const int64_t programs = grid[0] * grid[1] * grid[2];
      if (programs > int64_t(INT32_MAX))
        throw TesseraError(k.loc, "kernel " + kname(k) + ": " + std::to_string(programs) +
                                      " programs are more than a persistent kernel can count (2^31 - 1)");
      const int64_t ctas = int64_t(dev.num_sms) * (info.persistent_fill ? c_->ctas_per_sm : 1);
      launch_grid = {info.stream_k ? cuda::stream_k_ctas(programs, ctas) : std::min<int64_t>(programs, ctas), 1, 1};
      if (const int64_t c = info.persistent_cluster; c > 1) {
        // Clusters of c CTAs each take c programs of axis 0 (the last group of a row partly
        // past the grid): whole clusters, no more than the multiprocessors hold at once.
        if (ctas < c)
          throw TesseraError(k.loc, "kernel " + kname(k) + ": cluster_m = " + std::to_string(c) + " needs " +
                                        std::to_string(c) + " multiprocessors at once; " + dev.name + " has " +
                                        std::to_string(dev.num_sms) + " (compile without the knob)");
        const int64_t groups = (grid[0] + c - 1) / c * grid[1] * grid[2];
        launch_grid[0] = std::min(groups, ctas / c) * c;
      }
    }
    std::vector<uint64_t> slots(info.params.size());
    std::vector<CUtensorMap> maps(info.params.size());
    for (size_t i = 0; i < info.params.size(); ++i) {
      const CudaParam& p = info.params[i];
      switch (p.kind) {
        case CudaParam::Kind::TensorMap:
          if (!encode_tensor_map(*driver(), p, ptrs.at(p.param_index), view_dims(k, p.param_index, sizes), maps[i])) {
            ++root.launches_without_tma;
            root.without_tma().launch(args, ptrs, stream);
            return;
          }
          continue;
        case CudaParam::Kind::Pointer: slots[i] = ptrs.at(p.param_index); break;
        case CudaParam::Kind::Dim: {
          auto it = sizes.find(p.name);
          if (it == sizes.end())
            throw TesseraError(k.loc, "kernel " + kname(k) + ": no argument binds dim '" + p.name + "'");
          int32_t v = static_cast<int32_t>(it->second);  // bind_dims checked it is below 2^31
          std::memcpy(&slots[i], &v, sizeof v);
          break;
        }
        case CudaParam::Kind::Scalar: put_scalar(slots[i], p.elem, args.at(p.param_index)); break;
        case CudaParam::Kind::GridSize: {
          int32_t v = static_cast<int32_t>(grid.at(static_cast<size_t>(p.param_index)));
          std::memcpy(&slots[i], &v, sizeof v);
          break;
        }
        case CudaParam::Kind::SplitWorkspace:
          // Split-K: a slot per CTA of every program; stream-K: a slot and a flag per CTA.
          slots[i] = info.stream_k ? split_workspace(stream, launch_grid[0], 1)
                                   : split_workspace(stream, grid[0] * grid[1], splits);
          break;
      }
    }
    if (info.split_k) launch_grid[2] = splits;
    if (info.cluster > 1) {
      launch_grid[0] *= info.cluster;
      if (launch_grid[0] > dev.max_grid[0])
        throw TesseraError(k.loc, "kernel " + kname(k) + ": " + std::to_string(grid[0]) + " programs in x on clusters of " +
                                      std::to_string(info.cluster) + " CTAs exceed the grid limit " +
                                      std::to_string(dev.max_grid[0]) + " on " + dev.name);
    }
    auto p = std::make_unique<Prepared>();
    p->stream = stream;
    p->ptrs = ptrs;
    p->args = std::move(key);
    p->owner = this;
    p->splits = splits;
    // A split compilation that can add its partial sums within a cluster runs each program's
    // CTAs as one (CudaKernelInfo::split_cluster) where that pays (split_in_clusters), unless
    // CudaOptions::split_k_cluster is false or TESSERA_CUDA_SPLIT_K_WORKSPACE=1 (an A/B switch).
    static const bool workspace_only = env_flag("TESSERA_CUDA_SPLIT_K_WORKSPACE");
    if (info.split_k && info.split_cluster && driver()->cuLaunchKernelEx && root.opts_.split_k_cluster && !workspace_only &&
        split_in_clusters(grid[0] * grid[1] * grid[2] * splits, splits, dev.num_sms))
      p->cluster_z = static_cast<unsigned>(splits);
    for (int i = 0; i < 3; ++i) p->grid[i] = static_cast<unsigned>(launch_grid[i]);
    p->slots = std::move(slots);
    p->maps = std::move(maps);
    p->params.resize(info.params.size());
    for (size_t i = 0; i < info.params.size(); ++i)
      p->params[i] = info.params[i].kind == CudaParam::Kind::TensorMap ? static_cast<void*>(&p->maps[i])
                                                                        : static_cast<void*>(&p->slots[i]);
    std::lock_guard<std::mutex> lock(root.prepared_mu_);
    root.relaunch(*p);
    if (root.prepared_.size() >= kPreparedKept) root.prepared_.erase(root.prepared_.begin());
    root.prepared_.push_back(std::move(p));
  }

  // Launches repeated with the same arguments (device pointers, shapes, scalars, stream) reuse
  // their prepared parameters: no dims to bind, grid to evaluate or tensor maps to encode (tens
  // of microseconds of host time, more than a small matmul's GPU time). The kernel keeps the
  // last few argument sets (a benchmark's rotating buffers, a model's layers).
  struct Prepared {
    void* stream = nullptr;
    std::vector<uint64_t> ptrs;
    std::vector<int64_t> args;        // arg_key
    CudaKernelImpl* owner = nullptr;  // the compilation launched: this kernel or its split-K variant
    int splits = 1;
    unsigned cluster_z = 1;  // > 1: launched with clusters of 1 x 1 x cluster_z CTAs
    unsigned grid[3] = {1, 1, 1};
    std::vector<uint64_t> slots;
    std::vector<CUtensorMap> maps;
    std::vector<void*> params;  // into slots and maps
  };
  static constexpr size_t kPreparedKept = 8;

  // What a prepared launch depends on besides pointers and stream: per tensor its dtype, shape
  // and byte size; per scalar its kind and bits.
  static std::vector<int64_t> arg_key(const std::vector<KernelArg>& args) {
    std::vector<int64_t> key;
    for (const KernelArg& a : args) {
      if (a.tensor) {
        key.push_back(1000 + static_cast<int64_t>(a.tensor->dtype));
        key.push_back(static_cast<int64_t>(a.tensor->shape.size()));
        key.insert(key.end(), a.tensor->shape.begin(), a.tensor->shape.end());
        key.push_back(static_cast<int64_t>(a.tensor->data.size()));
      } else if (std::holds_alternative<int64_t>(a.scalar)) {
        key.push_back(1);
        key.push_back(std::get<int64_t>(a.scalar));
      } else {
        int64_t bits = 0;
        double v = std::get<double>(a.scalar);
        std::memcpy(&bits, &v, sizeof bits);
        key.push_back(2);
        key.push_back(bits);
      }
    }
    return key;
  }

  // Launches a prepared launch (prepared_mu_ held) and counts it.
  void relaunch(Prepared& p) {
    const CudaKernelImpl& o = *p.owner;
    const CudaKernelInfo& info = o.em_.info;
    last_splits = p.splits;
    if (p.splits > 1) ++launches_split_k;
    // Split-K counts arrivals per program (gridDim.x x gridDim.y), stream-K raises a flag per CTA.
    for (size_t i = 0; i < info.params.size(); ++i)
      if (info.params[i].kind == CudaParam::Kind::SplitWorkspace)
        p.owner->zero_counters(p.slots[i],
                               CudaKernelInfo::split_counter_bytes(info.stream_k ? int64_t(p.grid[0])
                                                                                 : int64_t(p.grid[0]) * p.grid[1]),
                               p.stream);
    CUresult r = CUDA_SUCCESS;
    if (p.cluster_z > 1 && clusters_refused_) p.cluster_z = 1;
    if (p.cluster_z > 1) {
      CUlaunchAttribute cl;
      cl.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
      cl.value.clusterDim = {1, 1, p.cluster_z};
      CUlaunchConfig cfg;
      cfg.gridDimX = p.grid[0], cfg.gridDimY = p.grid[1], cfg.gridDimZ = p.grid[2];
      cfg.blockDimX = static_cast<unsigned>(info.block_threads);
      cfg.sharedMemBytes = static_cast<unsigned>(info.dynamic_smem_bytes);
      cfg.hStream = static_cast<CUstream>(p.stream);
      cfg.attrs = &cl;
      cfg.numAttrs = 1;
      r = driver()->cuLaunchKernelEx(&cfg, o.c_->fn, p.params.data(), nullptr);
      if (r == CUDA_SUCCESS) {
        ++launches_split_cluster;
        return;
      }
    }
    const CUresult refused = r;
    r = driver()->cuLaunchKernel(o.c_->fn, p.grid[0], p.grid[1], p.grid[2], static_cast<unsigned>(info.block_threads), 1, 1,
                                 static_cast<unsigned>(info.dynamic_smem_bytes), static_cast<CUstream>(p.stream),
                                 p.params.data(), nullptr);
    // Clusters the driver would not place where the launch without them runs (the kernel then
    // takes the workspace's path): this launch and every later one of this kernel run without
    // clusters, and the first refusal's reason is kept. Other errors throw below.
    if (refused != CUDA_SUCCESS && r == CUDA_SUCCESS) {
      p.cluster_z = 1, clusters_refused_ = true, ++cluster_launches_refused;
      if (cluster_refusal.empty()) cluster_refusal = error_text(refused, "cuLaunchKernelEx");
    }
    if (r != CUDA_SUCCESS)
      throw TesseraError(k_->loc, "cuda: " + error_text(r, "cuLaunchKernel") + " for kernel " + kname(*k_) + " (grid " +
                                      std::to_string(p.grid[0]) + "x" + std::to_string(p.grid[1]) + "x" +
                                      std::to_string(p.grid[2]) + ", block " + std::to_string(info.block_threads) +
                                      ", dynamic shared memory " + std::to_string(info.dynamic_smem_bytes) + " bytes)");
  }

 public:
  void run_host(std::vector<KernelArg>& args) override {
    const Kernel& k = *k_;
    bind_dims(k, args);
    device();
    // One device buffer per distinct host tensor, so aliased arguments stay aliased.
    std::map<Tensor*, DeviceBuffer> bufs;
    std::vector<uint64_t> ptrs(k.params.size(), 0);
    for (size_t j = 0; j < k.params.size(); ++j) {
      Tensor* t = args[j].tensor;
      if (!t || !(k.params[j]->type.is_view() || k.params[j]->type.is_ptr())) continue;
      size_t need = static_cast<size_t>(t->numel()) * scalar_bytes(t->dtype);
      if (t->data.size() < need)
        throw TesseraError(k.loc, "tensor for %" + k.params[j]->name + " holds " + std::to_string(t->data.size()) +
                                      " bytes, its shape needs " + std::to_string(need));
      auto it = bufs.find(t);
      if (it == bufs.end()) {
        it = bufs.emplace(t, DeviceBuffer(t->data.size())).first;
        it->second.upload(t->data.data(), t->data.size());
      }
      ptrs[j] = it->second.get();
    }
    launch(args, ptrs, nullptr);
    CUresult r = driver()->cuCtxSynchronize();
    if (r != CUDA_SUCCESS)
      throw TesseraError(k.loc, "cuda: " + error_text(r, "cuCtxSynchronize") + " after running kernel " + kname(k));
    for (auto& [t, b] : bufs) b.download(t->data.data(), t->data.size());
  }

 private:
  // Load the module at the first launch; check the launch limits once against the device.
  void ensure_loaded(const DeviceInfo& dev) {
    Compiled& c = *c_;
    std::lock_guard<std::mutex> lock(c.mu);
    if (c.fn) return;
    const Kernel& k = *k_;
    const Driver& d = *driver();
    CUmodule mod = nullptr;
    CUresult r = d.cuModuleLoadData(&mod, c.cubin.data());
    if (r != CUDA_SUCCESS)
      throw TesseraError(k.loc, "cuda: " + error_text(r, "cuModuleLoadData") + " for kernel " + kname(k) +
                                    " compiled for " + target.str() + " on " + dev.name + " (sm_" +
                                    std::to_string(dev.sm) + ")");
    CUfunction fn = nullptr;
    r = d.cuModuleGetFunction(&fn, mod, em_.info.symbol.c_str());
    if (r != CUDA_SUCCESS) {
      d.cuModuleUnload(mod);
      throw TesseraError(k.loc, "cuda: " + error_text(r, "cuModuleGetFunction") + " for '" + em_.info.symbol + "'");
    }
    int max_threads = 0, static_smem = 0;
    check(d.cuFuncGetAttribute(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fn), "cuFuncGetAttribute");
    check(d.cuFuncGetAttribute(&static_smem, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn), "cuFuncGetAttribute");
    int dyn = em_.info.dynamic_smem_bytes;
    auto fail = [&](const std::string& msg) {
      d.cuModuleUnload(mod);
      throw TesseraError(k.loc, "kernel " + kname(k) + " " + msg);
    };
    if (em_.info.block_threads > max_threads)
      fail("needs " + std::to_string(em_.info.block_threads) + " threads per block, but its register use allows " +
           std::to_string(max_threads) + " on " + dev.name + "; use fewer warps (num_warps) or smaller tiles");
    if (static_cast<int64_t>(static_smem) + dyn > dev.smem_per_block_optin)
      fail("needs " + std::to_string(static_smem + dyn) + " bytes of shared memory per block (" +
           std::to_string(static_smem) + " static + " + std::to_string(dyn) + " dynamic), but " + dev.name +
           " allows at most " + std::to_string(dev.smem_per_block_optin) + "; use smaller tiles or fewer stages");
    // The default dynamic limit is 48 KiB minus the static part; beyond it the kernel must opt in.
    if (static_cast<int64_t>(static_smem) + dyn > kSmemWithoutOptin) {
      r = d.cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, dyn);
      if (r != CUDA_SUCCESS) fail("cannot get " + std::to_string(dyn) + " bytes of dynamic shared memory: " +
                                  error_text(r, "cuFuncSetAttribute"));
    }
    int resident = 1;
    if (d.cuOccupancyMaxActiveBlocksPerMultiprocessor(&resident, fn, em_.info.block_threads, static_cast<size_t>(dyn)) !=
            CUDA_SUCCESS ||
        resident < 1)
      resident = 1;
    c.ctas_per_sm = resident;
    c.module = mod;
    c.max_threads = max_threads;
    c.static_smem = static_smem;
    c.fn = fn;
  }

  // The same kernel compiled without TMA (the mma.sync path), for operands a tensor map cannot
  // describe; compiled at its first use.
  CudaKernel& without_tma() {
    std::lock_guard<std::mutex> lock(fallback_mu_);
    if (!fallback_) {
      CudaOptions o = opts_;
      o.target = target;
      o.target.tma = false;
      o.target_from_device = false;
      fallback_ = compile_cuda(*k_, o);
    }
    return *fallback_;
  }

  // The same kernel compiled as its split-K variant (CudaTarget::split_k); compiled at its first
  // use. Null where that compilation did not split the loop after all (the layout emitter
  // printed it without wgmma: its deeper ring beside the kernel's other shared tiles did not
  // fit): the kernel then runs unsplit.
  CudaKernelImpl* split_variant() {
    std::lock_guard<std::mutex> lock(fallback_mu_);
    if (!split_) {
      CudaOptions o = opts_;
      o.target = target;
      o.target.split_k = true;
      o.target_from_device = false;
      split_ = std::static_pointer_cast<CudaKernelImpl>(compile_cuda(*k_, o));
    }
    return split_->em_.info.split_k ? split_.get() : nullptr;
  }

  // The split workspace for launches on `stream` (one per stream: launches on one stream run in
  // order, so they can share it; launches on two streams may run at once), grown as needed with
  // its counters zeroed.
  uint64_t split_workspace(void* stream, int64_t programs, int64_t splits) {
    size_t need = static_cast<size_t>(em_.info.split_workspace_bytes(programs, splits));
    std::lock_guard<std::mutex> lock(workspace_mu_);
    DeviceBuffer& b = workspaces_[stream];
    if (b.bytes() < need) {
      // Prepared launches of other argument sets may still name the old buffer: keep it.
      if (b.get()) retired_.push_back(std::move(b));
      b = DeviceBuffer(need);
      // Nothing of it is zero yet: the launch's zero_counters clears its counters on its own
      // stream (a memset on the legacy stream would not be ordered before a launch on a
      // non-blocking one). The slots need no clearing: every slot is written before it is read.
      zeroed_[b.get()] = 0;
    }
    return b.get();
  }

  // Before a launch that uses workspace `ws` with `counters` bytes of counters or flags at its
  // start (CudaKernelInfo::split_counter_bytes): the kernel needs them zero, and leaves them
  // zero, but the slots after them are where an earlier launch with fewer counters (fewer
  // programs, or a stream-K launch on fewer CTAs) left partial sums. Zero what the earlier
  // launches may have written in stream order, on the launch's stream.
  void zero_counters(uint64_t ws, int64_t counters, void* stream) {
    std::lock_guard<std::mutex> lock(workspace_mu_);
    int64_t& zero = zeroed_[ws];  // bytes from ws known zero once the launches before finish
    if (counters > zero)
      check(driver()->cuMemsetD32Async(ws + static_cast<uint64_t>(zero), 0u, static_cast<size_t>((counters - zero) / 4),
                                       static_cast<CUstream>(stream)),
            "cuMemsetD32Async");
    zero = counters;
  }

  std::shared_ptr<Compiled> c_;
  std::unique_ptr<Kernel> k_;
  CudaEmission em_;
  CudaOptions opts_;
  std::mutex fallback_mu_;
  std::shared_ptr<CudaKernel> fallback_;
  std::shared_ptr<CudaKernelImpl> split_;
  // Guards workspaces_, zeroed_ and retired_: its own lock, not fallback_mu_, which is held
  // through a fallback's NVRTC compile that every launch would otherwise wait for.
  std::mutex workspace_mu_;
  std::map<void*, DeviceBuffer> workspaces_;
  std::map<uint64_t, int64_t> zeroed_;  // per workspace: see zero_counters (workspace_mu_)
  std::vector<DeviceBuffer> retired_;
  std::mutex prepared_mu_;
  std::vector<std::unique_ptr<Prepared>> prepared_;
  bool clusters_refused_ = false;  // (prepared_mu_) the driver refused a split's cluster launch
};

}  // namespace

int cuda::split_k_factor(int64_t programs, int64_t capacity, int64_t loop_k) {
  if (programs < 1 || capacity < 3 * programs) return 1;
  int64_t s = std::min<int64_t>(kAutoSplitK, capacity / programs);
  if (loop_k >= 0) s = std::min(s, loop_k / kMinSplitKSlice);
  return static_cast<int>(std::max<int64_t>(s, 1));
}

bool cuda::split_in_clusters(int64_t ctas, int splits, int64_t sms) {
  return splits >= 2 && splits <= kMaxSplitKCluster && double(ctas) <= kSplitClusterMaxShare * double(sms);
}

int64_t cuda::stream_k_tiles(int64_t programs, int64_t ctas) {
  if (ctas < 1 || programs < 1) return 0;
  const int64_t rem = programs % ctas;
  if (rem == 0) return 0;
  return 2 * rem >= ctas || programs < ctas ? rem : rem + ctas;
}

int64_t cuda::stream_k_ctas(int64_t programs, int64_t ctas) {
  return std::max<int64_t>(1, std::min<int64_t>(ctas, kStreamKMaxParts * programs));
}

CudaTarget cuda_target_for(const CudaOptions& o) {
  CudaTarget t = o.target;
  if (o.target_from_device && cuda_device_available()) {
    const DeviceInfo& dev = device();
    // The arch-specific variant unlocks wgmma/setmaxnreg on Hopper; it only runs on that exact
    // architecture, which is the device we are on.
    t.sm = dev.sm;
    t.arch_specific = dev.sm == 90;
    t.split_k = false;  // (the runtime asks for its split-K compilation itself)
  }
  // TESSERA_CUDA_FROM_LAYOUTS (1 or 0) reaches every compilation that asks for the default,
  // whatever made its options (one that names an emitter keeps it: the tests of each).
  if (const auto e = CudaTarget::emitter_from_environment(); e && t.emitter == CudaTarget::Emitter::Auto) t.emitter = *e;
  return t;
}

std::string cuda_cache_dir(const CudaOptions& o) { return default_cache_dir(o.cache_dir); }

void clear_cuda_memory_cache() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_memory.clear();
  g_emitted.clear();
}

std::shared_ptr<CudaKernel> compile_cuda(const Kernel& k, const CudaOptions& opts) {
  CudaTarget target = cuda_target_for(opts);
  std::string why;
  if (!nvrtc_available(&why)) throw TesseraError(k.loc, "cuda: " + why);
  auto make = [&](std::shared_ptr<Compiled> c, CudaEmission em) {
    const int cluster = em.info.cluster;
    auto kk = std::make_shared<CudaKernelImpl>(std::move(c), k, std::move(em), opts);
    kk->target = target;
    kk->cluster = cluster;
    kk->block_threads = kk->info().block_threads;
    kk->dynamic_smem_bytes = kk->info().dynamic_smem_bytes;
    kk->split_k_capable = kk->info().split_k_capable && !kk->info().split_k;
    kk->symbol = kk->info().symbol;
    return kk;
  };
  // TESSERA_CUDA_DUMP_DIR: every kernel compiled (or found in a cache) is also written there as
  // <symbol>-<key>.cu, the source a sanitizer's line numbers (TESSERA_NVRTC_LINEINFO=1) refer to,
  // including the compilations the runtime makes on its own (without TMA, split-K).
  auto dump = [](const CudaEmission& em, const std::string& key) {
    if (const char* d = std::getenv("TESSERA_CUDA_DUMP_DIR"); d && *d) {
      std::error_code ec;
      std::filesystem::create_directories(d, ec);
      std::ofstream(std::filesystem::path(d) / (em.info.symbol + "-" + key + ".cu"), std::ios::binary) << em.source;
    }
  };
  // (emission_key hashes every TESSERA_* variable: a compilation made with an override folder,
  // below, is not handed to a call made without one.)
  const std::string emitted_key = emission_key(k, target);
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (auto it = g_emitted.find(emitted_key); it != g_emitted.end()) {
      dump(it->second.em, it->second.key);
      auto kk = make(it->second.compiled, it->second.em);
      kk->from_cache = kk->from_memory_cache = true;
      return kk;
    }
  }
  CudaEmission em = emit_cuda_with_info(k, target);
  // Everything the cubin depends on: codegen, compiler, options, headers, source.
  std::string keyin = std::string(kCudaCodegenVersion) + "\n" + nvrtc_version_string() + "\n" + target.str() +
                      (target.tma ? "" : " no-tma") +
                      (target.split_k ? " split-k" : "") + "\n";
  for (const auto& o : nvrtc_options(target)) keyin += o + "\n";
  for (size_t i = 0; i < kNumDeviceHeaders; ++i)
    keyin += std::string(kDeviceHeaders[i].name) + "\n" + kDeviceHeaders[i].text + "\n";
  std::string key = "cuda-" + content_hash(keyin + em.source);
  dump(em, key);
  // TESSERA_CUDA_OVERRIDE_DIR: a developer's experiment. Where the folder holds
  // <symbol>-<key>.cu (the name TESSERA_CUDA_DUMP_DIR gives this compilation's emitted source),
  // its text is compiled in place of the emitted source, and a note on stderr says so: a change
  // to the generated code tried on the GPU before the compiler is taught to make it (Triton's
  // TRITON_KERNEL_OVERRIDE). The key names one emitted source, so one file never stands in for
  // another dtype, configuration or the runtime's own split-K or no-TMA compilations. The launch
  // shape, parameters and shared-memory size stay the emitter's: the file must keep them.
  if (const char* d = std::getenv("TESSERA_CUDA_OVERRIDE_DIR"); d && *d) {
    const std::filesystem::path f = std::filesystem::path(d) / (em.info.symbol + "-" + key + ".cu");
    if (std::ifstream in(f, std::ios::binary); in) {
      em.source.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      em.line_op.clear();  // (its lines are not the emitted source's)
      key = "cuda-" + content_hash(keyin + em.source);
      std::fprintf(stderr, "note: TESSERA_CUDA_OVERRIDE_DIR: compiling %s in place of the emitted source\n", f.c_str());
    }
  }

  // Remembered under the emission key too; line_op may point into the caller's kernel, which
  // does not outlive this call (a cubin found there is never compiled again, so none is needed).
  auto remember = [&](const std::shared_ptr<Compiled>& c) {
    Emitted e{em, key, c};
    if (!e.em.lowered) e.em.line_op.clear();
    g_emitted.emplace(emitted_key, std::move(e));
  };
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = g_memory.find(key);
    if (it != g_memory.end()) {
      remember(it->second);
      auto kk = make(it->second, std::move(em));
      kk->from_cache = kk->from_memory_cache = true;
      return kk;
    }
  }
  auto c = std::make_shared<Compiled>();
  std::optional<DiskCache> disk;
  if (opts.disk_cache) {
    disk.emplace(cuda_cache_dir(opts), "tessera-cuda-cache", ".cubin");
    if (auto hit = disk->lookup(key)) c->cubin.assign(hit->begin(), hit->end());
  }
  bool hit = !c->cubin.empty();
  double seconds = 0;
  if (!hit) {
    NvrtcResult r = nvrtc_compile(em.source, target, "kernel.cu", em.line_op);
    c->cubin = std::move(r.cubin);
    seconds = r.seconds;
    if (disk) disk->store(key, std::string_view(c->cubin.data(), c->cubin.size()));
  }
  {
    std::lock_guard<std::mutex> lock(g_mu);
    // A concurrent compile of the same key may have won; share its module.
    auto [it, inserted] = g_memory.emplace(key, c);
    c = it->second;
    remember(c);
  }
  auto kk = make(c, std::move(em));
  kk->from_cache = hit;
  kk->compile_seconds = seconds;
  return kk;
}

}  // namespace tessera
