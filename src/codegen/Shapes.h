// Shape arithmetic shared by the C++ and CUDA emitters.
#pragma once

#include <cstdint>
#include <vector>

namespace tessera::codegen {

// A row-major shape seen as [outer, len, inner] around `axis` (0 <= axis < rank): what a
// reduction or scan along `axis` iterates over.
struct AxisSplit {
  int64_t outer = 1, len = 1, inner = 1;
};

inline AxisSplit split_at_axis(const std::vector<int64_t>& shape, int64_t axis) {
  AxisSplit s;
  s.len = shape[static_cast<size_t>(axis)];
  for (int64_t d = 0; d < axis; ++d) s.outer *= shape[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < shape.size(); ++d) s.inner *= shape[d];
  return s;
}

}  // namespace tessera::codegen
