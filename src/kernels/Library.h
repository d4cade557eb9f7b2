// The built-in kernel library, written in Tessera's C++ language, with plain C++ reference
// loops that `tessera run --check` compares against.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ir/IR.h"
#include "runtime/Tensor.h"

namespace tessera {

struct LibraryKernel {
  std::string name;
  std::string summary;
  std::vector<ScalarKind> dtypes;  // the first is the default
  Sizes default_sizes;             // every symbolic dim of the kernel
  // Build the kernel's IR (unbound: constexprs keep their candidates) for a dtype.
  std::function<std::unique_ptr<Kernel>(ScalarKind dtype)> build;
  // Compute the expected outputs in place: args hold the same inputs the kernel got; the
  // reference overwrites the output tensors (in double precision, rounded to their dtype).
  std::function<void(std::vector<KernelArg>& args, const Sizes& sizes)> reference;
  // Bytes moved and floating-point operations for the given sizes (for bench figures).
  std::function<double(const Sizes&, ScalarKind)> bytes;
  std::function<double(const Sizes&, ScalarKind)> flops;
};

const std::vector<LibraryKernel>& library();
const LibraryKernel* find_library_kernel(const std::string& name);

}  // namespace tessera
