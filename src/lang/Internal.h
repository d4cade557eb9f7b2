// Helpers shared by the language's source files (not part of the public API).
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "lang/Lang.h"

namespace tessera::lang::detail {

inline Loc to_loc(const SrcLoc& sl) { return Loc::from(sl); }
[[noreturn]] inline void fail(const SrcLoc& sl, const std::string& msg) {
  throw TesseraError(to_loc(sl), msg);
}

inline KernelBuilder& kb(const SrcLoc& sl) { return KernelBuilder::current(sl); }

// An operand as a value, checked usable at this point of the kernel.
Val value_of(const Operand& o, std::optional<ScalarKind> hint, const SrcLoc& sl);

// Two operands brought to one type: literals take the other side's element type; tiles are
// broadcast numpy-style and scalars splat to the other side's shape. `what` names the op for
// messages.
std::pair<Val, Val> unify(const Operand& a, const Operand& b, const std::string& what,
                          const SrcLoc& sl);
std::vector<Val> unify_all(const std::vector<const Operand*>& ops, const std::string& what,
                           const SrcLoc& sl);
// A value broadcast (splat, expand_dims, broadcast) to `shape`; an error when impossible.
Val broadcast_value(const Val& v, const Shape& shape, const std::string& what, const SrcLoc& sl);
// The numpy broadcast of two shapes, or nullopt.
std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b);

// An i32 scalar index operand (tile indices, loop bounds, grid sizes).
Val index_value(const Operand& o, const std::string& what, const SrcLoc& sl);

// A double that converts to int64_t exactly (finite, integral, in range): literals and fill
// values for integer types; anything else would be undefined behaviour in the conversion.
inline bool is_integral_value(double v) {
  return std::isfinite(v) && v == std::floor(v) && v >= -9223372036854775808.0 &&
         v < 9223372036854775808.0;
}

// A tile whose dims are all a static 1 (`tile<f32, [1]>`, `tile<i32, [1, 1]>`).
inline bool is_one_element_tile(const Type& t) {
  if (!t.is_tile()) return false;
  for (const Dim& d : t.shape)
    if (!d.is_static() || d.value != 1) return false;
  return true;
}
// Appended to "must be a scalar" messages: the way out when the user holds a one-element tile
// (row statistics of [1, BN] tiles are tile<T, [1]>).
inline std::string scalar_hint(const Type& t) {
  return is_one_element_tile(t) ? " (item(x) makes a scalar of a one-element tile)" : "";
}

// One i32 tile index per dim of `view` (load, store, copies into buffers and pipes).
std::vector<Val> tile_indices(const Value* view, const std::vector<Operand>& index, const char* what,
                              const SrcLoc& loc);
// The `pad` attribute of a load from a view of `elem` (none when absent).
std::vector<NamedAttr> pad_attr(ScalarKind elem, std::optional<double> pad, const SrcLoc& loc);

int normalize_axis(int axis, int rank, const std::string& what, const SrcLoc& sl);
std::string type_str(const Type& t);

}  // namespace tessera::lang::detail
