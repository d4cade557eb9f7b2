// The verifier. It is the one place that states the rules of docs/semantics.md and the
// structural rules of docs/ir.md; every other component may assume verified IR.
//
// It must survive any input (the parser and C++ builders can hand it half-formed IR, and it is
// fuzzed), so nothing is dereferenced before it is known to belong to the kernel, and an op
// whose structure or operands are broken gets no type checks: its results are "poisoned" and
// ops using them skip their type checks too, so one mistake gives one message.
#include "ir/Verifier.h"

#include "ir/Struct.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <unordered_map>
#include <unordered_set>

namespace tessera {

namespace {

// The cpu and cuda backends declare every constexpr by its own name in the generated C++ (raw
// bodies read them), so a name C++ gives a meaning, or one the generated function already
// declares, would not compile there: "" or why `name` cannot be a constexpr's.
std::string reserved_constexpr_name(const std::string& name) {
  static const std::unordered_set<std::string> keywords = {
      "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break", "case", "catch",
      "char", "char8_t", "char16_t", "char32_t", "class", "compl", "concept", "const", "consteval", "constexpr",
      "constinit", "const_cast", "continue", "co_await", "co_return", "co_yield", "decltype", "default", "delete",
      "do", "double", "dynamic_cast", "else", "enum", "explicit", "export", "extern", "false", "float", "for",
      "friend", "goto", "if", "inline", "int", "long", "mutable", "namespace", "new", "noexcept", "not", "not_eq",
      "nullptr", "operator", "or", "or_eq", "private", "protected", "public", "register", "reinterpret_cast",
      "requires", "return", "short", "signed", "sizeof", "static", "static_assert", "static_cast", "struct",
      "switch", "template", "this", "thread_local", "throw", "true", "try", "typedef", "typeid", "typename",
      "union", "unsigned", "using", "virtual", "void", "volatile", "wchar_t", "while", "xor", "xor_eq"};
  // The cpu backend's program function (its argument block, program ids and counts), the
  // integer types and macros the generated code uses, CUDA's built-in variables and types.
  static const std::unordered_set<std::string> taken = {
      "A", "pid0", "pid1", "pid2", "np0", "np1", "np2", "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t",
      "uint16_t", "uint32_t", "uint64_t", "intptr_t", "uintptr_t", "size_t", "ptrdiff_t", "NAN", "INFINITY",
      "HUGE_VAL", "HUGE_VALF", "SIZE_MAX", "threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize", "dim3",
      "half", "half2"};
  if (keywords.count(name)) return "is a C++ keyword, and the generated C++ and CUDA declare constexprs by name";
  if (taken.count(name)) return "is a name the generated C++ or CUDA already uses (a type, a macro or a variable)";
  if (name.starts_with("__") || (name.size() > 1 && name[0] == '_' && std::isupper(static_cast<unsigned char>(name[1]))))
    return "names beginning with '__' or '_' and a capital are reserved to the C++ implementation";
  if (name.starts_with("tsr")) return "names beginning with 'tsr' are the generated code's (its runtime and locals)";
  // The emitters' own locals: a lower-case stem and a number (v12, i3, buf2, v7_name), and
  // names ending in '_' (o_, l_, a0_); <stdint.h>'s limit and constant macros (INT64_MAX, UINT8_C).
  size_t i = 0;
  while (i < name.size() && std::islower(static_cast<unsigned char>(name[i]))) ++i;
  const size_t digits = i;
  while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i]))) ++i;
  if (digits > 0 && i > digits && (i == name.size() || name[i] == '_'))
    return "a lower-case word and a number is how the generated code names its locals";
  if (name.back() == '_') return "names ending in '_' are the generated code's locals";
  for (const char* p : {"INT", "UINT"})
    if (name.starts_with(p) && (name.ends_with("_MIN") || name.ends_with("_MAX") || name.ends_with("_C")))
      return "is the form of <stdint.h>'s macros (INT64_MAX, UINT8_C)";
  return "";
}

std::string q(std::string_view s) { return "'" + std::string(s) + "'"; }

std::string kind_desc(AttrKind k) {
  switch (k) {
    case AttrKind::Int: return "an integer";
    case AttrKind::Number: return "a number";
    case AttrKind::String: return "a string";
    case AttrKind::IntList: return "a list of integers";
    case AttrKind::Bool: return "a boolean";
  }
  return "?";
}

bool attr_has_kind(const Attr& a, AttrKind k) {
  switch (k) {
    case AttrKind::Int: return std::holds_alternative<int64_t>(a);
    case AttrKind::Number: return std::holds_alternative<int64_t>(a) || std::holds_alternative<double>(a);
    case AttrKind::String: return std::holds_alternative<std::string>(a);
    case AttrKind::IntList: return std::holds_alternative<std::vector<int64_t>>(a);
    case AttrKind::Bool: return std::holds_alternative<bool>(a);
  }
  return false;
}

bool is_i32_scalar(const Type& t) { return t.is_scalar() && t.elem == ScalarKind::I32; }

// Two dims that may be symbolic: equal when provably equal or when a symbol hides the answer
// (rules needing the numbers are checked again after binding).
bool dims_may_equal(const Dim& a, const Dim& b) {
  if (a.is_static() && b.is_static()) return a.value == b.value;
  return true;
}

// The type a value of `t` has after removing dim `axis` (a scalar when t is 1-D).
// A reduction's result: the axis gone, and a distributed layout sliced along it (the threads
// that held the reduced dim now hold the same value).
Type drop_axis(const Type& t, int axis, ScalarKind elem) {
  if (t.rank() <= 1) return Type::scalar(elem);
  Type r = Type::tile(elem, t.shape);
  r.shape.erase(r.shape.begin() + axis);
  if (t.layout.is_distributed()) {
    r.layout = Layout::slice(t.layout, axis);
    r.space = t.space;
  }
  return r;
}

bool allowed_dot(ScalarKind in, ScalarKind acc) {
  using S = ScalarKind;
  switch (in) {
    case S::F8E4M3:
    case S::F8E5M2:
    case S::BF16: return acc == S::F32;
    case S::F16: return acc == S::F32 || acc == S::F16;
    case S::F32: return acc == S::F32;
    case S::F64: return acc == S::F64;
    case S::I8: return acc == S::I32;
    case S::U8: return acc == S::I32 || acc == S::U32;
    default: return false;
  }
}

bool allowed_in_grid(OpKind k) {
  switch (op_info(k).cls) {
    case OpClass::Constant:
    case OpClass::Unary:
    case OpClass::Binary:
    case OpClass::Compare:
    case OpClass::Ternary:
    case OpClass::Cast:
    case OpClass::Terminator: return true;
    default: return k == OpKind::Dim;
  }
}

// Whether the integer `v` is representable in integer kind `k`.
bool int_fits(ScalarKind k, int64_t v) {
  if (k == ScalarKind::I1) return v == 0 || v == 1;
  int bits = scalar_bits(k);
  if (is_unsigned_int(k)) return v >= 0 && (bits >= 64 || v < (int64_t{1} << bits));
  if (bits >= 64) return true;
  int64_t lim = int64_t{1} << (bits - 1);
  return v >= -lim && v < lim;
}

enum class BlockRole { Grid, Body, Region };

class Verifier {
 public:
  Verifier(const Kernel& k, const VerifyOptions& opts) : k_(k), opts_(opts) {}

  std::vector<TesseraError> run() {
    check_signature();
    collect_definitions();
    if (!k_.grid) {
      error(k_.loc, "kernel " + q(k_.name) + " has no grid block");
    } else {
      verify_block(*k_.grid, BlockRole::Grid, nullptr);
      check_grid_yield(*k_.grid);
    }
    if (!k_.body)
      error(k_.loc, "kernel " + q(k_.name) + " has no body block");
    else
      verify_block(*k_.body, BlockRole::Body, nullptr);
    // Kernel-wide Struct rules trust the op-level checks, so they run on clean kernels only.
    if (errors_.empty() && k_.body)
      for (TesseraError& e : verify_struct_rules(k_)) errors_.push_back(std::move(e));
    return std::move(errors_);
  }

 private:
  const Kernel& k_;
  const VerifyOptions& opts_;
  std::vector<TesseraError> errors_;
  // Every value the kernel defines, with its defining block (null for parameters). Operand
  // pointers are looked up here before they are ever dereferenced.
  std::unordered_map<const Value*, const Block*> defined_;
  std::unordered_set<const Value*> visible_;
  std::unordered_set<const Value*> poisoned_;
  std::vector<const Block*> open_blocks_;
  std::unordered_set<const Op*> failed_ops_;  // ops with a reported problem
  const Op* cur_ = nullptr;  // the op being checked
  bool cur_failed_ = false;

  void error(const Loc& loc, const std::string& msg) { errors_.emplace_back(loc, msg); }
  // An error about the current op; its name leads the message.
  void fail(const std::string& msg) {
    cur_failed_ = true;
    error(cur_->loc, q(cur_->name()) + " " + msg);
  }

  // ---------------------------------------------------------------- kernel level

  void check_signature() {
    std::unordered_set<std::string> seen;
    for (size_t i = 0; i < k_.params.size(); ++i) {
      const Value* p = k_.params[i];
      if (!p) {
        error(k_.loc, "kernel " + q(k_.name) + " parameter " + std::to_string(i) + " is null");
        continue;
      }
      std::string what = "kernel " + q(k_.name) + " parameter %" + p->name;
      if (!p->name.empty() && !seen.insert(p->name).second)
        error(k_.loc, what + " is declared twice");
      if (p->type.is_view()) {
        if (p->type.rank() == 0) error(k_.loc, what + " must be a view of rank >= 1, got " + p->type.str());
        for (const Dim& d : p->type.shape)
          if (d.is_static() && d.value <= 0)
            error(k_.loc, what + " has a non-positive dim " + std::to_string(d.value) + " in " +
                              p->type.str());
      } else if (!p->type.is_scalar()) {
        error(k_.loc, what + " must be a view or a scalar, got " + p->type.str());
      }
    }
    std::unordered_set<std::string> names;
    for (const ConstexprDecl& c : k_.constexprs) {
      const Loc& loc = c.loc.known() ? c.loc : k_.loc;
      if (!names.insert(c.name).second) {
        error(loc, "constexpr " + c.name + " is declared twice");
        continue;
      }
      if (std::string why = reserved_constexpr_name(c.name); !why.empty()) {
        error(loc, "constexpr " + c.name + ": " + why);
        continue;
      }
      std::string range = constexpr_range_error(c.name, c.value);
      for (int64_t v : c.candidates)
        if (range.empty()) range = constexpr_range_error(c.name + " candidate", v);
      if (!range.empty()) {
        error(loc, range);
        continue;
      }
      if (!c.candidates.empty() &&
          std::find(c.candidates.begin(), c.candidates.end(), c.value) == c.candidates.end())
        error(loc, "constexpr " + c.name + " = " + std::to_string(c.value) +
                       " is not one of its candidates " + attr_str(c.candidates));
    }
  }

  void collect_definitions() {
    for (const Value* p : k_.params)
      if (p) defined_.emplace(p, nullptr);
    if (k_.grid) collect(*k_.grid);
    if (k_.body) collect(*k_.body);
  }

  void collect(const Block& b) {
    for (const Value* a : b.args)
      if (a && !defined_.emplace(a, &b).second)
        error(k_.loc, "value %" + a->name + " is defined twice");
    for (const auto& op : b.ops) {
      if (!op) continue;
      for (const Value* r : op->results)
        if (r && !defined_.emplace(r, &b).second)
          error(op->loc, q(op->name()) + " result %" + r->name + " is already defined elsewhere");
      for (const auto& region : op->regions)
        if (region) collect(*region);
    }
  }

  // ---------------------------------------------------------------- blocks

  void verify_block(const Block& b, BlockRole role, const Op* parent, size_t index = 0) {
    open_blocks_.push_back(&b);
    if (role != BlockRole::Region && !b.args.empty())
      error(k_.loc, std::string(role == BlockRole::Grid ? "grid" : "body") + " block of kernel " +
                        q(k_.name) + " must not have arguments");
    for (const Value* a : b.args)
      if (a) visible_.insert(a);
    for (size_t i = 0; i < b.ops.size(); ++i) {
      const Op* op = b.ops[i].get();
      if (!op) {
        error(parent ? parent->loc : k_.loc, "null op in a block of kernel " + q(k_.name));
        continue;
      }
      if (op->kind == OpKind::Yield) {
        if (role == BlockRole::Body)
          error(op->loc, "'yield' is not allowed in the kernel body");
        else if (i + 1 != b.ops.size())
          error(op->loc, "'yield' must be the last op of its region");
        else if (role != BlockRole::Grid && (op->find_attr("persistent") || op->find_attr("group_rows") ||
                                              op->find_attr("num_warps") || op->find_attr("prefetch_buffers") ||
                                              op->find_attr("program_pairs") || op->find_attr("stream_k") ||
                                              op->find_attr("num_ctas")))
          error(op->loc, "'yield' takes persistent, group_rows, num_warps, num_ctas, prefetch_buffers, program_pairs and stream_k "
                         "only in the grid block (they say how its programs run)");
      }
      verify_op(*op, role == BlockRole::Grid);
      for (const Value* r : op->results)
        if (r) visible_.insert(r);
    }
    if (role == BlockRole::Region && !b.terminator())
      error(parent->loc, q(parent->name()) + " region " + std::to_string(index) + " does not end with 'yield'");
    // Leave scope: what this block defined is invisible outside it.
    for (const Value* a : b.args) visible_.erase(a);
    for (const auto& op : b.ops)
      if (op)
        for (const Value* r : op->results) visible_.erase(r);
    open_blocks_.pop_back();
  }

  void check_grid_yield(const Block& g) {
    const Op* y = g.terminator();
    if (!y) {
      error(k_.loc, "grid of kernel " + q(k_.name) + " must end with 'yield' of 1 to 3 i32 sizes");
      return;
    }
    if (failed_ops_.count(y)) return;
    if (y->operands.empty() || y->operands.size() > 3) {
      error(y->loc, "grid must yield 1 to 3 i32 sizes, got " + std::to_string(y->operands.size()) +
                        " values");
      return;
    }
    for (size_t i = 0; i < y->operands.size(); ++i) {
      const Value* v = y->operands[i];
      if (!usable(v)) continue;
      if (!is_i32_scalar(v->type))
        error(y->loc, "grid size " + std::to_string(i) + " must be i32, got " + v->type.str());
      else if (std::optional<int64_t> c = const_int(v); c && *c < 0)
        error(y->loc, "grid size " + std::to_string(i) + " is " + std::to_string(*c) +
                          ": a size of 0 runs no programs, a negative size is an error");
    }
  }

  // A checked operand whose type can be trusted.
  bool usable(const Value* v) const { return v && defined_.count(v) && !poisoned_.count(v); }

  // ---------------------------------------------------------------- ops

  void verify_op(const Op& op, bool in_grid) {
    const Op* saved = cur_;
    bool saved_failed = cur_failed_;
    cur_ = &op;
    cur_failed_ = false;

    if (in_grid && !allowed_in_grid(op.kind)) fail("is not allowed in the grid block (only scalar ops)");
    bool structure_ok = check_structure(op);
    bool operands_ok = check_operands(op);
    bool types_ok = structure_ok && check_result_types(op);
    bool trusted = operands_ok && std::all_of(op.operands.begin(), op.operands.end(),
                                              [&](const Value* v) { return !poisoned_.count(v); });
    if (types_ok && trusted && !cur_failed_) {
      if (in_grid) check_grid_op(op);
      if (!cur_failed_) check_rules(op);
    }
    // Regions are verified even when the op is broken, so that mistakes inside are reported.
    bool self_failed = cur_failed_ || !trusted;
    for (size_t i = 0; i < op.regions.size(); ++i)
      if (op.regions[i]) verify_block(*op.regions[i], BlockRole::Region, &op, i);
    cur_ = &op;
    cur_failed_ = false;
    if (structure_ok && types_ok && trusted && !self_failed) check_region_yields(op);
    self_failed = self_failed || cur_failed_;
    if (self_failed) {
      failed_ops_.insert(&op);
      for (const Value* r : op.results)
        if (r) poisoned_.insert(r);
    }

    cur_ = saved;
    cur_failed_ = saved_failed;
  }

  static std::string count_range(int lo, int hi) {
    if (hi < 0) return "at least " + std::to_string(lo);
    if (lo == hi) return std::to_string(lo);
    return std::to_string(lo) + " to " + std::to_string(hi);
  }

  bool check_structure(const Op& op) {
    const OpInfo& info = op.info();
    bool ok = true;
    int n = static_cast<int>(op.operands.size());
    if (n < info.min_operands || (info.max_operands >= 0 && n > info.max_operands)) {
      fail("expects " + count_range(info.min_operands, info.max_operands) + " operand" +
           (info.min_operands == 1 && info.max_operands == 1 ? "" : "s") + ", got " + std::to_string(n));
      ok = false;
    }
    if (info.num_results >= 0 && static_cast<int>(op.results.size()) != info.num_results) {
      fail("expects " + std::to_string(info.num_results) + " result" + (info.num_results == 1 ? "" : "s") +
           ", got " + std::to_string(op.results.size()));
      ok = false;
    }
    if (static_cast<int>(op.regions.size()) != info.num_regions) {
      fail("expects " + std::to_string(info.num_regions) + " region" + (info.num_regions == 1 ? "" : "s") +
           ", got " + std::to_string(op.regions.size()));
      ok = false;
    }
    for (size_t i = 0; i < op.regions.size(); ++i)
      if (!op.regions[i]) {
        fail("region " + std::to_string(i) + " is null");
        ok = false;
      }
    for (size_t i = 0; i < op.results.size(); ++i)
      if (!op.results[i]) {
        fail("result " + std::to_string(i) + " is null");
        ok = false;
      }
    std::unordered_set<std::string> seen;
    for (const NamedAttr& a : op.attrs) {
      const AttrSpec* spec = info.find_attr(a.name);
      if (!spec) {
        fail("has unknown attribute " + q(a.name));
        ok = false;
      } else if (!seen.insert(a.name).second) {
        fail("has attribute " + q(a.name) + " twice");
        ok = false;
      } else if (!attr_has_kind(a.value, spec->kind)) {
        fail("attribute " + q(a.name) + " must be " + kind_desc(spec->kind) + ", got " + attr_str(a.value));
        ok = false;
      }
    }
    for (const AttrSpec& spec : info.attrs)
      if (spec.required && !op.find_attr(spec.name)) {
        fail("is missing required attribute " + q(spec.name));
        ok = false;
      }
    return ok;
  }

  std::string operand_desc(size_t i, const Value* v) const {
    std::string s = "operand " + std::to_string(i);
    if (v && defined_.count(v) && !v->name.empty()) s += " (%" + v->name + ")";
    return s;
  }

  bool check_operands(const Op& op) {
    bool ok = true;
    for (size_t i = 0; i < op.operands.size(); ++i) {
      const Value* v = op.operands[i];
      if (!v) {
        fail(operand_desc(i, v) + " is null");
        ok = false;
        continue;
      }
      auto it = defined_.find(v);
      if (it == defined_.end()) {
        fail(operand_desc(i, v) + " does not belong to kernel " + q(k_.name));
        ok = false;
        continue;
      }
      if (it->second == nullptr || visible_.count(v)) continue;
      bool enclosing = std::find(open_blocks_.begin(), open_blocks_.end(), it->second) != open_blocks_.end();
      if (it->second == k_.grid.get())
        fail(operand_desc(i, v) + " is a value of the grid block: grid values are visible only in the grid block "
                                  "(compute it again in the body, e.g. with dim or program_id)");
      else
        fail(operand_desc(i, v) + (enclosing ? " is used before its definition"
                                           : " is defined in another region and is not visible here"));
      ok = false;
    }
    return ok;
  }

  // " (with HD = 63)": the constexpr values an expression dim was evaluated with.
  std::string constexpr_values(const Dim& d) const {
    if (!d.is_expr()) return "";
    std::string out;
    for (const std::string& n : dim_names(d))
      if (const ConstexprDecl* c = k_.find_constexpr(n))
        out += (out.empty() ? " (with " : ", ") + n + " = " + std::to_string(c->value);
    return out.empty() ? out : out + ")";
  }

  // Tile shapes: positive dims, symbols naming constexprs, static when bound.
  bool check_type_dims(const Type& t, const std::string& what) {
    if (!t.has_static_dims()) return true;
    bool ok = true;
    if (t.rank() == 0) {
      fail(what + " " + t.str() + " must have rank >= 1");
      return false;
    }
    if (t.is_pipe() && t.rank() < 2) {
      fail(what + " " + t.str() + " needs a number of stages and at least one slot dim");
      return false;
    }
    // Each dim's value with the constexprs at their current values (bound or default): an
    // expression must evaluate (known names, `/` dividing evenly) to a positive size.
    std::vector<int64_t> values;
    for (const Dim& d : t.shape) {
      DimValue v = eval_dim(d, [&](const std::string& n) -> std::optional<int64_t> {
        if (const ConstexprDecl* c = k_.find_constexpr(n)) return c->value;
        return std::nullopt;
      });
      if (v.unknown_name) {
        std::string name;
        for (const std::string& n : dim_names(d))
          if (!k_.find_constexpr(n) && name.empty()) name = n;
        fail(what + " " + t.str() + " names " + q(name) + ", which is not a constexpr of kernel " + q(k_.name));
        ok = false;
      } else if (!v.error.empty()) {
        fail(what + " " + t.str() + ": " + v.error + constexpr_values(d));
        ok = false;
      } else if (v.value <= 0) {
        fail(what + " " + t.str() + " has a non-positive dim " +
             (d.is_static() ? std::to_string(v.value) : d.symbol + " = " + std::to_string(v.value) + constexpr_values(d)));
        ok = false;
      } else if (opts_.require_bound && !d.is_static()) {
        fail(what + " " + t.str() + " has unbound constexpr dim " + q(d.symbol));
        ok = false;
      }
      values.push_back(v.value);
    }
    // The element count, without overflowing.
    int64_t n = 1;
    for (int64_t v : values) {
      if (!ok) break;
      if (__builtin_mul_overflow(n, v, &n) || n > kMaxTileElements) {
        fail(what + " " + t.str() + " has more than " + std::to_string(kMaxTileElements) +
             " elements (2^24), the limit for a tile, buffer or pipe");
        return false;
      }
    }
    return ok && check_type_encoding(t, what);
  }

  // A layout fits its shape (Layout.h's rules; unbound dims are not checked) and its memory
  // space: register layouts in registers, shared layouts in shared memory; buffers and pipes
  // are shared memory and take a shared layout or none.
  bool check_type_encoding(const Type& t, const std::string& what) {
    const std::string& sp = t.space;
    if (t.is_tile() && !sp.empty() && sp != "global" && sp != "shared" && sp != "registers") {
      fail(what + " " + t.str() + ": space must be \"global\", \"shared\" or \"registers\"");
      return false;
    }
    if (t.layout.empty()) return true;
    std::vector<int64_t> shape;
    for (const Dim& d : t.shape) shape.push_back(d.is_static() ? d.value : -1);
    if (std::string m = layout_misfit(t.layout, shape); !m.empty()) {
      fail(what + " " + t.str() + ": " + m);
      return false;
    }
    const bool shared_layout = t.layout.kind == Layout::Kind::Shared;
    if (!t.is_tile() && !shared_layout) {
      fail(what + " " + t.str() + ": a buffer or pipe is shared memory and takes a shared layout");
      return false;
    }
    if (t.is_tile() && shared_layout && sp != "shared") {
      fail(what + " " + t.str() + ": a shared layout needs space = \"shared\"");
      return false;
    }
    if (t.is_tile() && !shared_layout && !sp.empty() && sp != "registers") {
      fail(what + " " + t.str() + ": a " + layout_kind_name(t.layout.kind) +
           " layout spreads the tile over the threads' registers, so its space is \"registers\" (or none)");
      return false;
    }
    return true;
  }

  bool check_result_types(const Op& op) {
    bool ok = true;
    for (size_t i = 0; i < op.results.size(); ++i) {
      const Type& t = op.results[i]->type;
      std::string what = op.results.size() == 1 ? "result type" : "result " + std::to_string(i) + " type";
      // Only `alloc` and `pipe` make storage (buffers, pipes); every other result is a value.
      bool storage = (op.kind == OpKind::Alloc && t.is_buffer()) || (op.kind == OpKind::Pipe && t.is_pipe());
      if (op.kind == OpKind::Alloc && !t.is_buffer()) {
        fail(what + " must be a buffer, got " + t.str());
        ok = false;
      } else if (op.kind == OpKind::Pipe && !t.is_pipe()) {
        fail(what + " must be a pipe, got " + t.str());
        ok = false;
      } else if (!t.is_value() && !storage) {
        fail(what + " must be a scalar or a tile, got " + t.str());
        ok = false;
      } else if (!check_type_dims(t, what)) {
        ok = false;
      }
    }
    for (size_t r = 0; r < op.regions.size(); ++r) {
      if (!op.regions[r]) continue;
      const auto& args = op.regions[r]->args;
      for (size_t i = 0; i < args.size(); ++i) {
        std::string what = "region " + std::to_string(r) + " argument " + std::to_string(i) + " type";
        if (!args[i]) {
          fail("region " + std::to_string(r) + " argument " + std::to_string(i) + " is null");
          ok = false;
        } else if (!args[i]->type.is_value()) {
          fail(what + " must be a scalar or a tile, got " + args[i]->type.str());
          ok = false;
        } else if (!check_type_dims(args[i]->type, what)) {
          ok = false;
        }
      }
    }
    return ok;
  }

  // Whether `op` has integer attribute `name` equal to `v` (an attribute of another kind, which
  // that op's own check reports, is not: damaged input must not throw here).
  static bool int_attr_is(const Op* op, const char* name, int64_t v) {
    const Attr* a = op ? op->find_attr(name) : nullptr;
    const int64_t* x = a ? std::get_if<int64_t>(a) : nullptr;
    return x && *x == v;
  }

  void check_grid_op(const Op& op) {
    // The launch's form (persist-programs): programs in a loop of persistent CTAs, and the
    // order programs are taken in, groups of `group_rows` values of axis 0 (by persistent CTAs,
    // or with one CTA per program renumbered so).
    if (const Attr* p = op.find_attr("persistent"); p && std::get<int64_t>(*p) != 0 && std::get<int64_t>(*p) != 1)
      return fail("persistent must be 0 or 1 (CTAs that loop over the programs), got " + attr_str(*p));
    // The CTAs of every program, a thread-block cluster (cluster-programs).
    int64_t ctas = 1;
    if (const Attr* c = op.find_attr("num_ctas")) {
      const int64_t* n = std::get_if<int64_t>(c);
      if (!n || (*n != 1 && *n != 2 && *n != 4 && *n != 8))
        return fail("num_ctas must be 1, 2, 4 or 8 (the CTAs of a thread-block cluster running each program), got " +
                    attr_str(*c));
      // (The program id is the cluster's: no other mapping of programs to CTAs goes with it.)
      if (*n > 1)
        for (const char* a : kProgramMappingAttrs)
          if (const Attr* other = op.find_attr(a); other && !(std::string(a) == "persistent" && int_attr_is(&op, a, 0)))
            return fail("num_ctas = " + std::to_string(*n) + " does not go with " + a +
                        " (a program's CTAs are one cluster's, the program id the cluster's)");
      ctas = *n;
    }
    // The warps of every program (assign-launch-shape), num_warps / num_ctas to a CTA: a CTA
    // has at most 1024 threads.
    if (const Attr* w = op.find_attr("num_warps")) {
      const int64_t n = std::get<int64_t>(*w);
      if (n < 1 || n > 32 * ctas || n % ctas != 0)
        return fail("num_warps must be between 1 and 32 (warps of each program: a CTA has at most 1024 threads)" +
                    (ctas > 1 ? std::string(" times num_ctas = ") + std::to_string(ctas) + ", and a multiple of it" : std::string()) +
                    ", got " + attr_str(*w));
    }
    // The shared buffers of the next programs' tiles (prefetch-programs).
    if (const Attr* b = op.find_attr("prefetch_buffers")) {
      const int64_t* n = std::get_if<int64_t>(b);
      if (!n || (*n != 1 && *n != 2))
        return fail("prefetch_buffers must be 1 or 2 (shared buffers of the next program's tiles), got " + attr_str(*b));
    }
    if (const Attr* g = op.find_attr("group_rows")) {
      if (std::get<int64_t>(*g) < 1 || std::get<int64_t>(*g) > 1024)
        return fail("group_rows must be between 1 and 1024 (values of program axis 0 per group), got " + attr_str(*g));
    }
    // CTA pairs of a cluster taking programs (2q, n), (2q + 1, n) (pair-programs): persistent CTAs only.
    if (const Attr* pp = op.find_attr("program_pairs")) {
      const int64_t v = std::get<int64_t>(*pp);
      if (v != 0 && v != 1) return fail("program_pairs must be 0 or 1 (CTA pairs taking programs 2q and 2q + 1), got " + attr_str(*pp));
      if (v == 1 && !int_attr_is(&op, "persistent", 1))
        return fail("program_pairs = 1 needs persistent = 1 (the pairs are persistent CTAs of a cluster)");
    }
    // A last partial wave shared out over the persistent CTAs (stream-k-programs).
    if (const Attr* sk = op.find_attr("stream_k")) {
      const int64_t v = std::get<int64_t>(*sk);
      if (v != 0 && v != 1) return fail("stream_k must be 0 or 1 (the last partial wave's K loops shared out), got " + attr_str(*sk));
      if (v == 1 && !int_attr_is(&op, "persistent", 1))
        return fail("stream_k = 1 needs persistent = 1 (the parts are run by persistent CTAs)");
      if (v == 1 && int_attr_is(&op, "program_pairs", 1))
        return fail("stream_k = 1 does not go with program_pairs = 1 (a pair's parts would not run in step)");
    }
    for (const Value* v : op.operands)
      if (!v->type.is_scalar() && !(op.kind == OpKind::Dim && v->type.is_view())) {
        fail("in the grid block must work on scalars, got " + v->type.str());
        return;
      }
    for (const Value* r : op.results)
      if (!r->type.is_scalar()) {
        fail("in the grid block must produce scalars, got " + r->type.str());
        return;
      }
  }

  // ---------------------------------------------------------------- op rules

  const Type& ot(size_t i) const { return cur_->operands[i]->type; }
  const Type& rt(size_t i = 0) const { return cur_->results[i]->type; }

  void expect_result(const Type& want) {
    if (rt() != want) fail("result type must be " + want.str() + ", got " + rt().str());
  }

  void check_axis(int64_t axis, int64_t lo, int64_t hi, const std::string& of) {
    if (axis < lo || axis > hi)
      fail("axis " + std::to_string(axis) + " is out of range [" + std::to_string(lo) + ", " +
           std::to_string(hi) + "]" + of);
  }

  void check_pad(const Op& op, ScalarKind elem) {
    const Attr* a = op.find_attr("pad");
    if (!a) return;
    if (is_float(elem)) return;
    if (std::holds_alternative<double>(*a)) {
      fail("pad " + attr_str(*a) + " is not valid for element type " + std::string(scalar_name(elem)));
      return;
    }
    int64_t v = std::get<int64_t>(*a);
    if (!int_fits(elem, v))
      fail("pad " + std::to_string(v) + " does not fit in " + std::string(scalar_name(elem)));
  }

  // l2_hint: "evict_first", "evict_last", or "few_readers" with `readers`, distinct grid axes
  // (hint-l2-policy); `readers` only with "few_readers". l2_prefetch: 64, 128 or 256 bytes.
  void check_l2_hint(const Op& op) {
    if (const Attr* p = op.find_attr("l2_prefetch")) {
      const int64_t b = std::get<int64_t>(*p);
      if (b != 64 && b != 128 && b != 256) {
        fail("l2_prefetch (the bytes L2 fetches around each copy) must be 64, 128 or 256, got " + std::to_string(b));
        return;
      }
    }
    const Attr* h = op.find_attr("l2_hint");
    const Attr* r = op.find_attr("readers");
    const std::string hint = h ? std::get<std::string>(*h) : "";
    if (h && hint != "evict_first" && hint != "evict_last" && hint != "few_readers") {
      fail("l2_hint must be \"evict_first\", \"evict_last\" or \"few_readers\", got " + attr_str(*h));
      return;
    }
    if ((hint == "few_readers") != (r != nullptr)) {
      fail("readers (the grid axes whose programs share a tile) goes with l2_hint = \"few_readers\" and only with it");
      return;
    }
    if (!r) return;
    std::vector<int64_t> axes = std::get<std::vector<int64_t>>(*r);
    std::sort(axes.begin(), axes.end());
    if (axes.empty() || axes.front() < 0 || axes.back() > 2 || std::adjacent_find(axes.begin(), axes.end()) != axes.end())
      fail("readers must be distinct grid axes in [0, 2], got " + attr_str(*r));
  }

  // prefetch: "next_program" or "once", with prefetch_at, the tile's byte offset in the prefetch
  // buffer (a multiple of 16); both only where the grid's yield says persistent = 1, since the
  // copies are made by the CTA's previous program (prefetch-programs).
  void check_prefetch(const Op& op) {
    const Attr* p = op.find_attr("prefetch");
    const Attr* at = op.find_attr("prefetch_at");
    if (!p && !at) return;
    const std::string* how = p ? std::get_if<std::string>(p) : nullptr;
    if (p && (!how || (*how != "next_program" && *how != "once")))
      return fail("prefetch must be \"next_program\" or \"once\", got " + attr_str(*p));
    const int64_t* off = at ? std::get_if<int64_t>(at) : nullptr;
    if (!p || !off || *off < 0 || *off % 16 != 0)
      return fail("prefetch goes with prefetch_at, the tile's byte offset in the prefetch buffer (a multiple of 16 from 0)" +
                  std::string(at ? ", got " + attr_str(*at) : ""));
    const Op* y = k_.grid ? k_.grid->terminator() : nullptr;
    const Attr* pers = y ? y->find_attr("persistent") : nullptr;
    const int64_t* on = pers ? std::get_if<int64_t>(pers) : nullptr;
    if (!on || *on != 1)
      fail("prefetch needs persistent = 1 on the grid's yield (the CTA's previous program copies the tile)");
  }

  // multicast (pair-programs): 0 or 1, and 1 only where the grid's yield says program_pairs = 1
  // (the pair's other CTA copies the other half of the tile).
  void check_multicast(const Op& op) {
    const Attr* m = op.find_attr("multicast");
    if (!m) return;
    const int64_t v = std::get<int64_t>(*m);
    if (v != 0 && v != 1) return fail("multicast must be 0 or 1 (a CTA pair's shared ring tile), got " + attr_str(*m));
    const Op* y = k_.grid ? k_.grid->terminator() : nullptr;
    if (v == 1 && !int_attr_is(y, "program_pairs", 1))
      fail("multicast = 1 needs program_pairs = 1 on the grid's yield (the CTA pair that shares the tile)");
  }

  // Operands [first, first + n) must be i32 scalars named `what` i.
  bool check_i32_indices(size_t first, size_t n, const std::string& what) {
    for (size_t i = 0; i < n; ++i)
      if (!is_i32_scalar(ot(first + i))) {
        fail(what + " " + std::to_string(i) + " must be an i32 scalar, got " + ot(first + i).str());
        return false;
      }
    return true;
  }

  bool check_view(size_t i) {
    if (ot(i).is_view()) return true;
    fail("operand " + std::to_string(i) + " must be a view, got " + ot(i).str());
    return false;
  }

  void check_rules(const Op& op) {
    switch (op.info().cls) {
      case OpClass::Constant: return check_constant(op);
      case OpClass::Index: return check_index(op);
      case OpClass::Create: return check_create(op);
      case OpClass::Memory: return check_memory(op);
      case OpClass::Unary: return check_unary(op);
      case OpClass::Binary:
      case OpClass::Compare: return check_binary(op);
      case OpClass::Ternary: return check_ternary(op);
      case OpClass::Cast: return check_cast(op);
      case OpClass::Shape: return check_shape(op);
      case OpClass::Dot: return check_dot(op);
      case OpClass::Reduce:
      case OpClass::Scan: return check_reduce(op);
      case OpClass::Sort: return check_sort(op);
      case OpClass::Control: return check_control(op);
      case OpClass::Terminator: return;  // checked by the parent
      case OpClass::Raw: return check_raw(op);
      case OpClass::Struct: return check_struct(op);
    }
  }

  void check_constant(const Op& op) {
    if (op.kind == OpKind::Param) {
      const std::string& n = op.attr_string("name");
      if (!k_.find_constexpr(n))
        fail("names " + q(n) + ", which is not a constexpr of kernel " + q(k_.name));
      else
        expect_result(Type::scalar(ScalarKind::I32));
      return;
    }
    if (!rt().is_scalar()) {
      fail("result type must be a scalar, got " + rt().str());
      return;
    }
    const Attr& v = *op.find_attr("value");
    ScalarKind e = rt().elem;
    if (is_int(e)) {
      if (std::holds_alternative<double>(v))
        fail("value " + attr_str(v) + " is a float but the result type is " + rt().str());
      else if (!int_fits(e, std::get<int64_t>(v)))
        fail("value " + attr_str(v) + " does not fit in " + rt().str());
    }
  }

  void check_index(const Op& op) {
    int64_t axis = op.attr_int("axis");
    if (op.kind == OpKind::Dim) {
      if (!check_view(0)) return;
      if (axis < 0 || axis >= ot(0).rank()) {
        check_axis(axis, 0, ot(0).rank() - 1, " for " + ot(0).str());
        return;
      }
    } else {
      check_axis(axis, 0, 2, "");
      if (cur_failed_) return;
    }
    expect_result(Type::scalar(ScalarKind::I32));
  }

  void check_create(const Op& op) {
    if (op.kind == OpKind::Arange) {
      if (!rt().is_tile() || rt().rank() != 1 || rt().elem != ScalarKind::I32)
        fail("result type must be tile<i32, [N]>, got " + rt().str());
      return;
    }
    // splat
    if (!ot(0).is_scalar()) {
      fail("operand must be a scalar, got " + ot(0).str());
      return;
    }
    if (!rt().is_tile() || rt().elem != ot(0).elem)
      fail("result type must be a tile of " + ot(0).str() + ", got " + rt().str());
  }

  // The index operands of gather/scatter/atomic: all i32 scalars or all i32 tiles of one
  // shape, then an optional i1 mask of that shape. Returns the index type (scalar or tile,
  // element i32), or none when broken.
  std::optional<Type> check_elementwise_indices(size_t first, int rank, bool allow_mask) {
    size_t n = cur_->operands.size() - first;
    if (n != static_cast<size_t>(rank) && !(allow_mask && n == static_cast<size_t>(rank) + 1)) {
      fail("needs one index per view dim (" + std::to_string(rank) + ")" +
           (allow_mask ? " and an optional mask" : "") + ", got " + std::to_string(n) + " operands after " +
           (first == 1 ? "the view" : "the view and values"));
      return std::nullopt;
    }
    const Type& t0 = ot(first);
    if (!t0.is_value() || t0.elem != ScalarKind::I32) {
      fail("index 0 must be an i32 scalar or tile, got " + t0.str());
      return std::nullopt;
    }
    for (int i = 1; i < rank; ++i)
      if (ot(first + i) != t0) {
        fail("index " + std::to_string(i) + " must have the type of index 0 (" + t0.str() + "), got " +
             ot(first + i).str());
        return std::nullopt;
      }
    if (n == static_cast<size_t>(rank) + 1) {
      const Type& m = ot(first + rank);
      if (m != t0.with_elem(ScalarKind::I1)) {
        fail("mask must be " + t0.with_elem(ScalarKind::I1).str() + ", got " + m.str());
        return std::nullopt;
      }
    }
    return t0;
  }

  void check_memory(const Op& op) {
    if (!check_view(0)) return;
    const Type& view = ot(0);
    int rank = view.rank();
    size_t n = op.operands.size();
    switch (op.kind) {
      case OpKind::LoadTile: {
        if (n != 1 + static_cast<size_t>(rank)) {
          fail("needs one index per view dim (" + std::to_string(rank) + "), got " + std::to_string(n - 1));
          return;
        }
        if (!check_i32_indices(1, rank, "index")) return;
        if (!rt().is_tile() || rt().rank() != rank || rt().elem != view.elem) {
          fail("result type must be a tile of rank " + std::to_string(rank) + " with element type " +
               std::string(scalar_name(view.elem)) + ", got " + rt().str());
          return;
        }
        check_pad(op, view.elem);
        check_l2_hint(op);
        check_prefetch(op);
        check_multicast(op);
        return;
      }
      case OpKind::StoreTile: {
        if (const Attr* t = cur_->find_attr("tma_store"); t && std::get<int64_t>(*t) != 0 && std::get<int64_t>(*t) != 1) {
          fail("tma_store must be 0 or 1 (the tile goes out by TMA from shared memory), got " + attr_str(*t));
          return;
        }
        if (const Attr* b = cur_->find_attr("tma_buffers")) {
          const Attr* t = cur_->find_attr("tma_store");
          if ((std::get<int64_t>(*b) != 2 && std::get<int64_t>(*b) != 4) || !t || std::get<int64_t>(*t) != 1) {
            fail("tma_buffers (the TMA store's staging boxes per warpgroup) must be 2 or 4, on a store with tma_store = 1, got " +
                 attr_str(*b));
            return;
          }
        }
        // A store's cache hint (hint-l2-policy, from the knob stream_stores): only evict-first,
        // the streaming hint of its vector stores (st.global.cs).
        if (const Attr* h = cur_->find_attr("l2_hint"); h && std::get<std::string>(*h) != "evict_first") {
          fail("l2_hint on a store must be \"evict_first\" (its vector stores stream past L2), got " + attr_str(*h));
          return;
        }
        if (const Attr* t = cur_->find_attr("staged"); t && std::get<int64_t>(*t) != 0 && std::get<int64_t>(*t) != 1) {
          fail("staged must be 0 or 1 (the tile goes out through shared memory in 16-byte rows), got " + attr_str(*t));
          return;
        }
        if (const Attr* o = cur_->find_attr("overlap"); o && std::get<int64_t>(*o) != 0 && std::get<int64_t>(*o) != 1) {
          fail("overlap must be 0 or 1 (the tile goes out during the next program's loop), got " + attr_str(*o));
          return;
        }
        if (n != 2 + static_cast<size_t>(rank)) {
          fail("needs one index per view dim (" + std::to_string(rank) + "), got " + std::to_string(n - 2));
          return;
        }
        const Type& val = ot(1);
        if (!val.is_tile() || val.rank() != rank || val.elem != view.elem) {
          fail("value must be a tile of rank " + std::to_string(rank) + " with element type " +
               std::string(scalar_name(view.elem)) + ", got " + val.str());
          return;
        }
        check_i32_indices(2, rank, "index");
        return;
      }
      case OpKind::Gather: {
        auto idx = check_elementwise_indices(1, rank, true);
        if (!idx) return;
        expect_result(idx->with_elem(view.elem));
        if (!cur_failed_) check_pad(op, view.elem);
        return;
      }
      case OpKind::Scatter:
      case OpKind::Atomic: {
        auto idx = check_elementwise_indices(2, rank, true);
        if (!idx) return;
        Type want = idx->with_elem(view.elem);
        if (ot(1) != want) {
          fail("value must be " + want.str() + " (the index shape and view element type), got " + ot(1).str());
          return;
        }
        if (op.kind == OpKind::Atomic) {
          const std::string& kind = op.attr_string("kind");
          if (kind != "add" && kind != "max" && kind != "min") {
            fail("kind \"" + kind + "\" is not one of add, max, min");
            return;
          }
          expect_result(want);
        }
        return;
      }
      case OpKind::AtomicCas: {
        auto idx = check_elementwise_indices(3, rank, false);
        if (!idx) return;
        Type want = idx->with_elem(view.elem);
        for (size_t i : {size_t{1}, size_t{2}})
          if (ot(i) != want) {
            fail(std::string(i == 1 ? "cmp" : "value") + " must be " + want.str() + ", got " + ot(i).str());
            return;
          }
        expect_result(want);
        return;
      }
      default: return;
    }
  }

  void check_unary(const Op& op) {
    const Type& t = ot(0);
    if (!t.is_value()) {
      fail("operand must be a scalar or a tile, got " + t.str());
      return;
    }
    ScalarKind e = t.elem;
    switch (op.kind) {
      case OpKind::Not:
        if (!is_int(e)) return fail("needs an integer or i1 operand, got " + t.str());
        break;
      case OpKind::Neg:
      case OpKind::Abs:
        if (!is_signed_int(e) && !is_float(e))
          return fail("needs a signed integer or float operand, got " + t.str());
        break;
      default:
        if (!is_float(e)) return fail("needs a float operand, got " + t.str());
    }
    if (rt() != t) fail("result type must be the operand type " + t.str() + ", got " + rt().str());
    if (op.kind == OpKind::Exp && op.find_attr("max_rel_error")) {
      const double r = op.attr_number("max_rel_error");
      if (!(r > 0 && r <= 1)) fail("max_rel_error must be in (0, 1] (a relative error), got " + attr_str(*op.find_attr("max_rel_error")));
    }
  }

  void check_binary(const Op& op) {
    const Type& a = ot(0);
    const Type& b = ot(1);
    if (!a.is_value()) return fail("operands must be scalars or tiles, got " + a.str());
    if (a != b) return fail("operands must have the same type, got " + a.str() + " and " + b.str());
    ScalarKind e = a.elem;
    switch (op.kind) {
      case OpKind::And:
      case OpKind::Or:
      case OpKind::Xor:
        if (!is_int(e)) return fail("needs integer or i1 operands, got " + a.str());
        break;
      case OpKind::Shl:
      case OpKind::Shr:
      case OpKind::Cdiv:
        if (!is_int(e) || is_bool(e)) return fail("needs integer operands (not i1), got " + a.str());
        break;
      case OpKind::Pow:
        if (!is_float(e)) return fail("needs float operands, got " + a.str());
        break;
      case OpKind::Cmp: {
        const std::string& p = op.attr_string("pred");
        static const char* preds[] = {"eq", "ne", "lt", "le", "gt", "ge"};
        if (std::none_of(std::begin(preds), std::end(preds), [&](const char* s) { return p == s; }))
          return fail("pred \"" + p + "\" is not one of eq, ne, lt, le, gt, ge");
        return expect_result(a.with_elem(ScalarKind::I1));
      }
      default: break;
    }
    if (rt() != a) fail("result type must be the operand type " + a.str() + ", got " + rt().str());
  }

  void check_ternary(const Op& op) {
    if (op.kind == OpKind::Fma) {
      const Type& a = ot(0);
      if (!a.is_value() || !is_float(a.elem)) return fail("needs float operands, got " + a.str());
      for (size_t i : {size_t{1}, size_t{2}})
        if (ot(i) != a)
          return fail("operands must have the same type, got " + a.str() + " and " + ot(i).str());
      return expect_result(a);
    }
    // where
    const Type& c = ot(0);
    const Type& a = ot(1);
    const Type& b = ot(2);
    if (!a.is_value()) return fail("values must be scalars or tiles, got " + a.str());
    if (a != b) return fail("values must have the same type, got " + a.str() + " and " + b.str());
    if (!c.is_value() || c.elem != ScalarKind::I1 || c.kind != a.kind || c.shape != a.shape)
      return fail("condition must be " + a.with_elem(ScalarKind::I1).str() + ", got " + c.str());
    expect_result(a);
  }

  void check_cast(const Op& op) {
    const Type& a = ot(0);
    if (op.kind == OpKind::ConvertLayout) {
      if (!a.is_tile()) return fail("operand must be a tile, got " + a.str());
      if (!rt().is_tile() || rt().elem != a.elem || rt().shape != a.shape)
        fail("result must be the operand's tile type in another layout or space, got " + rt().str() + " for " +
             a.str());
      return;
    }
    if (!a.is_value()) return fail("operand must be a scalar or a tile, got " + a.str());
    if (rt().kind != a.kind || rt().shape != a.shape)
      return fail("result type must have the operand's shape, got " + rt().str() + " for " + a.str());
    if (rt().layout != a.layout || rt().space != a.space)
      return fail("a " + std::string(op.name()) + " keeps the operand's layout and space (convert_layout changes them), got " +
                  rt().str() + " for " + a.str());
    if (op.kind == OpKind::Bitcast)
      if (std::string why = bitcast_type_error(a.elem, rt().elem); !why.empty()) fail(why);
  }

  void check_shape(const Op& op) {
    const Type& a = ot(0);
    const Type& r = rt();
    if (op.kind == OpKind::Broadcast) {
      if (!r.is_tile()) return fail("result type must be a tile, got " + r.str());
      if (!a.is_value()) return fail("operand must be a scalar or a tile, got " + a.str());
      if (a.elem != r.elem)
        return fail("result element type must be the operand's, got " + r.str() + " for " + a.str());
      if (a.is_scalar()) return;
      if (a.rank() != r.rank())
        return fail("operand rank must equal the result rank, got " + a.str() + " to " + r.str());
      for (int i = 0; i < a.rank(); ++i)
        if (!(a.shape[i].is_static() && a.shape[i].value == 1) && !dims_may_equal(a.shape[i], r.shape[i]))
          return fail("cannot broadcast " + a.str() + " to " + r.str() + " (dim " + std::to_string(i) +
                      " is neither 1 nor equal)");
      return;
    }
    if (!a.is_tile() && !(op.kind == OpKind::ExpandDims && a.is_scalar()))
      return fail("operand must be a tile, got " + a.str());
    if (!r.is_tile()) return fail("result type must be a tile, got " + r.str());
    if (r.elem != a.elem)
      return fail("result element type must be the operand's, got " + r.str() + " for " + a.str());
    switch (op.kind) {
      case OpKind::ExpandDims: {
        int64_t axis = op.attr_int("axis");
        check_axis(axis, 0, a.rank(), " for " + a.str());
        if (cur_failed_) return;
        Type want = Type::tile(a.elem, a.shape);
        want.layout = r.layout;
        want.space = r.space;
        want.shape.insert(want.shape.begin() + axis, Dim(1));
        if (r != want) fail("result type must be " + want.str() + ", got " + r.str());
        return;
      }
      case OpKind::Reshape:
        if (shape_is_static(a.shape) && shape_is_static(r.shape) && shape_numel(a.shape) != shape_numel(r.shape))
          fail("must keep the element count, got " + a.str() + " to " + r.str());
        return;
      case OpKind::Permute: {
        const auto& dims = op.attr_ints("dims");
        std::vector<bool> seen(a.rank(), false);
        bool perm = static_cast<int>(dims.size()) == a.rank();
        for (int64_t d : dims) {
          if (!perm) break;
          if (d < 0 || d >= a.rank() || seen[d]) perm = false;
          else seen[d] = true;
        }
        if (!perm)
          return fail("dims " + attr_str(dims) + " is not a permutation of 0.." + std::to_string(a.rank() - 1));
        Shape s;
        for (int64_t d : dims) s.push_back(a.shape[d]);
        if (r.shape != s) fail("result shape must be " + shape_str(s) + ", got " + r.str());
        return;
      }
      case OpKind::ExtractTile:
      case OpKind::InsertTile: {
        bool ins = op.kind == OpKind::InsertTile;
        const Type& sub = ins ? ot(1) : r;
        size_t first = ins ? 2 : 1;
        if (op.operands.size() != first + a.rank())
          return fail("needs one sub-tile index per tile dim (" + std::to_string(a.rank()) + "), got " +
                      std::to_string(op.operands.size() - first));
        if (ins && r != a) return fail("result type must be the tile type " + a.str() + ", got " + r.str());
        if (!sub.is_tile() || sub.rank() != a.rank() || sub.elem != a.elem)
          return fail(std::string(ins ? "sub-tile" : "result type") + " must be a tile of rank " +
                      std::to_string(a.rank()) + " and element type " + std::string(scalar_name(a.elem)) +
                      ", got " + sub.str());
        for (int i = 0; i < a.rank(); ++i) {
          const Dim& sd = sub.shape[i];
          const Dim& td = a.shape[i];
          if (sd.is_static() && td.is_static() && sd.value > 0 && td.value % sd.value != 0)
            return fail("sub-tile " + sub.str() + " does not divide " + a.str() + " (dim " + std::to_string(i) + ")");
        }
        if (!check_i32_indices(first, a.rank(), "index")) return;
        // Constant indices can be range-checked here; others are checked by the interpreter.
        for (int i = 0; i < a.rank(); ++i) {
          const Value* iv = op.operands[first + i];
          const Dim& sd = sub.shape[i];
          const Dim& td = a.shape[i];
          if (!iv->def || iv->def->kind != OpKind::Const || !sd.is_static() || !td.is_static()) continue;
          const Attr* v = iv->def->find_attr("value");
          if (!v || !std::holds_alternative<int64_t>(*v)) continue;
          int64_t idx = std::get<int64_t>(*v);
          int64_t count = sd.value > 0 ? td.value / sd.value : 0;
          if (idx < 0 || idx >= count)
            return fail("index " + std::to_string(i) + " = " + std::to_string(idx) + " is out of range: " +
                        a.str() + " has " + std::to_string(count) + " sub-tiles of " + sub.str() + " along dim " +
                        std::to_string(i));
        }
        return;
      }
      default: return;
    }
  }

  void check_dot(const Op& op) {
    static const char* names[] = {"a", "b", "accumulator"};
    for (size_t i = 0; i < 3; ++i)
      if (!ot(i).is_tile() || ot(i).rank() != 2)
        return fail("operand " + std::string(names[i]) + " must be a 2-D tile, got " + ot(i).str());
    const Type& a = ot(0);
    const Type& b = ot(1);
    const Type& acc = ot(2);
    if (const Attr* f = op.find_attr("in_flight"); f && std::get<int64_t>(*f) != 0 && std::get<int64_t>(*f) != 1)
      return fail("in_flight must be 0 or 1 (groups a wgmma dot may leave running into the next iteration), got " +
                  attr_str(*f));
    if (const Attr* f = op.find_attr("fragments_ahead"); f && std::get<int64_t>(*f) != 0 && std::get<int64_t>(*f) != 1)
      return fail("fragments_ahead must be 0 or 1 (an mma.sync dot loads the next iteration's first fragments before its "
                  "last k step), got " + attr_str(*f));
    if (const Attr* f = op.find_attr("early_last_step"); f && std::get<int64_t>(*f) != 0 && std::get<int64_t>(*f) != 1)
      return fail("early_last_step must be 0 or 1 (a fragments_ahead dot's last k step runs before the ring's wait and "
                  "barrier), got " + attr_str(*f));
    if (a.elem != b.elem)
      return fail("operands a and b must have one element type, got " + a.str() + " and " + b.str());
    if (!dims_may_equal(a.shape[1], b.shape[0]))
      return fail("inner dims differ: a is " + a.str() + ", b is " + b.str());
    if (!dims_may_equal(acc.shape[0], a.shape[0]) || !dims_may_equal(acc.shape[1], b.shape[1]))
      return fail("accumulator must have shape [" + a.shape[0].str() + ", " + b.shape[1].str() + "], got " +
                  acc.str());
    if (!allowed_dot(a.elem, acc.elem))
      return fail("does not support " + std::string(scalar_name(a.elem)) + " inputs with a " +
                  std::string(scalar_name(acc.elem)) + " accumulator");
    // An operand is read from shared memory (a shared layout, wgmma's SS form), from registers
    // in the dot's operand layout for this result, or has no layout yet.
    for (int64_t i = 0; i < 2; ++i) {
      const Layout& l = ot(i).layout;
      if (l.empty() || l.kind == Layout::Kind::Shared) continue;
      const std::string which = std::string("operand ") + names[i];
      if (l.kind != Layout::Kind::DotOperand)
        return fail(which + " must have a dot_operand or shared layout, got " + l.str());
      if (l.operand != i)
        return fail(which + " has a dot_operand layout for operand " + std::to_string(l.operand) + ", not " +
                    std::to_string(i));
      if (acc.layout.empty() || *l.parent != acc.layout)
        return fail(which + "'s dot_operand parent " + l.parent->str() + " is not the result's layout" +
                    (acc.layout.empty() ? std::string(" (it has none)") : " " + acc.layout.str()));
    }
    expect_result(acc);
  }

  void check_reduce(const Op& op) {
    const Type& t = ot(0);
    if (!t.is_tile()) return fail("operand must be a tile, got " + t.str());
    int64_t axis = op.attr_int("axis");
    check_axis(axis, 0, t.rank() - 1, " for " + t.str());
    if (cur_failed_) return;
    bool scan = op.info().cls == OpClass::Scan;
    ScalarKind elem = t.elem;
    if (op.kind == OpKind::Reduce || op.kind == OpKind::Scan) {
      const std::string& kind = op.attr_string("kind");
      bool arg = kind == "argmax" || kind == "argmin";
      bool ok = kind == "sum" || kind == "prod" || kind == "max" || kind == "min" || (!scan && arg);
      if (!ok)
        return fail("kind \"" + kind + "\" is not one of " +
                    (scan ? "sum, prod, max, min" : "sum, prod, max, min, argmax, argmin"));
      // An i1 sum would wrap to a parity (and a product is an `and`): a count needs i32.
      if (t.elem == ScalarKind::I1 && (kind == "sum" || kind == "prod"))
        return fail("kind \"" + kind + "\" over an i1 tile is not defined (it would wrap modulo 2): cast to i32 "
                    "first (`cast` to " + t.with_elem(ScalarKind::I32).str() + ") to count");
      if (arg) elem = ScalarKind::I32;
    } else {
      const Block& r = op.region(0);
      Type s = Type::scalar(t.elem);
      if (r.args.size() != 2 || r.args[0]->type != s || r.args[1]->type != s)
      {
        std::string got;
        for (const Value* a : r.args) got += (got.empty() ? "" : ", ") + a->type.str();
        return fail("combiner region must take two " + s.str() + " arguments, got (" + got + ")");
      }
    }
    if (scan) {
      Type want = t;
      want.elem = elem;
      return expect_result(want);
    }
    expect_result(drop_axis(t, static_cast<int>(axis), elem));
  }

  // sort / topk: keys (a numeric tile) and an optional i32 index tile of the same shape; results
  // values and, optionally, indices, of the keys' shape with the axis dim k for topk (the
  // result's own dim: a constexpr until binding, then 1 <= k <= the axis size). Layouts and
  // spaces are not compared: the results take their own (AssignLayouts).
  void check_sort(const Op& op) {
    if (op.kind == OpKind::Histogram) return check_histogram();
    const Type& t = ot(0);
    if (!t.is_tile()) return fail("operand 0 (the keys) must be a tile, got " + t.str());
    if (is_bool(t.elem)) return fail("keys must be a numeric tile, got " + t.str() + " (cast i1 to i8 first)");
    int64_t axis = op.attr_int("axis");
    check_axis(axis, 0, t.rank() - 1, " for " + t.str());
    if (cur_failed_) return;
    bool with_index = op.operands.size() == 2;
    if (with_index) {
      const Type& ix = ot(1);
      if (!ix.is_tile() || ix.elem != ScalarKind::I32 || ix.shape != t.shape)
        return fail("operand 1 (the indices) must be an i32 tile of the keys' shape " + shape_str(t.shape) + ", got " +
                    ix.str());
    }
    size_t n = op.results.size();
    if (n != 1 && n != 2)
      return fail("has 1 result (values) or 2 (values, indices), got " + std::to_string(n));
    if (with_index && n != 2)
      return fail("with an index operand has 2 results (values, indices), got 1");
    Shape want = t.shape;
    const char* what = "the keys' shape";
    if (op.kind == OpKind::Topk) {
      if (!rt().is_tile() || rt().rank() != t.rank())
        return fail("result 0 must be a tile of rank " + std::to_string(t.rank()) + " (the keys' shape with k along axis " +
                    std::to_string(axis) + "), got " + rt().str());
      const Dim& k = rt().shape[static_cast<size_t>(axis)];
      const Dim& len = t.shape[static_cast<size_t>(axis)];
      if (k.is_static() && len.is_static() && (k.value < 1 || k.value > len.value))
        return fail("k = " + std::to_string(k.value) + " (result 0's dim " + std::to_string(axis) +
                    ") must be in [1, " + std::to_string(len.value) + "], the keys' size along axis " +
                    std::to_string(axis));
      want[static_cast<size_t>(axis)] = k;
      what = "the keys' shape with k along the axis";
    }
    for (size_t i = 0; i < n; ++i) {
      ScalarKind e = i == 0 ? t.elem : ScalarKind::I32;
      const Type& r = rt(i);
      if (!r.is_tile() || r.elem != e || r.shape != want)
        return fail("result " + std::to_string(i) + " must be a tile<" + std::string(scalar_name(e)) + ", " +
                    shape_str(want) + "> (" + what + "), got " + r.str());
    }
  }

  // histogram: an integer tile of any shape (no i1) -> tile<i32, [B]>, B >= 1 (a number or a
  // constexpr; the result's own dim says how many bins).
  void check_histogram() {
    const Type& t = ot(0);
    if (!t.is_tile() || !is_int(t.elem) || is_bool(t.elem))
      return fail("operand 0 must be an integer tile (the bin of each element), got " + t.str() +
                  (t.is_tile() && is_float(t.elem) ? " (bitcast or cast floats to an integer type first)" : ""));
    const Type& r = rt();
    if (!r.is_tile() || r.elem != ScalarKind::I32 || r.rank() != 1)
      return fail("result must be a tile<i32, [B]> (the count of each of B bins), got " + r.str());
    const Dim& b = r.shape[0];
    if (b.is_static() && b.value < 1) return fail("needs at least one bin, got " + r.str());
  }

  std::vector<Type> operand_types(size_t first) const {
    std::vector<Type> out;
    for (size_t i = first; i < cur_->operands.size(); ++i) out.push_back(ot(i));
    return out;
  }

  // Region `r` takes `want` arguments (after `skip` leading ones already checked).
  bool check_region_args(size_t r, const std::vector<Type>& want, size_t skip) {
    const auto& args = cur_->region(r).args;
    if (args.size() != want.size() + skip) {
      fail("region " + std::to_string(r) + " must have " + std::to_string(want.size() + skip) +
           " arguments, got " + std::to_string(args.size()));
      return false;
    }
    for (size_t i = 0; i < want.size(); ++i)
      if (args[i + skip]->type != want[i]) {
        fail("region " + std::to_string(r) + " argument " + std::to_string(i + skip) + " type " +
             args[i + skip]->type.str() + " does not match carried type " + want[i].str());
        return false;
      }
    return true;
  }

  bool check_results_are(const std::vector<Type>& want) {
    if (cur_->results.size() != want.size()) {
      fail("has " + std::to_string(want.size()) + " carried values but " + std::to_string(cur_->results.size()) +
           " results");
      return false;
    }
    for (size_t i = 0; i < want.size(); ++i)
      if (rt(i) != want[i]) {
        fail("result " + std::to_string(i) + " type " + rt(i).str() + " does not match carried type " +
             want[i].str());
        return false;
      }
    return true;
  }

  void check_control(const Op& op) {
    switch (op.kind) {
      case OpKind::For: {
        static const char* names[] = {"lower bound", "upper bound", "step"};
        for (size_t i = 0; i < 3; ++i)
          if (!is_i32_scalar(ot(i))) return fail(std::string(names[i]) + " must be an i32 scalar, got " + ot(i).str());
        if (const Attr* p = op.find_attr("pipeline"); p && std::get<int64_t>(*p) < 1)
          return fail("pipeline must be >= 1, got " + attr_str(*p));
        if (const Attr* r = op.find_attr("refill_in_dot"); r && std::get<int64_t>(*r) != 0 && std::get<int64_t>(*r) != 1)
          return fail("refill_in_dot must be 0 or 1 (a ring's refill in its mma.sync dot's first k step, or at the "
                      "iteration's top), got " + attr_str(*r));
        if (const Attr* r = op.find_attr("refill_parts"); r && (std::get<int64_t>(*r) < 1 || std::get<int64_t>(*r) > 64))
          return fail("refill_parts must be 1..64 (the pieces of a ring's refill over its mma.sync dot's k steps), got " +
                      attr_str(*r));
        if (const Attr* sk = op.find_attr("split_k")) {
          if (std::get<int64_t>(*sk) != 0 && std::get<int64_t>(*sk) != 1)
            return fail("split_k must be 0 or 1 (the loop's slice of a split-K launch, its carried value a partial sum), "
                        "got " + attr_str(*sk));
          if (std::get<int64_t>(*sk) == 1 && (op.operands.size() != 4 || !ot(3).is_tile() || ot(3).elem != ScalarKind::F32))
            return fail("split_k = 1 needs one carried f32 tile (the partial sum the program's CTAs add)");
        }
        if (const Attr* r = op.find_attr("split_skip_rows")) {
          if (std::get<int64_t>(*r) != 0 && std::get<int64_t>(*r) != 1)
            return fail("split_skip_rows must be 0 or 1 (the split's fixup leaves out the rows past its dot's A), got " +
                        attr_str(*r));
          if (std::get<int64_t>(*r) == 1 && !int_attr_is(&op, "split_k", 1) && !int_attr_is(&op, "stream_k", 1))
            return fail("split_skip_rows = 1 needs split_k = 1 or stream_k = 1 (it is about the parts' partial sums)");
        }
        if (const Attr* sk = op.find_attr("stream_k")) {
          const int64_t v = std::get<int64_t>(*sk);
          if (v != 0 && v != 1)
            return fail("stream_k must be 0 or 1 (the loop runs its program's stream-K part, its carried value a partial "
                        "sum), got " + attr_str(*sk));
          const Op* y = k_.grid ? k_.grid->terminator() : nullptr;
          if (v == 1 && !int_attr_is(y, "stream_k", 1))
            return fail("stream_k = 1 needs stream_k = 1 on the grid's yield (the programs' parts)");
          if (v == 1 && (op.operands.size() != 4 || !ot(3).is_tile() || ot(3).elem != ScalarKind::F32))
            return fail("stream_k = 1 needs one carried f32 tile (the partial sum the tile's parts add)");
          if (v == 1 && int_attr_is(&op, "split_k", 1))
            return fail("stream_k = 1 does not go with split_k = 1 (a loop is cut one way)");
          if (v == 1 && (op.parent != k_.body.get() || !int_attr_is(&op, "warp_specialize", 1)))
            return fail("stream_k = 1 needs a top-level loop with warp_specialize = 1 (the producer's loop the parts cut)");
        }
        if (const Attr* w = op.find_attr("warp_specialize"); w && std::get<int64_t>(*w) != 0 && std::get<int64_t>(*w) != 1)
          return fail("warp_specialize must be 0 or 1 (a producer warpgroup issues the loop's copies), got " +
                      attr_str(*w));
        if (const Attr* c = op.find_attr("consumers")) {
          if (std::get<int64_t>(*c) != 1 && std::get<int64_t>(*c) != 2)
            return fail("consumers must be 1 or 2 (compute warpgroups that take alternate programs), got " +
                        attr_str(*c));
          // Written before specialize-warps decides, it may come without warp_specialize; a
          // loop that has none (0) has no ring to share.
          if (std::get<int64_t>(*c) == 2 && op.find_attr("warp_specialize") && op.attr_int("warp_specialize") != 1)
            return fail("consumers = 2 needs warp_specialize = 1 (the consumers share the producer's ring)");
          // Lowered (pingpong-consumers): each consumer holds the whole accumulator.
          for (size_t i = 3; std::get<int64_t>(*c) == 2 && i < op.operands.size(); ++i) {
            const Layout& l = ot(i).layout;
            if (l.kind == Layout::Kind::Mma && l.version == 3 && l.warps.size() == 2 && l.warps[0] * l.warps[1] != 4)
              return fail("consumers = 2 needs each carried wgmma accumulator on one warpgroup (warps = [4, 1]), got " +
                          l.str());
          }
        }
        auto carried = operand_types(3);
        for (size_t i = 0; i < carried.size(); ++i)
          if (!carried[i].is_value())
            return fail("carried value " + std::to_string(i) + " must be a scalar or a tile, got " + carried[i].str());
        if (!check_results_are(carried)) return;
        const auto& args = op.region(0).args;
        if (!args.empty() && !is_i32_scalar(args[0]->type))
          return fail("region 0 argument 0 (the induction variable) must be i32, got " + args[0]->type.str());
        check_region_args(0, carried, 1);
        return;
      }
      case OpKind::If: {
        if (!ot(0).is_scalar() || ot(0).elem != ScalarKind::I1)
          return fail("condition must be an i1 scalar, got " + ot(0).str());
        for (size_t r = 0; r < 2; ++r)
          if (!op.region(r).args.empty()) return fail("region " + std::to_string(r) + " must have no arguments");
        return;
      }
      case OpKind::While: {
        auto carried = operand_types(0);
        for (size_t i = 0; i < carried.size(); ++i)
          if (!carried[i].is_value())
            return fail("carried value " + std::to_string(i) + " must be a scalar or a tile, got " + carried[i].str());
        if (!check_results_are(carried)) return;
        if (check_region_args(0, carried, 0)) check_region_args(1, carried, 0);
        return;
      }
      default: return;
    }
  }

  // ---------------------------------------------------------------- Struct ops
  // Types and operand counts here; where ops may stand and how pipes and buffers are shared
  // between warp roles is checked over the whole kernel (VerifyStruct.cpp).

  static bool shapes_may_equal(const Shape& a, const Shape& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!dims_may_equal(a[i], b[i])) return false;
    return true;
  }

  // Operand `i` is a buffer / pipe.
  bool check_storage(size_t i, Type::Kind kind) {
    if (ot(i).kind == kind) return true;
    fail("operand " + std::to_string(i) + " must be a " + (kind == Type::Kind::Buffer ? "buffer" : "pipe") +
         ", got " + ot(i).str());
    return false;
  }

  // A tile of `t` read from / written to slots of buffer `buf`: the element type and trailing
  // dims agree; `first` is where the slot indices start. `what` names the tile.
  bool check_slot_access(const Type& buf, const Type& t, size_t first, const std::string& what, size_t extra) {
    if (!t.is_tile() || t.rank() > buf.rank() || t.elem != buf.elem) {
      fail(what + " must be a tile of element type " + std::string(scalar_name(buf.elem)) + " and rank <= " +
           std::to_string(buf.rank()) + " (the buffer's), got " + t.str());
      return false;
    }
    Shape slot = struct_slot_shape(buf, t.rank());
    if (!shapes_may_equal(slot, t.shape)) {
      fail(what + " " + t.str() + " does not match the slot shape " + shape_str(slot) + " of " + buf.str());
      return false;
    }
    size_t nslots = static_cast<size_t>(buf.rank() - t.rank());
    if (cur_->operands.size() != first + nslots + extra) {
      fail("needs " + std::to_string(nslots) + " slot " + (nslots == 1 ? "index" : "indices") + " for " + buf.str() +
           (extra ? " and " + std::to_string(extra) + " tile " + (extra == 1 ? "index" : "indices") : std::string()) +
           ", got " + std::to_string(cur_->operands.size() - first) + " indices");
      return false;
    }
    return check_i32_indices(first, nslots + extra, "index");
  }

  void check_struct(const Op& op) {
    switch (op.kind) {
      case OpKind::Alloc:
        if (rt().space != "shared")
          fail("buffer space must be \"shared\" (the one on-chip space so far), got " +
               (rt().space.empty() ? std::string("none") : "\"" + rt().space + "\""));
        return;
      case OpKind::Pipe:
        if (!rt().space.empty() && rt().space != "shared")
          fail("pipe space must be \"shared\" or absent, got \"" + rt().space + "\"");
        return;
      case OpKind::AsyncWait: return;
      case OpKind::AsyncCopy: {
        if (!check_storage(0, Type::Kind::Buffer) || !check_view(1)) return;
        const Type& buf = ot(0);
        const Type& view = ot(1);
        Type tile = Type::tile(view.elem, struct_slot_shape(buf, view.rank()));
        if (view.elem != buf.elem)
          return fail("view " + view.str() + " must have the element type of " + buf.str());
        if (view.rank() > buf.rank())
          return fail("view " + view.str() + " has a higher rank than " + buf.str() +
                      " (a slot holds a tile of the view's rank)");
        if (!check_slot_access(buf, tile, 2, "the copied tile", static_cast<size_t>(view.rank()))) return;
        check_pad(op, view.elem);
        return;
      }
      case OpKind::BufferRead:
        if (!check_storage(0, Type::Kind::Buffer)) return;
        check_slot_access(ot(0), rt(), 1, "result type", 0);
        return;
      case OpKind::BufferWrite:
        if (!check_storage(0, Type::Kind::Buffer)) return;
        check_slot_access(ot(0), ot(1), 2, "value", 0);
        return;
      case OpKind::PipePush: {
        if (!check_storage(0, Type::Kind::Pipe)) return;
        const Type& p = ot(0);
        const Type& src = ot(1);
        Shape slot = struct_slot_shape(p, 0);
        if (src.is_view()) {
          if (src.elem != p.elem || src.rank() != static_cast<int>(slot.size()))
            return fail("view " + src.str() + " must have the element type and slot rank of " + p.str());
          if (op.operands.size() != 2 + slot.size())
            return fail("needs one tile index per view dim (" + std::to_string(slot.size()) + "), got " +
                        std::to_string(op.operands.size() - 2));
          if (!check_i32_indices(2, slot.size(), "index")) return;
          check_pad(op, src.elem);
          return;
        }
        if (!src.is_tile() || src.elem != p.elem || !shapes_may_equal(src.shape, slot))
          return fail("pushes a view tile or a tile<" + std::string(scalar_name(p.elem)) + ", " + shape_str(slot) +
                      "> (one slot of " + p.str() + "), got " + src.str());
        if (op.operands.size() != 2) return fail("takes no indices when pushing a tile value");
        if (op.has_attr("pad")) fail("pad applies only to a push from a view");
        return;
      }
      case OpKind::PipePop: {
        if (!check_storage(0, Type::Kind::Pipe)) return;
        const Type& p = ot(0);
        Shape slot = struct_slot_shape(p, 0);
        if (!rt().is_tile() || rt().elem != p.elem || !shapes_may_equal(rt().shape, slot))
          fail("result type must be tile<" + std::string(scalar_name(p.elem)) + ", " + shape_str(slot) +
               "> (one slot of " + p.str() + "), got " + rt().str());
        return;
      }
      case OpKind::WarpRole: {
        const std::string& role = op.attr_string("role");
        if (role != "producer" && role != "consumer")
          return fail("role \"" + role + "\" is not one of producer, consumer");
        if (!op.region(0).args.empty()) return fail("region must have no arguments");
        if (role == "producer" && !op.results.empty())
          fail("producer region must yield nothing: a producer hands data on only through pipes");
        return;
      }
      default: return;
    }
  }

  void check_raw(const Op& op) {
    for (size_t i = 0; i < op.operands.size(); ++i)
      if (!ot(i).is_value()) return fail("operand " + std::to_string(i) + " must be a scalar or a tile, got " + ot(i).str());
    const std::string& name = op.attr_string("name");
    if (!opts_.backend.empty() && !op.has_attr(opts_.backend))
      fail("op " + q(name) + " has no body for backend " + q(opts_.backend));
  }

  // ---------------------------------------------------------------- yields

  // The yield of region `r` of the current op must pass values of `want`.
  void check_yield(size_t r, const std::vector<Type>& want, const std::string& what) {
    const Op* y = cur_->region(r).terminator();
    if (!y || failed_ops_.count(y)) return;  // reported already
    for (const Value* v : y->operands)
      if (!usable(v)) return;
    auto yfail = [&](const std::string& msg) {
      cur_failed_ = true;
      error(y->loc, "'yield' in " + q(cur_->name()) + " " + what + " " + msg);
    };
    if (y->operands.size() != want.size())
      return yfail("must yield " + std::to_string(want.size()) + " value" + (want.size() == 1 ? "" : "s") +
                   ", got " + std::to_string(y->operands.size()));
    for (size_t i = 0; i < want.size(); ++i)
      if (y->operands[i]->type != want[i])
        return yfail("operand " + std::to_string(i) + " has type " + y->operands[i]->type.str() + ", expected " +
                     want[i].str());
  }

  std::vector<Type> result_types() const {
    std::vector<Type> out;
    for (const Value* r : cur_->results) out.push_back(r->type);
    return out;
  }

  void check_region_yields(const Op& op) {
    switch (op.kind) {
      case OpKind::For: return check_yield(0, operand_types(3), "body");
      case OpKind::If:
        check_yield(0, result_types(), "then region");
        check_yield(1, result_types(), "else region");
        return;
      case OpKind::While:
        check_yield(0, {Type::scalar(ScalarKind::I1)}, "condition");
        check_yield(1, operand_types(0), "body");
        return;
      case OpKind::ReduceWith:
      case OpKind::ScanWith: return check_yield(0, {Type::scalar(ot(0).elem)}, "combiner");
      case OpKind::WarpRole: return check_yield(0, result_types(), "region");
      default: return;
    }
  }
};

}  // namespace

std::vector<TesseraError> verify(const Kernel& k, const VerifyOptions& opts) {
  return Verifier(k, opts).run();
}

void verify_or_throw(const Kernel& k, const VerifyOptions& opts) {
  auto errors = verify(k, opts);
  if (!errors.empty()) throw errors.front();
}

}  // namespace tessera
