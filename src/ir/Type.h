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
#include <functional>
#include <memory>
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
// f16, bf16 and the f8 kinds: stored narrow, computed as float (by the backends) and rounded
// after every op.
bool is_narrow(ScalarKind k);
// The two 8-bit float kinds (e4m3, e5m2).
inline bool is_f8(ScalarKind k) { return k == ScalarKind::F8E4M3 || k == ScalarKind::F8E5M2; }
// Half the distance from 1 to the next number of the float type: 2^-24 for f32, 2^-53 for
// f64, 2^-11 for f16, 2^-8 for bf16 (0 for integers, which are exact).
double unit_roundoff(ScalarKind k);
bool is_int(ScalarKind k);  // signed, unsigned or i1
bool is_signed_int(ScalarKind k);
bool is_unsigned_int(ScalarKind k);
bool is_bool(ScalarKind k);
const std::vector<ScalarKind>& all_scalar_kinds();
// Why `bitcast` cannot go from `from` to `to` ("needs element types of the same width, got
// ..."), or "" when it can: the verifier's and the builder's message.
std::string bitcast_type_error(ScalarKind from, ScalarKind to);

struct DimExpr;

// One dimension of a tile or view shape: a static size, or a symbol (a constexpr name in a
// tile shape; a runtime dim name in a view shape), or in a tile shape an expression over
// constexprs and integers (`HD / 2`, `cdiv(N, BK)`), folded when the constexprs bind.
struct Dim {
  int64_t value = 0;
  std::string symbol;  // non-empty: symbolic; an expression's canonical text (what prints)
  std::shared_ptr<const DimExpr> expr;  // set only for an expression, not for a plain name

  Dim() = default;
  Dim(int64_t v) : value(v) {}  // NOLINT: implicit so that shapes read {1, 1024}
  Dim(int v) : value(v) {}      // NOLINT
  Dim(std::string s) : symbol(std::move(s)) {}  // NOLINT
  Dim(const char* s) : symbol(s) {}              // NOLINT
  explicit Dim(std::shared_ptr<const DimExpr> e);

  bool is_static() const { return symbol.empty(); }
  bool is_expr() const { return expr != nullptr; }
  std::string str() const { return is_static() ? std::to_string(value) : symbol; }
  // The text is canonical (one spelling per tree), so comparing it compares the trees.
  bool operator==(const Dim& o) const { return value == o.value && symbol == o.symbol; }
};

// A shape expression's tree. Leaves are integers and names; operators are the four
// arithmetic ones (`/` must divide evenly) and the calls cdiv, min, max.
struct DimExpr {
  enum class Op : uint8_t { Int, Name, Add, Sub, Mul, Div, Cdiv, Min, Max };
  Op op = Op::Int;
  int64_t value = 0;  // Int
  std::string name;   // Name
  std::shared_ptr<const DimExpr> lhs, rhs;

  static std::shared_ptr<const DimExpr> leaf(const Dim& d);  // an integer, a name or a subtree
  static std::shared_ptr<const DimExpr> make(Op op, const Dim& a, const Dim& b);
  std::string str() const;  // canonical text: `a - (b + c)`, `cdiv(N, 2) * 4`
};

// `a op b` as a shape dim (an expression; nothing is folded before binding).
Dim dim_expr(DimExpr::Op op, const Dim& a, const Dim& b);
Dim operator+(const Dim& a, const Dim& b);
Dim operator-(const Dim& a, const Dim& b);
Dim operator*(const Dim& a, const Dim& b);
Dim operator/(const Dim& a, const Dim& b);
Dim cdiv(const Dim& a, const Dim& b);
Dim min(const Dim& a, const Dim& b);
Dim max(const Dim& a, const Dim& b);

// The names a dim reads (a plain name, or an expression's leaves), in order, once each.
std::vector<std::string> dim_names(const Dim& d);

// A dim's value with every name looked up: the value, or why there is none (an unknown name,
// a `/` that does not divide evenly, a zero divisor, an overflow). Positivity is the caller's.
struct DimValue {
  int64_t value = 0;
  std::string error;  // empty: value holds
  bool unknown_name = false;  // the error is a name that `lookup` does not know
};
DimValue eval_dim(const Dim& d, const std::function<std::optional<int64_t>(const std::string&)>& lookup);

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
