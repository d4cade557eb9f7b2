// What ptxas gave a compiled kernel, read from its cubin (CubinInfo.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

// What ptxas gave a kernel, read from the cubin (an ELF file) without a device or the toolkit's
// tools: the registers per thread and the stack frame (spills, local arrays) from the
// `.nv.info` section's REGCOUNT and FRAME_SIZE attributes for the kernel's symbol, and its
// static shared memory (the size of `.nv.shared.SYMBOL`); -1 where the cubin does not say.
struct CubinResources {
  int registers = -1;
  int64_t static_smem = -1;
  int64_t frame_bytes = -1;
};
CubinResources cubin_resources(const std::vector<char>& cubin, const std::string& symbol);

}  // namespace tessera
