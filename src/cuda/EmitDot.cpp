// dot: operands are staged into shared memory from whatever layout they have.
//  * bf16/f16 inputs with an f32 accumulator and M % 16, N % 8, K % 16 == 0: tensor cores
//    (mma.sync m16n8k16). A is stored row-major and B transposed (n-major), each row padded by
//    8 elements so that the 8 rows a fragment load touches fall in different banks. Warps tile
//    the output in a wm x wn grid, each warp owning MT x NT mma tiles in registers.
//  * f8e4m3 / f8e5m2 inputs (both one kind) with an f32 accumulator, M % 16, N % 8, K % 32 == 0,
//    on sm_89 and newer: mma.sync m16n8k32, the same staging with rows in bytes (16 bytes of
//    pad), warp grid and fragments (mma.cuh: an fp8 fragment is a 16-bit one of byte pairs).
//  * everything else (f32, f64, i8/u8, f16 -> f16, f8 before sm_89, ragged shapes): one fused
//    multiply-add chain per output element, in k order, rounded to the accumulator type.
#include <cstdlib>
#include <string_view>

#include "cuda/EmitterInternal.h"
#include "support/Env.h"

namespace tessera::cudagen {

Emitter::MmaPlan Emitter::fragment_plan(const Op& dot) const {
  return wg_.ok && &dot == wg_.dot ? wg_.mma : plan_mma(dot);
}

Emitter::MmaPlan Emitter::plan_mma(const Op& op) const {
  MmaPlan p;
  const Value *a = op.operand(0), *r = op.result();
  if (!a->type.is_tile() || !r->type.is_tile() || a->type.rank() != 2 || r->type.rank() != 2) return p;
  if (!shape_is_static(a->type.shape) || !shape_is_static(r->type.shape)) return p;
  auto AS = static_shape(a->type.shape), RS = static_shape(r->type.shape);
  p.M = AS[0], p.K = AS[1], p.N = RS[1];
  ScalarKind in = a->type.elem;
  if (in == ScalarKind::F8E4M3 || in == ScalarKind::F8E5M2) {
    auto no = [&](const std::string& why) {
      p.why = why;
      return p;
    };
    std::string shape = std::to_string(p.M) + " x " + std::to_string(p.N) + " x " + std::to_string(p.K);
    if (op.operand(1)->type.elem != in || r->type.elem != ScalarKind::F32)
      return no("fp8 mma.sync takes two operands of one f8 kind into an f32 accumulator");
    if (tg_.sm < 89) return no("fp8 mma.sync (m16n8k32) needs sm_89 or newer, the target is " + tg_.str());
    if (p.M % 16 || p.N % 8 || p.K % 32)
      return no("fp8 mma.sync needs M % 16, N % 8 and K % 32 == 0, the dot is " + shape + " (M x N x K)");
    p.f8 = in == ScalarKind::F8E4M3 ? 1 : 2;
    p.bf16 = false;
    p.lda = p.K + 16;  // bytes: the 16 bytes of pad a 16-bit row has
  } else {
    if ((in != ScalarKind::BF16 && in != ScalarKind::F16) || r->type.elem != ScalarKind::F32) return p;
    if (p.M % 16 || p.N % 8 || p.K % 16) return p;
    p.bf16 = in == ScalarKind::BF16;
    p.lda = p.K + 8;
  }
  p.ldc = p.N + 4;
  // Warp grid wm x wn (idle warps allowed), each warp an MT x NT block of 16x8 tiles: use the
  // most warps, then the squarest warp block (fewest fragment loads per mma).
  int W = T_ / 32;
  for (int64_t cm = 1; cm <= W; ++cm)
    for (int64_t cn = 1; cm * cn <= W; ++cn) {
      if (p.M % (16 * cm) || p.N % (8 * cn)) continue;
      int64_t mt = p.M / 16 / cm, nt = p.N / 8 / cn;
      if (mt * nt > 32) continue;  // 128 accumulator registers per thread at most
      auto skew = [](int64_t m, int64_t n) { return std::abs(16 * m - 8 * n); };
      if (!p.ok || cm * cn > p.wm * p.wn || (cm * cn == p.wm * p.wn && skew(mt, nt) < skew(p.mt, p.nt))) {
        p.ok = true;
        p.wm = cm, p.wn = cn, p.mt = mt, p.nt = nt;
      }
    }
  return p;
}

namespace {
std::string smem_c(const Emitter::MmaPlan& p) {
  const int64_t eb = p.operand_bytes();
  return std::to_string(Emitter::align16(p.M * p.lda * eb) + Emitter::align16(p.N * p.lda * eb));
}
}  // namespace

std::string fp8_mma_note(const Op& dot, const Emitter::MmaPlan& p, const std::string& how) {
  return "dot at " + dot.loc.str() + ": mma.sync m16n8k32 " + p.f8_name() + " " + how +
         "; fp8 tensor-core sums may round below f32 precision (as fp8 wgmma's do), not an exact f32 sum";
}

// Per-warp fragment coordinates (inside a block the caller opens).
void warp_coords(Emitter& e, const Emitter::MmaPlan& p) {
  e.line("const int warp_ = tsr_tid / 32, lane_ = tsr_tid % 32, g_ = lane_ / 4, t_ = lane_ % 4;");
  e.line("const int m0_ = (warp_ / " + std::to_string(p.wn) + ") * " + std::to_string(16 * p.mt) + ", n0_ = (warp_ % " +
         std::to_string(p.wn) + ") * " + std::to_string(8 * p.nt) + ";");
  e.line("(void)g_; (void)t_; (void)lane_;");
}

// Moves between the accumulator fragments and sC (row-major, row stride ldc).
static void frag_copy(Emitter& e, const Emitter::MmaPlan& p, const std::string& frag, const std::string& sC, bool store) {
  std::string LDC = std::to_string(p.ldc);
  // Without idle warps the guard is dropped: ptxas cannot prove it true, and the two paths it
  // merges after a pipelined loop cost about 40 registers per thread.
  e.open(p.wm * p.wn == e.T_ / 32 ? "{" : "if (warp_ < " + std::to_string(p.wm * p.wn) + ") {");
  e.line("#pragma unroll");
  e.open("for (int i_ = 0; i_ < " + std::to_string(p.mt) + "; ++i_) {");
  e.line("#pragma unroll");
  e.open("for (int j_ = 0; j_ < " + std::to_string(p.nt) + "; ++j_) {");
  e.line("float* p_ = " + sC + " + (m0_ + 16 * i_ + g_) * " + LDC + " + n0_ + 8 * j_ + 2 * t_;");
  for (int q = 0; q < 4; ++q) {
    std::string addr = "p_[" + std::string(q >= 2 ? "8 * " + LDC + " + " : "") + std::to_string(q % 2) + "]";
    std::string f = frag + "[i_][j_][" + std::to_string(q) + "]";
    e.line(store ? addr + " = " + f + ";" : f + " = " + addr + ";");
  }
  e.close();
  e.close();
  e.close();
}

void Emitter::frags_from_tile(const MmaPlan& p, const Value* v, const std::string& frag) {
  std::string N_ = std::to_string(p.N), LDC = std::to_string(p.ldc);
  std::string sC = smem_ptr("float", std::stoll(smem_c(p)), p.M * p.ldc * 4);
  barrier();
  Layout L = layout_of(v);
  slots(L, [&](const std::string& s) {
    std::string e = elem_expr(L, s);
    line("if (" + owner_expr(L, s) + ") " + sC + "[((" + e + ") / " + N_ + ") * " + LDC + " + (" + e + ") % " + N_ + "] = " +
         nm(v) + "[" + s + "];");
  });
  barrier();
  open("{");
  warp_coords(*this, p);
  frag_copy(*this, p, frag, sC, false);
  close();
  count("layout-conversions");
}

void Emitter::frags_to_tile(const MmaPlan& p, const std::string& frag, const Value* r, const std::string& dst) {
  std::string N_ = std::to_string(p.N), LDC = std::to_string(p.ldc);
  std::string sC = smem_ptr("float", std::stoll(smem_c(p)), p.M * p.ldc * 4);
  barrier();
  open("{");
  warp_coords(*this, p);
  frag_copy(*this, p, frag, sC, true);
  close();
  barrier();
  gather_into(r, dst, [&](const std::string& e) { return sC + "[((" + e + ") / " + N_ + ") * " + LDC + " + (" + e + ") % " + N_ + "]"; });
  count("layout-conversions");
}

void Emitter::frags_fill(const MmaPlan& p, const std::string& frag, const std::string& x) {
  line("#pragma unroll");
  open("for (int i_ = 0; i_ < " + std::to_string(p.mt) + "; ++i_)");
  line("#pragma unroll");
  open("for (int j_ = 0; j_ < " + std::to_string(p.nt) + "; ++j_)");
  line(frag + "[i_][j_][0] = " + frag + "[i_][j_][1] = " + frag + "[i_][j_][2] = " + frag + "[i_][j_][3] = float(" + x + ");");
  --ind_;
  --ind_;
}

namespace {

// The op that reads `v`, when exactly one operand of one op in `b` (nested regions included) does.
const Op* only_user(Block& b, const Value* v) {
  const Op* user = nullptr;
  int n = 0;
  walk(b, [&](Op& o) {
    for (const Value* x : o.operands)
      if (x == v) ++n, user = &o;
  });
  return n == 1 ? user : nullptr;
}

}  // namespace

namespace {

// The scalar that `v` is a splat of, or null.
const Value* splat_scalar(const Value* v) {
  const Op* d = v->def;
  return d && d->kind == OpKind::Splat && d->operand(0)->type.is_scalar() ? d->operand(0) : nullptr;
}

// An f32 tile mul, add or sub of `tile` and a splat f32 scalar (either side).
bool scalar_epilogue_op(const Op& o, const Value* tile) {
  if (o.kind != OpKind::Mul && o.kind != OpKind::Add && o.kind != OpKind::Sub) return false;
  if (o.operands.size() != 2 || o.result()->type.elem != ScalarKind::F32 || tile->type.elem != ScalarKind::F32) return false;
  const Value* other = o.operand(0) == tile ? o.operand(1) : o.operand(0);
  const Value* s = splat_scalar(other);
  return other != tile && s && s->type.elem == ScalarKind::F32 && o.result()->type.shape == tile->type.shape;
}

}  // namespace

const std::vector<const Op*>& Emitter::frag_store_chain(const Op& f, size_t j) const {
  auto [it, first] = frag_store_chains_.try_emplace(f.result(j));
  if (first) it->second = find_frag_store_chain(f, j);
  return it->second;
}

std::vector<const Op*> Emitter::find_frag_store_chain(const Op& f, size_t j) const {
  Block& top = const_cast<Block&>(*k_.body);
  std::vector<const Op*> chain;
  const Value* stored = f.result(j);
  const Op* u = only_user(top, stored);
  while (u && u->parent == f.parent && scalar_epilogue_op(*u, stored)) {
    chain.push_back(u);
    stored = u->result();
    u = only_user(top, stored);
  }
  if (!u || u->parent != f.parent) return {};
  if (u->kind == OpKind::Cast) {
    if (!u->result()->type.is_tile() || !is_float(u->result()->type.elem)) return {};
    chain.push_back(u);
    stored = u->result();
    u = only_user(top, stored);
    if (!u || u->parent != f.parent) return {};
  }
  if (u->kind != OpKind::StoreTile || u->operands.size() != 4 || u->operand(1) != stored) return {};
  const Value* view = u->operand(0);
  if (!views_.count(view) || view->type.rank() != 2 || !is_float(view->type.elem) || !u->operand(2)->type.is_scalar() ||
      !u->operand(3)->type.is_scalar())
    return {};
  chain.push_back(u);
  return chain;
}

bool Emitter::fold_frag_binary(const Op& o) {
  if (o.operands.size() != 2) return false;
  for (int side = 0; side < 2; ++side) {
    auto it = frag_tiles_.find(o.operand(side));
    if (it == frag_tiles_.end() || !scalar_epilogue_op(o, o.operand(side))) continue;
    FragTile ft = it->second;
    if (ft.cast != ScalarKind::F32) return false;  // arithmetic after a narrowing cast
    std::string s = nm(splat_scalar(o.operand(1 - side)));
    const char* sym = o.kind == OpKind::Mul ? " * " : o.kind == OpKind::Add ? " + " : " - ";
    ft.expr = side == 0 ? "(" + ft.expr + sym + s + ")" : "(" + s + sym + ft.expr + ")";
    frag_tiles_[o.result()] = ft;
    count("mma-fused-epilogue-ops");
    return true;
  }
  return false;
}

bool Emitter::fold_frag_cast(const Op& c) {
  auto it = frag_tiles_.find(c.operand(0));
  if (it == frag_tiles_.end()) return false;
  FragTile ft = it->second;
  ft.cast = c.result()->type.elem;
  frag_tiles_[c.result()] = ft;
  return true;
}

std::string Emitter::frag_store_conv(const FragTile& ft, ScalarKind vt) const {
  // Rounding to the cast's kind and then to the view's is one rounding when they agree.
  std::string x = ft.cast == vt || ft.cast == ScalarKind::F32 ? ft.expr : fround(ft.cast, ft.expr);
  return store_conv(vt, x);
}

bool Emitter::store_frag_tile(const Op& st) {
  auto it = frag_tiles_.find(st.operand(1));
  if (it == frag_tiles_.end()) return false;
  const FragTile& ft = it->second;
  if (wg_.tma_store && &st == wg_.store) {
    emit_wgmma_tma_store(st, ft);
    return true;
  }
  const MmaPlan& p = ft.p;
  const ViewInfo& vi = view_of(st, st.operand(0));
  ScalarKind vt = st.operand(0)->type.elem;
  std::string St = stype(vt);
  open("{");
  warp_coords(*this, p);
  if (auto w = frag_of_.find(wg_.dot); wg_.swapped && w != frag_of_.end() && ft.frag == w->second) {
    // The swapped product's fragments hold C^T (p.M: the tile's columns, p.N: its rows).
    open("if (warp_ < " + std::to_string(p.wm * p.wn) + ") {");
    line("tsr::store_frags_t(" + ft.frag + ", " + vi.ptr + ", int64_t(" + nm(st.operand(3)) + ") * " + std::to_string(p.M) +
         " + m0_, int64_t(" + nm(st.operand(2)) + ") * " + std::to_string(p.N) + " + n0_, " + vi.dims[0] + ", " +
         vi.dims[1] + ", " + vi.strides[0] + ", lane_, [=](float x_) -> " + St + " { return " + frag_store_conv(ft, vt) +
         "; });");
    close();
    close();
    count("mma-transposed-epilogues");
    return true;
  }
  // Through shared memory, out in 16-byte row chunks, for 16- and 32-bit outputs whose padded
  // tile fits in shared memory (it reuses the operands' space): by default for 16-bit outputs
  // of a pipelined mma.sync matmul with tiles 256 or more wide (H200, 4096^3 bf16 at
  // 128x256x64: 460 TFLOP/s against 438 direct; 128x256x32 381 vs 379; 128x128x32 lost, 299
  // vs 307), in kernels without Struct buffers that could still be live; the knob
  // mma_smem_epilogue = 0 / 1 decides otherwise.
  const int64_t eb = scalar_bytes(vt);
  const int64_t staged_bytes = p.M * (p.N + 16 / std::max<int64_t>(eb, 1)) * eb;
  bool structs = false;
  walk(const_cast<Block&>(*k_.body), [&](Op& o) { structs |= o.info().cls == OpClass::Struct; });
  const int64_t staged_default = !wg_.ok && !structs && eb == 2 && p.N >= 256 && has_pipelined_mma_loop() ? 1 : 0;
  if (knob("mma_smem_epilogue", staged_default) == 1 && (eb == 2 || eb == 4) && staged_bytes <= smem_limit(tg_)) {
    std::string E = std::to_string(16 / eb);
    line("tsr::store_frags_staged<" + St + ", " + std::to_string(p.M) + ", " + std::to_string(p.N) + ", " + std::to_string(T_) + ">(" + ft.frag + ", " +
         smem_ptr(St, 0, staged_bytes) + ", m0_, n0_, " + (p.wm * p.wn == T_ / 32 ? "true" : "warp_ < " + std::to_string(p.wm * p.wn)) +
         ", " + vi.ptr + ", int64_t(" + nm(st.operand(2)) + ") * " + std::to_string(p.M) + ", int64_t(" + nm(st.operand(3)) +
         ") * " + std::to_string(p.N) + ", " + vi.dims[0] + ", " + vi.dims[1] + ", " + vi.strides[0] + ", tsr::aligned_vec<" +
         St + ", " + E + ">(" + vi.ptr + ") && " + vi.strides[0] + " % " + E + " == 0, tsr_tid, [=](float x_) -> " + St +
         " { return " + frag_store_conv(ft, vt) + "; });");
    close();
    count("mma-staged-epilogues");
    return true;
  }
  open(p.wm * p.wn == T_ / 32 ? "{" : "if (warp_ < " + std::to_string(p.wm * p.wn) + ") {");
  line("tsr::store_frags(" + ft.frag + ", " + vi.ptr + ", int64_t(" + nm(st.operand(2)) + ") * " + std::to_string(p.M) +
       " + m0_, int64_t(" + nm(st.operand(3)) + ") * " + std::to_string(p.N) + " + n0_, " + vi.dims[0] + ", " + vi.dims[1] +
       ", " + vi.strides[0] + ", tsr::aligned_vec<" + St + ", 2>(" + vi.ptr + ") && " + vi.strides[0] +
       " % 2 == 0, lane_, [=](float x_) -> " + St + " { return " + frag_store_conv(ft, vt) + "; });");
  close();
  close();
  count("mma-direct-epilogues");
  return true;
}

const Op* Emitter::carried_dot(const Op& f, size_t j) const {
  Block& body = f.region(0);
  const Op* y = body.terminator();
  if (!y || j + 1 >= body.args.size() || j >= y->operands.size()) return nullptr;
  const Value* arg = body.args[j + 1];
  int uses = 0;
  const Op* user = nullptr;
  walk(body, [&](Op& o) {
    for (size_t i = 0; i < o.operands.size(); ++i)
      if (o.operands[i] == arg) ++uses, user = (o.kind == OpKind::Dot && i == 2 && o.parent == &body) ? &o : nullptr;
  });
  if (uses != 1 || !user || y->operand(j) != user->result()) return nullptr;
  int res_uses = 0;
  walk(body, [&](Op& o) {
    for (const Value* v : o.operands) res_uses += v == user->result();
  });
  return res_uses == 1 ? user : nullptr;
}

std::vector<std::pair<size_t, const Op*>> Emitter::frag_carried(const Op& f) const {
  std::vector<std::pair<size_t, const Op*>> out;
  const Block& body = f.region(0);
  for (size_t j = 0; j + 1 < body.args.size(); ++j)
    if (const Op* dot = carried_dot(f, j); dot && fragment_plan(*dot).ok) out.push_back({j, dot});
  return out;
}

void Emitter::emit_dot(const Op& op) {
  const Value *a = op.operand(0), *b = op.operand(1), *acc = op.operand(2);
  const Value* r = op.result();
  std::vector<int64_t> AS = shape_of(op, a), BS = shape_of(op, b), RS = shape_of(op, r);
  if (AS.size() != 2 || BS.size() != 2 || RS.size() != 2 || AS[1] != BS[0] || AS[0] != RS[0] || BS[1] != RS[1])
    fail(op, "dot needs a [M, K], b [K, N] and an [M, N] accumulator");
  int64_t M = AS[0], K = AS[1], N = BS[1];
  ScalarKind in = a->type.elem, out = r->type.elem;
  auto carried = frag_of_.find(&op);
  std::string res = carried != frag_of_.end() ? nm(r) : declare(op, r);
  Layout LR = layout_of(r);
  auto write_tile = [&](const Value* v, const std::string& ptr, const std::function<std::string(const std::string&)>& index,
                        const std::function<std::string(const std::string&)>& conv) {
    Layout L = layout_of(v);
    slots(L, [&](const std::string& s) {
      line("if (" + owner_expr(L, s) + ") " + ptr + "[" + index(elem_expr(L, s)) + "] = " + conv(nm(v) + "[" + s + "]") + ";");
    });
  };
  auto ident = [](const std::string& x) { return x; };
  MmaPlan p = plan_mma(op);
  if (p.ok) {
    uses_mma_ = true;
    count("mma-dots");
    count("dot.mma");
    const int64_t eb = p.operand_bytes();
    const std::string et = p.f8 ? "uint8_t" : "uint16_t";
    if (p.f8) {
      count("mma-fp8-dots");
      std::string how = "with operands staged through shared memory at each dot";
      // In a `pipeline` loop: why it is not the cp.async ring.
      if (const Op* loop = op.parent ? op.parent->parent : nullptr; loop && loop->kind == OpKind::For && loop->has_attr("pipeline"))
        if (PipePlan pp = plan_pipeline(*loop, frag_carried(*loop)); !pp.ok && !pp.why.empty())
          how += " (not the cp.async ring: " + pp.why + ")";
      notes_.push_back(fp8_mma_note(op, p, how));
    }
    std::string sA = smem_ptr(et, 0, align16(M * p.lda * eb)), sB = smem_ptr(et, align16(M * p.lda * eb), align16(N * p.lda * eb));
    std::string K_ = std::to_string(K), N_ = std::to_string(N), LDA = std::to_string(p.lda);
    std::string frag;
    if (carried != frag_of_.end()) {
      frag = carried->second;
    } else {
      frag = fresh("frag");
      line("float " + frag + "[" + std::to_string(p.mt) + "][" + std::to_string(p.nt) + "][4];");
      frags_from_tile(p, acc, frag);
    }
    barrier();
    auto bits = [&](const std::string& x) { return store_conv(in, x); };
    write_tile(a, sA, [&](const std::string& e) { return "((" + e + ") / " + K_ + ") * " + LDA + " + (" + e + ") % " + K_; }, bits);
    write_tile(b, sB, [&](const std::string& e) { return "((" + e + ") % " + N_ + ") * " + LDA + " + (" + e + ") / " + N_; }, bits);
    barrier();
    count("operand-stagings", 2);
    open("{");
    warp_coords(*this, p);
    open("if (warp_ < " + std::to_string(p.wm * p.wn) + ") {");
    const std::string block = p.f8 ? "tsr::warp_mma_block_f8<" + std::to_string(p.f8) : std::string("tsr::warp_mma_block<") + (p.bf16 ? "true" : "false");
    line(block + ", " + K_ + ", " + std::to_string(p.mt) + ", " + std::to_string(p.nt) + ">(" + frag + ", " + sA +
         " + m0_ * " + LDA + ", " + LDA + ", " + sB + " + n0_ * " + LDA + ", " + LDA + ", lane_);");
    close();
    close();
    if (carried == frag_of_.end()) frags_to_tile(p, frag, r, res);
    return;
  }
  // FMA path.
  count("fma-dots");
  count("dot.fma");
  if (!p.why.empty()) notes_.push_back("dot at " + op.loc.str() + ": exact FMA dot (no tensor cores): " + p.why);
  std::string CI = ctype(in), CO = ctype(out);
  int64_t eb = scalar_bytes(in) > 4 ? 8 : 4;
  int64_t a_bytes = align16(M * K * eb), b_bytes = align16(K * N * eb);
  std::string sA = smem_ptr(CI, 0, a_bytes), sB = smem_ptr(CI, a_bytes, b_bytes);
  barrier();
  write_tile(a, sA, ident, ident);
  write_tile(b, sB, ident, ident);
  barrier();
  count("layout-conversions", 2);
  std::string K_ = std::to_string(K), N_ = std::to_string(N);
  const std::string step = fma_dot_step(out, "x_", "y_", "s_");
  if (step.empty()) fail(op, "dot from " + std::string(scalar_name(in)) + " to " + std::string(scalar_name(out)) + " is not supported");
  // A blocked accumulator whose every chunk of V slots is V columns of one row, the same
  // columns in every chunk (V divides N, N divides the T * V elements a chunk step covers):
  // k outside, so each k loads the thread's V values of B's row k and one value of A per
  // chunk, and updates every slot. Each slot still adds its products in k order (the same
  // bits). One load of A and B per product instead left NVVM thousands of shared-memory loads
  // in one block once it unrolled k, and its time grows as their square (matmul f32,
  // 64 x 64 x 32: 2048 loads, 5 s; issue 18, bench/RESULTS.md session 17).
  const int64_t V = LR.vec, TV = int64_t(T_) * LR.vec;
  // TESSERA_CUDA_FMA_DOT_PER_ELEMENT=1 keeps the per-element loop everywhere: the A/B switch of
  // tools/h200-fma-dot-check (the compile cache keys on the source, so both forms can be cached).
  static const bool per_element = env_flag("TESSERA_CUDA_FMA_DOT_PER_ELEMENT");
  if (!per_element && !LR.dist && !LR.replicated && cluster_ == 1 && V > 1 && LR.slots % V == 0 && N % V == 0 && TV % N == 0 &&
      valid_expr(LR, "0") == "true") {
    const std::string V_ = std::to_string(V);
    count("fma-dots-k-outer");
    slots(LR, [&](const std::string& s) { line(res + "[" + s + "] = " + nm(acc) + "[" + s + "];"); });
    open("{");
    // The thread's first row and its V columns (local_elem_expr of slot 0).
    line("const int m0_ = (tsr_tid * " + V_ + ") / " + N_ + ", n0_ = (tsr_tid * " + V_ + ") % " + N_ + ";");
    // Four k steps unrolled: A's four k of a row and B's rows are 16-byte shared loads (f32),
    // and the straight-line block NVVM gets stays small.
    line("#pragma unroll 4");
    open("for (int k_ = 0; k_ < " + K_ + "; ++k_) {");
    line(CI + " y_[" + V_ + "];");
    line("#pragma unroll");
    line("for (int v_ = 0; v_ < " + V_ + "; ++v_) y_[v_] = " + sB + "[k_ * " + N_ + " + n0_ + v_];");
    line("#pragma unroll");
    open("for (int c_ = 0; c_ < " + std::to_string(LR.slots / V) + "; ++c_) {");
    line("const " + CI + " x_ = " + sA + "[(m0_ + c_ * " + std::to_string(TV / N) + ") * " + K_ + " + k_];");
    line("#pragma unroll");
    open("for (int v_ = 0; v_ < " + V_ + "; ++v_) {");
    line(CO + " s_ = " + res + "[c_ * " + V_ + " + v_];");
    line("s_ = " + fma_dot_step(out, "x_", "y_[v_]", "s_") + ";");
    line(res + "[c_ * " + V_ + " + v_] = s_;");
    close();
    close();
    close();
    close();
    return;
  }
  slots(LR, [&](const std::string& s) {
    std::string e = fresh("e");
    line("const int " + e + " = " + elem_expr(LR, s) + ";");
    open("{");
    line("const int m_ = " + e + " / " + N_ + ", n_ = " + e + " % " + N_ + ";");
    line(CO + " s_ = " + nm(acc) + "[" + s + "];");
    open("if (" + valid_expr(LR, s) + ") {");
    line("#pragma unroll 4");
    open("for (int k_ = 0; k_ < " + K_ + "; ++k_) {");
    line("const " + CI + " x_ = " + sA + "[m_ * " + K_ + " + k_], y_ = " + sB + "[k_ * " + N_ + " + n_];");
    line("s_ = " + step + ";");
    close();
    close();
    line(res + "[" + s + "] = s_;");
    close();
  });
}

std::string fma_dot_step(ScalarKind out, const std::string& x, const std::string& y, const std::string& s) {
  if (out == ScalarKind::F32) return "fmaf(float(" + x + "), float(" + y + "), " + s + ")";
  if (out == ScalarKind::F64) return "fma(double(" + x + "), double(" + y + "), " + s + ")";
  if (is_float(out)) return fround(out, "fmaf(float(" + x + "), float(" + y + "), " + s + ")");
  if (out == ScalarKind::I32) return "int32_t(uint32_t(" + s + ") + uint32_t(int32_t(" + x + ") * int32_t(" + y + ")))";
  if (out == ScalarKind::U32) return "uint32_t(" + s + " + uint32_t(" + x + ") * uint32_t(" + y + "))";
  if (out == ScalarKind::I64) return "int64_t(uint64_t(" + s + ") + uint64_t(int64_t(" + x + ") * int64_t(" + y + ")))";
  return "";
}

}  // namespace tessera::cudagen
