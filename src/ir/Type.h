// Types of the Tile IR: scalars, tiles, views and pointers, and the Struct layer's buffers and
// pipes.
//
// Text forms:  i32   bf16   tile<f32, [1, BLOCK_N]>   view<bf16, [M, 4096]>   ptr<f32>
//              tile<f32, [64, 64], layout = blocked<...>, space = "registers">
//              buffer<bf16, [2, BM, BK], space = "shared">   pipe<bf16, [STAGES, BM, BK]>
// Tile dims are static: an integer, or the name of a kernel constexpr that the
// bind-constexprs step replaces by its value. View dims are an integer or a symbolic name
// bound at run time from the argument's shape (the same name in two views means the same size).
// Buffers and pipes (Struct layer, docs/layers.md) are on-chip storage, not values: only
// `alloc` / `pipe` make them and only the Struct ops read or write them. Their dims are static
// like tile dims; a pipe's first dim is its number of stages, the rest the shape of one slot.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/Layout.h"

namespace tessera {

// Listed once; every switch over scalar kinds is generated from or checked against this.
#define TESSERA_SCALAR_KINDS(X) \
  X(I1, "i1", 1)                \
  X(I8, "i8", 8)                \
  X(I16, "i16", 16)             \
  X(I32, "i32", 32)             \
  X(I64, "i64", 64)             \
  X(U8, "u8", 8)                \
  X(U16, "u16", 16)             \
  X(U32, "u32", 32)             \
  X(U64, "u64", 64)             \
  X(F8E4M3, "f8e4m3", 8)        \
  X(F8E5M2, "f8e5m2", 8)        \
  X(F16, "f16", 16)             \
  X(BF16, "bf16", 16)           \
  X(F32, "f32", 32)             \
  X(F64, "f64", 64)

enum class ScalarKind : uint8_t {
#define X(name, text, bits) name,
  TESSERA_SCALAR_KINDS(X)
#undef X
};

std::string_view scalar_name(ScalarKind k);
std::optional<ScalarKind> scalar_from_name(std::string_view s);
int scalar_bits(ScalarKind k);
int scalar_bytes(ScalarKind k);  // storage size in host/device memory (i1 is one byte)
bool is_float(ScalarKind k);
bool is_int(ScalarKind k);  // signed, unsigned or i1
bool is_signed_int(ScalarKind k);
bool is_unsigned_int(ScalarKind k);
bool is_bool(ScalarKind k);
const std::vector<ScalarKind>& all_scalar_kinds();
// Why `bitcast` cannot go from `from` to `to` ("needs element types of the same width, got
// ..."), or "" when it can: the verifier's and the builder's message.
std::string bitcast_type_error(ScalarKind from, ScalarKind to);

// One dimension of a tile or view shape: a static size, or a symbol (a constexpr name in a
// tile shape; a runtime dim name in a view shape).
struct Dim {
  int64_t value = 0;
  std::string symbol;  // non-empty: symbolic

  Dim() = default;
  Dim(int64_t v) : value(v) {}  // NOLINT: implicit so that shapes read {1, 1024}
  Dim(int v) : value(v) {}      // NOLINT
  Dim(std::string s) : symbol(std::move(s)) {}  // NOLINT
  Dim(const char* s) : symbol(s) {}              // NOLINT

  bool is_static() const { return symbol.empty(); }
  std::string str() const { return is_static() ? std::to_string(value) : symbol; }
  bool operator==(const Dim& o) const { return value == o.value && symbol == o.symbol; }
};
using Shape = std::vector<Dim>;

std::string shape_str(const Shape& s);  // "[1, BLOCK_N]"
bool shape_is_static(const Shape& s);
int64_t shape_numel(const Shape& s);  // requires a static shape
std::vector<int64_t> static_shape(const Shape& s);  // requires a static shape

struct Type {
  enum class Kind : uint8_t { None, Scalar, Tile, View, Ptr, Buffer, Pipe };

  Kind kind = Kind::None;
  ScalarKind elem = ScalarKind::F32;
  Shape shape;  // tile or view shape; empty for scalars and pointers
  // Optional: the layout encoding of a tile or buffer (Layout.h) and its memory space
  // ("global", "shared" or "registers"). Backends that do not lower to threads ignore both.
  Layout layout;
  std::string space;

  static Type none() { return {}; }
  static Type scalar(ScalarKind k) { return Type{Kind::Scalar, k, {}, {}, {}}; }
  static Type tile(ScalarKind k, Shape s) { return Type{Kind::Tile, k, std::move(s), {}, {}}; }
  static Type view(ScalarKind k, Shape s) { return Type{Kind::View, k, std::move(s), {}, {}}; }
  static Type ptr(ScalarKind k) { return Type{Kind::Ptr, k, {}, {}, {}}; }
  static Type buffer(ScalarKind k, Shape s, std::string space = "shared") {
    return Type{Kind::Buffer, k, std::move(s), {}, std::move(space)};
  }
  static Type pipe(ScalarKind k, Shape s) { return Type{Kind::Pipe, k, std::move(s), {}, {}}; }

  bool is_none() const { return kind == Kind::None; }
  bool is_scalar() const { return kind == Kind::Scalar; }
  bool is_tile() const { return kind == Kind::Tile; }
  bool is_view() const { return kind == Kind::View; }
  bool is_ptr() const { return kind == Kind::Ptr; }
  bool is_buffer() const { return kind == Kind::Buffer; }
  bool is_pipe() const { return kind == Kind::Pipe; }
  // Types whose dims are static (constexpr names until binding): tiles, buffers, pipes.
  bool has_static_dims() const { return is_tile() || is_buffer() || is_pipe(); }
  // A scalar or a tile: the values elementwise ops work on.
  bool is_value() const { return is_scalar() || is_tile(); }
  int rank() const { return static_cast<int>(shape.size()); }

  // The same kind and shape with another element type (e.g. the i1 result of a compare).
  Type with_elem(ScalarKind k) const {
    Type t = *this;
    t.elem = k;
    return t;
  }

  std::string str() const;
  bool operator==(const Type& o) const {
    return kind == o.kind && elem == o.elem && shape == o.shape && layout == o.layout &&
           space == o.space;
  }
  bool operator!=(const Type& o) const { return !(*this == o); }
};

}  // namespace tessera
