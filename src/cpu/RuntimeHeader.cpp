// The runtime header is kept as a raw string literal in runtime/tessera_cpu.h.inc so that it is
// compiled into the library: generated code finds it wherever the binary runs from.
#include "cpu/CpuInternal.h"

namespace tessera::cpu {

const char* const kRuntimeHeader =
#include "cpu/runtime/tessera_cpu.h.inc"
    ;

}  // namespace tessera::cpu
