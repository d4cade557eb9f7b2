// The interpreter's runtime values: a scalar or a tile as one flat row-major vector.
//
// Floats are held as doubles already rounded to the element type (so every op reads exact
// element values and rounds its result once); integers as int64 already wrapped to their width
// (u64 as its bit pattern, i1 as 0/1). Keeping the data in plain vectors lets every op run as a
// tight loop with its type dispatch hoisted out.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/Type.h"

namespace tessera::interp {

struct RValue {
  ScalarKind elem = ScalarKind::F32;
  bool scalar = true;
  std::vector<int64_t> shape;  // empty for a scalar
  std::vector<double> f;       // float elements
  std::vector<int64_t> i;      // integer / i1 elements

  bool floats() const { return is_float(elem); }
  int64_t numel() const { return floats() ? static_cast<int64_t>(f.size()) : static_cast<int64_t>(i.size()); }

  // Zero-filled, of the given scalar kind and shape (scalar when `is_scalar`).
  static RValue make(ScalarKind k, bool is_scalar, std::vector<int64_t> shape);
  // Zero-filled, of a scalar or (static) tile type.
  static RValue of_type(const Type& t);

  // Element `idx` as a double / as an integer (floats truncated, like a cast to i64).
  double get_f(int64_t idx) const;
  int64_t get_i(int64_t idx) const;
  // Store `v` converted to the element type exactly as a cast would.
  void set_f(int64_t idx, double v);
  void set_i(int64_t idx, int64_t v);
};

// "(1, 2)": the multi-index of flat element `flat` in `shape` ("()" for a scalar).
std::string index_str(const std::vector<int64_t>& shape, int64_t flat);
// "(1, 2)" from explicit coordinates.
std::string coords_str(const std::vector<int64_t>& coords);
// "[4, 999]"
std::string dims_str(const std::vector<int64_t>& shape);

}  // namespace tessera::interp
