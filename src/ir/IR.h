// The Tile IR: values, ops, blocks, kernels and modules.
//
// SSA values; ops with operands, results, attributes and regions; every region is a single
// block whose arguments are its values (loop index, carried values, combiner inputs) and whose
// last op is `yield`. A kernel holds typed parameters (views and scalars), constexpr
// declarations with candidate values, a grid block (scalar ops, yields 1..3 i32 grid sizes)
// and a body block run once per program instance.
//
// Ownership: a Kernel owns all its Values; Blocks own their Ops; Ops own their regions.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "ir/Ops.h"
#include "ir/Type.h"
#include "support/Diagnostic.h"

namespace tessera {

struct Op;
struct Block;
struct Kernel;

struct Value {
  Type type;
  std::string name;      // a hint for printing ("x", "acc"); may be empty
  Op* def = nullptr;     // the op that produced it, or null for a block argument
  Block* block = nullptr;  // for a block argument: its block
  int index = 0;         // result number or argument number
};

using Attr = std::variant<int64_t, double, std::string, std::vector<int64_t>, bool>;

struct NamedAttr {
  std::string name;
  Attr value;
};

std::string attr_str(const Attr& a);  // as written in the text format

struct Block {
  std::vector<Value*> args;
  std::vector<std::unique_ptr<Op>> ops;
  Op* parent = nullptr;  // the op owning this region; null for a kernel's grid/body

  Op* terminator() const;  // the last op if it is a yield, else null
};

struct Op {
  OpKind kind;
  Loc loc;
  std::vector<Value*> operands;
  std::vector<Value*> results;
  std::vector<NamedAttr> attrs;
  std::vector<std::unique_ptr<Block>> regions;
  Block* parent = nullptr;

  const OpInfo& info() const { return op_info(kind); }
  std::string_view name() const { return info().name; }
  Value* result(size_t i = 0) const { return results.at(i); }
  Value* operand(size_t i) const { return operands.at(i); }
  Block& region(size_t i) const { return *regions.at(i); }

  const Attr* find_attr(std::string_view n) const;
  bool has_attr(std::string_view n) const { return find_attr(n) != nullptr; }
  // Typed accessors; they throw TesseraError (at this op) when missing or of another kind.
  int64_t attr_int(std::string_view n) const;
  double attr_number(std::string_view n) const;  // an int or float attribute, as double
  const std::string& attr_string(std::string_view n) const;
  const std::vector<int64_t>& attr_ints(std::string_view n) const;
  bool attr_bool(std::string_view n) const;
  void set_attr(std::string_view n, Attr v);  // replaces or appends
};

struct ConstexprDecl {
  std::string name;
  int64_t value = 0;                 // the current (default or bound) value
  std::vector<int64_t> candidates;   // the tuning space; empty means "any value"
  Loc loc;
};

struct Kernel {
  std::string name;
  Loc loc;
  std::vector<Value*> params;  // views and scalars, in signature order
  std::vector<ConstexprDecl> constexprs;
  std::unique_ptr<Block> grid;
  std::unique_ptr<Block> body;

  Kernel();
  Kernel(const Kernel&) = delete;
  Kernel& operator=(const Kernel&) = delete;

  Value* new_value(Type t, std::string name = {});
  Value* add_param(Type t, std::string name);
  Value* add_block_arg(Block& b, Type t, std::string name = {});
  // Create an op at the end of `b` (or before `before` when given) with fresh result values.
  Op* create_op(Block& b, OpKind kind, std::vector<Value*> operands,
                const std::vector<Type>& result_types, std::vector<NamedAttr> attrs = {},
                Loc loc = {}, size_t num_regions = 0, const Op* before = nullptr);

  const ConstexprDecl* find_constexpr(std::string_view n) const;
  ConstexprDecl* find_constexpr(std::string_view n);
  // Sets constexpr `n` to `value`: the kernel's own when it declares one, else a new one with that
  // single candidate (codegen knobs such as num_warps or whole_tile_checks, which some kernels
  // declare and others do not; a second declaration of a name would not compile).
  void set_constexpr(std::string_view n, int64_t value);
  // Parameters that are views / scalars, in order.
  std::vector<Value*> view_params() const;

  // A deep copy with fresh values (same names, types, attributes and locations).
  std::unique_ptr<Kernel> clone() const;

 private:
  std::vector<std::unique_ptr<Value>> values_;
};

struct Module {
  std::vector<std::unique_ptr<Kernel>> kernels;
  Kernel* find(std::string_view name) const;
};

// Visit every op in a block and, recursively, in the regions of its ops (pre-order).
void walk(Block& b, const std::function<void(Op&)>& fn);
void walk(Kernel& k, const std::function<void(Op&)>& fn);  // grid, then body

// Replace every use of `from` by `to` in the kernel.
void replace_all_uses(Kernel& k, Value* from, Value* to);

// Limits every kernel is checked against (docs/semantics.md): a constexpr's value (and each
// candidate) is an i32, since constexprs become i32 constants and tile dims; a tile, buffer or
// pipe holds at most kMaxTileElements elements.
inline constexpr int64_t kMaxTileElements = int64_t{1} << 24;
// The relative error of a relaxed exp (`exp {max_rel_error = r}` with r at least this may use
// one: the cpu backend's tsr::exp16_relaxed; relax-exp-precision writes this value): 2^-16.
inline constexpr double kRelaxedExpError = 1.0 / 65536.0;
// Empty when `value` is a valid constexpr value, else the message (naming the limit).
std::string constexpr_range_error(const std::string& name, int64_t value);

// The value of an integer scalar that a `const` op defines, else nullopt; const_positive: such
// a value > 0 (a `for` step that needs no run-time check).
std::optional<int64_t> const_int(const Value* v);
bool const_positive(const Value* v);
// An integer div, rem or cdiv whose divisor is not a nonzero constant (a `const`, or a splat of
// one): it fails on a zero divisor, so passes neither remove it unused (dce) nor hoist it where
// it might not have run (licm).
bool may_divide_by_zero(const Op& op);
// An extract_tile or insert_tile at a sub-tile index not all constant: out of range, it fails
// (dce keeps it unused).
bool has_runtime_subtile_index(const Op& op);

}  // namespace tessera
