// Per-target default configs of library kernels (LibraryKernel::target_configs).
#include "kernels/Library.h"

namespace tessera {

std::map<std::string, int64_t> library_config(const LibraryKernel& k, ScalarKind dtype, const std::string& target,
                                              const std::map<std::string, int64_t>& given, const Sizes* sizes) {
  std::map<std::string, int64_t> out = given;
  if (target.empty()) return out;
  // insert() keeps what the caller (then the size rule) gave.
  if (sizes && !sizes->empty() && k.size_configs)
    for (const auto& [name, v] : k.size_configs(dtype, target, *sizes)) out.insert({name, v});
  if (!k.target_configs) return out;
  auto all = k.target_configs(dtype);
  auto it = all.find(target);
  if (it == all.end()) return out;
  for (const auto& [name, v] : it->second) out.insert({name, v});
  return out;
}

}  // namespace tessera
