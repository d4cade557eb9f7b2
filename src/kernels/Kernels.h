// One function per library kernel (each in its own file); Library.cpp lists them.
#pragma once

#include "kernels/Library.h"

namespace tessera::kernels {

LibraryKernel vector_add();
LibraryKernel softmax();
LibraryKernel layernorm();
LibraryKernel rmsnorm();
LibraryKernel matmul();
LibraryKernel matmul_struct();

// The dtypes every library kernel takes; the first is the default.
inline std::vector<ScalarKind> float_dtypes() {
  return {ScalarKind::F32, ScalarKind::BF16, ScalarKind::F16};
}

}  // namespace tessera::kernels
