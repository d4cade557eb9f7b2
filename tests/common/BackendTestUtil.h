// Helpers shared by the backend test binaries (tests/cpu, tests/gpu): a private compile-cache
// directory per test process and kernel arguments for a set of tensors.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "runtime/Tensor.h"

namespace tessera::testutil {

// One cache directory per test process (named after `what`), removed at exit. The name lives
// in a never-destroyed string: the exit handler runs after the statics are destroyed.
inline const std::string& process_cache_dir(const std::string& what) {
  static const std::string* dir = [&] {
    auto* d = new std::string((std::filesystem::temp_directory_path() /
                               ("tessera-" + what + "-test-" + std::to_string(::getpid())))
                                  .string());
    std::filesystem::create_directories(*d);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(*dir, ec);
    });
    return d;
  }();
  return *dir;
}

// Arguments in signature order: the tensors for the views, fixed nonzero scalars.
inline std::vector<KernelArg> args_for(const Kernel& k, std::vector<Tensor>& ts) {
  std::vector<KernelArg> a;
  size_t ti = 0;
  for (const Value* p : k.params) {
    KernelArg x;
    if (p->type.is_view()) x.tensor = &ts.at(ti++);
    else if (p->type.is_scalar() && is_float(p->type.elem)) x.scalar = 0.75;
    else if (p->type.is_scalar()) x.scalar = int64_t{3};
    a.push_back(x);
  }
  return a;
}

}  // namespace tessera::testutil
