// Tessera's CUDA device headers (src/cuda/device/*.cuh), embedded in the binary at build time
// by src/cuda/embed_headers.cmake so that NVRTC never reads files at run time. Each header is
// registered with NVRTC as "tessera/NAME.cuh", the name generated code includes.
#pragma once

#include <cstddef>

namespace tessera::cuda {

struct EmbeddedHeader {
  const char* name;  // "tessera/core.cuh"
  const char* text;
};

extern const EmbeddedHeader kDeviceHeaders[];
extern const size_t kNumDeviceHeaders;

}  // namespace tessera::cuda
