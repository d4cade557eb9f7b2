// Tessera's embedded tile language (the Lite layer): C++ functions that build Tile IR.
//
//   KernelBuilder k("softmax");
//   auto x = k.view("x", f32, {"M", "N"}), y = k.view("y", f32, {"M", "N"});
//   auto BN = k.constexpr_("BLOCK_N", {256, 512, 1024});
//   k.grid({x.dim(0)});
//   auto t = x.tile({1, BN}).load({program_id(0), 0}, -inf);
//   auto e = exp(t - max(t, 1));            // numpy-style broadcasting
//   y.tile({1, BN}).store({program_id(0), 0}, e / sum(e, 1));
//   std::unique_ptr<Kernel> kernel = k.finish();
//
// Every function records the user's call site (std::source_location) on the ops it creates,
// and ill-typed programs fail at once with a TesseraError located there. The free functions
// build into the innermost live KernelBuilder of the calling thread. docs/language.md is the
// guide; docs/semantics.md defines what each op means.
#pragma once

#include <concepts>
#include <functional>
#include <initializer_list>
#include <limits>
#include <memory>
#include <optional>
#include <source_location>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ir/IR.h"

namespace tessera::lang {

using SrcLoc = std::source_location;
#define TESSERA_HERE SrcLoc loc = SrcLoc::current()

inline constexpr ScalarKind i1 = ScalarKind::I1, i8 = ScalarKind::I8, i16 = ScalarKind::I16,
                            i32 = ScalarKind::I32, i64 = ScalarKind::I64, u8 = ScalarKind::U8,
                            u16 = ScalarKind::U16, u32 = ScalarKind::U32, u64 = ScalarKind::U64,
                            f16 = ScalarKind::F16, bf16 = ScalarKind::BF16,
                            f32 = ScalarKind::F32, f64 = ScalarKind::F64,
                            f8e4m3 = ScalarKind::F8E4M3, f8e5m2 = ScalarKind::F8E5M2;
inline constexpr double inf = std::numeric_limits<double>::infinity();

class KernelBuilder;
class Var;
class Constexpr;

// An SSA value of the kernel being built: a scalar or a tile. Immutable; see Var for
// variables that change in loops and branches.
class Val {
 public:
  Val() = default;
  explicit Val(tessera::Value* v) : v_(v) {}

  tessera::Value* ir() const { return v_; }
  bool valid() const { return v_ != nullptr; }
  const Type& type() const;
  ScalarKind dtype() const { return type().elem; }
  const Shape& shape() const { return type().shape; }
  int rank() const { return type().rank(); }
  bool is_tile() const { return type().is_tile(); }

  Val to(ScalarKind dt, TESSERA_HERE) const;  // cast (no op when already dt)
  Val T(TESSERA_HERE) const;                  // transpose of a 2-D tile
  // A name hint for the printed IR ("acc").
  const Val& named(const std::string& name) const;

 private:
  tessera::Value* v_ = nullptr;
};

// A kernel constexpr (tunable parameter). As a tile dim it is symbolic (Dim("BLOCK_N"));
// used as a value it becomes a `param` op of type i32.
class Constexpr {
 public:
  Constexpr(std::string name, int64_t value) : name_(std::move(name)), value_(value) {}
  const std::string& name() const { return name_; }
  int64_t default_value() const { return value_; }
  operator Dim() const { return Dim(name_); }  // NOLINT: reads {1, BN}
  Val val(TESSERA_HERE) const;

 private:
  std::string name_;
  int64_t value_;
};

// Anything that can stand where a value is expected: a Val, a Var, a constexpr, or a C++
// literal. Literals take the element type of the other operand (or i32 / f32 alone). The
// constructor's default argument captures the user's source location of the expression.
class Operand {
 public:
  enum class Kind { Value, Int, Float, Constexpr };

  Operand(Val v, SrcLoc sl = SrcLoc::current());                // NOLINT
  Operand(const Var& v, SrcLoc sl = SrcLoc::current());         // NOLINT
  Operand(const Constexpr& c, SrcLoc sl = SrcLoc::current());   // NOLINT
  template <std::integral I>
    requires(!std::same_as<I, bool>)
  Operand(I i, SrcLoc sl = SrcLoc::current())  // NOLINT
      : kind_(Kind::Int), int_(static_cast<int64_t>(i)), sl_(sl) {}
  template <std::floating_point F>
  Operand(F f, SrcLoc sl = SrcLoc::current())  // NOLINT
      : kind_(Kind::Float), float_(static_cast<double>(f)), sl_(sl) {}

  Kind kind() const { return kind_; }
  bool is_literal() const { return kind_ == Kind::Int || kind_ == Kind::Float; }
  const Val& value() const { return val_; }
  int64_t int_value() const { return int_; }
  double float_value() const { return float_; }
  const std::string& constexpr_name() const { return cx_; }
  const SrcLoc& where() const { return sl_; }

  // The operand as a value; a literal becomes a const of `hint` (i32 or f32 when absent).
  Val materialize(std::optional<ScalarKind> hint, const SrcLoc& loc) const;

 private:
  Kind kind_;
  Val val_;
  int64_t int_ = 0;
  double float_ = 0;
  std::string cx_;
  SrcLoc sl_;
};

template <class T>
concept VarInit = std::same_as<std::remove_cvref_t<T>, Val> ||
                  std::same_as<std::remove_cvref_t<T>, Constexpr> ||
                  std::same_as<std::remove_cvref_t<T>, Operand> ||
                  (std::is_arithmetic_v<std::remove_cvref_t<T>> &&
                   !std::same_as<std::remove_cvref_t<T>, bool>);

// A mutable variable. Assigning to a Var inside for_range / while_ / if_ bodies makes its
// value loop-carried (or a result of the branch) automatically: the builder carries every Var
// that is live when the construct starts and drops those the body leaves unchanged.
class Var {
 public:
  // From anything an Operand accepts: a Val, a constexpr or a literal (i32 / f32).
  template <class T>
    requires VarInit<T>
  Var(T&& init, SrcLoc sl = SrcLoc::current())  // NOLINT
  {
    // An Operand as it is (Operand(an Operand, sl) would go through Var and recurse).
    if constexpr (std::same_as<std::remove_cvref_t<T>, Operand>)
      attach(init, sl);
    else
      attach(Operand(std::forward<T>(init), sl), sl);
  }
  Var(const Var& o);
  Var& operator=(const Var& o);
  template <class T>
    requires VarInit<T>
  Var& operator=(T&& v) {
    assign(Operand(std::forward<T>(v)));
    return *this;
  }
  ~Var();

  Val val() const { return cur_; }
  operator Val() const { return cur_; }  // NOLINT
  const Type& type() const { return cur_.type(); }
  ScalarKind dtype() const { return cur_.dtype(); }
  const Shape& shape() const { return cur_.shape(); }
  Val to(ScalarKind dt, TESSERA_HERE) const { return cur_.to(dt, loc); }

  Var& operator+=(const Operand& o);
  Var& operator-=(const Operand& o);
  Var& operator*=(const Operand& o);
  Var& operator/=(const Operand& o);

 private:
  friend class KernelBuilder;
  void attach(const Operand& init, const SrcLoc& sl);
  void assign(const Operand& v);
  KernelBuilder* owner_ = nullptr;
  Val cur_;
};

class View;

// A view split into tiles of a static shape; load/store address tiles by tile index.
class TiledView {
 public:
  TiledView(tessera::Value* view, Shape shape) : view_(view), shape_(std::move(shape)) {}
  // Elements outside the view read as `pad` (0 when absent).
  Val load(const std::vector<Operand>& index, std::optional<double> pad = std::nullopt,
           TESSERA_HERE) const;
  void store(const std::vector<Operand>& index, const Operand& value, TESSERA_HERE) const;
  const Shape& shape() const { return shape_; }
  tessera::Value* view() const { return view_; }

 private:
  tessera::Value* view_;
  Shape shape_;
};

// A kernel parameter that is a global tensor.
class View {
 public:
  explicit View(tessera::Value* v) : v_(v) {}
  tessera::Value* ir() const { return v_; }
  ScalarKind dtype() const { return v_->type.elem; }
  int rank() const { return v_->type.rank(); }
  const std::string& name() const { return v_->name; }
  Val dim(int axis, TESSERA_HERE) const;  // the run-time size (i32)
  TiledView tile(Shape shape, TESSERA_HERE) const;

 private:
  tessera::Value* v_;
};

struct LoopOptions {
  int pipeline = 0;  // > 0: software-pipeline hint with that many stages
};
inline LoopOptions pipeline(int stages) { return LoopOptions{stages}; }

class KernelBuilder {
 public:
  explicit KernelBuilder(std::string name, TESSERA_HERE);
  ~KernelBuilder();
  KernelBuilder(const KernelBuilder&) = delete;
  KernelBuilder& operator=(const KernelBuilder&) = delete;

  View view(const std::string& name, ScalarKind dt, Shape dims, TESSERA_HERE);
  Val scalar(const std::string& name, ScalarKind dt, TESSERA_HERE);
  // Candidates are the tuning space; the default is `value`, or the first candidate.
  Constexpr constexpr_(const std::string& name, std::vector<int64_t> candidates,
                       std::optional<int64_t> value = std::nullopt, TESSERA_HERE);
  // The launch grid: 1..3 i32 sizes built from dims, constexprs, scalars and literals.
  void grid(const std::vector<Operand>& sizes, TESSERA_HERE);
  // Verify and hand over the kernel; the builder is spent afterwards.
  std::unique_ptr<Kernel> finish(TESSERA_HERE);

  // --- used by the free functions (not needed in kernel code) ---
  static KernelBuilder& current(const SrcLoc& loc);
  Kernel& kernel() { return *kernel_; }
  Val emit(OpKind kind, std::vector<Val> operands, const Type& result,
           std::vector<NamedAttr> attrs, const SrcLoc& loc);
  std::vector<Val> emit_multi(OpKind kind, std::vector<Val> operands,
                              const std::vector<Type>& results, std::vector<NamedAttr> attrs,
                              const SrcLoc& loc);
  void emit_void(OpKind kind, std::vector<Val> operands, std::vector<NamedAttr> attrs,
                 const SrcLoc& loc);
  Val constant(ScalarKind dt, double v, const SrcLoc& loc);
  Val constant_int(ScalarKind dt, int64_t v, const SrcLoc& loc);
  Val param(const std::string& name, const SrcLoc& loc);
  void check_usable(const Val& v, const SrcLoc& loc) const;

  using LoopBody = std::function<std::vector<Val>(Val iv, std::vector<Val> carried)>;
  std::vector<Val> for_loop(const Operand& lb, const Operand& ub, const Operand& step,
                            std::vector<Val> init, const LoopBody& body, LoopOptions opts,
                            const SrcLoc& loc);
  using Branch = std::function<std::vector<Val>()>;
  std::vector<Val> if_then_else(const Operand& cond, const Branch& then_fn,
                                const Branch* else_fn, const SrcLoc& loc);
  void while_loop(const std::function<Val()>& cond, const std::function<void()>& body,
                  const SrcLoc& loc);
  Val region_combine(OpKind kind, const Val& x, int axis,
                     const std::function<Val(Val, Val)>& fn, const SrcLoc& loc);
  // A warp_role region (Struct layer): Vars the body assigns become its results (consumer
  // only; a producer hands data on through pipes).
  void warp_role_region(const std::string& role, const std::function<void()>& body, const SrcLoc& loc);
  // Where the builder inserts: the kernel body's top level (not inside a loop, branch or
  // role), and the role of the warp_role region being built ("" outside one).
  bool at_top_level() const { return blocks_.size() == 1; }
  const std::string& role() const { return role_; }

 private:
  friend class Var;
  Block& block() { return *blocks_.back(); }
  bool visible(const tessera::Value* v) const;
  Value* clone_into_grid(tessera::Value* v, const SrcLoc& loc);
  void require_open(const SrcLoc& loc) const;
  void remove_dead_grid_sources();

  struct Caches;  // constants and params already emitted, reused while visible

  std::unique_ptr<Kernel> kernel_;
  std::unique_ptr<Caches> caches_;
  std::vector<Block*> blocks_;
  std::vector<Var*> vars_;
  KernelBuilder* prev_ = nullptr;
  bool has_grid_ = false;
  std::vector<Op*> grid_sources_;
  std::vector<std::pair<const tessera::Value*, Value*>> grid_map_;
  std::string role_;
};

// --- indices and creation ---
Val program_id(int axis, TESSERA_HERE);
Val num_programs(int axis, TESSERA_HERE);
Val arange(Dim n, int64_t start = 0, TESSERA_HERE);  // tile<i32, [n]>
Val full(Shape shape, double value, ScalarKind dt, TESSERA_HERE);  // shape {}: a scalar
Val zeros(Shape shape, ScalarKind dt, TESSERA_HERE);
Val splat(const Operand& scalar, Shape shape, TESSERA_HERE);
Val cdiv(const Operand& a, const Operand& b, TESSERA_HERE);  // (a + b - 1) / b

// --- memory (gather/scatter/atomics address elements; indices are i32 scalars or tiles) ---
Val gather(const View& v, const std::vector<Operand>& index,
           std::optional<Operand> mask = std::nullopt, std::optional<double> pad = std::nullopt,
           TESSERA_HERE);
void scatter(const View& v, const Operand& value, const std::vector<Operand>& index,
             std::optional<Operand> mask = std::nullopt, TESSERA_HERE);
Val atomic_add(const View& v, const Operand& value, const std::vector<Operand>& index,
               std::optional<Operand> mask = std::nullopt, TESSERA_HERE);
Val atomic_max(const View& v, const Operand& value, const std::vector<Operand>& index,
               std::optional<Operand> mask = std::nullopt, TESSERA_HERE);
Val atomic_min(const View& v, const Operand& value, const std::vector<Operand>& index,
               std::optional<Operand> mask = std::nullopt, TESSERA_HERE);
Val atomic_cas(const View& v, const Operand& cmp, const Operand& value,
               const std::vector<Operand>& index, TESSERA_HERE);

// --- elementwise ---
Val exp(const Operand& x, TESSERA_HERE);
Val exp2(const Operand& x, TESSERA_HERE);
Val log(const Operand& x, TESSERA_HERE);
Val log2(const Operand& x, TESSERA_HERE);
Val log1p(const Operand& x, TESSERA_HERE);  // log(1 + x), accurate near 0
Val expm1(const Operand& x, TESSERA_HERE);  // e^x - 1, accurate near 0
Val sqrt(const Operand& x, TESSERA_HERE);
Val rsqrt(const Operand& x, TESSERA_HERE);
Val abs(const Operand& x, TESSERA_HERE);
Val sin(const Operand& x, TESSERA_HERE);
Val cos(const Operand& x, TESSERA_HERE);
Val tanh(const Operand& x, TESSERA_HERE);
Val sigmoid(const Operand& x, TESSERA_HERE);
Val erf(const Operand& x, TESSERA_HERE);
Val floor(const Operand& x, TESSERA_HERE);
Val ceil(const Operand& x, TESSERA_HERE);
Val minimum(const Operand& a, const Operand& b, TESSERA_HERE);
Val maximum(const Operand& a, const Operand& b, TESSERA_HERE);
Val pow(const Operand& a, const Operand& b, TESSERA_HERE);  // floats; broadcasts like a + b
Val fma(const Operand& a, const Operand& b, const Operand& c, TESSERA_HERE);
Val where(const Operand& cond, const Operand& a, const Operand& b, TESSERA_HERE);
Val cast(const Operand& x, ScalarKind dt, TESSERA_HERE);
// The same bits as `dt`, which must have x's width (f32 <-> i32/u32, bf16/f16 <-> i16/u16,
// f8 <-> i8/u8, ...); a float NaN gives its positive canonical bits (docs/semantics.md).
Val bitcast(const Operand& x, ScalarKind dt, TESSERA_HERE);
// The same tile in another layout encoding and memory space (ir/Layout.h); the values stay.
Val convert_layout(const Val& t, const Layout& layout, const std::string& space = "", TESSERA_HERE);
Val eq(const Operand& a, const Operand& b, TESSERA_HERE);
Val ne(const Operand& a, const Operand& b, TESSERA_HERE);

Val operator+(const Operand& a, const Operand& b);
Val operator-(const Operand& a, const Operand& b);
Val operator*(const Operand& a, const Operand& b);
Val operator/(const Operand& a, const Operand& b);
Val operator%(const Operand& a, const Operand& b);
Val operator&(const Operand& a, const Operand& b);
Val operator|(const Operand& a, const Operand& b);
Val operator^(const Operand& a, const Operand& b);
Val operator<<(const Operand& a, const Operand& b);
Val operator>>(const Operand& a, const Operand& b);
Val operator<(const Operand& a, const Operand& b);
Val operator<=(const Operand& a, const Operand& b);
Val operator>(const Operand& a, const Operand& b);
Val operator>=(const Operand& a, const Operand& b);
Val operator-(const Operand& a);
Val operator~(const Operand& a);

// --- shape ---
Val broadcast_to(const Operand& x, Shape shape, TESSERA_HERE);
Val expand_dims(const Operand& x, int axis, TESSERA_HERE);
Val reshape(const Operand& x, Shape shape, TESSERA_HERE);
Val permute(const Operand& x, std::vector<int64_t> dims, TESSERA_HERE);
Val transpose(const Operand& x, TESSERA_HERE);
Val extract_tile(const Operand& x, Shape sub_shape, const std::vector<Operand>& index,
                 TESSERA_HERE);
Val insert_tile(const Operand& x, const Operand& sub, const std::vector<Operand>& index,
                TESSERA_HERE);

// --- matrix: acc + a @ b (acc defaults to zeros of f32, f64 or i32 by the input type) ---
Val dot(const Operand& a, const Operand& b, std::optional<Operand> acc = std::nullopt,
        TESSERA_HERE);

// --- reductions and scans (negative axes count from the end) ---
Val sum(const Operand& x, int axis, TESSERA_HERE);
Val prod(const Operand& x, int axis, TESSERA_HERE);
Val max(const Operand& x, int axis, TESSERA_HERE);
Val min(const Operand& x, int axis, TESSERA_HERE);
Val argmax(const Operand& x, int axis, TESSERA_HERE);
Val argmin(const Operand& x, int axis, TESSERA_HERE);
Val reduce(const Operand& x, int axis, const std::function<Val(Val, Val)>& combine, TESSERA_HERE);
// The element of a one-element tile (every dim a static 1, e.g. the tile<f32, [1]> statistic
// of a [1, BN] row) as a scalar, for if_ conditions, loop bounds and indices. Scalars pass
// through unchanged.
Val item(const Operand& x, TESSERA_HERE);
Val cumsum(const Operand& x, int axis, TESSERA_HERE);
Val cumprod(const Operand& x, int axis, TESSERA_HERE);
Val cummax(const Operand& x, int axis, TESSERA_HERE);
Val cummin(const Operand& x, int axis, TESSERA_HERE);
Val scan(const Operand& x, int axis, const std::function<Val(Val, Val)>& combine, TESSERA_HERE);

// --- sorting (docs/semantics.md: NaN above +inf, -0 below +0, ties by smaller position) ---
struct Sorted {
  Val values;
  Val indices;  // i32: positions along the axis, or the index operand's elements
};
// Stable sort along `axis`: values only, values with their positions, or values with an i32
// index tile of the same shape moved alike.
Val sort(const Operand& x, int axis, bool descending = false, TESSERA_HERE);
Sorted sort_indexed(const Operand& x, int axis, bool descending = false, TESSERA_HERE);
Sorted sort_pairs(const Operand& x, const Operand& idx, int axis, bool descending = false, TESSERA_HERE);
// The k largest (smallest unless `largest`) along `axis`, best first, ties by smaller
// position; k a number or a constexpr (1 <= k <= the axis size, checked once bound). Indices:
// positions along the axis, or (topk_pairs) the elements of `idx` at those positions.
Sorted topk(const Operand& x, Dim k, int axis, bool largest = true, TESSERA_HERE);
Sorted topk_pairs(const Operand& x, const Operand& idx, Dim k, int axis, bool largest = true, TESSERA_HERE);
// Counts of the values of an integer tile (any shape) in bins 0 .. bins-1: tile<i32, [bins]>;
// values outside [0, bins) are not counted (so where(keep, bin, -1) counts only what is kept).
Val histogram(const Operand& x, Dim bins, TESSERA_HERE);

// --- control flow ---
// for iv in [lb, ub) step `step`: Vars assigned in the body are carried automatically.
inline void for_range(const Operand& lb, const Operand& ub, const Operand& step,
                      const std::function<void(Val)>& body, LoopOptions opts = {},
                      TESSERA_HERE) {
  KernelBuilder::current(loc).for_loop(
      lb, ub, step, {},
      [&](Val iv, std::vector<Val>) {
        body(iv);
        return std::vector<Val>{};
      },
      opts, loc);
}
// Explicit carried values: the body receives them and returns their next values; the loop
// returns their final values.
inline std::vector<Val> for_range(const Operand& lb, const Operand& ub, const Operand& step,
                                  std::vector<Val> init,
                                  const std::function<std::vector<Val>(Val, std::vector<Val>)>& body,
                                  LoopOptions opts = {}, TESSERA_HERE) {
  return KernelBuilder::current(loc).for_loop(lb, ub, step, std::move(init), body, opts, loc);
}

namespace detail {
template <class F>
KernelBuilder::Branch as_branch(F& f) {
  return [&f]() -> std::vector<Val> {
    using R = std::invoke_result_t<F&>;
    if constexpr (std::is_void_v<R>) {
      f();
      return {};
    } else if constexpr (std::is_convertible_v<R, std::vector<Val>> &&
                         !std::is_convertible_v<R, Val>) {
      return f();
    } else {
      return {Val(f())};
    }
  };
}
template <class F>
using BranchResult = std::conditional_t<std::is_void_v<std::invoke_result_t<F&>>, void, Val>;
}  // namespace detail

// if_(cond, then) and if_(cond, then, else): branches assign Vars, or both return a Val
// (then if_ returns the selected value).
template <class Then>
void if_(const Operand& cond, Then then_fn, TESSERA_HERE) {
  KernelBuilder::current(loc).if_then_else(cond, detail::as_branch(then_fn), nullptr, loc);
}
template <class Then, class Else>
detail::BranchResult<Then> if_(const Operand& cond, Then then_fn, Else else_fn, TESSERA_HERE) {
  auto e = detail::as_branch(else_fn);
  auto r = KernelBuilder::current(loc).if_then_else(cond, detail::as_branch(then_fn), &e, loc);
  if constexpr (!std::is_void_v<detail::BranchResult<Then>>) return r.at(0);
}
// while cond() is true run body(); Vars assigned in the body are carried.
inline void while_(const std::function<Val()>& cond, const std::function<void()>& body,
                   TESSERA_HERE) {
  KernelBuilder::current(loc).while_loop(cond, body, loc);
}

// --- Struct: architecture-aware control (docs/layers.md) ---
// A buffer in shared memory, `buffer<T, shape, space = "shared">`: the leading dims number its
// slots, the trailing ones are the tile each slot holds. Made at the top level of the kernel.
class Buffer {
 public:
  explicit Buffer(tessera::Value* v) : v_(v) {}
  tessera::Value* ir() const { return v_; }
  ScalarKind dtype() const { return v_->type.elem; }
  const Shape& shape() const { return v_->type.shape; }
  // A name hint for the printed IR and messages ("%a_stage").
  Buffer& named(const std::string& name) {
    v_->name = name;
    return *this;
  }
  // Start copying tile `index` of `src` into slot `slot` (one index per leading dim the tile
  // does not cover); elements outside the view read as `pad`. Read it after async_wait().
  void copy(const std::vector<Operand>& slot, const TiledView& src, const std::vector<Operand>& index,
            std::optional<double> pad = std::nullopt, TESSERA_HERE) const;
  // The tile in slot `slot`: the dims after the slot indices.
  Val read(const std::vector<Operand>& slot, TESSERA_HERE) const;
  void write(const std::vector<Operand>& slot, const Operand& value, TESSERA_HERE) const;

 private:
  tessera::Value* v_;
};
Buffer alloc_shared(ScalarKind dt, Shape shape, const Layout& layout = {}, TESSERA_HERE);
// Wait for this program's async copies (Buffer::copy).
void async_wait(TESSERA_HERE);

// A FIFO of tiles of one shape in a ring of `stages` shared-memory slots,
// `pipe<T, [stages, slot...]>`. In program order a push needs a free slot and a pop a full
// one; every pushed tile must be popped by the end of the program.
class Pipe {
 public:
  explicit Pipe(tessera::Value* v) : v_(v) {}
  tessera::Value* ir() const { return v_; }
  ScalarKind dtype() const { return v_->type.elem; }
  Shape slot_shape() const { return Shape(v_->type.shape.begin() + 1, v_->type.shape.end()); }
  Pipe& named(const std::string& name) {
    v_->name = name;
    return *this;
  }
  // Producer: copy tile `index` of `src` (its tile shape is the slot shape) into the next slot.
  void push(const TiledView& src, const std::vector<Operand>& index, std::optional<double> pad = std::nullopt,
            TESSERA_HERE) const;
  // Producer: push a tile value of the slot shape.
  void push(const Operand& tile, TESSERA_HERE) const;
  // Consumer: the oldest tile.
  Val pop(TESSERA_HERE) const;

 private:
  tessera::Value* v_;
};
Pipe pipe(ScalarKind dt, Shape slot_shape, Dim stages, TESSERA_HERE);

// warp_role(producer, [&] { ... }): a region run by the warps of one role. Its meaning is
// sequential (it runs where it stands); a backend may run the roles' warps concurrently, which
// the pipe rules keep deadlock-free. A consumer's assignments to outer Vars come out of it.
enum class Role { producer, consumer };
inline constexpr Role producer = Role::producer, consumer = Role::consumer;
void warp_role(Role role, const std::function<void()>& body, TESSERA_HERE);
void warp_role(const std::string& role, const std::function<void()>& body, TESSERA_HERE);

// --- Raw: inline native code, one body per backend ("cpp", "cuda") ---
struct RawBody {
  std::string backend;
  std::string code;
};
std::vector<Val> raw(const std::string& name, const std::vector<Operand>& operands,
                     const std::vector<Type>& result_types, const std::vector<RawBody>& bodies,
                     TESSERA_HERE);

// Types for raw() and checks: tile_type(f32, {16, 16}), scalar_type(i32).
inline Type tile_type(ScalarKind dt, Shape s) { return Type::tile(dt, std::move(s)); }
inline Type scalar_type(ScalarKind dt) { return Type::scalar(dt); }

#undef TESSERA_HERE

}  // namespace tessera::lang
