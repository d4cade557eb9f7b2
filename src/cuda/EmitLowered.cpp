// The layout emitter: prints a kernel that the GPU lowering passes have given layouts
// (CudaTarget::from_layouts). Each tile value is a register array whose slot s holds the
// element its layout places there (DistLayout.h), so elementwise ops, splats, casts and control
// flow print slot by slot as in the planning emitter; the ops below are the ones whose code
// depends on the layouts. Nothing here plans: a conversion the passes left is an exchange
// (through registers when every thread already holds what it needs, else through shared
// memory), a reduction shuffles along the lanes and exchanges along the warps its layout
// spreads the axis over, and a dot is mma.sync over its operands' fragments.
#include <algorithm>

#include "cuda/EmitterInternal.h"
#include "passes/Passes.h"

namespace tessera::cudagen {

namespace {

std::string num(int64_t v) { return std::to_string(v); }

bool is_tile_op(const Op& op) {
  for (const Value* v : op.operands)
    if (v->type.is_tile()) return true;
  for (const Value* v : op.results)
    if (v->type.is_tile()) return true;
  return false;
}

// Every op of `b` (nested regions included) that reads `v`.
void readers(const Block& b, const Value* v, std::vector<std::pair<const Op*, size_t>>& out) {
  for (const auto& op : b.ops) {
    for (size_t i = 0; i < op->operands.size(); ++i)
      if (op->operands[i] == v) out.push_back({op.get(), i});
    for (const auto& r : op->regions)
      if (r) readers(*r, v, out);
  }
}

// How many of a thread's consecutive slots hold consecutive elements along `dim` (the layout's
// fastest digit), capped at 16 bytes of `elem_bytes` elements: the width of a vector access.
int64_t vector_width(const Dist& d, int dim, int elem_bytes) {
  if (d.digits.empty() || d.digits[0].dim != dim || d.digits[0].coef != 1) return 1;
  int64_t v = 1;
  while (d.digits[0].radix % (v * 2) == 0 && v * 2 * elem_bytes <= 16) v *= 2;
  return v;
}

// Whether every reader of `v` in `b` is a dot that takes it as operand A or B (and there is one).
bool read_only_by_dots(const Block& b, const Value* v) {
  std::vector<std::pair<const Op*, size_t>> rs;
  readers(b, v, rs);
  return !rs.empty() && std::all_of(rs.begin(), rs.end(), [](const auto& u) { return u.first->kind == OpKind::Dot && u.second < 2; });
}

}  // namespace

const Dist& Emitter::dist_of(const Value* v) const {
  auto it = dists_.find(v);
  if (it != dists_.end()) return it->second;
  if (!v->type.is_tile() || !v->type.layout.is_distributed())
    throw NotLowerable{"a tile without a register layout (" + v->type.str() + ")"};
  if (!shape_is_static(v->type.shape)) throw NotLowerable{"a tile without a static shape"};
  return dists_.emplace(v, make_dist(v->type.layout, static_shape(v->type.shape), warps_)).first->second;
}

bool Emitter::emit_lowered(const Op& op) {
  switch (op.kind) {
    case OpKind::ConvertLayout: lowered_convert(op); return true;
    case OpKind::LoadTile:
    case OpKind::StoreTile: lowered_load_store(op); return true;
    case OpKind::Reshape:
    case OpKind::Permute:
    case OpKind::ExpandDims:
    case OpKind::Broadcast: lowered_shape(op); return true;
    case OpKind::Reduce: lowered_reduce(op); return true;
    case OpKind::Dot: lowered_dot(op); return true;
    case OpKind::Arange: {
      const Value* r = op.result();
      const Dist& d = dist_of(r);
      int64_t start = op.has_attr("start") ? op.attr_int("start") : 0;
      std::string n = declare(op, r);
      slots(layout_of(r), [&](const std::string& s) {
        line(n + "[" + s + "] = int32_t(" + num(start) + " + " + d.const_expr(0, s) + " + " + d.thread_expr(0) + ");");
      });
      return true;
    }
    default: break;
  }
  if (!is_tile_op(op)) return false;
  switch (op.info().cls) {
    case OpClass::Create:
    case OpClass::Unary:
    case OpClass::Binary:
    case OpClass::Compare:
    case OpClass::Ternary:
    case OpClass::Cast:
      // Slot by slot: every tile operand must be in the result's layout.
      for (const Value* v : op.operands)
        if (v->type.is_tile() && v->type.layout != op.result()->type.layout)
          throw NotLowerable{"an elementwise op at " + op.loc.str() + " over tiles of different layouts"};
      return false;
    case OpClass::Control:
      if (op.kind == OpKind::While) throw NotLowerable{"tiles carried through a while loop"};
      return false;
    default: throw NotLowerable{"the op " + std::string(op.name()) + " at " + op.loc.str()};
  }
}

void Emitter::lowered_exchange(const Op& op, const Value* x, const Value* r,
                               const std::function<std::string(const std::string&)>& src_flat) {
  const int64_t bytes = shape_numel(x->type.shape) * std::max(4, scalar_bytes(x->type.elem));
  const std::string ptr = smem_ptr(ctype(x->type.elem), 0, bytes);
  stage(x, ptr);  // (a barrier first: the last exchange's readers are done)
  barrier();
  const std::string n = declare(op, r);
  gather_into(r, n, [&](const std::string& e) { return ptr + "[" + src_flat(e) + "]"; });
  count("layout-exchanges");
}

void Emitter::lowered_convert(const Op& op) {
  const Value *x = op.operand(0), *r = op.result();
  const bool to_shared = r->type.layout.kind == tessera::Layout::Kind::Shared;
  if (to_shared && x->type.layout.kind == tessera::Layout::Kind::Shared)
    throw NotLowerable{"a conversion between shared layouts"};
  if (to_shared) {  // registers -> a shared tile
    SharedView sv = alloc_shared(r, r->type.layout.order);
    store_to_shared(x, sv);
    shared_[r] = sv;
    count("stores-to-shared");
    return;
  }
  if (auto it = shared_.find(x); it != shared_.end()) {  // a shared tile -> registers
    if (r->type.layout.kind == tessera::Layout::Kind::DotOperand && read_only_by_dots(*k_.body, r)) {
      staged_[r] = staged_from(op, it->second);  // the dots load their fragments (ldmatrix)
      name_[r] = it->second.ptr;
      return;
    }
    const SharedView sv = it->second;
    const std::vector<int64_t> S = static_shape(r->type.shape);
    const std::string n = declare(op, r);
    gather_into(r, n, [&](const std::string& e) {
      std::vector<std::string> c = coords(e, S);
      std::string at;
      for (size_t d = 0; d < c.size(); ++d) at += (d ? " + " : "") + std::string("(") + c[d] + ") * " + num(sv.strides[d]);
      return load_conv(r->type.elem, sv.ptr + "[" + at + "]");
    });
    count("loads-from-shared");
    return;
  }
  const Dist &from = dist_of(x), &to = dist_of(r);
  std::vector<int64_t> m = same_thread_slots(from, to, T_, [](const std::vector<int64_t>& c) { return c; });
  if (!m.empty()) {
    const std::string n = declare(op, r);
    for (size_t s = 0; s < m.size(); ++s) line(n + "[" + num(int64_t(s)) + "] = " + nm(x) + "[" + num(m[s]) + "];");
    count("register-conversions");
    return;
  }
  // An mma operand that only dots read stays in shared memory; the dots load its fragments.
  if (r->type.layout.kind == tessera::Layout::Kind::DotOperand && scalar_bits(r->type.elem) == 16) {
    if (read_only_by_dots(*k_.body, r)) {
      // Stored with the source's contiguous dim fastest, so that each thread's run lands side
      // by side.
      const bool dim0 = x->type.layout.kind == tessera::Layout::Kind::Blocked && !x->type.layout.order.empty() &&
                        x->type.layout.order[0] == 0;
      SharedView sv = alloc_shared(r, dim0 ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{});
      store_to_shared(x, sv);
      staged_[r] = staged_from(op, sv);
      name_[r] = sv.ptr;
      count("staged-operands");
      return;
    }
  }
  lowered_exchange(op, x, r, [](const std::string& e) { return e; });
}

Emitter::SharedView Emitter::alloc_shared(const Value* v, const std::vector<int64_t>& order_in, int64_t stages,
                                          int64_t* stage_elems) {
  const std::vector<int64_t> S = static_shape(v->type.shape);
  const int R = static_cast<int>(S.size());
  std::vector<int64_t> order = order_in;
  if (order.empty())
    for (int d = R - 1; d >= 0; --d) order.push_back(d);
  if (scalar_bits(v->type.elem) != 16) throw NotLowerable{"a shared tile of other than 16-bit elements"};
  SharedView sv;
  sv.strides.assign(R, 0);
  int64_t stride = 1;
  for (size_t i = 0; i < order.size(); ++i) {
    sv.strides[order[i]] = stride;
    // Rows of whole 16-byte chunks, padded by one more (vector stores and ldmatrix rows stay
    // aligned; eight rows of an ldmatrix phase fall in different banks).
    stride *= i == 0 ? (S[order[i]] + 7) / 8 * 8 + 8 : S[order[i]];
  }
  const int64_t off = lowered_smem_, bytes = align16(stride * 2);
  lowered_smem_ += stages * bytes;
  if (stage_elems) *stage_elems = bytes / 2;
  sv.ptr = fresh("sh");
  line("uint16_t* const " + sv.ptr + " = reinterpret_cast<uint16_t*>(tsr_smem + " + kLoweredBase + " + " + num(off) + ");");
  return sv;
}

void Emitter::store_to_shared(const Value* x, const SharedView& sv) {
  const Dist& d = dist_of(x);
  const std::string own = d.owner_expr();
  auto at = [&](const std::string& s) {
    std::string e;
    for (int q = 0; q < d.rank(); ++q)
      e += (q ? " + " : "") + std::string("(") + d.const_expr(q, s) + " + " + d.thread_expr(q) + ") * " + num(sv.strides[q]);
    return e;
  };
  int fastest = 0;
  for (int q = 0; q < d.rank(); ++q)
    if (sv.strides[q] == 1) fastest = q;
  // A thread's run along the stored rows is one shared store of up to 16 bytes (rows of a
  // multiple of 8 elements keep every run aligned).
  const int64_t V = vector_width(d, fastest, 2);
  barrier();  // the readers of the last contents are done
  const std::string c = fresh("c"), s0 = c + " * " + num(V), w = fresh("w");
  line("#pragma unroll");
  open("for (int " + c + " = 0; " + c + " < " + num(d.slots() / V) + "; ++" + c + ") {");
  line("uint16_t " + w + "[" + num(V) + "];");
  for (int64_t v = 0; v < V; ++v)
    line(w + "[" + num(v) + "] = " + store_conv(x->type.elem, nm(x) + "[" + s0 + " + " + num(v) + "]") + ";");
  line((own == "true" ? "" : "if (" + own + ") ") + "tsr::copy_vec<uint16_t, " + num(V) + ">(" + sv.ptr + " + " + at(s0) +
       ", " + w + ");");
  close();
  barrier();
}

Emitter::StagedOperand Emitter::staged_from(const Op& op, const SharedView& sv) const {
  if (sv.strides.size() != 2) fail(op, "internal: an mma operand view of rank other than 2");
  if (sv.strides[1] == 1) return {"tsr::smem_u32(" + sv.ptr + ")", sv.strides[0], false};
  if (sv.strides[0] == 1) return {"tsr::smem_u32(" + sv.ptr + ")", sv.strides[1], true};
  throw NotLowerable{"an mma operand in shared memory with neither dim contiguous"};
}

void Emitter::issue_shared_copies(const Op& op, const std::string& dst_ptr, const std::vector<int64_t>& strides) {
  const Value* view = op.operand(0);
  const ViewInfo& vi = view_of(op, view);
  const Value* tile = op.result();
  const int R = view->type.rank();
  const std::vector<int64_t> S = shape_of(op, tile);
  const ScalarKind t = view->type.elem;
  open("{");
  std::vector<std::string> o(R);
  for (int q = 0; q < R; ++q) {
    o[q] = fresh("o");
    line("const int64_t " + o[q] + " = int64_t(" + nm(op.operand(1 + q)) + ") * " + num(S[q]) + ";");
  }
  // Chunk q of 8 elements (row-major over the tile) is copied by thread q % T.
  const int64_t chunks = shape_numel(tile->type.shape) / 8, rounds = (chunks + T_ - 1) / T_;
  const std::string i = fresh("i");
  line("#pragma unroll");
  open("for (int " + i + " = 0; " + i + " < " + num(rounds) + "; ++" + i + ") {");
  const std::string q = fresh("q");
  line("const int " + q + " = " + i + " * " + num(T_) + " + tsr_tid;");
  if (chunks % T_ != 0) line("if (" + q + " >= " + num(chunks) + ") break;");
  std::vector<std::string> c = coords(q + " * 8", S), g(R);
  std::string rows_ok = "true", at_g, at_s;
  for (int d = 0; d < R; ++d) {
    g[d] = "(" + o[d] + " + " + c[d] + ")";
    if (d < R - 1) rows_ok += " && " + g[d] + " < " + vi.dims[d];
    at_g += (d ? " + " : "") + g[d] + " * " + vi.strides[d];
    at_s += (d ? " + " : "") + std::string("(") + c[d] + ") * " + num(strides[d]);
  }
  const std::string n = fresh("n"), src = fresh("src"), dst = fresh("dst");
  const std::string left = "(" + vi.dims[R - 1] + " - " + g[R - 1] + ")";
  line("const int64_t " + n + " = !(" + rows_ok + ") || " + left + " <= 0 ? 0 : " + left + " < 8 ? " + left + " : 8;");
  line("const " + stype(t) + "* " + src + " = " + vi.ptr + " + (" + n + " > 0 ? " + at_g + " : 0);");
  line("uint16_t* const " + dst + " = " + dst_ptr + " + " + at_s + ";");
  // Past the view's end the chunk reads fewer bytes (none) and the copy zero-fills the rest.
  open("if (tsr::aligned_vec<" + stype(t) + ", 8>(" + src + ")) {");
  line("tsr::cp_async_16(tsr::smem_u32(" + dst + "), " + src + ", int(" + n + ") * 2);");
  --ind_;
  open("} else {");
  line("for (int v_ = 0; v_ < 8; ++v_) " + dst + "[v_] = v_ < " + n + " ? " + src + "[v_] : " + stype(t) + "(0);");
  close();
  close();
  close();
}

void Emitter::lowered_load_shared(const Op& op) {
  const Value* tile = op.result();
  if (auto it = rings_.find(&op); it != rings_.end()) {  // this iteration's stage of its ring
    const Ring& ring = it->second;
    shared_[tile] = {"(" + ring.view.ptr + " + " + ring.stage + " * " + num(ring.stage_elems) + ")", ring.view.strides};
    name_[tile] = shared_[tile].ptr;
    return;
  }
  const std::vector<int64_t> S = shape_of(op, tile);
  if (scalar_bits(tile->type.elem) != 16 || S.back() % 8 != 0)
    throw NotLowerable{"a load into shared memory of other than 16-bit rows of whole 16-byte chunks"};
  const SharedView sv = alloc_shared(tile, tile->type.layout.order);
  if (sv.strides.back() != 1) throw NotLowerable{"a load into a shared tile that is not row-major"};
  shared_[tile] = sv;
  name_[tile] = sv.ptr;
  barrier();  // the readers of the last contents are done
  issue_shared_copies(op, sv.ptr, sv.strides);
  line("tsr::cp_async_commit();");
  line("tsr::cp_async_wait<0>();");
  barrier();
  count("loads-into-shared");
}

bool Emitter::emit_ring_loop(const Op& op, const std::vector<const Value*>& vals, const std::vector<std::string>& carried) {
  const int64_t S = op.has_attr("pipeline") ? op.attr_int("pipeline") : 1;
  std::vector<const Op*> chain;
  const std::vector<const Op*> loads = S >= 2 ? ring_loads(op, &chain) : std::vector<const Op*>{};
  if (loads.empty()) return false;
  const Block& body = op.region(0);
  const std::string stage = fresh("rs");
  for (const Op* l : loads) {
    const std::vector<int64_t> shape = static_shape(l->result()->type.shape);
    if (scalar_bits(l->result()->type.elem) != 16 || shape.back() % 8 != 0)
      throw NotLowerable{"a ring load of other than 16-bit rows of whole 16-byte chunks"};
    Ring ring;
    ring.view = alloc_shared(l->result(), l->result()->type.layout.order, S, &ring.stage_elems);
    if (ring.view.strides.back() != 1) throw NotLowerable{"a ring load into a shared tile that is not row-major"};
    ring.stage = stage;
    rings_[l] = ring;
  }
  const std::string lb = nm(op.operand(0)), ub = nm(op.operand(1)), step = nm(op.operand(2));
  // The copies of the iteration whose induction value is `iv` into stage `st`, when it runs.
  auto issue = [&](const std::string& iv, const std::string& st) {
    open("if (" + iv + " < int64_t(" + ub + ")) {");
    const std::string nv = fresh("nx");
    line("const int32_t " + nv + " = int32_t(" + iv + ");");
    auto saved = name_;
    name_[body.args[0]] = nv;
    for (const Op* c : chain) emit_op(*c);
    for (const Op* l : loads) {
      const Ring& ring = rings_.at(l);
      issue_shared_copies(*l, "(" + ring.view.ptr + " + (" + st + ") * " + num(ring.stage_elems) + ")", ring.view.strides);
    }
    name_ = saved;
    close();
    line("tsr::cp_async_commit();");
  };
  line("int " + stage + " = 0;");
  for (int64_t p = 0; p + 1 < S; ++p) issue("(int64_t(" + lb + ") + " + num(p) + " * int64_t(" + step + "))", num(p));
  emit_loop(op, vals, carried,
            [&](const std::string& iv) {
              issue("(" + iv + "_ + " + num(S - 1) + " * int64_t(" + step + "))",
                    "(" + stage + " + " + num(S - 1) + ") % " + num(S));
              line("tsr::cp_async_wait<" + num(S - 1) + ">();  // this iteration's copies are in");
              barrier();
            },
            [&] {
              barrier();  // its stage is read: the copies of iteration + S may refill it
              line(stage + " = (" + stage + " + 1) % " + num(S) + ";");
            });
  line("tsr::cp_async_wait<0>();");
  count("ring-loops");
  return true;
}

void Emitter::lowered_load_store(const Op& op) {
  const bool load = op.kind == OpKind::LoadTile;
  if (load && op.result()->type.layout.kind == tessera::Layout::Kind::Shared) return lowered_load_shared(op);
  const Value* view = op.operand(0);
  const ViewInfo& vi = view_of(op, view);
  const Value* tile = load ? op.result() : op.operand(1);
  const size_t first = load ? 1 : 2;
  const int R = view->type.rank();
  if (tile->type.rank() != R || op.operands.size() != first + static_cast<size_t>(R))
    fail(op, "needs a tile of the view's rank and one index per view dim");
  const std::vector<int64_t> S = shape_of(op, tile);
  const Dist& d = dist_of(tile);
  const ScalarKind t = view->type.elem;
  const std::string r = load ? declare(op, tile) : nm(tile);
  const std::string pad = lit(t, op.has_attr("pad") ? op.attr_number("pad") : 0.0);
  const std::string own = d.owner_expr();
  open("{");
  std::vector<std::string> o(R);
  for (int q = 0; q < R; ++q) {
    o[q] = fresh("o");
    line("const int64_t " + o[q] + " = int64_t(" + nm(op.operand(first + q)) + ") * " + num(S[q]) + " + " +
         d.thread_expr(q) + ";");
  }
  // The element of slot s + v (v along the last dim) in the view: in bounds, and its offset.
  auto element = [&](const std::string& s, int64_t v, std::string& ok, std::string& at) {
    ok.clear(), at.clear();
    for (int q = 0; q < R; ++q) {
      std::string g = "(" + o[q] + " + " + d.const_expr(q, s) + (q == R - 1 && v ? " + " + num(v) : "") + ")";
      ok += (q ? " && " : "") + g + " < " + vi.dims[q];
      at += (q ? " + " : "") + g + " * " + vi.strides[q];
    }
  };
  auto scalar_access = [&](const std::string& s, int64_t v) {
    std::string ok, at;
    element(s, v, ok, at);
    const std::string addr = vi.ptr + "[" + at + "]", slot = r + "[" + s + (v ? " + " + num(v) : "") + "]";
    if (load) line(slot + " = (" + ok + ") ? " + load_conv(t, addr) + " : " + pad + ";");
    else line("if (" + (own == "true" ? "" : own + " && ") + ok + ") " + addr + " = " + store_conv(t, slot) + ";");
  };
  // A thread's run of V elements along the last dim (the layout's fastest slots) is one vector
  // access of up to 16 bytes where it is in bounds and aligned.
  const int64_t V = vector_width(d, R - 1, scalar_bytes(t));
  if (V == 1) {
    slots(layout_of(tile), [&](const std::string& s) { scalar_access(s, 0); });
    close();
    return;
  }
  const std::string St = stype(t), c = fresh("c");
  line("#pragma unroll");
  open("for (int " + c + " = 0; " + c + " < " + num(d.slots() / V) + "; ++" + c + ") {");
  const std::string s0 = c + " * " + num(V);
  std::string ok, at, last_ok;
  element(s0, V - 1, last_ok, at);
  element(s0, 0, ok, at);
  const std::string buf = fresh("vb");
  line(St + " " + buf + "[" + num(V) + "];");
  open("if (" + last_ok + " && tsr::aligned_vec<" + St + ", " + num(V) + ">(" + vi.ptr + " + " + at + ")) {");
  if (load) {
    line("tsr::copy_vec<" + St + ", " + num(V) + ">(" + buf + ", " + vi.ptr + " + " + at + ");");
    for (int64_t v = 0; v < V; ++v) line(r + "[" + s0 + " + " + num(v) + "] = " + load_conv(t, buf + "[" + num(v) + "]") + ";");
  } else {
    for (int64_t v = 0; v < V; ++v) line(buf + "[" + num(v) + "] = " + store_conv(t, r + "[" + s0 + " + " + num(v) + "]") + ";");
    line((own == "true" ? "" : "if (" + own + ") ") + "tsr::copy_vec<" + St + ", " + num(V) + ">(" + vi.ptr + " + " + at +
         ", " + buf + ");");
  }
  --ind_;
  open("} else {");
  for (int64_t v = 0; v < V; ++v) scalar_access(s0, v);
  close();
  close();
  count("vector-accesses");
  close();
}

void Emitter::lowered_shape(const Op& op) {
  const Value *x = op.operand(0), *r = op.result();
  const std::vector<int64_t> SX = static_shape(x->type.shape), SR = static_shape(r->type.shape);
  if (auto it = shared_.find(x); it != shared_.end()) {
    // A view of the same bytes: a permute reorders the strides; a reshape that adds or drops
    // unit dims keeps the others'.
    SharedView sv;
    sv.ptr = it->second.ptr;
    if (op.kind == OpKind::Permute) {
      for (int64_t d : op.attr_ints("dims")) sv.strides.push_back(it->second.strides[d]);
    } else if (op.kind == OpKind::Reshape) {
      std::vector<int64_t> kept;
      for (size_t d = 0; d < SX.size(); ++d)
        if (SX[d] != 1) kept.push_back(it->second.strides[d]);
      size_t j = 0;
      for (int64_t e : SR) sv.strides.push_back(e == 1 ? 0 : j < kept.size() ? kept[j++] : -1);
      if (j != kept.size() || std::count(sv.strides.begin(), sv.strides.end(), -1))
        throw NotLowerable{"a reshape of a shared tile other than of unit dims"};
    } else {
      throw NotLowerable{"a " + std::string(op.name()) + " of a shared tile"};
    }
    shared_[r] = sv;
    name_[r] = sv.ptr;
    return;
  }
  // The operand coordinate of a result coordinate.
  std::function<std::vector<int64_t>(const std::vector<int64_t>&)> src;
  std::vector<int64_t> dims;
  int64_t axis = 0;
  switch (op.kind) {
    case OpKind::Reshape:
      src = [&](const std::vector<int64_t>& c) {
        int64_t f = 0;
        for (size_t i = 0; i < c.size(); ++i) f = f * SR[i] + c[i];
        std::vector<int64_t> out(SX.size());
        for (size_t i = SX.size(); i-- > 0;) out[i] = f % SX[i], f /= SX[i];
        return out;
      };
      break;
    case OpKind::Broadcast:
      src = [&](const std::vector<int64_t>& c) {
        std::vector<int64_t> out = c;
        for (size_t i = 0; i < out.size(); ++i)
          if (SX[i] == 1) out[i] = 0;
        return out;
      };
      break;
    case OpKind::ExpandDims:
      axis = op.attr_int("axis");
      src = [&](const std::vector<int64_t>& c) {
        std::vector<int64_t> out = c;
        out.erase(out.begin() + axis);
        return out;
      };
      break;
    default:  // permute: result dim i is operand dim dims[i]
      for (const auto& v : op.attr_ints("dims")) dims.push_back(v);
      src = [&](const std::vector<int64_t>& c) {
        std::vector<int64_t> out(c.size());
        for (size_t i = 0; i < c.size(); ++i) out[dims[i]] = c[i];
        return out;
      };
  }
  std::vector<int64_t> m = same_thread_slots(dist_of(x), dist_of(r), T_, src);
  if (!m.empty()) {
    const std::string n = declare(op, r);
    for (size_t s = 0; s < m.size(); ++s) line(n + "[" + num(int64_t(s)) + "] = " + nm(x) + "[" + num(m[s]) + "];");
    return;
  }
  lowered_exchange(op, x, r, [&](const std::string& e) {
    if (op.kind == OpKind::Reshape) return e;
    std::vector<std::string> c = coords(e, SR), out;
    if (op.kind == OpKind::Broadcast) {
      out = c;
      for (size_t i = 0; i < out.size(); ++i)
        if (SX[i] == 1) out[i] = "0";
    } else if (op.kind == OpKind::ExpandDims) {
      out = c;
      out.erase(out.begin() + axis);
    } else {
      out.assign(c.size(), "0");
      for (size_t i = 0; i < c.size(); ++i) out[dims[i]] = c[i];
    }
    return flat(out, SX);
  });
}

void Emitter::lowered_reduce(const Op& op) {
  const Value *x = op.operand(0), *r = op.result();
  if (op.results.size() != 1 || !r->type.is_tile()) throw NotLowerable{"a reduction to a scalar or to two results"};
  const int64_t axis = op.attr_int("axis");
  const Dist &X = dist_of(x), &Y = dist_of(r);
  // For each operand slot, the result slot of the same thread its element folds into.
  std::vector<int64_t> into = same_thread_slots(Y, X, T_, [&](const std::vector<int64_t>& c) {
    std::vector<int64_t> out = c;
    out.erase(out.begin() + axis);
    return out;
  });
  if (into.empty()) throw NotLowerable{"a reduction at " + op.loc.str() + " whose result is not its operand's layout sliced"};
  // The fold, in the compute type (a narrow float's sum is rounded once, at the end), as the
  // planning emitter's reductions do.
  const ScalarKind t = r->type.elem;
  const bool f = is_float(t);
  const std::string kind = op.kind == OpKind::ReduceWith ? "with" : op.attr_string("kind");
  const std::string T = ctype(t);
  std::function<std::string(const std::string&, const std::string&)> fold = reduce_fold(kind, t);
  if (kind == "with") fold = [&](const std::string& a, const std::string& b) { return combine(op, a, b); };
  if (!fold) throw NotLowerable{"a reduction of kind " + kind};
  const std::string n = declare(op, r);
  std::vector<bool> seen(Y.slots(), false);
  for (int64_t s = 0; s < X.slots(); ++s) {
    const int64_t y = into[s];
    const std::string e = nm(x) + "[" + num(s) + "]", acc = n + "[" + num(y) + "]";
    if (!seen[y]) line(acc + " = " + e + ";");
    else line(acc + " = " + fold(acc, e) + ";");
    seen[y] = true;
  }
  // Along the lanes the axis is spread over: a butterfly of shuffles.
  const bool narrow_int = !is_float(r->type.elem) && scalar_bits(r->type.elem) < 32;
  for (size_t b = 0; b < X.lane_bits.size(); ++b) {
    if (X.lane_bits[b].dim != axis) continue;
    for (int64_t y = 0; y < Y.slots(); ++y) {
      const std::string acc = n + "[" + num(y) + "]", o = fresh("sh");
      const std::string v = narrow_int ? "int(" + acc + ")" : acc;
      std::string sh = "__shfl_xor_sync(0xffffffffu, " + v + ", " + num(int64_t{1} << b) + ")";
      line("const " + T + " " + o + " = " + (narrow_int ? T + "(" + sh + ")" : sh) + ";");
      line(acc + " = " + fold(acc, o) + ";");
    }
    count("reduction-shuffles");
  }
  // Along the warps: each warp's value through shared memory, folded in warp order.
  std::vector<size_t> wa;
  for (size_t b = 0; b < X.warp_bits.size(); ++b)
    if (X.warp_bits[b].dim == axis) wa.push_back(b);
  // A narrow float's sum or product rounded once; an i1 one kept to its bit.
  auto finish = [&] {
    if ((f && is_narrow(t) && (kind == "sum" || kind == "prod")) || (t == ScalarKind::I1 && kind != "max" && kind != "min"))
      slots(layout_of(r), [&](const std::string& s) {
        const std::string acc = n + "[" + s + "]";
        line(acc + " = " + (f ? fround(t, acc) : "uint8_t((" + acc + ") & 1)") + ";");
      });
  };
  if (wa.empty()) return finish();
  const int64_t G = int64_t{1} << wa.size(), numel = shape_numel(r->type.shape);
  const std::string ptr = smem_ptr(T, 0, G * numel * std::max(4, scalar_bytes(r->type.elem)));
  std::string widx, lanes_on_axis;
  for (size_t j = 0; j < wa.size(); ++j)
    widx += (j ? " + " : "") + std::string("(((tsr_warp >> ") + num(int64_t(wa[j])) + ") & 1) << " + num(int64_t(j)) + ")";
  int64_t lm = 0;
  for (size_t b = 0; b < X.lane_bits.size(); ++b)
    if (X.lane_bits[b].dim == axis) lm |= int64_t{1} << b;
  barrier();
  slots(layout_of(r), [&](const std::string& s) {
    line("if ((tsr_lane & " + num(lm) + ") == 0) " + ptr + "[(" + widx + ") * " + num(numel) + " + " + Y.flat_expr(s) +
         "] = " + n + "[" + s + "];");
  });
  barrier();
  slots(layout_of(r), [&](const std::string& s) {
    const std::string at = Y.flat_expr(s), acc = n + "[" + s + "]";
    line(acc + " = " + ptr + "[" + at + "];");
    for (int64_t q = 1; q < G; ++q) line(acc + " = " + fold(acc, ptr + "[" + num(q * numel) + " + " + at + "]") + ";");
  });
  count("reduction-warp-exchanges");
  finish();
}

void Emitter::lowered_dot(const Op& op) {
  const Value *a = op.operand(0), *b = op.operand(1), *c = op.operand(2), *r = op.result();
  const tessera::Layout& L = r->type.layout;
  if (L.kind != tessera::Layout::Kind::Mma || L.version != 2) throw NotLowerable{"a dot without an mma.sync accumulator"};
  const ScalarKind ab = a->type.elem;
  if ((ab != ScalarKind::BF16 && ab != ScalarKind::F16) || b->type.elem != ab || r->type.elem != ScalarKind::F32 ||
      c->type.layout != L)
    throw NotLowerable{"a dot at " + op.loc.str() + " other than 16-bit operands into an f32 mma accumulator"};
  const std::vector<int64_t> SR = static_shape(r->type.shape), SA = static_shape(a->type.shape);
  const int64_t wm = L.warps[0], wn = L.warps[1];
  const int64_t MT = std::max<int64_t>(1, SR[0] / (16 * wm)), NT = std::max<int64_t>(1, SR[1] / (8 * wn)), KT = SA[1] / 16;
  if (SR[0] % (16 * wm) != 0 || SR[1] % (8 * wn) != 0) throw NotLowerable{"an mma tile smaller than its warp grid"};
  const bool sa = staged_.count(a), sb = staged_.count(b);
  if (sb && NT % 2 != 0) throw NotLowerable{"a B operand in shared memory with an odd number of n8 tiles"};
  (void)dist_of(c);
  const std::string n = declare(op, r);
  copy_value(r, n, nm(c));
  const std::string pack = ab == ScalarKind::BF16 ? "tsr::f2bf2(" : "tsr::f2h2(";
  const std::string mma = ab == ScalarKind::BF16 ? "tsr::mma_bf16_16816(" : "tsr::mma_f16_16816(";
  open("{");
  line("const int wm_ = tsr_warp / " + num(wn) + ", wn_ = tsr_warp % " + num(wn) + ";");
  line("(void)wm_; (void)wn_;");
  line("#pragma unroll");
  open("for (int ks = 0; ks < " + num(KT) + "; ++ks) {");
  line("uint32_t fa[" + num(MT) + "][4], fb[" + num(NT) + "][2];");
  // One ldmatrix.x4 (.trans: the stored rows are the fragment's columns) into r0..r3 from a
  // staged operand, lane address at (row, col) of its rows of st.ld elements.
  auto ldsm = [&](bool trans, const std::string& regs, const StagedOperand& st, const std::string& row,
                  const std::string& col) {
    line(std::string(trans ? "tsr::ldsm_x4_trans(" : "tsr::ldsm_x4(") + regs + ", " + st.base + " + uint32_t((" + row +
         ") * " + num(st.ld) + " + " + col + ") * 2u);");
  };
  // Fragment registers from a register operand: `frag`[t][q] packs slots `per_step` * (ks +
  // KT * t) + 2q and + 1 (the slot order of DistLayout.h).
  auto from_registers = [&](const std::string& frag, const Value* v, int64_t tiles, int regs, int64_t per_step) {
    (void)dist_of(v);
    for (int64_t t = 0; t < tiles; ++t)
      for (int q = 0; q < regs; ++q) {
        const std::string s0 = num(per_step) + " * (ks + " + num(KT) + " * " + num(t) + ") + " + num(2 * q);
        line(frag + "[" + num(t) + "][" + num(q) + "] = " + pack + nm(v) + "[" + s0 + "], " + nm(v) + "[" + s0 + " + 1]);");
      }
  };
  if (sa) {
    const StagedOperand& st = staged_.at(a);
    for (int64_t i = 0; i < MT; ++i) {
      const std::string m0 = num(16 * wm * i) + " + 16 * wm_", I = num(i);
      const std::string regs = "fa[" + I + "][0], fa[" + I + "][1], fa[" + I + "][2], fa[" + I + "][3]";
      if (!st.dim0_fastest) ldsm(false, regs, st, m0 + " + (tsr_lane & 15)", "16 * ks + 8 * (tsr_lane >> 4)");
      else ldsm(true, regs, st, "16 * ks + (tsr_lane & 7) + 8 * (tsr_lane >> 4)", m0 + " + 8 * ((tsr_lane >> 3) & 1)");
    }
  } else {
    from_registers("fa", a, MT, 4, 8);
  }
  if (sb) {
    const StagedOperand& st = staged_.at(b);
    for (int64_t j = 0; j < NT; j += 2) {
      const std::string J = num(j), J1 = num(j + 1), n0 = num(8 * wn) + " * (" + J;
      if (!st.dim0_fastest)  // [K][N]: rows k
        ldsm(true, "fb[" + J + "][0], fb[" + J + "][1], fb[" + J1 + "][0], fb[" + J1 + "][1]", st,
             "16 * ks + (tsr_lane & 15)", n0 + " + (tsr_lane >> 4)) + 8 * wn_");
      else  // [N][K]: rows n
        ldsm(false, "fb[" + J + "][0], fb[" + J1 + "][0], fb[" + J + "][1], fb[" + J1 + "][1]", st,
             n0 + " + ((tsr_lane >> 3) & 1)) + 8 * wn_ + (tsr_lane & 7)", "16 * ks + 8 * (tsr_lane >> 4)");
    }
  } else {
    from_registers("fb", b, NT, 2, 4);
  }
  for (int64_t i = 0; i < MT; ++i)
    for (int64_t j = 0; j < NT; ++j)
      line(mma + "&" + n + "[" + num(4 * (j + NT * i)) + "], fa[" + num(i) + "], fb[" + num(j) + "]);");
  close();
  close();
  count("mma-dots");
}

}  // namespace tessera::cudagen
