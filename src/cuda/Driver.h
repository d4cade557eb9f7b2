// The CUDA driver API, loaded at run time from libcuda.so.1.
//
// cuda.h is not included: the build must work on machines without the toolkit, so the handful
// of types, enum values and prototypes used here are declared by hand (values from the CUDA 13
// cuda.h; they have been stable since CUDA 4). Entry points are resolved with dlsym under their
// versioned names (cuMemAlloc_v2, ...) because the unversioned ones are legacy ABIs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tessera::cuda {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;

inline constexpr CUresult CUDA_SUCCESS = 0;
inline constexpr CUresult CUDA_ERROR_NO_DEVICE = 100;

// CUdevice_attribute
inline constexpr int CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X = 5;
inline constexpr int CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y = 6;
inline constexpr int CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z = 7;
inline constexpr int CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8;
inline constexpr int CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
inline constexpr int CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38;
inline constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
inline constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
inline constexpr int CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97;

// CUfunction_attribute
inline constexpr int CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0;
inline constexpr int CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1;
inline constexpr int CU_FUNC_ATTRIBUTE_NUM_REGS = 4;
inline constexpr int CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;

// Tensor maps (TMA descriptors): CUtensorMap and the enum values cuTensorMapEncodeTiled takes.
struct alignas(64) CUtensorMap {
  uint64_t opaque[16];
};
inline constexpr int CU_TENSOR_MAP_DATA_TYPE_UINT8 = 0;
inline constexpr int CU_TENSOR_MAP_DATA_TYPE_UINT16 = 1;
inline constexpr int CU_TENSOR_MAP_DATA_TYPE_UINT32 = 2;
inline constexpr int CU_TENSOR_MAP_DATA_TYPE_UINT64 = 4;
inline constexpr int CU_TENSOR_MAP_DATA_TYPE_FLOAT16 = 6;
inline constexpr int CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 = 9;
inline constexpr int CU_TENSOR_MAP_INTERLEAVE_NONE = 0;
inline constexpr int CU_TENSOR_MAP_SWIZZLE_NONE = 0;
inline constexpr int CU_TENSOR_MAP_SWIZZLE_64B = 2;
inline constexpr int CU_TENSOR_MAP_SWIZZLE_128B = 3;
inline constexpr int CU_TENSOR_MAP_L2_PROMOTION_L2_256B = 3;
inline constexpr int CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0;

// cuLaunchKernelEx's configuration (cuda.h's CUlaunchConfig and CUlaunchAttribute, with only
// the cluster-dimension attribute's member of the 64-byte value union).
inline constexpr int CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4;
struct CUlaunchAttribute {
  int id = 0;
  char pad[4] = {};
  union alignas(8) {
    char bytes[64];
    struct {
      unsigned x, y, z;
    } clusterDim;
  } value = {};
};
struct CUlaunchConfig {
  unsigned gridDimX = 1, gridDimY = 1, gridDimZ = 1;
  unsigned blockDimX = 1, blockDimY = 1, blockDimZ = 1;
  unsigned sharedMemBytes = 0;
  CUstream hStream = nullptr;
  CUlaunchAttribute* attrs = nullptr;
  unsigned numAttrs = 0;
};
static_assert(sizeof(CUlaunchAttribute) == 72 && offsetof(CUlaunchAttribute, value) == 8 &&
                  alignof(CUlaunchAttribute) == 8 && sizeof(CUlaunchConfig) == 56 &&
                  offsetof(CUlaunchConfig, hStream) == 32 && offsetof(CUlaunchConfig, attrs) == 40,
              "cuda.h's layouts");

struct Driver {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDriverGetVersion)(int*);
  CUresult (*cuGetErrorName)(CUresult, const char**);
  CUresult (*cuGetErrorString)(CUresult, const char**);
  CUresult (*cuDeviceGetCount)(int*);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDeviceGetName)(char*, int, CUdevice);
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuModuleLoadData)(CUmodule*, const void*);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*cuFuncSetAttribute)(CUfunction, int, int);
  CUresult (*cuFuncGetAttribute)(int*, int, CUfunction);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void**, void**);
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void*, size_t);
  CUresult (*cuMemcpyDtoH)(void*, CUdeviceptr, size_t);
  CUresult (*cuMemcpyDtoD)(CUdeviceptr, CUdeviceptr, size_t);
  CUresult (*cuMemsetD8)(CUdeviceptr, unsigned char, size_t);
  CUresult (*cuMemsetD32Async)(CUdeviceptr, unsigned, size_t, CUstream);
  CUresult (*cuEventCreate)(CUevent*, unsigned);
  CUresult (*cuEventDestroy)(CUevent);
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventSynchronize)(CUevent);
  CUresult (*cuEventElapsedTime)(float*, CUevent, CUevent);
  CUresult (*cuOccupancyMaxActiveBlocksPerMultiprocessor)(int*, CUfunction, int, size_t);
  // Optional (CUDA 12+ drivers): null when absent; kernels that need tensor maps then run their
  // mma.sync compilation.
  CUresult (*cuTensorMapEncodeTiled)(CUtensorMap*, int, uint32_t, void*, const uint64_t*, const uint64_t*,
                                     const uint32_t*, const uint32_t*, int, int, int, int) = nullptr;
  // Optional (CUDA 12+ drivers): launches with a cluster shape chosen at launch time (split-K's
  // clusters of the split's CTAs); without it those launches run without clusters.
  CUresult (*cuLaunchKernelEx)(const CUlaunchConfig*, CUfunction, void**, void**) = nullptr;
};

// The loaded and initialised driver, or null with the reason in `why` (no libcuda, cuInit
// failed, ...). Loaded once per process.
const Driver* driver(std::string* why = nullptr);

// "cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory)".
std::string error_text(CUresult r, const char* call);
// Throws TesseraError("cuda: " + error_text) unless r is CUDA_SUCCESS.
void check(CUresult r, const char* call);

struct DeviceInfo {
  int ordinal = 0;
  CUdevice dev = 0;
  CUcontext ctx = nullptr;  // the primary context (retained for the life of the process)
  std::string name;
  int sm = 0;                  // major*10 + minor
  int smem_per_block = 0;      // without opt-in
  int smem_per_block_optin = 0;
  int num_sms = 0;
  int l2_bytes = 0;
  int max_grid[3] = {0, 0, 0};
};

// Device 0 with its primary context made current on the calling thread. Throws TesseraError
// ("no CUDA device: ...") when there is none.
const DeviceInfo& device();

// Device memory owned for one scope.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = 0; o.bytes_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  CUdeviceptr get() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  void upload(const void* host, size_t n);
  void download(void* host, size_t n) const;

 private:
  CUdeviceptr ptr_ = 0;
  size_t bytes_ = 0;
};

}  // namespace tessera::cuda
