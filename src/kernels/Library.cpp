#include "kernels/Library.h"

#include "kernels/Kernels.h"

namespace tessera {

const std::vector<LibraryKernel>& library() {
  static const std::vector<LibraryKernel> all = {
      kernels::vector_add(), kernels::softmax(), kernels::layernorm(), kernels::rmsnorm(),
      kernels::matmul(), kernels::matmul_fp8(), kernels::matmul_struct(), kernels::topk(), kernels::sort(),
  };
  return all;
}

const LibraryKernel* find_library_kernel(const std::string& name) {
  for (const auto& k : library())
    if (k.name == name) return &k;
  return nullptr;
}

}  // namespace tessera
