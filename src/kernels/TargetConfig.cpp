// Per-target default configs of library kernels (LibraryKernel::target_configs).
#include "kernels/Kernels.h"
#include "kernels/Library.h"

namespace tessera {

std::map<std::string, int64_t> library_config(const LibraryKernel& k, ScalarKind dtype, const std::string& target,
                                              const std::map<std::string, int64_t>& given, const Sizes* sizes) {
  std::map<std::string, int64_t> out = given;
  // insert() keeps what the caller (then the size rule) gave. The size rule applies without a
  // target too: topk's K follows the size K on the interpreter as well.
  if (sizes && !sizes->empty() && k.size_configs)
    for (const auto& [name, v] : k.size_configs(dtype, target, *sizes, given)) out.insert({name, v});
  if (target.empty() || !k.target_configs) return out;
  auto all = k.target_configs(dtype);
  auto it = all.find(target);
  if (it == all.end()) return out;
  for (const auto& [name, v] : it->second) out.insert({name, v});
  return out;
}

namespace kernels {

std::map<std::string, int64_t> whole_row_config(ScalarKind dtype, const std::string& target, const Sizes& sizes,
                                                const std::map<std::string, int64_t>& given) {
  auto n = sizes.find("N");
  const bool cuda = target.rfind("cuda", 0) == 0;
  // cuda: rows of up to 64 KiB (32768 16-bit elements, 16384 f32: f32 layernorm at 32768
  // columns spilled 440 bytes a thread), and not under a caller's BLOCK_M > 1 or num_warps,
  // whose whole-row tiles spill or pass the register file (layernorm BLOCK_M = 4 at 32768).
  const int64_t most = target == "cpu" ? 8192 : cuda ? 65536 / std::max(2, scalar_bytes(dtype)) : 0;
  if (n == sizes.end() || n->second < 1 || n->second > most) return {};
  if (cuda) {
    auto bm = given.find("BLOCK_M");
    if ((bm != given.end() && bm->second > 1) || given.count("num_warps")) return {};
  }
  int64_t bn = 256;  // the least BLOCK_N candidate
  while (bn < n->second) bn *= 2;
  return {{"BLOCK_N", bn}};
}

}  // namespace kernels

}  // namespace tessera
