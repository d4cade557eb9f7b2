// Tessera's CUDA device headers (src/cuda/device/*.cuh), embedded in the binary at build time
// by src/cuda/embed_headers.cmake so that NVRTC never reads files at run time. Each header is
// registered with NVRTC under its file name: generated code writes `#include "NAME.cuh"`.
#pragma once

#include <cstddef>

namespace tessera::cuda {

struct EmbeddedHeader {
  const char* name;  // "tile.cuh"
  const char* text;
};

extern const EmbeddedHeader kDeviceHeaders[];
extern const size_t kNumDeviceHeaders;

}  // namespace tessera::cuda
