// NumPy's .npy format (numpy.lib.format, versions 1.0, 2.0 and 3.0): what `tessera run
// --input/--output/--reference` read and write. Debian has no kept C++ library for it, so this
// is the format's own spec: the magic "\x93NUMPY", a version, a header length (2 bytes in 1.0,
// 4 in 2.0 and 3.0), a Python dict literal {'descr': .., 'fortran_order': .., 'shape': (..)}
// and the raw data.
//
// Only what a Tensor holds is accepted: little-endian (or one-byte) scalars, C order. NumPy has
// no bf16 or f8 dtype, so those travel as their raw bits: bf16 as '<u2', f8e4m3 and f8e5m2 as
// '|u1' (written so; read also as the void types '|V2' / '|V1' that ml_dtypes arrays save as).
// In NumPy: `np.load(f).view(ml_dtypes.bfloat16)`, or `(a.astype(np.uint32) << 16).view(np.float32)`.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/Tensor.h"

namespace tessera {

struct NpyArray {
  std::string descr;  // as the header says it: '<f4', '|b1', ...
  std::vector<int64_t> shape;
  TensorBytes data;  // raw, C order
  uint64_t data_offset = 0;   // where the data starts in the file (for located errors)
};

// The largest .npy file read (what the CLI's tensor budget allows).
inline constexpr uint64_t kMaxNpyBytes = uint64_t{16} << 30;

// Parse a whole .npy file held in memory. `name` names it in errors, which are TesseraErrors
// located at the offending byte (`NAME:1:COL`, COL = byte offset + 1): bad magic or version,
// a bad header dict, big-endian or fortran-order data, a dtype Tessera has no scalar for, a
// shape whose size overflows, truncated or trailing data.
NpyArray parse_npy(std::string_view bytes, const std::string& name);

// Read a file (regular files only, at most kMaxNpyBytes) and parse it.
NpyArray read_npy(const std::string& path);

// The descr Tessera writes for a dtype, and whether `descr` may hold a tensor of `dtype`.
std::string npy_descr(ScalarKind dtype);
bool npy_descr_fits(const std::string& descr, ScalarKind dtype);

// The array as a Tensor of `dtype` (npy_descr_fits must hold). Throws, located in `name`, for
// an i1 tensor whose bytes are not 0 or 1.
Tensor npy_to_tensor(NpyArray a, ScalarKind dtype, const std::string& name);

// The bytes of a .npy file (version 1.0, or 2.0 when the header needs it) holding `t`.
std::string npy_bytes(const Tensor& t);
// Write `t` to `path`; throws naming the path when it cannot.
void write_npy(const std::string& path, const Tensor& t);

}  // namespace tessera
