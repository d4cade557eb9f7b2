// Shape ops, reductions and scans: the ops that move elements between threads. They go through
// the shared-memory scratch (a flat row-major copy of the source); reshape and expand_dims keep
// the flat order and therefore the layout, so they are register copies.
#include "cuda/EmitterInternal.h"
#include "support/Env.h"

namespace tessera::cudagen {

static int64_t cbytes(ScalarKind k) { return scalar_bytes(k) > 4 ? 8 : 4; }

void Emitter::emit_shape(const Op& op) {
  const Value* x = op.operand(0);
  const Value* r = op.result();
  ScalarKind t = r->type.elem;
  std::string C = ctype(t);
  std::vector<int64_t> RS = shape_of(op, r);
  if (op.kind == OpKind::Reshape || op.kind == OpKind::ExpandDims) {
    if (!x->type.is_tile()) {
      std::string n = declare(op, r);
      slots(layout_of(r), [&](const std::string& s) { line(n + "[" + s + "] = " + nm(x) + ";"); });
      return;
    }
    if (shape_numel(x->type.shape) != shape_numel(r->type.shape)) fail(op, "element counts differ");
    std::string n = declare(op, r);
    copy_value(r, n, nm(x));
    return;
  }
  if (op.kind == OpKind::Broadcast) {
    std::string n = declare(op, r);
    if (!x->type.is_tile()) {
      slots(layout_of(r), [&](const std::string& s) { line(n + "[" + s + "] = " + nm(x) + ";"); });
      return;
    }
    std::vector<int64_t> XS = shape_of(op, x);
    if (XS.size() != RS.size()) fail(op, "broadcast needs equal ranks");
    // The source element of result element e.
    auto src_index = [&](const std::string& e) {
      std::vector<std::string> c = coords(e, RS);
      for (size_t d = 0; d < RS.size(); ++d)
        if (XS[d] == 1) c[d] = "0";
        else if (XS[d] != RS[d]) fail(op, "dim " + std::to_string(d) + " is neither 1 nor the result's");
      return flat(c, XS);
    };
    Layout LX = layout_of(x);
    Layout L = layout_of(r);
    const int64_t TV = int64_t(T_) * L.vec;
    // Elements per step of dim d of the result (the product of the dims after it).
    auto inner = [&](size_t d) {
      int64_t n = 1;
      for (size_t q = d + 1; q < RS.size(); ++q) n *= RS[q];
      return n;
    };
    // Broadcast along leading dims only, of a blocked source whose elements are a multiple of
    // T * VEC: result slot s holds the element of source slot s % slots, in this very thread
    // (a [BLOCK_N] row of weights against a [BLOCK_M, BLOCK_N] tile), so no data moves.
    // (A cluster-split kernel holds different parts of the two tiles on each CTA: only the
    // identity qualifies there.)
    bool leading = !LX.replicated && !L.replicated && LX.vec == L.vec && LX.numel % TV == 0 &&
                   (cluster_ == 1 || LX.numel == L.numel);
    for (size_t d = 0; d < RS.size() && leading; ++d)
      leading = XS[d] == RS[d] ? inner(d) * RS[d] <= LX.numel : (XS[d] == 1 && inner(d) % LX.numel == 0);
    if (leading) {
      slots(L, [&](const std::string& s) { line(n + "[" + s + "] = " + nm(x) + "[" + s + " % " + std::to_string(LX.slots) + "];"); });
      count("register-broadcasts");
      return;
    }
    if (LX.replicated) {
      // Every thread holds the whole (small) source: index it with compile-time slots only.
      // When every dim the source varies along steps by a multiple of T * VEC elements, a slot's
      // coordinates there are those of its chunk's first element (the thread's offset within a
      // chunk never carries into them), so the index is a compile-time constant.
      bool chunk_index = !L.replicated && cluster_ == 1;
      for (size_t d = 0; d < RS.size() && chunk_index; ++d) chunk_index = XS[d] == 1 || inner(d) % TV == 0;
      if (chunk_index) {
        const std::string V = std::to_string(L.vec);
        slots(L, [&](const std::string& s) {
          line(n + "[" + s + "] = " + nm(x) + "[" + src_index("((" + s + " / " + V + ") * " + std::to_string(TV) + ")") + "];");
        });
        return;
      }
      slots(L, [&](const std::string& s) {
        std::string e = fresh("e");
        line("const int " + e + " = " + elem_expr(L, s) + ";");
        // The index is a runtime value for blocked results; pick it by an unrolled select so
        // that the source array stays in registers.
        std::string si = fresh("si");
        line("const int " + si + " = " + src_index(e) + ";");
        line(n + "[" + s + "] = " + nm(x) + "[0];");
        line("#pragma unroll");
        line("for (int q_ = 1; q_ < " + std::to_string(LX.slots) + "; ++q_) if (q_ == " + si + ") " + n + "[" + s +
             "] = " + nm(x) + "[q_];");
      });
      return;
    }
    std::string p = smem_ptr(C, 0, shape_numel(x->type.shape) * cbytes(t));
    stage(x, p);
    barrier();
    gather_into(r, n, [&](const std::string& e) { return p + "[" + src_index(e) + "]"; });
    count("layout-conversions");
    return;
  }
  std::vector<int64_t> XS = shape_of(op, x);
  if (op.kind == OpKind::Permute) {
    const std::vector<int64_t>& dims = op.attr_ints("dims");
    if (dims.size() != XS.size()) fail(op, "dims must be a permutation of the operand's dims");
    std::string n = declare(op, r);
    std::string p = smem_ptr(C, 0, shape_numel(x->type.shape) * cbytes(t));
    stage(x, p);
    barrier();
    gather_into(r, n, [&](const std::string& e) {
      std::vector<std::string> c = coords(e, RS), xc(XS.size());
      for (size_t i = 0; i < dims.size(); ++i) xc[static_cast<size_t>(dims[i])] = c[i];
      return p + "[" + flat(xc, XS) + "]";
    });
    count("layout-conversions");
    return;
  }
  if (op.kind == OpKind::ExtractTile) {
    if (op.operands.size() != 1 + XS.size()) fail(op, "needs one index per dim");
    std::string n = declare(op, r);
    std::string p = smem_ptr(C, 0, shape_numel(x->type.shape) * cbytes(t));
    stage(x, p);
    barrier();
    gather_into(r, n, [&](const std::string& e) {
      std::vector<std::string> c = coords(e, RS);
      for (size_t d = 0; d < c.size(); ++d)
        c[d] = "(" + nm(op.operand(1 + d)) + " * " + std::to_string(RS[d]) + " + " + c[d] + ")";
      return p + "[" + flat(c, XS) + "]";
    });
    count("layout-conversions");
    return;
  }
  if (op.kind == OpKind::InsertTile) {
    const Value* sub = op.operand(1);
    std::vector<int64_t> SS = shape_of(op, sub);
    if (op.operands.size() != 2 + XS.size()) fail(op, "needs one index per dim");
    std::string n = declare(op, r);
    std::string p = smem_ptr(C, 0, shape_numel(sub->type.shape) * cbytes(t));
    stage(sub, p);
    barrier();
    Layout L = layout_of(r);
    slots(L, [&](const std::string& s) {
      std::string e = fresh("e");
      line("const int " + e + " = " + elem_expr(L, s) + ";");
      std::vector<std::string> c = coords(e, RS), sc(c.size());
      std::string inside;
      for (size_t d = 0; d < c.size(); ++d) {
        std::string lo = "(" + nm(op.operand(2 + d)) + " * " + std::to_string(SS[d]) + ")";
        sc[d] = "(" + c[d] + " - " + lo + ")";
        inside += (d ? " && " : "") + c[d] + " >= " + lo + " && " + c[d] + " < " + lo + " + " + std::to_string(SS[d]);
      }
      line(n + "[" + s + "] = (" + valid_expr(L, s) + " && " + inside + ") ? " + p + "[" + flat(sc, SS) + "] : " + nm(x) + "[" + s + "];");
    });
    count("layout-conversions");
    return;
  }
  fail(op, "unsupported shape op");
}

std::function<std::string(const std::string&, const std::string&)> reduce_fold(const std::string& kind, ScalarKind t) {
  const std::string C = ctype(t), U = scalar_bits(t) > 32 ? "uint64_t" : "uint32_t";
  const bool f = is_float(t);
  if (kind == "sum" || kind == "prod") {
    const std::string o = kind == "sum" ? " + " : " * ";
    return [=](const std::string& a, const std::string& b) {
      return f ? C + "(" + a + o + b + ")" : C + "(" + U + "(" + a + ")" + o + U + "(" + b + "))";
    };
  }
  if (kind == "max" || kind == "min") {
    // f32: max.NaN / min.NaN, one instruction instead of a compare, a NaN test and a select.
    const std::string fn = t == ScalarKind::F32 ? "tsr::" + kind + "_nan_f32"
                                                : std::string(f ? "tsr::f" : "tsr::i") + kind + (f ? "_nan<" : "<") + C + ">";
    return [=](const std::string& a, const std::string& b) { return fn + "(" + a + ", " + b + ")"; };
  }
  return {};
}

std::string Emitter::combine(const Op& op, const std::string& a, const std::string& b) {
  const Block& body = op.region(0);
  if (body.args.size() != 2) fail(op, "the combiner region takes two arguments");
  name_[body.args[0]] = a;
  name_[body.args[1]] = b;
  emit_block(body);
  const Op* y = terminator(body, op);
  if (y->operands.size() != 1) fail(op, "the combiner yields one value");
  return nm(y->operand(0));
}

bool Emitter::folds_with_next(const Op& a, const Op& b) const {
  if (a.kind != OpKind::Reduce || b.kind != OpKind::Reduce || cluster_ > 1) return false;
  const std::string& kind = a.attr_string("kind");
  if (kind != b.attr_string("kind") || (kind != "sum" && kind != "prod" && kind != "max" && kind != "min")) return false;
  const Value *x = a.operand(0), *y = b.operand(0);
  if (y == a.result() || !x->type.is_tile() || !(x->type == y->type) || !(a.result()->type == b.result()->type) ||
      a.attr_int("axis") != b.attr_int("axis") || !shape_is_static(x->type.shape))
    return false;
  std::vector<int64_t> S = static_shape(x->type.shape);
  int64_t axis = a.attr_int("axis");
  if (axis < 0 || axis >= static_cast<int64_t>(S.size())) return false;
  const AxisSplit sp = split_at_axis(S, axis);
  return sp.outer * sp.inner == 1 && !layout_of(x).replicated && T_ > 32;
}

void Emitter::emit_reduce(const Op& op, const Op* partner) {
  const Value* x = op.operand(0);
  const Value* r = op.result();
  std::vector<int64_t> S = shape_of(op, x);
  int64_t axis = op.attr_int("axis");
  if (axis < 0 || axis >= static_cast<int64_t>(S.size())) fail(op, "axis out of range");
  const AxisSplit sp = split_at_axis(S, axis);
  const int64_t O = sp.outer, L = sp.len, I = sp.inner;
  int64_t P = O * I, N = O * L * I;
  ScalarKind t = x->type.elem;
  std::string C = ctype(t);
  bool f = is_float(t);
  std::string res = declare(op, r);
  const std::string partner_res = partner ? declare(*partner, partner->result()) : std::string();
  std::string kind = op.kind == OpKind::ReduceWith ? "with" : op.attr_string("kind");
  bool arg = kind == "argmax" || kind == "argmin";
  std::string Sx = std::to_string(L), Ix = std::to_string(I);
  // The reduced value is in the compute type (sums of narrow floats accumulate in f32).
  std::string init;
  std::function<std::string(const std::string&, const std::string&)> step = reduce_fold(kind, t);
  if (kind == "sum") init = C + "(0)";
  else if (kind == "prod") init = C + "(1)";
  else if (!step && !arg && kind != "with") fail(op, "unknown reduce kind '" + kind + "'");
  auto fin = [&](const std::string& e) {
    if (f && (kind == "sum" || kind == "prod")) return fround(t, e);
    if (t == ScalarKind::I1 && (kind == "sum" || kind == "prod")) return "uint8_t((" + e + ") & 1)";
    return e;
  };
  auto better = [&](const std::string& v1, const std::string& i1, const std::string& v2, const std::string& i2) {
    return arg_better(kind, v1, i1, v2, i2);
  };

  Layout LX = layout_of(x);
  auto put = [&](int64_t p, const std::string& v) {
    line(r->type.is_tile() ? res + "[" + std::to_string(p) + "] = " + v + ";" : res + " = " + v + ";");
  };
  if (LX.replicated) {
    // Every thread holds the whole (small) source: reduce it in registers, left to right (the
    // interpreter's order, so custom combiners and arg ties match exactly), with no exchange.
    auto xi = [&](int64_t o, int64_t l, int64_t i) { return nm(x) + "[" + std::to_string((o * L + l) * I + i) + "]"; };
    for (int64_t p = 0; p < P; ++p) {
      int64_t o = p / I, i = p % I;
      std::string acc = fresh("acc"), ai = fresh("ai");
      line(C + " " + acc + " = " + xi(o, 0, i) + ";");
      if (arg) line("int32_t " + ai + " = 0;");
      for (int64_t l = 1; l < L; ++l) {
        std::string xv = xi(o, l, i), ls = std::to_string(l);
        if (arg) {
          line("if (" + better(xv, ls, acc, ai) + ") { " + acc + " = " + xv + "; " + ai + " = " + ls + "; }");
        } else if (kind == "with") {
          std::string a = fresh("a"), b = fresh("b");
          line("const " + C + " " + a + " = " + acc + ";");
          line("const " + C + " " + b + " = " + xv + ";");
          std::string c = combine(op, a, b);
          cur_ = &op;
          line(acc + " = " + c + ";");
        } else {
          line(acc + " = " + step(acc, xv) + ";");
        }
      }
      put(p, arg ? ai : fin(acc));
    }
    count("reductions");
    count("register-reductions");
    return;
  }
  int64_t TV = int64_t(T_) * LX.vec;
  bool assoc = kind == "sum" || kind == "prod" || kind == "max" || kind == "min";
  // Every slot's output is known at compile time when there is one output, or when rows are
  // contiguous (I == 1) and each chunk of T*VEC elements lies in one row.
  if (assoc && P <= kReplicateMax && (P == 1 || (I == 1 && L % TV == 0))) {
    std::string ident;
    bool f64 = t == ScalarKind::F64;
    if (kind == "sum") ident = C + "(0)";
    else if (kind == "prod") ident = C + "(1)";
    else if (kind == "max") ident = f ? (f64 ? "(-tsr::inf_d())" : "(-tsr::inf_f())") : "tsr::lowest_int<" + C + ">()";
    else ident = f ? (f64 ? "tsr::inf_d()" : "tsr::inf_f()") : "tsr::highest_int<" + C + ">()";
    int V = LX.vec;
    std::string Vs = std::to_string(V);
    int64_t per_out = P == 1 ? LX.slots : (L / TV) * V;
    std::vector<std::string> accs;
    // The partner's one value is folded as a second output (P == 1 for both: folds_with_next).
    const int64_t outs = partner ? 2 : P;
    for (int64_t p = 0; p < outs; ++p) {
      const Value* src = partner && p == 1 ? partner->operand(0) : x;
      const int64_t q = partner ? 0 : p;  // the output's place in the source's slots
      if (partner && p == 1) cur_ = partner;
      // One partial per vector lane: VEC independent chains, folded pairwise.
      std::string a = fresh("racc");
      accs.push_back(a);
      line(C + " " + a + "[" + Vs + "];");
      line("#pragma unroll");
      line("for (int v_ = 0; v_ < " + Vs + "; ++v_) " + a + "[v_] = " + ident + ";");
      std::string sv = fresh("s");
      line("#pragma unroll");
      open("for (int " + sv + " = " + std::to_string(q * per_out) + "; " + sv + " < " + std::to_string((q + 1) * per_out) +
           "; ++" + sv + ") {");
      std::string ok = P == 1 ? valid_expr(LX, sv) : "true";
      std::string upd = a + "[" + sv + " % " + Vs + "] = " + step(a + "[" + sv + " % " + Vs + "]", nm(src) + "[" + sv + "]") + ";";
      line(ok == "true" ? upd : "if (" + ok + ") " + upd);
      close();
      for (int w = V / 2; w >= 1; w /= 2)
        for (int v = 0; v < w; ++v) {
          std::string d = a + "[" + std::to_string(v) + "]", e = a + "[" + std::to_string(v + w) + "]";
          line(d + " = " + step(d, e) + ";");
        }
      // Butterfly within the warp: every lane ends with the warp's value.
      for (int m = 16; m >= 1; m /= 2)
        line(a + "[0] = " + step(a + "[0]", "tsr::shfl_xor(" + a + "[0], " + std::to_string(m) + ")") + ";");
    }
    cur_ = &op;
    count("warp-reductions", outs);
    int nw = T_ / 32;
    if (nw > 1) exchange_warp_partials(op, C, outs, accs, step);
    if (cluster_ > 1) {
      if (P != 1) needs_no_cluster(op, "a reduction with several results");
      exchange_cluster_partials(op, C, accs[0] + "[0]", step);
    }
    for (int64_t p = 0; p < P; ++p) put(p, fin(accs[p] + "[0]"));
    if (partner) {
      const std::string v = fin(accs[1] + "[0]");
      line(partner->result()->type.is_tile() ? partner_res + "[0] = " + v + ";" : partner_res + " = " + v + ";");
      count("reductions");
      count("folded-reductions");
    }
    count("reductions");
    return;
  }

  if (partner) fail(op, "internal: a folded reduction off the register path");
  needs_no_cluster(op, "a reduction of this shape or kind");
  // Stage the source; partial results follow it in the scratch.
  int64_t src_bytes = align16(N * cbytes(t));
  std::string src = smem_ptr(C, 0, src_bytes);
  stage(x, src);
  barrier();
  auto at = [&](const std::string& o, const std::string& l, const std::string& i) {
    return src + "[(" + o + " * " + Sx + " + " + l + ") * " + Ix + " + " + i + "]";
  };
  std::string out_v = smem_ptr(arg ? "int32_t" : C, src_bytes, std::max<int64_t>(P, T_) * 8);
  std::string part_i = smem_ptr("int32_t", src_bytes + align16(std::max<int64_t>(P, T_) * 8), std::max<int64_t>(P, T_) * 4);
  // Group size: threads cooperating on one output (a power of two), when outputs are few.
  int64_t gs = 1;
  if (kind != "with")
    while (gs * 2 * P <= T_ && gs * 2 <= L) gs *= 2;
  if (gs >= 2) {
    std::string G = std::to_string(gs);
    std::string pv = smem_ptr(C, src_bytes, std::max<int64_t>(P, T_) * 8);
    open("if (tsr_tid < " + std::to_string(P * gs) + ") {");
    line("const int p_ = tsr_tid / " + G + ", lane_ = tsr_tid % " + G + ";");
    line("const int o_ = p_ / " + Ix + ", i_ = p_ % " + Ix + ";");
    if (arg) {
      line(C + " acc_ = " + at("o_", "lane_", "i_") + ";");
      line("int32_t ai_ = lane_;");
      open("for (int l_ = lane_ + " + G + "; l_ < " + Sx + "; l_ += " + G + ") {");
      line("const " + C + " x_ = " + at("o_", "l_", "i_") + ";");
      line("if (" + better("x_", "l_", "acc_", "ai_") + ") { acc_ = x_; ai_ = l_; }");
      close();
      line(pv + "[tsr_tid] = acc_;");
      line(part_i + "[tsr_tid] = ai_;");
    } else {
      line(C + " acc_ = " + at("o_", "lane_", "i_") + ";");
      line("for (int l_ = lane_ + " + G + "; l_ < " + Sx + "; l_ += " + G + ") acc_ = " + step("acc_", at("o_", "l_", "i_")) + ";");
      line(pv + "[tsr_tid] = acc_;");
    }
    close();
    barrier();
    for (int64_t h = gs / 2; h >= 1; h /= 2) {
      std::string H = std::to_string(h);
      open("if (tsr_tid < " + std::to_string(P * gs) + " && tsr_tid % " + G + " < " + H + ") {");
      if (arg) {
        line("const " + C + " a_ = " + pv + "[tsr_tid], b_ = " + pv + "[tsr_tid + " + H + "];");
        line("const int32_t ia_ = " + part_i + "[tsr_tid], ib_ = " + part_i + "[tsr_tid + " + H + "];");
        line("if (" + better("b_", "ib_", "a_", "ia_") + ") { " + pv + "[tsr_tid] = b_; " + part_i + "[tsr_tid] = ib_; }");
      } else {
        line(pv + "[tsr_tid] = " + step(pv + "[tsr_tid]", pv + "[tsr_tid + " + H + "]") + ";");
      }
      close();
      barrier();
    }
    auto result_at = [&](const std::string& p) {
      return arg ? part_i + "[(" + p + ") * " + G + "]" : fin(pv + "[(" + p + ") * " + G + "]");
    };
    if (r->type.is_tile()) gather_into(r, res, result_at);
    else line(res + " = " + result_at("0") + ";");
  } else {
    // One thread per output, left to right (exact order for custom combiners).
    std::string ov = arg ? part_i : out_v;
    open("for (int p_ = tsr_tid; p_ < " + std::to_string(P) + "; p_ += " + std::to_string(T_) + ") {");
    line("const int o_ = p_ / " + Ix + ", i_ = p_ % " + Ix + ";");
    line(C + " acc_ = " + at("o_", "0", "i_") + ";");
    if (arg) line("int32_t ai_ = 0;");
    open("for (int l_ = 1; l_ < " + Sx + "; ++l_) {");
    line("const " + C + " x_ = " + at("o_", "l_", "i_") + ";");
    if (arg) {
      line("if (" + better("x_", "l_", "acc_", "ai_") + ") { acc_ = x_; ai_ = l_; }");
    } else if (kind == "with") {
      std::string a = fresh("a"), b = fresh("b");
      line("const " + C + " " + a + " = acc_;");
      line("const " + C + " " + b + " = x_;");
      std::string c = combine(op, a, b);
      cur_ = &op;
      line("acc_ = " + c + ";");
    } else {
      line("acc_ = " + step("acc_", "x_") + ";");
    }
    close();
    line(ov + "[p_] = " + (arg ? std::string("ai_") : fin("acc_")) + ";");
    close();
    barrier();
    if (r->type.is_tile()) gather_into(r, res, [&](const std::string& e) { return ov + "[" + e + "]"; });
    else line(res + " = " + ov + "[0];");
  }
  count("reductions");
}

std::string Emitter::exchange_words(const Op& op, const std::string& C, int64_t words, int64_t bytes) {
  const bool looped = runs_repeatedly(op);
  const std::string part = fresh("tsr_red");
  line("__shared__ " + C + " " + part + "_mem[" + std::to_string(words * (looped ? 2 : 1)) + "];");
  red_smem_ += align16(bytes * (looped ? 2 : 1));
  if (looped) {
    // The copy this run uses; kernel scope, so that it survives from one iteration to the next.
    prologue_.push_back("int " + part + "_at = 0;  // the copy of " + part + "_mem the next exchange uses");
    line(C + "* const " + part + " = " + part + "_mem + " + part + "_at;");
    line(part + "_at ^= " + std::to_string(words) + ";");
  } else {
    line(C + "* const " + part + " = " + part + "_mem;");
  }
  return part;
}

bool Emitter::runs_repeatedly(const Op& op) const {
  if (persistent_ || prog_persistent_ || ws_persistent_) return true;
  for (const Block* b = op.parent; b && b->parent; b = b->parent->parent)
    if (b->parent->kind == OpKind::For || b->parent->kind == OpKind::While) return true;
  return false;
}

// Folds each warp's value accs[p][0] (uniform within the warp) across the CTA's warps, leaving
// the CTA's value, uniform, in every thread. One barrier per exchange: the partials go to
// shared words of this reduction alone, so no later exchange can overwrite them while slower
// threads still read; a reduction inside a loop alternates between two copies (its next run
// writes the other copy, and the run after that starts only after every thread has passed the
// barrier in between, hence finished reading). With 8 or more warps (a power of two) each lane
// reads one warp's partial and a butterfly over the lanes folds them (every lane the same value
// bit for bit: the steps are commutative); fewer warps are read by every thread in order.
void Emitter::exchange_warp_partials(const Op& op, const std::string& C, int64_t P, const std::vector<std::string>& accs,
                                     const std::function<std::string(const std::string&, const std::string&)>& step) {
  const int nw = T_ / 32;
  const int64_t words = int64_t(nw) * P;
  const std::string part = exchange_words(op, C, words, words * cbytes(op.operand(0)->type.elem));
  const std::string Ps = std::to_string(P);
  open("if ((tsr_tid & 31) == 0) {");
  for (int64_t p = 0; p < P; ++p) line(part + "[(tsr_tid >> 5) * " + Ps + " + " + std::to_string(p) + "] = " + accs[p] + "[0];");
  close();
  barrier();
  count("block-exchanges");
  const bool lanes = nw >= 8 && (nw & (nw - 1)) == 0;
  for (int64_t p = 0; p < P; ++p) {
    std::string ps = std::to_string(p);
    if (lanes) {
      line(accs[p] + "[0] = " + part + "[(tsr_tid & " + std::to_string(nw - 1) + ") * " + Ps + " + " + ps + "];");
      for (int m = nw / 2; m >= 1; m /= 2)
        line(accs[p] + "[0] = " + step(accs[p] + "[0]", "tsr::shfl_xor(" + accs[p] + "[0], " + std::to_string(m) + ")") + ";");
    } else {
      line(accs[p] + "[0] = " + part + "[" + ps + "];");
      line("#pragma unroll");
      line("for (int w_ = 1; w_ < " + std::to_string(nw) + "; ++w_) " + accs[p] + "[0] = " +
           step(accs[p] + "[0]", part + "[w_ * " + Ps + " + " + ps + "]") + ";");
    }
  }
}

// Folds the CTAs' values across a cluster: each CTA's thread 0 writes its value to a slot in its
// own shared memory, a cluster barrier publishes the slots, and lane l of every warp reads the
// slot of CTA l % C through distributed shared memory; a butterfly over the lanes folds them
// (the steps are commutative, so every thread of every CTA ends with the same bits). A
// reduction in a loop alternates between two slots, as exchange_warp_partials does: a CTA can
// rewrite a slot only after the next exchange's barrier, which every reader of this one has
// passed. The kernel's last cluster barrier keeps each slot alive until its readers are done.
void Emitter::exchange_cluster_partials(const Op& op, const std::string& C, const std::string& acc,
                                        const std::function<std::string(const std::string&, const std::string&)>& step) {
  const bool looped = runs_repeatedly(op);  // (cluster-split kernels are never persistent)
  std::string slot = fresh("tsr_cred");
  line("__shared__ unsigned long long " + slot + "_mem[" + (looped ? "2" : "1") + "];");
  red_smem_ += 16;
  if (looped) {
    prologue_.push_back("int " + slot + "_at = 0;  // the slot of " + slot + "_mem the next cluster exchange uses");
    line("unsigned long long* const " + slot + " = " + slot + "_mem + " + slot + "_at;");
    line(slot + "_at ^= 1;");
  } else {
    line("unsigned long long* const " + slot + " = " + slot + "_mem;");
  }
  line("if (tsr_tid == 0) " + slot + "[0] = tsr::to_slot(" + acc + ");");
  line("tsr::cluster_sync();");
  line(acc + " = tsr::cluster_slot<" + C + ">(" + slot + ", unsigned(tsr_tid & " + std::to_string(cluster_ - 1) + "));");
  for (int m = cluster_ / 2; m >= 1; m /= 2)
    line(acc + " = " + step(acc, "tsr::shfl_xor(" + acc + ", " + std::to_string(m) + ")") + ";");
  count("cluster-exchanges");
}

bool Emitter::emit_block_scan(const Op& op) {
  const Value* x = op.operand(0);
  const Value* r = op.result();
  ScalarKind t = x->type.elem;
  if (lowered_ || cluster_ > 1 || op.kind != OpKind::Scan || op.attr_string("kind") != "sum") return false;
  if (!(t == ScalarKind::F32 || t == ScalarKind::F64 || (is_int(t) && !is_bool(t)))) return false;
  std::vector<int64_t> S = shape_of(op, x);
  int64_t numel = 1;
  for (int64_t d : S) numel *= d;
  if (numel != S[static_cast<size_t>(op.attr_int("axis"))] || T_ % 32 != 0) return false;  // one line: the tile
  Layout L = layout_of(x);
  if (L.replicated || L.chunks > 16) return false;  // (each chunk's code is written out)
  const std::string C = ctype(t), U = is_float(t) ? C : scalar_bits(t) > 32 ? "uint64_t" : "uint32_t";
  std::string res = declare(op, r);
  if (env_flag("TESSERA_CUDA_ONE_BARRIER_SCANS")) {
    // An A/B switch (bench/session33_gpu.sh): every chunk's runs first, then one
    // tsr::block_exclusive_sums for all chunks: two barriers (the one below, one inside) where
    // R chunks took 2R.
    const int64_t R = L.chunks;
    const std::string part = smem_ptr(U, 0, (T_ / 32) * R * 8), accs = fresh("accs"), offs = fresh("offs");
    line(U + " " + accs + "[" + std::to_string(R) + "], " + offs + "[" + std::to_string(R) + "];");
    for (int64_t c = 0; c < R; ++c) {
      const std::string a = accs + "[" + std::to_string(c) + "]";
      line(a + " = " + U + "(0);");
      for (int l = 0; l < L.vec; ++l) {
        std::string sl = std::to_string(c * L.vec + l), ok = valid_expr(L, sl);
        std::string add = a + " += " + U + "(" + nm(x) + "[" + sl + "]); ";
        line((ok == "true" ? add : "if (" + ok + ") " + add) + res + "[" + sl + "] = " + C + "(" + a + ");");
      }
    }
    add_block_offsets(res, C, U, accs, offs, part, R, L.vec);
    count("block-scans");
    return true;
  }
  std::string part = smem_ptr(U, 0, (T_ / 32) * 8);
  std::string run = fresh("run"), acc = fresh("acc"), off = fresh("off"), tot = fresh("tot");
  line(U + " " + run + " = " + U + "(0);");
  // Elements are chunk-major: chunk c's VEC lanes of thread 0, then of thread 1, ...
  for (int64_t c = 0; c < L.chunks; ++c) {
    line(U + " " + acc + "_" + std::to_string(c) + " = " + U + "(0);");
    std::string a = acc + "_" + std::to_string(c);
    for (int l = 0; l < L.vec; ++l) {
      std::string sl = std::to_string(c * L.vec + l), ok = valid_expr(L, sl);
      std::string add = a + " += " + U + "(" + nm(x) + "[" + sl + "]); ";
      line((ok == "true" ? add : "if (" + ok + ") " + add) + res + "[" + sl + "] = " + C + "(" + a + ");");
    }
    barrier();  // the partial sums' previous readers are done
    line(U + " " + tot + "_" + std::to_string(c) + ";");
    line("const " + U + " " + off + "_" + std::to_string(c) + " = " + run + " + tsr::block_exclusive_sum<" +
         std::to_string(T_ / 32) + ">(" + a + ", " + part + ", " + tot + "_" + std::to_string(c) + ");");
    for (int l = 0; l < L.vec; ++l) {
      std::string sl = std::to_string(c * L.vec + l);
      line(res + "[" + sl + "] = " + C + "(" + U + "(" + res + "[" + sl + "]) + " + off + "_" + std::to_string(c) + ");");
    }
    line(run + " += " + tot + "_" + std::to_string(c) + ";");
  }
  count("block-scans");
  return true;
}

void Emitter::emit_scan(const Op& op) {
  if (emit_block_scan(op)) return;
  const Value* x = op.operand(0);
  const Value* r = op.result();
  std::vector<int64_t> S = shape_of(op, x);
  int64_t axis = op.attr_int("axis");
  if (axis < 0 || axis >= static_cast<int64_t>(S.size())) fail(op, "axis out of range");
  const AxisSplit sp = split_at_axis(S, axis);
  const int64_t O = sp.outer, L = sp.len, I = sp.inner;
  ScalarKind t = x->type.elem;
  std::string C = ctype(t);
  bool f = is_float(t);
  std::string res = declare(op, r);
  std::string src = smem_ptr(C, 0, O * L * I * cbytes(t));
  stage(x, src);
  barrier();
  std::string Sx = std::to_string(L), Ix = std::to_string(I);
  auto at = [&](const std::string& l) { return src + "[(o_ * " + Sx + " + " + l + ") * " + Ix + " + i_]"; };
  // One thread per line, in place, in order.
  open("for (int p_ = tsr_tid; p_ < " + std::to_string(O * I) + "; p_ += " + std::to_string(T_) + ") {");
  line("const int o_ = p_ / " + Ix + ", i_ = p_ % " + Ix + ";");
  line(C + " acc_ = " + at("0") + ";");
  open("for (int l_ = 1; l_ < " + Sx + "; ++l_) {");
  if (op.kind == OpKind::ScanWith) {
    std::string a = fresh("a"), b = fresh("b");
    line("const " + C + " " + a + " = acc_;");
    line("const " + C + " " + b + " = " + at("l_") + ";");
    std::string c = combine(op, a, b);
    cur_ = &op;
    line("acc_ = " + c + ";");
  } else {
    const std::string& kind = op.attr_string("kind");
    std::string b = at("l_"), e, U = scalar_bits(t) > 32 ? "uint64_t" : "uint32_t";
    // Narrow float sums accumulate in f32; each output is rounded (below).
    if (kind == "sum") e = f ? C + "(acc_ + " + b + ")" : C + "(" + U + "(acc_) + " + U + "(" + b + "))";
    else if (kind == "prod") e = f ? C + "(acc_ * " + b + ")" : C + "(" + U + "(acc_) * " + U + "(" + b + "))";
    else if (kind == "max" || kind == "min") e = std::string(f ? "tsr::f" : "tsr::i") + kind + (f ? "_nan<" : "<") + C + ">(acc_, " + b + ")";
    else fail(op, "unknown scan kind '" + kind + "'");
    if (t == ScalarKind::I1 && (kind == "sum" || kind == "prod")) e = "uint8_t((" + e + ") & 1)";
    line("acc_ = " + e + ";");
  }
  line(at("l_") + " = " + (f ? fround(t, "acc_") : std::string("acc_")) + ";");
  close();
  close();
  barrier();
  gather_into(r, res, [&](const std::string& e) { return src + "[" + e + "]"; });
}

// histogram: counts in shared memory (zeroed, then one tsr::hist_add per element its owner
// holds: shared atomics, one per distinct bin of a warp), read back into the result's layout.
void Emitter::emit_histogram(const Op& op) {
  const Value* x = op.operand(0);
  const Value* r = op.result();
  const int64_t B = shape_of(op, r).at(0);
  const std::string Bs = std::to_string(B);
  std::string res = declare(op, r);
  std::string h = smem_ptr("unsigned", 0, B * 4);
  barrier();
  line("for (int b_ = tsr_tid; b_ < " + Bs + "; b_ += " + std::to_string(T_) + ") " + h + "[b_] = 0u;");
  barrier();
  if (x->type.is_tile()) {
    Layout L = layout_of(x);
    const std::string B_t = scalar_bits(x->type.elem) > 32 ? "long long" : "int";
    slots(L, [&](const std::string& s) {
      std::string own = owner_expr(L, s), v = "(" + B_t + ")(" + nm(x) + "[" + s + "])";
      line("tsr::hist_add<" + B_t + ">(" + h + ", " + (own == "true" ? v : own + " ? " + v + " : (" + B_t + ")(-1)") +
           ", (" + B_t + ")(" + Bs + "));");
    });
  }
  barrier();
  gather_into(r, res, [&](const std::string& e) { return "int32_t(" + h + "[" + e + "])"; });
  count("histograms");
}

// sort / topk: one bitonic network in shared memory over every line of the tile at once. The
// operand (and the index operand) are staged flat; each line [o, :, i] gets Lp = the next power
// of two >= its length of (key, position) pairs, the padding keyed past every real element
// (the largest key, at positions >= len). Pairs compare by key, then position: a total order,
// so the network's result is the stable sort's (ties keep the smaller position first). A
// descending order sorts the complemented keys. Each result element reads its source through
// the sorted positions.
void Emitter::emit_sort(const Op& op) {
  if (op.kind == OpKind::Histogram) return emit_histogram(op);
  const Value* x = op.operand(0);
  std::vector<int64_t> S = shape_of(op, x), R = shape_of(op, op.result(0));
  int64_t axis = op.attr_int("axis");
  if (axis < 0 || axis >= static_cast<int64_t>(S.size()) || R.size() != S.size()) fail(op, "axis out of range");
  const AxisSplit sp = split_at_axis(S, axis);
  const int64_t O = sp.outer, L = sp.len, I = sp.inner, K = R[static_cast<size_t>(axis)];
  int64_t Lp = 1;
  while (Lp < L) Lp *= 2;
  const int64_t lines = O * I, pairs = lines * Lp / 2;
  const bool desc = op.kind == OpKind::Topk ? !op.has_attr("largest") || op.attr_bool("largest")
                                            : op.has_attr("descending") && op.attr_bool("descending");
  const bool with_index = op.operands.size() > 1;
  ScalarKind t = x->type.elem;
  const std::string C = ctype(t), KT = scalar_bits(t) > 32 ? "uint64_t" : "uint32_t";
  const int64_t kbytes = scalar_bits(t) > 32 ? 8 : 4;
  std::string v = declare(op, op.result(0));
  std::string ix = op.results.size() > 1 ? declare(op, op.result(1)) : std::string();
  int64_t off = 0;
  auto take = [&](const std::string& type, int64_t bytes) {
    std::string p = smem_ptr(type, off, bytes);
    off += align16(bytes);
    return p;
  };
  std::string src = take(C, O * L * I * cbytes(t));
  std::string isrc = with_index ? take("int32_t", O * L * I * 4) : std::string();
  std::string keys = take(KT, lines * Lp * kbytes), pos = take("int32_t", lines * Lp * 4);
  stage(x, src);
  if (with_index) {
    // stage() opens with a barrier, which is harmless here: nothing reads the scratch yet.
    stage(op.operand(1), isrc);
  }
  barrier();
  const std::string Ls = std::to_string(L), Is = std::to_string(I), Lps = std::to_string(Lp), Ts = std::to_string(T_);
  open("for (int p_ = tsr_tid; p_ < " + std::to_string(lines * Lp) + "; p_ += " + Ts + ") {");
  line("const int ln_ = p_ / " + Lps + ", l_ = p_ % " + Lps + ";");
  line("const int o_ = ln_ / " + Is + ", i_ = ln_ % " + Is + ";");
  std::string key = "tsr::sort_key(" + src + "[(o_ * " + Ls + " + l_) * " + Is + " + i_])";
  if (desc) key = "~" + key;
  line(keys + "[p_] = l_ < " + Ls + " ? " + KT + "(" + key + ") : ~" + KT + "(0);");
  line(pos + "[p_] = l_;");
  close();
  barrier();
  if (Lp > 1) {
    const std::string H = std::to_string(Lp / 2);
    open("for (int k_ = 2; k_ <= " + Lps + "; k_ <<= 1) {");
    open("for (int j_ = k_ >> 1; j_ > 0; j_ >>= 1) {");
    open("for (int q_ = tsr_tid; q_ < " + std::to_string(pairs) + "; q_ += " + Ts + ") {");
    line("const int h_ = q_ % " + H + ";");
    line("const int a_ = (q_ / " + H + ") * " + Lps + " + ((h_ & ~(j_ - 1)) << 1) + (h_ & (j_ - 1)), b_ = a_ + j_;");
    line("const " + KT + " ka_ = " + keys + "[a_], kb_ = " + keys + "[b_];");
    line("const int pa_ = " + pos + "[a_], pb_ = " + pos + "[b_];");
    // a_ is in the lower half of its k_-block: that block sorts up when its k_ bit is clear.
    line("const bool up_ = ((a_ % " + Lps + ") & k_) == 0;");
    open("if ((ka_ > kb_ || (ka_ == kb_ && pa_ > pb_)) == up_) {");
    line(keys + "[a_] = kb_; " + keys + "[b_] = ka_; " + pos + "[a_] = pb_; " + pos + "[b_] = pa_;");
    close();
    close();
    line("__syncthreads();");
    close();
    close();
  }
  // Result element e of [O, K, I]: the element of its line at sorted rank r.
  const std::string Ks = std::to_string(K);
  auto source = [&](const std::string& e) {
    std::string o = "((" + e + ") / " + std::to_string(K * I) + ")", r = "(((" + e + ") / " + Is + ") % " + Ks + ")",
                i = "((" + e + ") % " + Is + ")";
    std::string p = pos + "[(" + o + " * " + Is + " + " + i + ") * " + Lps + " + " + r + "]";
    return std::make_pair("(" + o + " * " + Ls + " + " + p + ") * " + Is + " + " + i, p);
  };
  gather_into(op.result(0), v, [&](const std::string& e) { return src + "[" + source(e).first + "]"; });
  if (!ix.empty())
    gather_into(op.result(1), ix, [&](const std::string& e) {
      auto [at, p] = source(e);
      return with_index ? isrc + "[" + at + "]" : p;
    });
  count("sorts");
}

std::string arg_better(const std::string& kind, const std::string& v1, const std::string& i1, const std::string& v2,
                       const std::string& i2) {
  std::string n1 = "(" + v1 + " != " + v1 + ")", n2 = "(" + v2 + " != " + v2 + ")";
  std::string cmp = kind == "argmax" ? ">" : "<";
  return "((" + n1 + " && !" + n2 + ") || (!" + n1 + " && !" + n2 + " && " + v1 + " " + cmp + " " + v2 + ") || (((" + n1 +
         " && " + n2 + ") || " + v1 + " == " + v2 + ") && " + i1 + " < " + i2 + "))";
}

// The end of a one-barrier block scan (both emitters): a barrier (the previous readers of
// `part` are done), one tsr::block_exclusive_sums over the R runs' totals in `accs`, and each
// run's offset added to its `run` inclusive sums in `res`.
void Emitter::add_block_offsets(const std::string& res, const std::string& C, const std::string& U,
                                const std::string& accs, const std::string& offs, const std::string& part, int64_t R,
                                int64_t run) {
  barrier();
  line("tsr::block_exclusive_sums<" + std::to_string(T_ / 32) + ", " + std::to_string(R) + ">(" + accs + ", " + offs + ", " +
       part + ");");
  for (int64_t c = 0; c < R; ++c)
    for (int64_t l = 0; l < run; ++l) {
      const std::string sl = std::to_string(c * run + l);
      line(res + "[" + sl + "] = " + C + "(" + U + "(" + res + "[" + sl + "]) + " + offs + "[" + std::to_string(c) + "]);");
    }
}

}  // namespace tessera::cudagen
