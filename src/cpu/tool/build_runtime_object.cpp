// tessera_cpu_runtime DIR: compiles the cpu backend's runtime object for the default compiler
// and flags into DIR (a step of the CMake build: <build>/cpu-runtime, where the backend looks
// for it before compiling one itself; src/cpu/RuntimeObject.cpp).
#include <cstdio>
#include <exception>

#include "cpu/CpuBackend.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  try {
    tessera::build_cpu_runtime_object(argv[1]);
  } catch (const std::exception& e) {
    // Not fatal for the build: kernels then compile the helpers themselves (or a disk cache
    // keeps a copy after the first compile).
    std::fprintf(stderr, "tessera_cpu_runtime: %s (kernels will compile the runtime themselves)\n", e.what());
  }
  return 0;
}
