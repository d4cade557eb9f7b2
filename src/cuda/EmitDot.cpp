// dot: operands are staged into shared memory from whatever layout they have.
//  * bf16/f16 inputs with an f32 accumulator and M % 16, N % 8, K % 16 == 0: tensor cores
//    (mma.sync m16n8k16). A is stored row-major and B transposed (n-major), each row padded by
//    8 elements so that the 8 rows a fragment load touches fall in different banks. Warps tile
//    the output in a wm x wn grid, each warp owning MT x NT mma tiles in registers.
//  * everything else (f32, f64, i8/u8, f16 -> f16, f8, ragged shapes): one fused multiply-add
//    chain per output element, in k order, rounded to the accumulator type.
#include "cuda/EmitterInternal.h"

namespace tessera::cudagen {

void Emitter::emit_dot(const Op& op) {
  const Value *a = op.operand(0), *b = op.operand(1), *acc = op.operand(2);
  const Value* r = op.result();
  std::vector<int64_t> AS = shape_of(op, a), BS = shape_of(op, b), RS = shape_of(op, r);
  if (AS.size() != 2 || BS.size() != 2 || RS.size() != 2 || AS[1] != BS[0] || AS[0] != RS[0] || BS[1] != RS[1])
    fail(op, "dot needs a [M, K], b [K, N] and an [M, N] accumulator");
  int64_t M = AS[0], K = AS[1], N = BS[1];
  ScalarKind in = a->type.elem, out = r->type.elem;
  std::string res = declare(op, r);
  Layout LR = layout_of(r);
  bool mma = (in == ScalarKind::BF16 || in == ScalarKind::F16) && out == ScalarKind::F32 && M % 16 == 0 &&
             N % 8 == 0 && K % 16 == 0;
  auto write_tile = [&](const Value* v, const std::string& ptr, const std::function<std::string(const std::string&)>& index,
                        const std::function<std::string(const std::string&)>& conv) {
    Layout L = layout_of(v);
    slots(L, [&](const std::string& s) {
      line("if (" + owner_expr(L, s) + ") " + ptr + "[" + index(elem_expr(L, s)) + "] = " + conv(nm(v) + "[" + s + "]") + ";");
    });
  };
  auto ident = [](const std::string& x) { return x; };
  if (mma) {
    uses_mma_ = true;
    count("mma-dots");
    int64_t lda = K + 8, ldc = N + 4;
    int64_t a_bytes = align16(M * lda * 2), b_bytes = align16(N * lda * 2), c_bytes = M * ldc * 4;
    std::string sA = smem_ptr("uint16_t", 0, a_bytes), sB = smem_ptr("uint16_t", a_bytes, b_bytes);
    std::string sC = smem_ptr("float", a_bytes + b_bytes, c_bytes);
    std::string K_ = std::to_string(K), N_ = std::to_string(N), LDA = std::to_string(lda), LDC = std::to_string(ldc);
    barrier();
    auto bits = [&](const std::string& x) { return store_conv(in, x); };
    write_tile(a, sA, [&](const std::string& e) { return "((" + e + ") / " + K_ + ") * " + LDA + " + (" + e + ") % " + K_; }, bits);
    write_tile(b, sB, [&](const std::string& e) { return "((" + e + ") % " + N_ + ") * " + LDA + " + (" + e + ") / " + N_; }, bits);
    write_tile(acc, sC, [&](const std::string& e) { return "((" + e + ") / " + N_ + ") * " + LDC + " + (" + e + ") % " + N_; }, ident);
    barrier();
    count("layout-conversions", 2);
    // Warp grid: wm x wn warps, each an MT x NT block of 16x8 tiles; else a loop over tiles.
    int W = T_ / 32;
    int64_t wm = 0, wn = 0;
    for (int64_t cm = 1; cm <= W; ++cm) {
      if (W % cm) continue;
      int64_t cn = W / cm;
      if (M % (16 * cm) || N % (8 * cn)) continue;
      int64_t mt = M / 16 / cm, nt = N / 8 / cn;
      if (mt * nt > 32) continue;  // 128 accumulator registers per thread at most
      // Prefer square-ish warp blocks (fewer fragment loads per mma).
      if (wm == 0 || std::abs(16 * mt - 8 * nt) < std::abs(16 * (M / 16 / wm) - 8 * (N / 8 / wn))) {
        wm = cm;
        wn = cn;
      }
    }
    std::string BF = in == ScalarKind::BF16 ? "true" : "false";
    open("{");
    line("const int warp_ = tsr_tid / 32, lane_ = tsr_tid % 32, g_ = lane_ / 4, t_ = lane_ % 4;");
    if (wm > 0) {
      int64_t mt = M / 16 / wm, nt = N / 8 / wn;
      std::string MT = std::to_string(mt), NT = std::to_string(nt);
      line("const int m0_ = (warp_ / " + std::to_string(wn) + ") * " + std::to_string(16 * mt) + ", n0_ = (warp_ % " +
           std::to_string(wn) + ") * " + std::to_string(8 * nt) + ";");
      line("float c_[" + MT + "][" + NT + "][4];");
      auto frag = [&](bool store) {
        line("#pragma unroll");
        open("for (int i_ = 0; i_ < " + MT + "; ++i_) {");
        line("#pragma unroll");
        open("for (int j_ = 0; j_ < " + NT + "; ++j_) {");
        line("float* p_ = " + sC + " + (m0_ + 16 * i_ + g_) * " + LDC + " + n0_ + 8 * j_ + 2 * t_;");
        for (int q = 0; q < 4; ++q) {
          std::string addr = "p_[" + std::string(q >= 2 ? "8 * " + LDC + " + " : "") + std::to_string(q % 2) + "]";
          line(store ? addr + " = c_[i_][j_][" + std::to_string(q) + "];" : "c_[i_][j_][" + std::to_string(q) + "] = " + addr + ";");
        }
        close();
        close();
      };
      frag(false);
      line("tsr::warp_mma_block<" + BF + ", " + K_ + ", " + MT + ", " + NT + ">(c_, " + sA + " + m0_ * " + LDA + ", " + LDA +
           ", " + sB + " + n0_ * " + LDA + ", " + LDA + ", lane_);");
      frag(true);
    } else {
      int64_t tiles = (M / 16) * (N / 8);
      open("for (int tt_ = warp_; tt_ < " + std::to_string(tiles) + "; tt_ += " + std::to_string(W) + ") {");
      line("const int m0_ = (tt_ / " + std::to_string(N / 8) + ") * 16, n0_ = (tt_ % " + std::to_string(N / 8) + ") * 8;");
      line("float* p_ = " + sC + " + (m0_ + g_) * " + LDC + " + n0_ + 2 * t_;");
      line("float c_[1][1][4] = {{{p_[0], p_[1], p_[8 * " + LDC + "], p_[8 * " + LDC + " + 1]}}};");
      line("tsr::warp_mma_block<" + BF + ", " + K_ + ", 1, 1>(c_, " + sA + " + m0_ * " + LDA + ", " + LDA + ", " + sB +
           " + n0_ * " + LDA + ", " + LDA + ", lane_);");
      line("p_[0] = c_[0][0][0]; p_[1] = c_[0][0][1]; p_[8 * " + LDC + "] = c_[0][0][2]; p_[8 * " + LDC + " + 1] = c_[0][0][3];");
      close();
    }
    close();
    barrier();
    gather_into(r, res, [&](const std::string& e) { return sC + "[((" + e + ") / " + N_ + ") * " + LDC + " + (" + e + ") % " + N_ + "]"; });
    return;
  }
  // FMA path.
  count("fma-dots");
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
  std::string step;
  if (out == ScalarKind::F32) step = "fmaf(float(x_), float(y_), s_)";
  else if (out == ScalarKind::F64) step = "fma(double(x_), double(y_), s_)";
  else if (is_float(out)) step = fround(out, "fmaf(float(x_), float(y_), s_)");
  else if (out == ScalarKind::I32) step = "int32_t(uint32_t(s_) + uint32_t(int32_t(x_) * int32_t(y_)))";
  else if (out == ScalarKind::U32) step = "uint32_t(s_ + uint32_t(x_) * uint32_t(y_))";
  else if (out == ScalarKind::I64) step = "int64_t(uint64_t(s_) + uint64_t(int64_t(x_) * int64_t(y_)))";
  else fail(op, "dot from " + std::string(scalar_name(in)) + " to " + std::string(scalar_name(out)) + " is not supported");
  slots(LR, [&](const std::string& s) {
    std::string e = fresh("e");
    line("const int " + e + " = " + elem_expr(LR, s) + ";");
    open("{");
    line("const int m_ = " + e + " / " + N_ + ", n_ = " + e + " % " + N_ + ";");
    line(CO + " s_ = " + nm(acc) + "[" + s + "];");
    open("if (" + valid_expr(LR, s) + ") {");
    open("for (int k_ = 0; k_ < " + K_ + "; ++k_) {");
    line("const " + CI + " x_ = " + sA + "[m_ * " + K_ + " + k_], y_ = " + sB + "[k_ * " + N_ + " + n_];");
    line("s_ = " + step + ";");
    close();
    close();
    line(res + "[" + s + "] = s_;");
    close();
  });
}

}  // namespace tessera::cudagen
