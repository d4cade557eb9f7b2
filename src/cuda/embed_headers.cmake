# Writes OUT: a C++ file holding every *.cuh under DIR as a raw string literal (see
# src/cuda/DeviceHeaders.h). Run as `cmake -DDIR=... -DOUT=... -P embed_headers.cmake`.
file(GLOB headers ${DIR}/*.cuh)
list(SORT headers)
set(body "")
set(n 0)
foreach(h ${headers})
  get_filename_component(name ${h} NAME)
  file(READ ${h} text)
  # The delimiter cannot occur in a header; check instead of hoping.
  string(FIND "${text}" ")tessera_cuh\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${h} contains the raw-string delimiter )tessera_cuh\"")
  endif()
  string(APPEND body "  {\"tessera/${name}\", R\"tessera_cuh(${text})tessera_cuh\"},\n")
  math(EXPR n "${n} + 1")
endforeach()
if(n EQUAL 0)
  # A zero-length array is not C++; a sentinel entry is never counted.
  set(body "  {nullptr, nullptr},\n")
endif()
file(WRITE ${OUT}.tmp "// Generated from src/cuda/device/*.cuh by src/cuda/embed_headers.cmake. Do not edit.
#include \"cuda/DeviceHeaders.h\"

namespace tessera::cuda {

const EmbeddedHeader kDeviceHeaders[] = {
${body}};
const size_t kNumDeviceHeaders = ${n};

}  // namespace tessera::cuda
")
file(RENAME ${OUT}.tmp ${OUT})
