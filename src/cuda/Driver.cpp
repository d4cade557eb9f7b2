// Loading libcuda, device discovery and checked driver calls.
#include "cuda/Driver.h"

#include <dlfcn.h>

#include <mutex>

#include "cuda/CudaBackend.h"
#include "support/Diagnostic.h"

namespace tessera::cuda {

namespace {

struct Loaded {
  Driver d{};
  bool ok = false;
  std::string why;
};

Loaded load() {
  Loaded L;
  void* h = nullptr;
  for (const char* name : {"libcuda.so.1", "libcuda.so"}) {
    h = ::dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (h) break;
  }
  if (!h) {
    L.why = "no CUDA driver (libcuda.so.1 cannot be loaded: " + std::string(::dlerror()) + ")";
    return L;
  }
  // Each entry point under the names to try, newest ABI first.
  auto sym = [&](auto& fn, std::initializer_list<const char*> names) {
    for (const char* n : names) {
      if (void* p = ::dlsym(h, n)) {
        fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
        return true;
      }
    }
    if (L.why.empty()) L.why = std::string("the CUDA driver lacks ") + *names.begin();
    return false;
  };
  Driver& d = L.d;
  bool ok = true;
  ok &= sym(d.cuInit, {"cuInit"});
  ok &= sym(d.cuDriverGetVersion, {"cuDriverGetVersion"});
  ok &= sym(d.cuGetErrorName, {"cuGetErrorName"});
  ok &= sym(d.cuGetErrorString, {"cuGetErrorString"});
  ok &= sym(d.cuDeviceGetCount, {"cuDeviceGetCount"});
  ok &= sym(d.cuDeviceGet, {"cuDeviceGet"});
  ok &= sym(d.cuDeviceGetName, {"cuDeviceGetName"});
  ok &= sym(d.cuDeviceGetAttribute, {"cuDeviceGetAttribute"});
  ok &= sym(d.cuDevicePrimaryCtxRetain, {"cuDevicePrimaryCtxRetain"});
  ok &= sym(d.cuCtxSetCurrent, {"cuCtxSetCurrent"});
  ok &= sym(d.cuCtxSynchronize, {"cuCtxSynchronize"});
  ok &= sym(d.cuModuleLoadData, {"cuModuleLoadData"});
  ok &= sym(d.cuModuleUnload, {"cuModuleUnload"});
  ok &= sym(d.cuModuleGetFunction, {"cuModuleGetFunction"});
  ok &= sym(d.cuFuncSetAttribute, {"cuFuncSetAttribute"});
  ok &= sym(d.cuFuncGetAttribute, {"cuFuncGetAttribute"});
  ok &= sym(d.cuLaunchKernel, {"cuLaunchKernel"});
  ok &= sym(d.cuMemAlloc, {"cuMemAlloc_v2"});
  ok &= sym(d.cuMemFree, {"cuMemFree_v2"});
  ok &= sym(d.cuMemcpyHtoD, {"cuMemcpyHtoD_v2"});
  ok &= sym(d.cuMemcpyDtoH, {"cuMemcpyDtoH_v2"});
  ok &= sym(d.cuMemcpyDtoD, {"cuMemcpyDtoD_v2"});
  ok &= sym(d.cuMemsetD8, {"cuMemsetD8_v2"});
  ok &= sym(d.cuMemsetD32Async, {"cuMemsetD32Async"});
  ok &= sym(d.cuEventCreate, {"cuEventCreate"});
  ok &= sym(d.cuEventDestroy, {"cuEventDestroy_v2", "cuEventDestroy"});
  ok &= sym(d.cuEventRecord, {"cuEventRecord"});
  ok &= sym(d.cuEventSynchronize, {"cuEventSynchronize"});
  ok &= sym(d.cuEventElapsedTime, {"cuEventElapsedTime_v2", "cuEventElapsedTime"});
  ok &= sym(d.cuOccupancyMaxActiveBlocksPerMultiprocessor, {"cuOccupancyMaxActiveBlocksPerMultiprocessor"});
  if (!ok) return L;
  if (void* p = ::dlsym(h, "cuTensorMapEncodeTiled"))
    d.cuTensorMapEncodeTiled = reinterpret_cast<decltype(d.cuTensorMapEncodeTiled)>(p);
  if (void* p = ::dlsym(h, "cuLaunchKernelEx"))
    d.cuLaunchKernelEx = reinterpret_cast<decltype(d.cuLaunchKernelEx)>(p);
  CUresult r = d.cuInit(0);
  if (r != CUDA_SUCCESS) {
    const char* n = nullptr;
    d.cuGetErrorName(r, &n);
    L.why = r == CUDA_ERROR_NO_DEVICE ? "no CUDA device (cuInit: CUDA_ERROR_NO_DEVICE)"
                                      : std::string("the CUDA driver failed to initialise (cuInit: ") +
                                            (n ? n : "error " + std::to_string(r)) + ")";
    return L;
  }
  int count = 0;
  r = d.cuDeviceGetCount(&count);
  if (r != CUDA_SUCCESS || count == 0) {
    L.why = "no CUDA device (the driver reports none)";
    return L;
  }
  L.ok = true;
  return L;
}

const Loaded& loaded() {
  static const Loaded L = load();
  return L;
}

}  // namespace

const Driver* driver(std::string* why) {
  const Loaded& L = loaded();
  if (!L.ok) {
    if (why) *why = L.why;
    return nullptr;
  }
  return &L.d;
}

std::string error_text(CUresult r, const char* call) {
  const char* name = nullptr;
  const char* desc = nullptr;
  if (const Driver* d = driver()) {
    d->cuGetErrorName(r, &name);
    d->cuGetErrorString(r, &desc);
  }
  std::string s = std::string(call) + " failed: " + (name ? name : "CUresult " + std::to_string(r));
  if (desc) s += std::string(" (") + desc + ")";
  return s;
}

void check(CUresult r, const char* call) {
  if (r != CUDA_SUCCESS) throw TesseraError("cuda: " + error_text(r, call));
}

namespace {

DeviceInfo open_device(const Driver& d) {
  DeviceInfo info;
  check(d.cuDeviceGet(&info.dev, 0), "cuDeviceGet");
  char name[256] = {};
  check(d.cuDeviceGetName(name, sizeof name - 1, info.dev), "cuDeviceGetName");
  info.name = name;
  auto attr = [&](int a) {
    int v = 0;
    check(d.cuDeviceGetAttribute(&v, a, info.dev), "cuDeviceGetAttribute");
    return v;
  };
  info.sm = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) * 10 + attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  info.smem_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
  info.smem_per_block_optin = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  info.num_sms = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  info.l2_bytes = attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
  info.max_grid[0] = attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X);
  info.max_grid[1] = attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y);
  info.max_grid[2] = attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z);
  check(d.cuDevicePrimaryCtxRetain(&info.ctx, info.dev), "cuDevicePrimaryCtxRetain");
  return info;
}

}  // namespace

const DeviceInfo& device() {
  std::string why;
  const Driver* d = driver(&why);
  if (!d) throw TesseraError("cuda: " + why);
  static std::once_flag once;
  static DeviceInfo info;
  std::call_once(once, [&] { info = open_device(*d); });
  // The primary context is per device but "current" is per thread: set it on every entry.
  check(d->cuCtxSetCurrent(info.ctx), "cuCtxSetCurrent");
  return info;
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  device();
  // A zero-byte view still gets a distinct valid pointer so kernels may form addresses.
  check(driver()->cuMemAlloc(&ptr_, bytes ? bytes : 16), "cuMemAlloc");
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) driver()->cuMemFree(ptr_);
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) driver()->cuMemFree(ptr_);
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.ptr_ = 0;
    o.bytes_ = 0;
  }
  return *this;
}

void DeviceBuffer::upload(const void* host, size_t n) {
  if (n) check(driver()->cuMemcpyHtoD(ptr_, host, n), "cuMemcpyHtoD");
}

void DeviceBuffer::download(void* host, size_t n) const {
  if (n) check(driver()->cuMemcpyDtoH(host, ptr_, n), "cuMemcpyDtoH");
}

}  // namespace tessera::cuda

namespace tessera {

bool cuda_device_available(std::string* why) {
  std::string reason;
  if (!cuda::driver(&reason)) {
    if (why) *why = reason;
    return false;
  }
  try {
    cuda::device();
  } catch (const TesseraError& e) {
    if (why) *why = e.message();
    return false;
  }
  return true;
}

}  // namespace tessera
