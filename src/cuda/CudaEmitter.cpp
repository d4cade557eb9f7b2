// IR -> CUDA C++: the emitter's core (values, layouts, the kernel signature), elementwise ops,
// control flow and raw ops. Memory, shape/reduction and dot ops are in their own files.
#include <cmath>
#include <cstdio>
#include <sstream>

#include "cuda/EmitterInternal.h"
#include "passes/Passes.h"
#include "ir/Struct.h"
#include "support/Env.h"
#include "support/Float.h"
#include "text/Text.h"

namespace tessera::cudagen {

std::string dlit(double v) {
  if (std::isnan(v)) return "tsr::nan_d()";
  if (std::isinf(v)) return v > 0 ? "tsr::inf_d()" : "(-tsr::inf_d())";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}

std::string flit(double v) {
  if (std::isnan(v)) return "tsr::nan_f()";
  if (std::isinf(v)) return v > 0 ? "tsr::inf_f()" : "(-tsr::inf_f())";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%af", static_cast<double>(static_cast<float>(v)));
  return buf;
}

std::string ilit(ScalarKind k, int64_t v) {
  if (is_float(k)) return lit(k, static_cast<double>(v));
  v = wrap_int(k, v);
  if (k == ScalarKind::I1) return v ? "uint8_t(1)" : "uint8_t(0)";
  if (k == ScalarKind::U64) return "uint64_t(" + std::to_string(static_cast<uint64_t>(v)) + "ULL)";
  if (v == INT64_MIN) return "int64_t(-9223372036854775807LL - 1)";
  return ctype(k) + "(" + std::to_string(v) + "LL)";
}

std::string lit(ScalarKind k, double v) {
  if (!is_float(k)) return ilit(k, static_cast<int64_t>(v));
  double r = round_to_float(k, v);
  return k == ScalarKind::F64 ? dlit(r) : flit(r);
}

static std::string sanitize(const std::string& s) {
  std::string o;
  for (char c : s) o += (std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  return o.size() > 24 ? o.substr(0, 24) : o;
}

// ---------------------------------------------------------------------------------------------

Emitter::Emitter(const Kernel& k, const CudaTarget& t, int cluster)
    : k_(k), tg_(t), op_texts_(print_op_lines(k)), cluster_(cluster) {}

void Emitter::needs_no_cluster(const Op& op, const std::string& what) const {
  if (cluster_ > 1) throw NotClusterable{what + " at " + op.loc.str() + " (`" + text_of(op) + "`)"};
}

std::string Emitter::text_of(const Op& op) const {
  auto it = op_texts_.find(&op);
  return it != op_texts_.end() ? it->second : std::string(op.name());
}

void Emitter::line(const std::string& s) {
  lines_.push_back(std::string(static_cast<size_t>(ind_) * 2, ' ') + s);
  line_op_.push_back(cur_);
}

void Emitter::fail(const Op& op, const std::string& msg) const {
  throw TesseraError(op.loc, "cuda backend: " + msg + " (in `" + text_of(op) + "`)");
}

const std::string& Emitter::nm(const Value* v) const {
  auto it = name_.find(v);
  if (it == name_.end()) throw TesseraError("cuda backend: internal: value without a name");
  return it->second;
}

std::string Emitter::bind_new(const Value* v, const std::string& hint) {
  std::string n = fresh(hint);
  if (!v->name.empty()) n += "_" + sanitize(v->name);
  name_[v] = n;
  return n;
}

std::vector<int64_t> Emitter::shape_of(const Op& op, const Value* v) const {
  if (!v->type.is_tile()) return {};
  if (!shape_is_static(v->type.shape))
    fail(op, "tile shape " + shape_str(v->type.shape) + " is not static; bind the constexprs before compiling");
  return static_shape(v->type.shape);
}

const Emitter::ViewInfo& Emitter::view_of(const Op& op, const Value* v) const {
  auto it = views_.find(v);
  if (it == views_.end()) fail(op, "operand 0 must be a view parameter");
  return it->second;
}

Layout Emitter::layout(int64_t n) const {
  Layout L;
  L.numel = n;
  L.part = n;
  if (n <= kReplicateMax) {
    L.replicated = true;
    L.slots = static_cast<int>(n);
    return L;
  }
  L.replicated = false;
  // A cluster-split kernel blocks each CTA's part alike; parts are whole chunks, so that no
  // slot of one CTA holds an element of the next.
  int64_t part = n;
  if (cluster_ > 1) {
    part = n / cluster_;
    if (n % cluster_ != 0 || part % T_ != 0)
      throw NotClusterable{"a tile of " + std::to_string(n) + " elements does not split into " + std::to_string(cluster_) +
                           " parts of whole chunks of " + std::to_string(T_) + " threads"};
  }
  L.part = part;
  L.vec = 1;
  for (int v : {8, 4, 2})
    if (part % v == 0 && part >= static_cast<int64_t>(v) * T_) {
      L.vec = v;
      break;
    }
  int64_t per = static_cast<int64_t>(L.vec) * T_;
  if (cluster_ > 1 && part % per != 0) L.vec = 1, per = T_;
  L.chunks = (part + per - 1) / per;
  L.slots = static_cast<int>(L.chunks * L.vec);
  return L;
}

Layout Emitter::layout_of(const Value* v) const {
  if (lowered_ && v->type.is_tile()) {
    const Dist& d = dist_of(v);
    Layout L;
    L.replicated = false;
    L.numel = L.part = shape_numel(v->type.shape);
    L.slots = static_cast<int>(d.slots());
    L.chunks = L.slots;
    L.dist = &d;
    return L;
  }
  return layout(v->type.is_tile() && shape_is_static(v->type.shape) ? shape_numel(v->type.shape) : 1);
}

std::string Emitter::local_elem_expr(const Layout& L, const std::string& s) const {
  if (L.replicated) return s;
  std::string V = std::to_string(L.vec);
  if (L.vec == 1) return "(" + s + " * " + std::to_string(T_) + " + tsr_tid)";
  return "((" + s + " / " + V + ") * " + std::to_string(int64_t(T_) * L.vec) + " + tsr_tid * " + V + " + (" + s +
         " % " + V + "))";
}

std::string Emitter::elem_expr(const Layout& L, const std::string& s) const {
  if (L.dist) return L.dist->flat_expr(s);
  if (L.replicated || cluster_ == 1) return local_elem_expr(L, s);
  return "(tsr_crank * " + std::to_string(L.part) + " + " + local_elem_expr(L, s) + ")";
}

std::string Emitter::valid_expr(const Layout& L, const std::string& s) const {
  if (L.dist) return "true";
  if (L.replicated || L.part % (int64_t(L.vec) * T_) == 0) return "true";
  return "(" + local_elem_expr(L, s) + " < " + std::to_string(L.part) + ")";
}

std::string Emitter::owner_expr(const Layout& L, const std::string& s) const {
  if (L.dist) return L.dist->owner_expr();
  // A replicated tile's side effects: one thread per element, on the cluster's first CTA.
  if (L.replicated)
    return "(" + s + " % " + std::to_string(T_) + " == tsr_tid" + (cluster_ > 1 ? " && tsr_crank == 0" : "") + ")";
  return valid_expr(L, s);
}

std::string Emitter::declare(const Op& op, const Value* v, const std::string& hint) {
  std::string n = bind_new(v, hint);
  if (v->type.is_tile()) {
    std::vector<int64_t> S = shape_of(op, v);
    int64_t bytes = shape_numel(v->type.shape) * std::max(4, scalar_bytes(v->type.elem));
    if (bytes > 256 * 1024)
      fail(op, "tile " + v->type.str() + " needs " + std::to_string(bytes / 1024) +
                   " KiB of registers per CTA in kernel @" + k_.name + "; the limit is 256 KiB");
    if (packed_in_layouts(v)) {
      line(packed_type(v) + " " + n + ";");
      return n;
    }
    Layout L = layout_of(v);
    line(ctype(v->type.elem) + " " + n + "[" + std::to_string(L.slots) + "];");
  } else if (v->type.is_scalar()) {
    line(ctype(v->type.elem) + " " + n + ";");
  } else {
    fail(op, "results of type " + v->type.str() + " are not supported");
  }
  return n;
}

void Emitter::slots(const Layout& L, const std::function<void(const std::string&)>& body) {
  std::string s = fresh("s");
  line("#pragma unroll");
  open("for (int " + s + " = 0; " + s + " < " + std::to_string(L.slots) + "; ++" + s + ") {");
  body(s);
  close();
}

std::string Emitter::smem_ptr(const std::string& type, int64_t off, int64_t bytes) {
  // The scratch carries tile data between threads: a cluster-split CTA holds only its part.
  // (The layout emitter's reductions exchange a CTA's warps' values in it, and its exchanges of
  // tiles stage them: stage() declines those.)
  if (cluster_ > 1 && !lowered_) throw NotClusterable{"an exchange of tile data through shared memory"};
  smem_ = std::max(smem_, off + bytes);
  ++scratch_uses_;
  return "reinterpret_cast<" + type + "*>(tsr_smem + " + std::to_string(off) + ")";
}

std::vector<std::string> Emitter::coords(const std::string& e, const std::vector<int64_t>& S) {
  // Only elements of the tile (e < numel) need the right coordinates (every caller guards the
  // others), so a dim of extent 1 is 0 and the outermost dim above 1 needs no modulo: a row
  // tile [1, N] indexes its row and column with no division, which saves registers.
  std::vector<std::string> c(S.size());
  size_t outermost = 0;  // the first dim of extent other than 1
  while (outermost + 1 < S.size() && S[outermost] == 1) ++outermost;
  int64_t inner = 1;
  for (size_t d = S.size(); d-- > 0;) {
    std::string q = inner == 1 ? e : "(" + e + ") / " + std::to_string(inner);
    c[d] = S[d] == 1 ? std::string("0") : d <= outermost ? "(" + q + ")" : "((" + q + ") % " + std::to_string(S[d]) + ")";
    inner *= S[d];
  }
  return c;
}

std::string Emitter::flat(const std::vector<std::string>& c, const std::vector<int64_t>& S) {
  if (c.empty()) return "0";
  std::string e = c[0];
  for (size_t d = 1; d < c.size(); ++d) e = "(" + e + ") * " + std::to_string(S[d]) + " + " + c[d];
  return "(" + e + ")";
}

void Emitter::stage(const Value* v, const std::string& ptr) {
  if (cluster_ > 1) throw NotClusterable{"an exchange of tile data through shared memory"};
  barrier();
  if (!v->type.is_tile()) {
    line("if (tsr_tid == 0) " + ptr + "[0] = " + nm(v) + ";");
    return;
  }
  Layout L = layout_of(v);
  slots(L, [&](const std::string& s) {
    line("if (" + owner_expr(L, s) + ") " + ptr + "[" + elem_expr(L, s) + "] = " + nm(v) + "[" + s + "];");
  });
}

void Emitter::gather_into(const Value* r, const std::string& dst,
                          const std::function<std::string(const std::string&)>& src_fn) {
  Layout L = layout_of(r);
  slots(L, [&](const std::string& s) {
    std::string e = fresh("e");
    line("const int " + e + " = " + elem_expr(L, s) + ";");
    std::string v = valid_expr(L, s);
    if (v == "true") line(dst + "[" + s + "] = " + src_fn(e) + ";");
    else line(dst + "[" + s + "] = " + v + " ? " + ctype(r->type.elem) + "(" + src_fn(e) + ") : " + ctype(r->type.elem) + "(0);");
  });
}

// ---------------------------------------------------------------------------------------------

void Emitter::emit_block(const Block& b) {
  for (size_t i = 0; i < b.ops.size(); ++i) {
    const Op& o = *b.ops[i];
    if (o.kind == OpKind::Yield) continue;
    // Two independent reductions in a row share one exchange.
    if (!lowered_ && i + 1 < b.ops.size() && folds_with_next(o, *b.ops[i + 1])) {
      const Op* saved = cur_;
      cur_ = &o;
      line("// " + text_of(o));
      line("// " + text_of(*b.ops[i + 1]) + "  (folded with the reduction above in one exchange)");
      emit_reduce(o, b.ops[i + 1].get());
      cur_ = saved;
      ++i;
      continue;
    }
    emit_op(o);
  }
  if (!pending_pf_.empty()) flush_program_prefetch(b);
}

const Op* Emitter::terminator(const Block& b, const Op& parent) const {
  const Op* t = b.terminator();
  if (!t) fail(parent, "region does not end with yield");
  return t;
}

void Emitter::emit_op(const Op& op) {
  const Op* saved = cur_;
  cur_ = &op;
  line("// " + text_of(op));
  order_global_reads(op, true);
  if (lowered_ && emit_lowered(op)) {
    order_global_reads(op, false);
    cur_ = saved;
    return;
  }
  switch (op.info().cls) {
    case OpClass::Constant: {
      const Value* r = op.result();
      std::string l;
      if (op.kind == OpKind::Const) {
        const Attr* a = op.find_attr("value");
        if (a && std::holds_alternative<int64_t>(*a)) l = ilit(r->type.elem, std::get<int64_t>(*a));
        else l = lit(r->type.elem, op.attr_number("value"));
      } else {
        const std::string& cname = op.attr_string("name");
        const ConstexprDecl* d = k_.find_constexpr(cname);
        if (!d) fail(op, "unknown constexpr '" + cname + "'");
        l = ilit(r->type.elem, d->value);
      }
      line("const " + ctype(r->type.elem) + " " + bind_new(r) + " = " + l + ";");
      break;
    }
    case OpClass::Index: {
      const Value* r = op.result();
      int64_t axis = op.attr_int("axis");
      if (op.kind == OpKind::Dim) {
        const ViewInfo& vi = view_of(op, op.operand(0));
        if (axis < 0 || axis >= static_cast<int64_t>(vi.dims.size())) fail(op, "axis out of range");
        line("const int32_t " + bind_new(r) + " = int32_t(" + vi.dims[axis] + ");");
      } else {
        if (axis < 0 || axis > 2) fail(op, "axis must be 0, 1 or 2");
        const char* xyz[] = {"x", "y", "z"};
        if (cluster_ > 1 && axis == 0)  // a cluster per program along x
          line("const int32_t " + bind_new(r) + " = int32_t(" +
               (op.kind == OpKind::ProgramId ? "tsr::cluster_id_x()" : "tsr::cluster_count_x()") + ");");
        else if ((split_k_ || persistent_ || grouped_) && axis == 2)  // these kernels' grids are 2-D
          line("const int32_t " + bind_new(r) + " = " + (op.kind == OpKind::ProgramId ? "0" : "1") + ";");
        else if (persistent_ || grouped_ || prog_persistent_ || ws_persistent_)
          line("const int32_t " + bind_new(r) + " = " + (op.kind == OpKind::ProgramId ? pid_prefix_ : "tsr_grid") +
               std::to_string(axis) + ";");
        else
          line("const int32_t " + bind_new(r) + " = int32_t(" + (op.kind == OpKind::ProgramId ? "blockIdx." : "gridDim.") +
               xyz[axis] + ");");
      }
      break;
    }
    case OpClass::Create:
      if (op.kind == OpKind::Arange) {
        int64_t start = op.has_attr("start") ? op.attr_int("start") : 0;
        const Value* r = op.result();
        std::string n = declare(op, r);
        Layout L = layout_of(r);
        slots(L, [&](const std::string& s) {
          line(n + "[" + s + "] = int32_t(" + std::to_string(start) + " + " + elem_expr(L, s) + ");");
        });
      } else {
        elementwise(op, [](const std::vector<std::string>& a) { return a[0]; });
      }
      break;
    case OpClass::Memory:
      if (role_ == Role::Producer && &op == wg_.store) break;  // (the consumers' loop stores)
      if (persistent_ && wg_.cluster_m > 1 && &op == wg_.store) {
        // cluster_m = 2 with an odd number of program rows: the last pair's second program
        // (tsr_pid0 = tsr_grid0) only keeps its partner's multicast protocol; it lies outside
        // the kernel's grid, and its store, which may still fall inside the view, is not made.
        open("if (tsr_pid0 < tsr_grid0) {  // not the program past an odd grid of the CTA pairs");
        if (!store_frag_tile(op)) emit_load_store(op);
        if (wg_.overlap) {
          // Its loop has stored the previous block: nothing is pending after it.
          --ind_;
          line("} else {");
          ++ind_;
          line("pend_ = false;");
        }
        close();
        break;
      }
      if (op.kind == OpKind::StoreTile && store_frag_tile(op)) break;
      if (op.kind == OpKind::LoadTile || op.kind == OpKind::StoreTile) {
        emit_load_store(op);
        break;
      }
      // Scattered or atomic side effects would run once per CTA of a cluster.
      needs_no_cluster(op, "a " + std::string(op.name()));
      if (op.kind == OpKind::Gather || op.kind == OpKind::Scatter) emit_gather_scatter(op);
      else emit_atomic(op);
      break;
    case OpClass::Unary: emit_unary(op); break;
    case OpClass::Binary:
      if (!fold_frag_binary(op)) emit_binary(op);
      break;
    case OpClass::Compare: emit_binary(op); break;
    case OpClass::Ternary:
      if (op.kind == OpKind::Where) {
        elementwise(op, [](const std::vector<std::string>& a) { return "(" + a[0] + " ? " + a[1] + " : " + a[2] + ")"; });
      } else {
        ScalarKind t = op.result()->type.elem;
        if (!is_float(t)) fail(op, "fma needs a float type");
        elementwise(op, [&](const std::vector<std::string>& a) {
          return fround(t, std::string(t == ScalarKind::F64 ? "fma(" : "fmaf(") + a[0] + ", " + a[1] + ", " + a[2] + ")");
        });
      }
      break;
    case OpClass::Cast:
      // A fragment or a packed pair converts its values at each use: not what a bitcast means.
      if (op.kind == OpKind::Bitcast || (!fold_frag_cast(op) && !alias_packed_cast(op))) emit_cast(op);
      break;
    case OpClass::Shape: emit_shape(op); break;
    case OpClass::Dot:
      needs_no_cluster(op, "a dot");
      emit_dot(op);
      break;
    case OpClass::Reduce: emit_reduce(op); break;
    case OpClass::Scan:
      needs_no_cluster(op, "a scan");
      emit_scan(op);
      break;
    case OpClass::Sort:
      needs_no_cluster(op, "a sort");
      emit_sort(op);
      break;
    case OpClass::Control:
      if (op.kind == OpKind::For) emit_for(op);
      else if (op.kind == OpKind::If) emit_if(op);
      else emit_while(op);
      break;
    case OpClass::Terminator: fail(op, "yield outside the end of a region");
    case OpClass::Raw:
      needs_no_cluster(op, "raw code");
      emit_raw(op);
      break;
    case OpClass::Struct:
      needs_no_cluster(op, "a Struct op");
      emit_struct(op);
      break;
  }
  order_global_reads(op, false);
  cur_ = saved;
}

namespace {

bool writes_view(const Op& op) {
  return op.kind == OpKind::StoreTile || op.kind == OpKind::Scatter || op.kind == OpKind::Atomic ||
         op.kind == OpKind::AtomicCas;
}

void views_written_in(const Op& op, std::unordered_set<const Value*>& out) {
  if (writes_view(op)) out.insert(op.operand(0));
  for (const auto& region : op.regions)
    for (const auto& inner : region->ops) views_written_in(*inner, out);
}

}  // namespace

void Emitter::order_global_reads(const Op& op, bool before) {
  if (op.info().cls == OpClass::Control) {
    views_written_in(op, written_views_);
    return;
  }
  if (before && (op.kind == OpKind::LoadTile || op.kind == OpKind::Gather) && written_views_.count(op.operand(0))) {
    barrier();
    count("write-read-barriers");
  }
  if (!before && writes_view(op)) written_views_.insert(op.operand(0));
}

void Emitter::elementwise(const Op& op, const std::function<std::string(const std::vector<std::string>&)>& fn) {
  const Value* r = op.result();
  if (r->type.is_tile()) {
    std::string n = declare(op, r);
    Layout L = layout_of(r);
    slots(L, [&](const std::string& s) {
      std::vector<std::string> a;
      for (const Value* v : op.operands) a.push_back(v->type.is_tile() ? nm(v) + "[" + s + "]" : nm(v));
      line(n + "[" + s + "] = " + fn(a) + ";");
    });
  } else {
    std::vector<std::string> a;
    for (const Value* v : op.operands) {
      if (v->type.is_tile()) fail(op, "a tile operand with a scalar result");
      a.push_back(nm(v));
    }
    line("const " + ctype(r->type.elem) + " " + bind_new(r) + " = " + fn(a) + ";");
  }
}

// Unsigned type integer arithmetic of kind k wraps in.
static std::string wide_u(ScalarKind k) { return scalar_bits(k) > 32 ? "uint64_t" : "uint32_t"; }

void Emitter::emit_unary(const Op& op) {
  ScalarKind t = op.operand(0)->type.elem;
  const std::string T = ctype(t);
  bool f = is_float(t), d = t == ScalarKind::F64;
  auto need_float = [&] {
    if (!f) fail(op, std::string(op.name()) + " needs a float type");
  };
  auto math = [&](const char* ff, const char* df) {
    need_float();
    elementwise(op, [&](const std::vector<std::string>& a) {
      return d ? std::string(df) + "(" + a[0] + ")" : fround(t, std::string(ff) + "(" + a[0] + ")");
    });
  };
  switch (op.kind) {
    case OpKind::Neg:
      elementwise(op, [&](const std::vector<std::string>& a) {
        return f ? T + "(-" + a[0] + ")" : T + "(" + wide_u(t) + "(0) - " + wide_u(t) + "(" + a[0] + "))";
      });
      break;
    case OpKind::Not:
      if (f) fail(op, "not needs an integer or i1 type");
      elementwise(op, [&](const std::vector<std::string>& a) {
        return t == ScalarKind::I1 ? "uint8_t(" + a[0] + " ^ 1)" : T + "(~" + a[0] + ")";
      });
      break;
    case OpKind::Exp: math("tsr::fexp", "exp"); break;
    case OpKind::Exp2: math("exp2f", "exp2"); break;
    case OpKind::Log: math("logf", "log"); break;
    case OpKind::Log2: math("log2f", "log2"); break;
    case OpKind::Log1p: math("log1pf", "log1p"); break;
    case OpKind::Expm1: math("expm1f", "expm1"); break;
    case OpKind::Sqrt: math("sqrtf", "sqrt"); break;
    case OpKind::Rsqrt: math("rsqrtf", "rsqrt"); break;
    case OpKind::Sin: math("sinf", "sin"); break;
    case OpKind::Cos: math("cosf", "cos"); break;
    case OpKind::Tanh: math("tanhf", "tanh"); break;
    case OpKind::Erf: math("erff", "erf"); break;
    case OpKind::Floor: math("floorf", "floor"); break;
    case OpKind::Ceil: math("ceilf", "ceil"); break;
    case OpKind::Sigmoid:
      need_float();
      elementwise(op, [&](const std::vector<std::string>& a) {
        return d ? "(1.0 / (1.0 + exp(-" + a[0] + ")))" : fround(t, "tsr::fsigmoid(" + a[0] + ")");
      });
      break;
    case OpKind::Abs:
      elementwise(op, [&](const std::vector<std::string>& a) {
        if (f) return T + "(" + (d ? "fabs(" : "fabsf(") + a[0] + "))";
        return "(" + a[0] + " < 0 ? " + T + "(" + wide_u(t) + "(0) - " + wide_u(t) + "(" + a[0] + ")) : " + a[0] + ")";
      });
      break;
    default: fail(op, "not a unary op");
  }
}

void Emitter::emit_binary(const Op& op) {
  ScalarKind t = op.operand(0)->type.elem;
  const std::string T = ctype(t), U = wide_u(t);
  bool f = is_float(t), b1 = t == ScalarKind::I1;
  auto arith = [&](const char* c) {
    elementwise(op, [&](const std::vector<std::string>& a) {
      if (f) return fround(t, a[0] + " " + c + " " + a[1]);
      std::string e = T + "(" + U + "(" + a[0] + ") " + c + " " + U + "(" + a[1] + "))";
      return b1 ? "uint8_t((" + e + ") & 1)" : e;
    });
  };
  auto bits = [&](const char* c) {
    if (f) fail(op, std::string(op.name()) + " needs an integer or i1 type");
    elementwise(op, [&](const std::vector<std::string>& a) { return T + "(" + a[0] + " " + c + " " + a[1] + ")"; });
  };
  switch (op.kind) {
    case OpKind::Add: arith("+"); break;
    case OpKind::Sub: arith("-"); break;
    case OpKind::Mul: arith("*"); break;
    case OpKind::Div:
      elementwise(op, [&](const std::vector<std::string>& a) {
        if (f) return fround(t, a[0] + " / " + a[1]);
        std::string e = "tsr::idiv<" + T + ">(" + a[0] + ", " + a[1] + ")";
        return b1 ? "uint8_t((" + e + ") & 1)" : e;
      });
      break;
    case OpKind::Cdiv:  // (a + b - 1) / b, the sum wrapping (docs/semantics.md)
      elementwise(op, [&](const std::vector<std::string>& a) {
        return "tsr::idiv<" + T + ">(" + T + "(" + U + "(" + a[0] + ") + " + U + "(" + a[1] + ") - " + U + "(1)), " + a[1] + ")";
      });
      break;
    case OpKind::Rem:
      elementwise(op, [&](const std::vector<std::string>& a) {
        if (f) return fround(t, std::string(t == ScalarKind::F64 ? "fmod(" : "fmodf(") + a[0] + ", " + a[1] + ")");
        return "tsr::irem<" + T + ">(" + a[0] + ", " + a[1] + ")";
      });
      break;
    case OpKind::Min:
    case OpKind::Max: {
      std::string fn = std::string(f ? "tsr::f" : "tsr::i") + (op.kind == OpKind::Min ? "min" : "max") + (f ? "_nan_z" : "");
      elementwise(op, [&](const std::vector<std::string>& a) { return fn + "<" + T + ">(" + a[0] + ", " + a[1] + ")"; });
      break;
    }
    case OpKind::Pow:
      if (!f) fail(op, "pow needs a float type");
      elementwise(op, [&](const std::vector<std::string>& a) {
        if (t == ScalarKind::F64) return "pow(" + a[0] + ", " + a[1] + ")";
        return fround(t, "powf(" + a[0] + ", " + a[1] + ")");
      });
      break;
    case OpKind::And: bits("&"); break;
    case OpKind::Or: bits("|"); break;
    case OpKind::Xor: bits("^"); break;
    case OpKind::Shl:
    case OpKind::Shr:
      if (f || b1) fail(op, std::string(op.name()) + " needs an integer type");
      elementwise(op, [&](const std::vector<std::string>& a) {
        return std::string(op.kind == OpKind::Shl ? "tsr::ishl<" : "tsr::ishr<") + T + ">(" + a[0] + ", " + a[1] + ")";
      });
      break;
    case OpKind::Cmp: {
      const std::string& p = op.attr_string("pred");
      std::string c = p == "eq" ? "==" : p == "ne" ? "!=" : p == "lt" ? "<" : p == "le" ? "<=" : p == "gt" ? ">" : p == "ge" ? ">=" : "";
      if (c.empty()) fail(op, "unknown cmp predicate '" + p + "'");
      elementwise(op, [&](const std::vector<std::string>& a) { return "uint8_t(" + a[0] + " " + c + " " + a[1] + ")"; });
      break;
    }
    default: fail(op, "not a binary op");
  }
}

static std::pair<std::string, std::string> int_limits(ScalarKind k) {
  switch (k) {
    case ScalarKind::I8: return {"-128", "127"};
    case ScalarKind::I16: return {"-32768", "32767"};
    case ScalarKind::I32: return {"-2147483648.0", "2147483647.0"};
    case ScalarKind::I64: return {"-9223372036854775808.0", "9223372036854775807.0"};
    case ScalarKind::U8: return {"0", "255"};
    case ScalarKind::U16: return {"0", "65535"};
    case ScalarKind::U32: return {"0", "4294967295.0"};
    case ScalarKind::U64: return {"0", "18446744073709551615.0"};
    default: return {"0", "1"};
  }
}

void Emitter::emit_cast(const Op& op) {
  ScalarKind from = op.operand(0)->type.elem, to = op.result()->type.elem;
  const std::string To = ctype(to);
  // The layout emitter: a cast of an f32 tile to bf16 or f16 whose every use is a store keeps
  // the f32 values unrounded, and each store's conversion (store_conv) rounds them once: the
  // same bits as rounding here and again there (the second rounding is exact), one conversion
  // instead of three instructions more per element (an epilogue's cast before its store).
  if (lowered_ && from == ScalarKind::F32 && (to == ScalarKind::BF16 || to == ScalarKind::F16) &&
      op.result()->type.is_tile() && only_stored(op.result())) {
    elementwise(op, [&](const std::vector<std::string>& a) { return a[0]; });
    count("casts-rounded-by-stores");
    return;
  }
  elementwise(op, [&](const std::vector<std::string>& a) -> std::string {
    const std::string& x = a[0];
    if (op.kind == OpKind::Bitcast) return bitcast_expr(from, to, x);
    if (to == ScalarKind::I1) return "uint8_t(" + x + " != 0)";
    if (is_float(from) && !is_float(to)) {
      auto [lo, hi] = int_limits(to);
      std::string lo_i = to == ScalarKind::I64 ? "int64_t(-9223372036854775807LL - 1)" : To + "(" + (to == ScalarKind::I32 ? "-2147483647 - 1" : lo.substr(0, lo.find('.'))) + ")";
      std::string hi_i = To + "(" + hi.substr(0, hi.find('.')) + (to == ScalarKind::U64 ? "ULL" : to == ScalarKind::I64 ? "LL" : to == ScalarKind::U32 ? "U" : "") + ")";
      return "tsr::f2i<" + To + ">(double(" + x + "), " + lo + ", " + hi + ", " + lo_i + ", " + hi_i + ")";
    }
    if (!is_float(to)) return To + "(" + x + ")";
    if (to == ScalarKind::F64) return "double(" + x + ")";
    // Into a narrow float from a source wider than float's 24 bits: through float rounded to
    // odd, so that the value is rounded once (as the interpreter does), not twice.
    if (is_narrow(to)) {
      if (from == ScalarKind::F64) return fround(to, "tsr::d2f_odd(" + x + ")");
      if (from == ScalarKind::I64) return fround(to, "tsr::d2f_odd(tsr::i2d_odd((long long)(" + x + ")))");
      if (from == ScalarKind::U64) return fround(to, "tsr::d2f_odd(tsr::i2d_odd((unsigned long long)(" + x + ")))");
      if (from == ScalarKind::I32 || from == ScalarKind::U32) return fround(to, "tsr::d2f_odd(double(" + x + "))");
    }
    return fround(to, "float(" + x + ")");
  });
}

// --- control flow ---------------------------------------------------------------------------

void Emitter::copy_value(const Value* v, const std::string& dst, const std::string& src) {
  if (packed_in_layouts(v)) {
    line(dst + " = " + src + ";");  // the packed words
  } else if (v->type.is_tile()) {
    Layout L = layout_of(v);
    slots(L, [&](const std::string& s) { line(dst + "[" + s + "] = " + src + "[" + s + "];"); });
  } else {
    line(dst + " = " + src + ";");
  }
}

void Emitter::assign_carried(const Op& y, const std::vector<const Value*>& vals, const std::vector<std::string>& carried) {
  if (y.operands.size() != carried.size()) fail(y, "yield must pass one value per carried value");
  std::vector<std::string> src(carried.size());
  for (size_t j = 0; j < carried.size(); ++j) {
    const Value* v = y.operand(j);
    src[j] = nm(v);
    for (size_t q = 0; q < carried.size(); ++q)
      if (q != j && src[j] == carried[q]) {
        // A swap must read the old value: copy it first.
        std::string tmp = fresh("t");
        if (packed_in_layouts(v)) line(packed_type(v) + " " + tmp + ";");
        else if (v->type.is_tile()) line(ctype(v->type.elem) + " " + tmp + "[" + std::to_string(layout_of(v).slots) + "];");
        else line(ctype(v->type.elem) + " " + tmp + ";");
        copy_value(v, tmp, src[j]);
        src[j] = tmp;
        break;
      }
  }
  for (size_t j = 0; j < carried.size(); ++j)
    if (src[j] != carried[j]) copy_value(vals[j], carried[j], src[j]);
}

void Emitter::emit_for(const Op& op) {
  if (op.operands.size() < 3) fail(op, "for needs lb, ub, step");
  const Block& body = op.region(0);
  size_t nc = op.operands.size() - 3;
  if (body.args.size() != nc + 1 || op.results.size() != nc) fail(op, "carried values do not match");
  std::vector<std::string> carried;
  std::vector<const Value*> vals;
  for (size_t j = 0; j < nc; ++j) {
    std::string c = declare(op, op.result(j), "c");
    copy_value(op.result(j), c, nm(op.operand(3 + j)));
    carried.push_back(c);
    vals.push_back(op.result(j));
    name_[body.args[j + 1]] = c;
  }
  // Accumulators that stay in mma fragments for the whole loop: converted once before and once
  // after it instead of twice per iteration.
  std::vector<std::pair<size_t, const Op*>> frags;
  if (!lowered_) frags = frag_carried(op);
  std::vector<std::string> frag_names;
  for (auto& [j, dot] : frags) {
    MmaPlan p = fragment_plan(*dot);
    std::string fr = fresh("frag");
    line("float " + fr + "[" + std::to_string(p.mt) + "][" + std::to_string(p.nt) + "][4];");
    const Op* init = op.operand(3 + j)->def;
    if (init && init->kind == OpKind::Splat && init->operand(0)->type.is_scalar())
      frags_fill(p, fr, nm(init->operand(0)));
    else
      frags_from_tile(p, op.result(j), fr);
    frag_of_[dot] = fr;
    frag_names.push_back(fr);
    name_[dot->result()] = carried[j];
    count("mma-carried-accumulators");
  }
  // A matmul-shaped pipeline loop: a cp.async ring instead of this loop.
  PipePlan pipe = lowered_ || (wg_.ok && &op == wg_.loop) ? PipePlan{} : plan_pipeline(op, frags);
  if (wg_.ok && &op == wg_.loop) emit_wgmma_loop(op, frag_names[0]);
  else if (pipe.ok) emit_pipelined(op, pipe, frag_names[0]);
  else if (!(lowered_ && emit_ring_loop(op, vals, carried))) emit_loop(op, vals, carried);
  if (&op == split_loop_) lowered_split_k_fixup(op);
  if (&op == stream_loop_ && ws_consumers_) lowered_stream_k_fixup(op);
  for (size_t q = 0; q < frags.size(); ++q) {
    MmaPlan p = fragment_plan(*frags[q].second);
    if (!frag_store_chain(op, frags[q].first).empty())
      frag_tiles_[op.result(frags[q].first)] = FragTile{p, frag_names[q], ScalarKind::F32};
    else
      frags_to_tile(p, frag_names[q], op.result(frags[q].first), carried[frags[q].first]);
  }
}

void Emitter::emit_loop(const Op& op, const std::vector<const Value*>& vals, const std::vector<std::string>& carried,
                        const std::function<void(const std::string&)>& top, const std::function<void()>& end) {
  const Block& body = op.region(0);
  std::vector<const Op*> ahead = begin_prefetch(op);
  std::string iv = fresh("iv");
  // A step of 0 or below is an error (docs/semantics.md): the kernel traps, the launch fails.
  if (!const_positive(op.operand(2))) line("if (!(" + nm(op.operand(2)) + " > 0)) __trap();  // 'for' step is not positive");
  // 64-bit induction: iv + step never overflows before the test. (A stream-K part's bounds:
  // loop_bounds_.)
  const auto bounds = loop_bounds_.find(&op);
  const std::string lb = bounds != loop_bounds_.end() ? bounds->second.first : nm(op.operand(0));
  const std::string ub = bounds != loop_bounds_.end() ? bounds->second.second : nm(op.operand(1));
  open("for (int64_t " + iv + "_ = " + lb + "; " + nm(op.operand(2)) + " > 0 && " + iv + "_ < " + ub + "; " + iv +
       "_ += " + nm(op.operand(2)) + ") {");
  line("const int32_t " + iv + " = int32_t(" + iv + "_);");
  name_[body.args[0]] = iv;
  prefetch_next(op, ahead, iv);
  ++loop_callbacks_;
  if (top) top(iv);
  --loop_callbacks_;
  emit_block(body);
  const Op* y = terminator(body, op);
  cur_ = y;
  line("// " + text_of(*y));
  assign_carried(*y, vals, carried);
  cur_ = &op;
  ++loop_callbacks_;
  if (end) end();
  --loop_callbacks_;
  close();
}

void Emitter::emit_region_into(const Op& op, int reg, const std::vector<std::string>& res) {
  const Block& b = op.region(reg);
  emit_block(b);
  const Op* y = terminator(b, op);
  if (y->operands.size() != res.size()) fail(op, "yield must pass one value per result");
  cur_ = y;
  line("// " + text_of(*y));
  for (size_t j = 0; j < res.size(); ++j) copy_value(op.result(j), res[j], nm(y->operand(j)));
  cur_ = &op;
}

void Emitter::emit_if(const Op& op) {
  std::vector<std::string> res;
  for (const Value* r : op.results) res.push_back(declare(op, r));
  open("if (" + nm(op.operand(0)) + ") {");
  for (int reg = 0; reg < 2; ++reg) {
    emit_region_into(op, reg, res);
    if (reg == 0) {
      --ind_;
      open("} else {");
    }
  }
  close();
}

void Emitter::emit_while(const Op& op) {
  const Block& cond = op.region(0);
  const Block& body = op.region(1);
  size_t nc = op.operands.size();
  if (cond.args.size() != nc || body.args.size() != nc || op.results.size() != nc) fail(op, "carried values do not match");
  std::vector<std::string> carried;
  std::vector<const Value*> vals;
  if (lowered_) {  // (assign-layouts lays out a while's tiles since session 56)
    bool tiles = std::any_of(op.results.begin(), op.results.end(), [](const Value* r) { return r->type.is_tile(); });
    for (const Block* b : {&cond, &body})
      walk(const_cast<Block&>(*b), [&](Op& o) {
        for (const std::vector<Value*>* vs : {&o.operands, &o.results})
          for (const Value* v : *vs) tiles |= v->type.is_tile();
      });
    if (tiles) count("tiles-through-while");
  }
  for (size_t j = 0; j < nc; ++j) {
    std::string c = declare(op, op.result(j), "c");
    copy_value(op.result(j), c, nm(op.operand(j)));
    carried.push_back(c);
    vals.push_back(op.result(j));
    name_[cond.args[j]] = c;
    name_[body.args[j]] = c;
  }
  // Past kMaxWhileIterations iterations the kernel traps (docs/semantics.md), never hangs.
  std::string w = fresh("w");
  open("for (long long " + w + " = 0;; ++" + w + ") {");
  line("if (" + w + " >= " + std::to_string(kMaxWhileIterations) + "LL) __trap();  // " + while_limit_message(kMaxWhileIterations));
  emit_block(cond);
  const Op* cy = terminator(cond, op);
  if (cy->operands.size() != 1) fail(op, "the condition region yields one i1");
  cur_ = cy;
  line("// " + text_of(*cy));
  line("if (!" + nm(cy->operand(0)) + ") break;");
  emit_block(body);
  const Op* y = terminator(body, op);
  cur_ = y;
  line("// " + text_of(*y));
  assign_carried(*y, vals, carried);
  cur_ = &op;
  close();
}

// --- raw --------------------------------------------------------------------------------------

void Emitter::emit_raw(const Op& op) {
  const Attr* body = op.find_attr("cuda");
  if (!body || !std::holds_alternative<std::string>(*body))
    fail(op, "raw op '" + (op.has_attr("name") ? op.attr_string("name") : std::string("?")) + "' has no cuda body");
  std::vector<std::string> outs;
  for (const Value* r : op.results) outs.push_back(declare(op, r));
  // Tiles are exchanged through shared memory as flat arrays: operands first, then results.
  int64_t off = 0;
  std::vector<std::string> in_ptr(op.operands.size()), out_ptr(op.results.size());
  for (size_t i = 0; i < op.operands.size(); ++i) {
    const Value* v = op.operand(i);
    if (!v->type.is_tile()) continue;
    int64_t bytes = shape_numel(v->type.shape) * (scalar_bytes(v->type.elem) > 4 ? 8 : 4);
    in_ptr[i] = smem_ptr(ctype(v->type.elem), off, bytes);
    off += align16(bytes);
  }
  for (size_t i = 0; i < op.results.size(); ++i) {
    const Value* v = op.result(i);
    if (!v->type.is_tile()) continue;
    int64_t bytes = shape_numel(v->type.shape) * (scalar_bytes(v->type.elem) > 4 ? 8 : 4);
    out_ptr[i] = smem_ptr(ctype(v->type.elem), off, bytes);
    off += align16(bytes);
  }
  bool staged = false;
  for (size_t i = 0; i < op.operands.size(); ++i)
    if (!in_ptr[i].empty()) {
      if (staged) {
        // stage() starts with a barrier; consecutive writes into disjoint regions need none.
        Layout L = layout_of(op.operand(i));
        slots(L, [&](const std::string& s) {
          line("if (" + owner_expr(L, s) + ") " + in_ptr[i] + "[" + elem_expr(L, s) + "] = " + nm(op.operand(i)) + "[" + s + "];");
        });
      } else {
        stage(op.operand(i), in_ptr[i]);
      }
      staged = true;
    }
  if (staged || !out_ptr.empty()) barrier();
  open("{");
  for (size_t i = 0; i < op.operands.size(); ++i) {
    const Value* v = op.operand(i);
    std::string is = std::to_string(i);
    if (v->type.is_tile()) line(ctype(v->type.elem) + "* in" + is + " = " + in_ptr[i] + ";");
    else line("const " + ctype(v->type.elem) + " in" + is + " = " + nm(v) + ";");
    line("constexpr int64_t in" + is + "_numel = " + std::to_string(v->type.is_tile() ? shape_numel(v->type.shape) : 1) + ";");
    line("(void)in" + is + "; (void)in" + is + "_numel;");
  }
  for (size_t i = 0; i < outs.size(); ++i) {
    const Value* v = op.result(i);
    std::string is = std::to_string(i);
    if (v->type.is_tile()) line(ctype(v->type.elem) + "* out" + is + " = " + out_ptr[i] + ";");
    else line(ctype(v->type.elem) + "& out" + is + " = " + outs[i] + ";");
    line("constexpr int64_t out" + is + "_numel = " + std::to_string(v->type.is_tile() ? shape_numel(v->type.shape) : 1) + ";");
    line("(void)out" + is + "_numel;");
  }
  std::istringstream in(std::get<std::string>(*body));
  for (std::string l; std::getline(in, l);) line(l);
  close();
  bool tile_out = false;
  for (const auto& p : out_ptr) tile_out |= !p.empty();
  if (tile_out) {
    barrier();
    for (size_t i = 0; i < op.results.size(); ++i)
      if (!out_ptr[i].empty())
        gather_into(op.result(i), outs[i], [&](const std::string& e) { return out_ptr[i] + "[" + e + "]"; });
  }
}

// --- the kernel -------------------------------------------------------------------------------

static std::string scalar_abi_type(ScalarKind k) {
  if (is_narrow(k)) return "float";
  return ctype(k);
}

int64_t Emitter::group_rows() const {
  // The layout emitter takes the order persist-programs wrote on the grid's yield (8 where it
  // wrote none).
  if (lowered_) {
    const Op* y = k_.grid ? k_.grid->terminator() : nullptr;
    return y && y->has_attr("group_rows") ? y->attr_int("group_rows") : 8;
  }
  const ConstexprDecl* d = k_.find_constexpr("GROUP_M");
  if (!d) return 8;
  if (d->value < 1 || d->value > 1024)
    throw TesseraError(d->loc, "cuda backend: constexpr GROUP_M of kernel @" + k_.name + " is " + std::to_string(d->value) +
                                   "; it must be between 1 and 1024 (rows of program axis 0 per group)");
  return d->value;
}

void Emitter::add_grid_size_params(std::vector<std::string>& sig, CudaKernelInfo& info, int axes) {
  for (int axis = 0; axis < axes; ++axis) {
    sig.push_back("int32_t tsr_grid" + std::to_string(axis));
    info.params.push_back({CudaParam::Kind::GridSize, ScalarKind::I32, 4, "grid" + std::to_string(axis), axis});
  }
}

void Emitter::emit_grouped_ids(const std::string& t, const std::string& G, const std::string& G0, bool pairs,
                               const std::string& index_type) {
  line("const " + index_type + " tsr_first = " + t + " / tsr_in_group * " + G + ", tsr_rows = " + G0 + " - tsr_first < " + G +
       " ? " + G0 + " - tsr_first : " + G + ";");
  if (pairs)
    line("const int32_t tsr_pid0 = int32_t(2 * (tsr_first + " + t + " % tsr_in_group % tsr_rows) + int64_t(tsr::cluster_rank()));");
  else
    line("const int32_t tsr_pid0 = int32_t(tsr_first + " + t + " % tsr_in_group % tsr_rows);");
  line("const int32_t tsr_pid1 = int32_t(" + t + " % tsr_in_group / tsr_rows);");
}

int64_t smem_limit(const CudaTarget& t) { return shared_memory_per_program(t.sm); }

std::string Emitter::add_tensor_map(std::vector<std::string>& sig, CudaKernelInfo& info, const Value* view,
                                    int64_t box_cols, int64_t box_rows, int swizzle) {
  return add_tensor_map(sig, info, view, std::vector<int64_t>{box_cols, box_rows}, swizzle);
}

std::string Emitter::add_tensor_map(std::vector<std::string>& sig, CudaKernelInfo& info, const Value* view,
                                    const std::vector<int64_t>& box, int swizzle) {
  int j = -1;
  for (size_t i = 0; i < k_.params.size(); ++i)
    if (k_.params[i] == view) j = static_cast<int>(i);
  // One map per view, box and swizzle: the first of a view is tsr_tmaJ, later ones tsr_tmaJ_N.
  auto name = [&](int nth) { return "tsr_tma" + std::to_string(j) + (nth ? "_" + std::to_string(nth) : ""); };
  int of_view = 0;
  for (const CudaParam& q : info.params) {
    if (q.kind != CudaParam::Kind::TensorMap || q.param_index != j) continue;
    bool same = q.rank == static_cast<int>(box.size()) && q.swizzle == swizzle;
    for (size_t i = 0; same && i < box.size(); ++i) same = q.box[i] == box[i];
    if (same) return name(of_view);
    ++of_view;
  }
  std::string n = name(of_view);
  sig.push_back("const __grid_constant__ tsr::TmaDesc " + n);
  CudaParam q{CudaParam::Kind::TensorMap, view->type.elem, 128, view->name, j};
  q.rank = static_cast<int>(box.size());
  for (size_t i = 0; i < box.size(); ++i) q.box[i] = static_cast<int>(box[i]);
  q.swizzle = swizzle;
  info.params.push_back(q);
  return n;
}

CudaEmission Emitter::run() {
  const Kernel& k = k_;
  T_ = lowered_ ? 32 * warps_ : 32 * default_num_warps(k, cluster_);
  CudaEmission out;
  CudaKernelInfo& info = out.info;
  info.symbol = "tessera_" + sanitize(k.name);
  info.block_threads = T_;
  if (const ConstexprDecl* d = k.find_constexpr("num_warps"); d && (d->value < 0 || d->value > kMaxWarps))
    throw TesseraError(d->loc, "cuda backend: constexpr num_warps of kernel @" + k.name + " is " + std::to_string(d->value) +
                                   "; it must be 0 (the backend's choice) or between 1 and " + std::to_string(kMaxWarps) +
                                   " (a CTA has at most 1024 threads)");
  // The runtime's knob (kSplitKKnob): not printed, but a value it gives no meaning is an error
  // here, where the kernel is compiled, as the emitters' knobs are.
  if (const ConstexprDecl* d = k.find_constexpr(kSplitKKnob); d && (d->value < 0 || d->value > kMaxSplitK))
    throw TesseraError(k.loc, "kernel " + k.name + ": knob split_k = " + std::to_string(d->value) +
                                  ": 0 (the runtime's rule), 1 (never split) or 2.." + std::to_string(kMaxSplitK) +
                                  " CTAs per program");
  if (const int64_t sk = knob("stream_k", 0); sk != 0 && sk != 1)
    throw TesseraError(k.loc, "kernel " + k.name + ": knob stream_k = " + std::to_string(sk) +
                                  ": 0 (whole programs) or 1 (a last partial wave cut into shares of K work)");

  std::vector<std::string> sig;
  std::vector<std::string> dim_syms;
  std::unordered_map<std::string, std::string> dim_var;
  for (size_t j = 0; j < k.params.size(); ++j) {
    const Value* p = k.params[j];
    std::string js = std::to_string(j);
    if (p->type.is_view() || p->type.is_ptr()) {
      std::string ptr = "tsr_p" + js;
      sig.push_back(stype(p->type.elem) + "* " + ptr);
      info.params.push_back({CudaParam::Kind::Pointer, p->type.elem, 8, p->name, static_cast<int>(j)});
      if (p->type.is_view()) {
        ViewInfo vi;
        vi.ptr = ptr;
        for (const Dim& d : p->type.shape) {
          if (d.is_static()) {
            vi.dims.push_back("int64_t(" + std::to_string(d.value) + ")");
          } else {
            if (!dim_var.count(d.symbol)) {
              dim_var[d.symbol] = "tsr_dim_" + sanitize(d.symbol);
              dim_syms.push_back(d.symbol);
            }
            vi.dims.push_back("int64_t(" + dim_var[d.symbol] + ")");
          }
        }
        views_[p] = vi;
      }
    }
  }
  for (const std::string& s : dim_syms) {
    sig.push_back("int32_t " + dim_var[s]);
    info.params.push_back({CudaParam::Kind::Dim, ScalarKind::I32, 4, s, -1});
  }
  for (size_t j = 0; j < k.params.size(); ++j) {
    const Value* p = k.params[j];
    if (!p->type.is_scalar()) {
      if (!p->type.is_view() && !p->type.is_ptr())
        throw TesseraError(k.loc, "cuda backend: parameter %" + p->name + " of type " + p->type.str() + " is not supported");
      continue;
    }
    std::string n = "tsr_a" + std::to_string(j);
    std::string at = scalar_abi_type(p->type.elem);
    sig.push_back(at + " " + n);
    int bytes = at == "float" ? 4 : at == "double" ? 8 : std::max(1, scalar_bytes(p->type.elem));
    info.params.push_back({CudaParam::Kind::Scalar, p->type.elem, bytes, p->name, static_cast<int>(j)});
    name_[p] = n;
  }
  if (!lowered_) wg_ = plan_wgmma();  // needs views_
  if (wg_.ok) T_ = 32 * (wg_.consumer_warps + 4);  // consumer warpgroups + one producer warpgroup
  else if (!wg_.why.empty()) {
    wgmma_not_taken_ = "dot at " + wg_.dot->loc.str() + kNotWgmmaMarker + wg_.why;
    notes_.push_back(wgmma_not_taken_);
  }
  info.block_threads = T_;
  // Whether the wgmma loop's K may be cut into parts whose sums add (split-K, stream-K).
  const bool zero_start = wg_.ok && accumulator_starts_at_zero();
  // Tensor maps of the wgmma pipeline's operand views, last (CudaEmitter.h, parameter ABI).
  if (wg_.ok) {
    auto add_map = [&](const Value* view, int64_t box_cols, int64_t box_rows, int swizzle = 128) {
      return add_tensor_map(sig, info, view, box_cols, box_rows, swizzle);
    };
    const int64_t atom = 128 / wg_.eb;  // a box row is one 128-byte swizzle atom
    persistent_ = can_be_persistent();
    const bool parts_add = persistent_ && zero_start;
    info.split_k_capable = parts_add;
    if (parts_add && tg_.split_k) split_k_ = true, persistent_ = false;
    wg_.cluster_m = plan_wgmma_cluster();
    info.persistent_cluster = wg_.cluster_m;
    wg_.tma_a = add_map(wg_.load_a->operand(0), atom, wg_.a_kmajor ? wg_.BM : wg_.BK);
    // (Under multicast each CTA of the pair copies half of B's box rows.)
    wg_.tma_b = add_map(wg_.load_b->operand(0), wg_.b_swizzle / wg_.eb,
                        (wg_.b_kmajor ? wg_.BN : wg_.BK) / wg_.cluster_m, wg_.b_swizzle);
    if (persistent_) {
      const Value* out = wg_.store->operand(0);
      // Knob tma_store_epilogue = 0: the consumers store their fragments straight to global
      // memory instead (no staging, no barriers between the boxes; plan_wgmma has already
      // sized the ring with the staging buffers' shared memory, which then stays unused).
      // (The swapped product's fragments hold C^T: stored transposed from registers.)
      if (out->type.rank() == 2 && (out->type.elem == ScalarKind::BF16 || out->type.elem == ScalarKind::F16) &&
          !wg_.swapped && wg_.BN % 64 == 0 && knob("tma_store_epilogue", 1) != 0) {
        wg_.tma_store = true;
        wg_.tma_c = add_map(out, 64, 64);
      }
    }
    plan_epilogue_overlap();
  }
  // Then those of Struct async_copy ops taken by TMA (knob struct_tma; EmitStruct.cpp).
  plan_struct_tma(sig, info);
  if (lowered_) plan_tma_rings(sig, info);
  if (lowered_) plan_warp_specialization(sig, info);
  if (lowered_) plan_lowered_split_k(sig, info);
  stream_k_ = persistent_ && stream_k_asked() && zero_start;
  if (persistent_ && stream_k_asked() && !stream_k_)
    notes_.push_back("stream-K not taken: the accumulator does not start at 0, and each part would add its start");
  if (split_k_ || stream_k_) {
    sig.push_back("unsigned char* __restrict__ tsr_ws");
    info.params.push_back({CudaParam::Kind::SplitWorkspace, ScalarKind::U8, 8, "split_workspace", -1});
    info.split_slot_bytes = wg_.partial_sum_bytes();
  }
  if (split_k_) {
    info.split_k = true;
    info.split_cluster = cluster_fixup_fits();
    count("split-k");
    notes_.push_back(std::string("split-K: gridDim.z CTAs share each program's K loop; ") +
                     (info.split_cluster ? "launched as one cluster (up to " + std::to_string(kMaxSplitKCluster) +
                                               " CTAs), the first adds its peers' partial sums over distributed shared "
                                               "memory; otherwise partial sums"
                                         : "partial sums") +
                     " meet in a workspace and the last CTA adds them in split order");
  }
  if (stream_k_) {
    info.stream_k = true;
    count("stream-k");
    notes_.push_back("stream-K: the tiles when they are fewer than the CTAs, else a last partial wave (of at least half "
                     "the CTAs, else with the full wave before it), are cut into equal shares of K work, one per CTA, each run last tile first; the CTA that ends a tile "
                     "adds the earlier parts in K order");
  }
  if (lowered_) {
    // One CTA per program in the grouped order persist-programs wrote (group_rows without
    // persistent = 1).
    const Op* y = k_.grid ? k_.grid->terminator() : nullptr;
    grouped_ = !ws_loop_ && !persistent_ && !split_k_ && y && y->operands.size() == 2 &&
               y->has_attr("group_rows") && !(y->has_attr("persistent") && y->attr_int("persistent") == 1);
  } else {
    grouped_ = !persistent_ && !split_k_ && !wg_.ok && has_pipelined_mma_loop();
  }
  if (grouped_) {
    count("grouped-order");
    notes_.push_back("grouped order: CTAs take the programs " + std::to_string(group_rows()) +
                     " rows of axis 0 at a time, for L2 reuse of the operand tiles");
  }
  auto add_grid_params = [&](int axes) { add_grid_size_params(sig, info, axes); };
  prog_persistent_ = lowered_ ? lowered_program_prefetch()
                              : !persistent_ && !grouped_ && !split_k_ && !wg_.ok && cluster_ == 1 && plan_program_prefetch();
  if (prog_persistent_) {
    info.persistent = true;
    info.persistent_fill = true;
    add_grid_params(3);
    for (const auto& pf : prog_pf_) count(pf.invariant ? "prefetched-invariant-loads" : "prefetched-program-loads");
    notes_.push_back("program prefetch: persistent CTAs (as many as fit) loop over the programs; " +
                     std::to_string(prog_pf_.size()) + " load(s) of " + std::to_string(prog_pf_bytes_) +
                     " bytes are copied for the next program while this one computes");
  }
  if (persistent_) {
    info.persistent = true;
    add_grid_params(2);
    count("persistent");
    notes_.push_back("persistent: one CTA per SM loops over the programs, " + std::to_string(group_rows()) +
                     " rows of axis 0 at a time");
  }

  line("// Generated by Tessera (" + std::string(kCudaCodegenVersion) + ") from kernel @" + k.name + " for " + tg_.str() + ".");
  // The former inline forms of the headers' edge code (TSR_EDGE in core.cuh): an A/B switch.
  if (env_flag("TESSERA_CUDA_INLINE_EDGES")) line("#define TSR_INLINE_EDGES 1");
  // Histograms whose warps with no lane to count skip the rest of tsr::hist_add: an A/B switch.
  if (env_flag("TESSERA_CUDA_HIST_SKIP")) line("#define TSR_HIST_SKIP 1");
  line("#include \"tessera/core.cuh\"");
  line("#include \"tessera/mma.cuh\"");
  out.headers = {"tessera/core.cuh", "tessera/mma.cuh"};
  if (cluster_ > 1) {
    line("#include \"tessera/cluster.cuh\"");
    out.headers.push_back("tessera/cluster.cuh");
    info.cluster = cluster_;
    stats_["cluster-size"] = cluster_;
    notes_.push_back("cluster: each program runs on a cluster of " + std::to_string(cluster_) +
                     " CTAs, each holding 1/" + std::to_string(cluster_) +
                     " of every tile; reductions meet through distributed shared memory");
  }
  if (wg_.cluster_m > 1 || info.split_cluster || program_pairs_) {
    line("#include \"tessera/cluster.cuh\"");
    out.headers.push_back("tessera/cluster.cuh");
  }
  if (wg_.ok || lowered_wgmma_ || !tma_loads_.empty()) {
    line("#include \"tessera/hopper.cuh\"");
    line("#include \"tessera/wgmma.cuh\"");
    out.headers.push_back("tessera/hopper.cuh");
    out.headers.push_back("tessera/wgmma.cuh");
  } else if (!struct_tma_.empty()) {
    line("#include \"tessera/hopper.cuh\"");
    out.headers.push_back("tessera/hopper.cuh");
  }
  line("");
  // A warp-specialized kernel runs one CTA per SM (its ring takes most of shared memory): the
  // 1 lets ptxas use 65536 / block_threads registers per thread.
  std::string s = "extern \"C\" __global__ void " +
                  (cluster_ > 1 || wg_.cluster_m > 1 || program_pairs_
                       ? "__cluster_dims__(" + std::to_string(std::max({cluster_, wg_.cluster_m, program_pairs_ ? 2 : 1})) +
                             ", 1, 1) "
                       : std::string()) +
                  "__launch_bounds__(" + std::to_string(info.block_threads) + (wg_.ok || ws_loop_ ? ", 1" : "") + ") " +
                  info.symbol + "(";
  for (size_t i = 0; i < sig.size(); ++i) s += (i ? ", " : "") + sig[i];
  const size_t sig_line = lines_.size();
  open(s + ") {");
  line("extern __shared__ __align__(16) unsigned char tsr_smem[];");
  line("const int tsr_tid = int(threadIdx.x);");
  line("constexpr int tsr_nthreads = " + std::to_string(T_) + ";");
  line("(void)tsr_tid; (void)tsr_smem;");
  if (cluster_ > 1) line("const int tsr_crank = int(tsr::cluster_rank());  // this CTA's part of every tile");
  // On a cluster the layouts' warps are the program's: a CTA's warps follow those of the CTAs
  // of lower rank (cluster-programs).
  if (lowered_)
    line("const int tsr_lane = tsr_tid & 31, tsr_warp = " +
         (cluster_ > 1 ? "(tsr_tid >> 5) + " + std::to_string(warps_) + " * tsr_crank" : std::string("tsr_tid >> 5")) +
         ";  (void)tsr_lane; (void)tsr_warp;");
  const size_t struct_line = lines_.size();
  // Row-major strides of every view, in 64 bits.
  for (const Value* p : k.params) {
    if (!views_.count(p)) continue;
    ViewInfo& vi = views_[p];
    int R = static_cast<int>(vi.dims.size());
    vi.strides.assign(R, "");
    std::string base = views_[p].ptr;
    for (int d = R - 1; d >= 0; --d) {
      std::string n = base + "_s" + std::to_string(d);
      if (d == R - 1) line("const int64_t " + n + " = 1;");
      else line("const int64_t " + n + " = " + vi.strides[d + 1] + " * " + vi.dims[d + 1] + ";");
      vi.strides[d] = n;
      line("(void)" + n + ";");
    }
  }
  for (const auto& c : k.constexprs)
    if (c.name != kSplitKKnob)  // read by the runtime only
      line("[[maybe_unused]] constexpr int64_t " + c.name + " = " + std::to_string(c.value) + "LL;");
  // Grouped order: the t-th program started is (tsr_pid0, tsr_pid1), taking 8 values of pid0
  // for each pid1 in turn, so that programs running together share operand tiles in L2.
  // A persistent kernel with cluster_m = 2 numbers pairs of axis-0 programs instead (rows
  // tsr_grid0p = ceil(tsr_grid0 / 2)); CTA rank r of the pair takes program 2q + r of pair row q
  // (with an odd tsr_grid0 the last pair's second program lies past the grid: it keeps its
  // partner's multicast protocol, and its store is skipped, emit_op).
  const bool pairs = persistent_ && wg_.cluster_m > 1;
  const std::string G = std::to_string(pairs ? std::max<int64_t>(1, group_rows() / 2) : group_rows());
  auto grouped_ids = [&] {
    emit_grouped_ids("tsr_t", G, pairs ? "tsr_grid0p" : "tsr_grid0", pairs);
    line("(void)tsr_pid0; (void)tsr_pid1;");
  };
  if (persistent_) {
    emit_wgmma_setup();
    if (pairs) line("const int64_t tsr_grid0p = (int64_t(tsr_grid0) + 1) / 2;");
    line("const int64_t tsr_programs = " + std::string(pairs ? "tsr_grid0p" : "int64_t(tsr_grid0)") +
         " * int64_t(tsr_grid1), tsr_in_group = " + G + " * int64_t(tsr_grid1);");
    // The loop over the programs, each running the kernel's body.
    auto program_loop = [&] {
      if (stream_k_) {
        // Whole tiles tsr_t = blockIdx.x, + gridDim.x, ... below tsr_dp; the last tsr_L tiles
        // (cuda::stream_k_tiles: all of them when they are fewer than gridDim.x, else a last
        // partial wave of at least half of gridDim.x, a smaller one with the full wave before
        // it) as tsr_L * gridDim.x units of K work, gridDim.x per tile, of which CTA c takes
        // units [c * tsr_L, (c + 1) * tsr_L): parts of at most three tiles (tsr_L < 2 *
        // gridDim.x), of which only the last can end inside a tile. A CTA
        // runs them last tile first: every CTA starts its stream-K work at K = 0 (or, when its
        // units lie inside one tile, within (G - L) / G of the K loop from it), so the parts
        // running at once read nearby K panels (as whole tiles in a wave do, for L2), and
        // the parts that end inside a tile, which the tile's last part waits for, run first.
        // [tsr_pb, tsr_pe) is the item's part of its tile, in units.
        line("const int32_t tsr_G = int32_t(gridDim.x), tsr_rem = int32_t(tsr_programs % tsr_G);");
        line("const int32_t tsr_L = tsr_rem == 0 ? 0 : 2 * tsr_rem >= tsr_G || tsr_programs < tsr_G ? tsr_rem : tsr_rem + tsr_G;");
        line("const int64_t tsr_dp = tsr_programs - tsr_L;");
        line("const int32_t tsr_u0 = int32_t(blockIdx.x) * tsr_L, tsr_u1 = tsr_u0 + tsr_L;");
        line("const int32_t tsr_ndp = int64_t(blockIdx.x) < tsr_dp ? int32_t((tsr_dp - 1 - int64_t(blockIdx.x)) / tsr_G) + 1 : 0;");
        line("const int32_t tsr_nsk = tsr_L > 0 ? (tsr_u1 - 1) / tsr_G - tsr_u0 / tsr_G + 1 : 0;");
        open("for (int32_t tsr_i = 0; tsr_i < tsr_ndp + tsr_nsk; ++tsr_i) {");
        line("const bool tsr_sk = tsr_i >= tsr_ndp;");
        line("const int64_t tsr_t = tsr_sk ? tsr_dp + (tsr_u1 - 1) / tsr_G - (tsr_i - tsr_ndp) : int64_t(blockIdx.x) + int64_t(tsr_i) * tsr_G;");
        line("const int32_t tsr_tu = tsr_sk ? int32_t(tsr_t - tsr_dp) * tsr_G : 0;  // the tile's first unit (stream-K tiles)");
        line("const int32_t tsr_pb = tsr_sk && tsr_u0 > tsr_tu ? tsr_u0 - tsr_tu : 0;");
        line("const int32_t tsr_pe = tsr_sk && tsr_u1 < tsr_tu + tsr_G ? tsr_u1 - tsr_tu : tsr_G;");
      } else if (pairs) {
        // Both CTAs of a cluster take the same pair of programs.
        open("for (int64_t tsr_t = blockIdx.x / 2; tsr_t < tsr_programs; tsr_t += gridDim.x / 2) {");
      } else {
        open("for (int64_t tsr_t = blockIdx.x; tsr_t < tsr_programs; tsr_t += gridDim.x) {");
      }
      grouped_ids();
      emit_block(*k.body);
      close();
    };
    if (wg_.overlap) emit_role_loops(program_loop);
    else program_loop();
    // The TMA stores must finish before the CTA's shared memory goes away.
    if (wg_.tma_store)
      line("if (tsr_tid < " + std::to_string(wg_.consumer_warps * 32) + " && tsr_tid % 128 == 0) tsr::bulk_wait_all();");
    // Neither CTA of a pair leaves while its partner may still arrive on its barriers.
    if (pairs) line("tsr::cluster_sync();");
  } else if (prog_persistent_) {
    emit_program_loop(*k.body);
  } else if (grouped_) {
    // One CTA per program, in launch order (blockIdx.x fastest), renumbered into grouped order.
    line("const int32_t tsr_grid0 = int32_t(gridDim.x), tsr_grid1 = int32_t(gridDim.y);");
    line("const int64_t tsr_t = int64_t(blockIdx.y) * gridDim.x + blockIdx.x, tsr_in_group = " +
         G + " * int64_t(tsr_grid1);");
    grouped_ids();
    emit_block(*k.body);
  } else if (ws_loop_) {
    emit_warp_specialized_body();
  } else {
    emit_block(*k.body);
    // No CTA of a cluster leaves while another may still read its shared memory.
    if (cluster_ > 1) line("tsr::cluster_sync();");
  }
  if (!struct_tma_.empty()) drain_struct_tma();
  close();
  if (lowered_) {
    // The layout emitter's tensor maps (TMA rings and stores): one thread starts fetching each
    // into the TMA unit's descriptor cache at the kernel's start, so that a program's first
    // copies do not wait for it, which a kernel of few programs and one CTA per SM pays once
    // per CTA (the planning emitter's wgmma kernels and Struct TMA prefetch theirs too).
    std::vector<std::string> maps;
    for (const auto& [load, m] : tma_loads_) maps.push_back(m);
    if (!tma_store_map_.empty()) maps.push_back(tma_store_map_);
    std::sort(maps.begin(), maps.end());
    maps.erase(std::unique(maps.begin(), maps.end()), maps.end());
    for (const auto& [copy, m] : struct_tma_) std::erase(maps, m);  // Struct's prologue has them
    if (!maps.empty()) {
      prologue_.push_back("if (tsr_tid == 0) {");
      for (const std::string& m : maps) prologue_.push_back("  tsr::prefetch_tensormap(&" + m + ");");
      prologue_.push_back("}");
    }
  }
  for (size_t i = prologue_.size(); i-- > 0;) {
    lines_.insert(lines_.begin() + static_cast<std::ptrdiff_t>(struct_line), "  " + prologue_[i]);
    line_op_.insert(line_op_.begin() + static_cast<std::ptrdiff_t>(struct_line), nullptr);
  }
  place_struct_storage(struct_line);

  if (prog_persistent_) {
    // The two prefetch buffers follow the scratch that the ops share (emit_program_loop left the
    // offset to fill in).
    const int64_t at = align16(smem_);
    for (auto& l : lines_)
      if (size_t p = l.find(kProgramPrefetchOffset); p != std::string::npos)
        l.replace(p, std::string(kProgramPrefetchOffset).size(), std::to_string(at));
    smem_ = at + pf_buffers_ * prog_pf_bytes_;
  }
  if (lowered_) {
    // The staged operands' buffers follow the scratch the exchanges share.
    const int64_t at = align16(smem_);
    for (auto& l : lines_)
      if (size_t p = l.find(kLoweredBase); p != std::string::npos) l.replace(p, std::string(kLoweredBase).size(), std::to_string(at));
    if (lowered_smem_ > 0) smem_ = at + lowered_smem_ + (lowered_wgmma_ ? 1024 : 0);
  }
  int64_t smem = align16(smem_);
  // The layout emitter's buffers (rings and staged operands, rows padded) may not fit where the
  // planning emitter's do: the kernel is then the planning emitter's, with a note.
  if (lowered_ && smem + red_smem_ > smem_limit(tg_))
    throw cudagen::NotLowerable{"its shared tiles need " + std::to_string(smem + red_smem_) + " bytes, over the " +
                                std::to_string(smem_limit(tg_)) + " of " + tg_.str()};
  if (smem + red_smem_ > smem_limit(tg_))
    throw TesseraError(k.loc, "cuda backend: kernel @" + k.name + " needs " + std::to_string(smem + red_smem_) +
                                  " bytes of shared memory; the limit on " + tg_.str() + " is " +
                                  std::to_string(smem_limit(tg_)) + " bytes (use smaller tiles)");
  // A pipelined matmul with at most 64 accumulators per thread and 32 elements per thread per
  // stage (4 cp.async chunks, 2 mma k-steps) fits in 128 registers without spills (one loop,
  // fragments stored straight from registers; BLOCK_K = 64 at 128 x 128 spills under the cap):
  // ask ptxas for that cap when shared memory allows two CTAs per SM, so that one CTA's barrier
  // waits, prologue and epilogue overlap another's main loop.
  if (pipe_frag_regs_ > 0 && pipe_fits_two_ctas(pipe_frag_regs_, pipe_stage_elems_)) {
    int64_t blocks = 65536 / (int64_t(T_) * 128);
    if (smem > 0) blocks = std::min(blocks, smem_limit(tg_) / smem);
    std::string lb = "__launch_bounds__(" + std::to_string(T_) + ")";
    size_t at = lines_[sig_line].find(lb);
    if (blocks >= 2 && at != std::string::npos) {
      lines_[sig_line].replace(at, lb.size(), "__launch_bounds__(" + std::to_string(T_) + ", " + std::to_string(blocks) + ")");
      stats_["min-blocks-per-sm"] = blocks;
    }
  }
  // A kernel constexpr min_blocks asks ptxas for few enough registers that that many CTAs fit
  // on an SM (an occupancy knob for memory-bound kernels, which cuda_bench --tune tries on the
  // row kernels: a row kernel's registers are set by the heavier of its two branches).
  if (const ConstexprDecl* d = k.find_constexpr("min_blocks"); d && d->value >= 1 && d->value <= 32 && !wg_.ok) {
    std::string lb = "__launch_bounds__(" + std::to_string(T_) + ")";
    size_t at = lines_[sig_line].find(lb);
    if (at != std::string::npos) {
      lines_[sig_line].replace(at, lb.size(), "__launch_bounds__(" + std::to_string(T_) + ", " + std::to_string(d->value) + ")");
      stats_["min-blocks-per-sm"] = d->value;
    }
  }
  info.dynamic_smem_bytes = static_cast<int>(smem);
  info.static_smem_bytes = static_cast<int>(red_smem_);
  stats_["smem-bytes"] = smem;
  stats_["threads"] = info.block_threads;
  for (auto& l : lines_) {
    out.source += l;
    out.source += '\n';
  }
  out.line_op = std::move(line_op_);
  out.stats = stats_;
  out.notes = notes_;
  out.wgmma_not_taken = wgmma_not_taken_;
  return out;
}

}  // namespace tessera::cudagen

namespace tessera {

// CTAs per program: the kernel's `cluster_size` constexpr (1, 2, 4 or 8; sm_90+), else 1.
// Not a default: on the H200 (bench/RESULTS.md, session 5) softmax, layernorm and rmsnorm at
// 4096x32768 ran 6%, 23% and 8% slower on clusters of 8 CTAs of 128 threads than on one CTA of
// 1024 threads per row (every reduction waits for the whole cluster, as a CTA barrier waits for
// the whole CTA, and pays a cluster barrier and remote reads besides).
// A cluster_size no path can take is an error on either emitter, not a note on one.
static void check_cluster_size(const Kernel& k) {
  const ConstexprDecl* d = k.find_constexpr("cluster_size");
  if (d && d->value != 1 && d->value != 2 && d->value != 4 && d->value != 8)
    throw TesseraError(d->loc, "cuda backend: constexpr cluster_size of kernel @" + k.name + " is " +
                                   std::to_string(d->value) + "; it must be 1, 2, 4 or 8");
}

static int pick_cluster(const Kernel& k, const CudaTarget& t, std::string& why_not) {
  const ConstexprDecl* d = k.find_constexpr("cluster_size");  // (check_cluster_size: 1, 2, 4 or 8)
  if (!d || d->value == 1) return 1;
  if (t.sm < 90) {
    why_not = "cluster_size = " + std::to_string(d->value) + " needs sm_90 or newer (thread-block clusters)";
    return 1;
  }
  return static_cast<int>(d->value);
}

namespace {

// The first op with a result whose type names a layout encoding or a convert_layout (null: none).
const Op* first_layout_op(const Block& b) {
  for (const auto& op : b.ops) {
    if (op->kind == OpKind::ConvertLayout) return op.get();
    for (const Value* r : op->results)
      if (r && !r->type.layout.empty()) return op.get();
    for (const auto& region : op->regions)
      if (const Op* inner = region ? first_layout_op(*region) : nullptr) return inner;
  }
  return nullptr;
}

}  // namespace

// The layout emitter's paths (by the stat each counts) that have not yet run on a GPU: "" when
// the emission used none. (Session 56's folds through shared memory, inserts in parts, tiles in
// a while, copy warps of an mma.sync grid and reductions over them, K-major f8 stores ran on
// the H100, bench/session56_gpu.sh; the folds' odd line stride, added after, has not. A new
// path adds its stat here until its GPU test passes.)
static std::string unrun_layout_paths(const std::map<std::string, int64_t>& stats) {
  static const std::pair<const char*, const char*> kUnrun[] = {
      {"folds-odd-stride", "a fold through shared memory with an odd line stride"}};
  std::string out;
  for (const auto& [stat, what] : kUnrun)
    if (auto it = stats.find(stat); it != stats.end() && it->second > 0) out += (out.empty() ? "" : ", ") + std::string(what);
  return out;
}

GpuLoweringOptions gpu_lowering_options(const CudaTarget& target, bool wgmma) {
  GpuLoweringOptions o{target.sm, wgmma};
  o.split_k = target.split_k && wgmma;
  o.stream_k = target.stream_k && wgmma;
  return o;
}

CudaEmission emit_cuda_with_info(const Kernel& bound_kernel, const CudaTarget& target) {
  check_cluster_size(bound_kernel);  // before either emitter: a located error on both
  std::string why_not, layouts_note;
  // Emitter::Auto and Emitter::Layouts: the layout emitter (every codegen knob is a GPU lowering
  // pass's since session 55, and each has run on a GPU), the planning emitter only for what it
  // cannot print yet, and under Auto for what it prints but has not yet run on a GPU
  // (unrun_layout_paths).
  if (target.emitter != CudaTarget::Emitter::Planning) {
    // wgmma where the target has it (sm_90a), as `tessera compile --dump-after` shows; what
    // the layout emitter cannot print with wgmma (a tile narrower than a 128-byte swizzle
    // atom, say) it tries again lowered for mma.sync.
    // A kernel on clusters (cluster-programs) that cannot be printed so is lowered again
    // without them (cluster_note says why).
    std::string wgmma_note, cluster_note;
    bool clusters = true;
    for (int attempt = 0; attempt < 2; ++attempt) {
      bool wgmma = attempt == 0;
      if (wgmma && !(target.arch_specific && target.tma)) continue;
      PipelineOptions lowering_options;
      lowering_options.disabled = target.disabled_passes;
      PassStats lowering_stats;
      GpuLoweringOptions gpu_options = gpu_lowering_options(target, wgmma);
      gpu_options.clusters = clusters;
      std::shared_ptr<Kernel> lowered = run_gpu_lowering(bound_kernel, gpu_options, lowering_options, &lowering_stats);
      try {
        const bool on_wgmma = has_mma_dot(*lowered->body, 3);
        if (wgmma && !on_wgmma) wgmma = false;  // nothing to retry without it
        // pingpong-consumers' `consumers = 2`: the layouts are one warpgroup's (each consumer
        // holds a whole tile), the program runs two of them (plan_warp_specialization).
        // (On a cluster, cluster-programs' `num_ctas`, the program's warps are its CTAs'.)
        const int ctas = launch_ctas(*lowered);
        int warps = launch_warps(*lowered) / ctas;
        for (const auto& op : lowered->body->ops)
          if (op->kind == OpKind::For && op->has_attr("consumers") && op->attr_int("consumers") == 2) warps /= 2;
        auto print = [&] {
          cudagen::Emitter e(*lowered, target, ctas);
          e.lowered_ = true;
          e.warps_ = warps;
          e.lowered_wgmma_ = on_wgmma;
          return e.run();
        };
        // Sets every `tma_store = 1` store of the lowered IR to 0; whether there was one.
        auto store_from_registers = [&] {
          bool staged = false;
          for (const auto& op : lowered->body->ops)
            if (op->kind == OpKind::StoreTile && op->has_attr("tma_store") && op->attr_int("tma_store") == 1) {
              op->set_attr("tma_store", int64_t{0});
              // (overlap-epilogues' `overlap` and the staging's `tma_buffers` go with it: the
              // boxes they are about are the TMA store's.)
              std::erase_if(op->attrs, [](const NamedAttr& a) { return a.name == "overlap" || a.name == "tma_buffers"; });
              staged = true;
            }
          return staged;
        };
        CudaEmission out;
        std::vector<std::string> no_producer;  // why a `warp_specialize = 1` loop got none
        // The TMA store's staging buffers (16 KiB per compute warpgroup) that leave too little
        // shared memory for the rest: the tile is stored from registers instead.
        auto print_or_store_from_registers = [&] {
          try {
            return print();
          } catch (const cudagen::NotLowerable& e) {
            if (e.why.find("shared tiles need") == std::string::npos || !store_from_registers()) throw;
            CudaEmission again = print();
            again.notes.push_back("tma_store = 0: " + e.why + " with the TMA store's staging buffers");
            return again;
          }
        };
        try {
          out = print_or_store_from_registers();
          if (out.stats["producer-warpgroups"] == 0)
            for (const std::string& n : out.notes)
              if (n.find("no producer warpgroup") != std::string::npos) no_producer.push_back(n);
        } catch (const cudagen::NotWarpSpecializable& w) {
          no_producer.push_back("no producer warpgroup: " + w.why);
        }
        if (!no_producer.empty()) {
          // Printed again from IR that says what is printed: the loop without a producer.
          for (const auto& op : lowered->body->ops)
            if (op->kind == OpKind::For && op->has_attr("warp_specialize")) {
              op->set_attr("warp_specialize", int64_t{0});
              // The layouts stay one warpgroup's: the program is that warpgroup alone.
              if (op->has_attr("consumers")) op->set_attr("consumers", int64_t{1});
              // (Stream-K's parts are the persistent CTAs': the whole loop again.)
              std::erase_if(op->attrs, [](const NamedAttr& a) { return a.name == "stream_k"; });
            }
          // Without a producer the programs run one per CTA (persistence follows the producer),
          // and their stores go out from registers (the TMA store follows persistence).
          if (Op* y = lowered->grid ? lowered->grid->terminator() : nullptr; y && y->has_attr("persistent"))
            take_back_persistence(*y);
          // (No CTA pairs without persistence: their shared tiles are copied whole.)
          walk(*lowered->body, [](Op& op) {
            if (op.kind == OpKind::LoadTile && op.has_attr("multicast")) op.set_attr("multicast", int64_t{0});
          });
          store_from_registers();
          out = print();
          for (const std::string& n : no_producer) out.notes.push_back(n + " (warp_specialize = 0)");
        }
        // Under Auto, what the layout emitter prints but has not yet run on a GPU (its stats
        // say where it printed it) goes to the planning emitter, with a note.
        if (target.emitter == CudaTarget::Emitter::Auto)
          if (const std::string u = unrun_layout_paths(out.stats); !u.empty()) {
            layouts_note = u + " on the layout emitter not run on a GPU yet: the planning emitter made it";
            break;
          }
        out.notes.push_back("printed from the GPU lowering's layouts (the layout emitter)");
        for (const std::string& n : lowering_stats.notes)
          if (n.rfind("cluster-programs:", 0) == 0 && clusters) out.notes.push_back(n);
        if (!cluster_note.empty()) out.notes.push_back(cluster_note);
        // Why a dot did not take wgmma, as `tessera compile` says without --stats: the lowering
        // that was printed (assign-layouts' note), or why its wgmma form could not be printed.
        for (const std::string& n : lowering_stats.notes)
          if (const size_t at = n.find("dot at "); at != std::string::npos && n.find(kNotWgmmaMarker) != std::string::npos) {
            out.wgmma_not_taken = n.substr(at);
            break;
          }
        if (out.wgmma_not_taken.empty() && !wgmma_note.empty()) out.wgmma_not_taken = wgmma_note;
        if (!wgmma_note.empty()) out.notes.push_back(wgmma_note);
        out.lowered = std::move(lowered);
        out.lowered_with_wgmma = wgmma;
        out.lowered_with_clusters = clusters;
        return out;
      } catch (const cudagen::NotClusterable& e) {
        const std::string not_taken = "cluster_size = " + std::to_string(launch_ctas(*lowered)) + " not taken: " + e.why +
                                      " would move data between the CTAs of a cluster";
        if (!clusters) {  // (cluster-programs left no num_ctas the second time: not expected)
          layouts_note = "the layout emitter cannot print this kernel yet (" + not_taken + "): the planning emitter made it";
          break;
        }
        cluster_note = not_taken + ": lowered without clusters";
        clusters = false;
        --attempt;  // (the same dots again)
        continue;
      } catch (const cudagen::NotLowerable& e) {
        if (wgmma) {
          wgmma_note = "not on wgmma (" + e.why + "): lowered for mma.sync";
          continue;
        }
        layouts_note = "the layout emitter cannot print this kernel yet (" + e.why +
                       (wgmma_note.empty() ? std::string() : "; " + wgmma_note) + "): the planning emitter made it";
        break;
      }
    }
  }
  int cluster = pick_cluster(bound_kernel, target, why_not);
  if (cluster > 1) {
    try {
      return cudagen::Emitter(bound_kernel, target, cluster).run();
    } catch (const cudagen::NotClusterable& e) {
      why_not = "not split over a cluster of " + std::to_string(cluster) + " CTAs: " + e.why;
    }
  }
  CudaEmission out = cudagen::Emitter(bound_kernel, target).run();
  if (!why_not.empty()) out.notes.push_back(why_not);
  if (!layouts_note.empty()) out.notes.push_back(layouts_note);
  if (const Op* op = first_layout_op(*bound_kernel.body))
    out.notes.push_back("layout encodings in the IR (the first at " + op->loc.str() +
                        ") are not yet honored by the cuda emitter: it picks its own, and convert_layout is a copy "
                        "(same results)");
  return out;
}

std::string emit_cuda(const Kernel& bound_kernel, const CudaTarget& target) {
  return emit_cuda_with_info(bound_kernel, target).source;
}

}  // namespace tessera
