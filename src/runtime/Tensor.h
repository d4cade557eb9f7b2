// Host tensors and kernel arguments, shared by every backend and the CLI.
//
// Element storage is the dtype's native bit pattern, row-major and contiguous: bf16 and f16
// as 16-bit words, f8 as bytes, i1 as one byte (0 or 1).
#pragma once

#include <cstdint>
#include <map>
#include <new>
#include <string>
#include <variant>
#include <vector>

#include "ir/IR.h"

namespace tessera {

// The most bytes of host tensors the CLI allocates for one run (the kernel's views, the copies
// kept for a reference, a split's partial results): well above any test, well below what makes
// a host swap instead of failing cleanly. Counted before anything is allocated.
inline constexpr int kMaxHostTensorGiB = 16;
inline constexpr double kMaxHostTensorBytes = kMaxHostTensorGiB * double(1ull << 30);

// Storage that starts at a cache line (64 bytes): a row of a tensor whose rows are whole lines
// then starts at one too, so the cpu kernels' 64-byte vector loads and stores do not split lines
// (malloc's 16 bytes put every row of a large tensor 16 bytes past one).
template <class T>
struct CacheLineAllocator {
  using value_type = T;
  CacheLineAllocator() = default;
  template <class U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}  // NOLINT
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(64))); }
  void deallocate(T* p, size_t) { ::operator delete(p, std::align_val_t(64)); }
  template <class U>
  bool operator==(const CacheLineAllocator<U>&) const { return true; }
};
using TensorBytes = std::vector<uint8_t, CacheLineAllocator<uint8_t>>;

struct Tensor {
  ScalarKind dtype = ScalarKind::F32;
  std::vector<int64_t> shape;
  TensorBytes data;

  Tensor() = default;
  Tensor(ScalarKind dt, std::vector<int64_t> shape);  // zero-filled

  int64_t numel() const;
  // Element i as a double (integers exactly up to 2^53) and as an integer; set rounds or
  // wraps to the dtype exactly as a cast would.
  double get(int64_t i) const;
  int64_t get_int(int64_t i) const;
  void set(int64_t i, double v);
  void set_int(int64_t i, int64_t v);
};

// A kernel argument: a tensor for a view parameter, a number for a scalar parameter.
struct KernelArg {
  Tensor* tensor = nullptr;
  std::variant<int64_t, double> scalar = int64_t{0};
};

// Sizes of symbolic view dims by name ("M" -> 1000).
using Sizes = std::map<std::string, int64_t>;

// Bind the kernel's symbolic view dims from the arguments' shapes. Throws TesseraError naming
// the parameter when an argument is missing, of the wrong kind or dtype, of the wrong rank, or
// when two views disagree on a dim.
Sizes bind_dims(const Kernel& k, const std::vector<KernelArg>& args);

// The shape of view parameter `view` of `k` at `sizes`. Throws when a dim is missing from
// `sizes` or negative.
std::vector<int64_t> view_shape(const Kernel& k, const Value& view, const Sizes& sizes);

// Random tensors for every view parameter (shapes from `sizes`; uniform in [-1, 1) for floats,
// small nonzero-heavy integers for ints, never all zeros) and defaults for scalars. Throws when
// a dim is missing from `sizes`.
// One tensor per view parameter, in the order of Kernel::view_params().
std::vector<Tensor> make_random_tensors(const Kernel& k, const Sizes& sizes, uint64_t seed);

// Arguments for every parameter: view parameters take `tensors` in order (e.g. the result of
// make_random_tensors, which must outlive the arguments); a scalar parameter takes sizes[its
// name] when given, else 1 (integers) or 0.5 (floats).
std::vector<KernelArg> make_args(const Kernel& k, std::vector<Tensor>& tensors,
                                 const Sizes& sizes = {});

}  // namespace tessera
