// The verifier: every structural, type and shape rule of the Tile IR, with located messages.
#pragma once

#include <string>
#include <vector>

#include "ir/IR.h"

namespace tessera {

struct VerifyOptions {
  // When false (default) tile shapes may still name constexprs; rules that need a static
  // shape (element counts, sizes) are checked after binding. When true they must be static.
  bool require_bound = false;
  // When non-empty, Raw ops must carry a body for this backend ("cpp" or "cuda").
  std::string backend;
};

// All problems found, each formatted `FILE:LINE:COL: error: ...`, in program order.
std::vector<TesseraError> verify(const Kernel& k, const VerifyOptions& opts = {});
// Throws the first problem found.
void verify_or_throw(const Kernel& k, const VerifyOptions& opts = {});

}  // namespace tessera
