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
std::optional<Config> lookup_tuned(const Kernel& unbound, const std::string& dtype, const std::string& target,
                                   const Sizes& sizes, const std::string& db_path = "");

}  // namespace tessera::tune
