// Where `tessera run`, `bench` and the C++ API find a tuned config: the key a measurement is
// stored under, and the best config the tuning database knows for it (docs/tuning.md).
#pragma once

#include <optional>
#include <string>

#include "ir/IR.h"
#include "runtime/Tensor.h"
#include "tune/Database.h"

namespace tessera::tune {

// The key of `unbound` (the kernel for its dtype, knobs not bound) at `sizes` on `target`, on
// this machine: the device and compiler are the cpu backend's for "cpu", the GPU's name and
// the cuda codegen and NVRTC versions for "cuda:sm_*" (none without a device).
TuneKey make_key(const Kernel& unbound, const std::string& dtype, const std::string& target, const Sizes& sizes);

// The fastest passing config in the database at `db_path` (default_database_path() when empty)
// for that key, restricted to the constexprs `unbound` declares and the target's codegen knobs
// (which a kernel that does not declare them gets with Kernel::set_constexpr); nullopt when the file does
// not exist, the target is neither "cpu" nor a cuda one, a cuda target has no device here, or
// it has no passing row. A database that cannot be read
// is a TesseraError (Database).
//
// Shape buckets: a shape never tuned takes the config of the nearest tuned shape in its bucket,
// when there is one (its shape is then put in `*tuned_at`; empty for the exact shape). A
// shape's bucket is each dim's power of two rounded up (M = 513..1024 -> 1024; shape_bucket),
// and the nearest is the least sum over the dims of |log2 of the ratio|.
std::optional<Config> lookup_tuned(const Kernel& unbound, const std::string& dtype, const std::string& target,
                                   const Sizes& sizes, const std::string& db_path = "",
                                   std::string* tuned_at = nullptr);

// "K=4096,M=1024,N=4096" for M = 1000, N = 4096, K = 3000: each dim rounded up to a power of two.
std::string shape_bucket(const Sizes& sizes);

}  // namespace tessera::tune
