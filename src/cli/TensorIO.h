// `tessera run --input NAME=FILE.npy`, `--output DIR` and `--reference NAME=FILE.npy`: view
// tensors read from and written to NumPy .npy files (runtime/Npy.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/IR.h"
#include "runtime/Tensor.h"

namespace tessera::cli {

// One tensor per view parameter of a kernel, in Kernel::view_params() order; empty where no
// file names that view.
using ViewFiles = std::vector<std::optional<Tensor>>;

// Read the NAME=FILE.npy items of `option` (--input or --reference) for kernel `k` at `sizes`:
// each NAME must be a view of `k` (named once), and each file must hold that view's dtype
// (runtime/Npy.h: bf16 and f8 as raw bits) and its shape at `sizes`. Throws one message naming
// the option, the view, the file and what differs.
ViewFiles read_view_files(const Kernel& k, const Sizes& sizes, const std::vector<std::string>& items,
                          const std::string& option);

// Write every view tensor of `k` as DIR/NAME.npy, creating DIR (and its parents).
void write_view_files(const Kernel& k, const std::vector<Tensor>& tensors, const std::string& dir);

}  // namespace tessera::cli
