// swap-dot-operands (GPU lowering, sm_90a, first): a K loop's dot of few rows computed as its
// transpose, c^T = b^T a^T (the knob swap_operands = 1).
//
// A wgmma warpgroup takes whole 64-row blocks of its accumulator: a decode GEMM's batch of 8,
// 16 or 32 rows would fill most of that block with rows of zeros. Swapped, the weights' N tile
// (64 to 256, a multiple of 64) takes the rows and the batch the instruction's n, which wgmma
// has from 8 up. The loop then carries the transposed accumulator, its dot reads permutes of
// its operands (b^T: the weights' [K, N] tile read MN-major, with the A-transpose immediate; a^T:
// the batch's [M, K] tile K-major), and after the loop one permute gives the result back in
// its own shape, which every later use reads. The sums are the same, added in the same order:
// the interpreter gives the same bits.
//
// Which loop: a top-level `for` carrying one value, the accumulator of its body's one dot (the
// dot reads it as C and the yield yields the dot), of 16-bit float operands, or f8 ones where b
// is a permute of the weights' [N, K] tile (f8 wgmma reads both operands K-major: b^T is then
// that tile, a^T the batch's [M, K] tile), with an M of 8, 16 or 32 rows and an N that is a
// multiple of 64 up to 256. The knob is the planning emitter's of the same name (which swaps
// inside its wgmma plan): 1 asks for the swap, 0 or none leaves the dot as it is; other values
// are an error. Only on sm_90a (GpuLoweringOptions::wgmma): mma.sync takes 16-row tiles anyway.
#include <string>

#include "ir/IR.h"
#include "passes/BlockEdit.h"
#include "passes/Passes.h"

namespace tessera {

namespace {

// The loop's one dot, when it accumulates the loop's one carried value and nothing else in the
// body reads the accumulator or the dot's result (which the swap transposes); else null.
Op* carried_dot(Op& loop) {
  if (loop.kind != OpKind::For || loop.operands.size() != 4) return nullptr;
  Block& body = loop.region(0);
  Op* dot = nullptr;
  int dots = 0;
  walk(body, [&](Op& o) {
    if (o.kind == OpKind::Dot) ++dots, dot = &o;
  });
  const Op* y = body.terminator();
  if (dots != 1 || dot->parent != &body || !y || y->operands.size() != 1 || y->operand(0) != dot->result() ||
      dot->operand(2) != body.args[1] || uses_in(body, body.args[1]) != 1 || uses_in(body, dot->result()) != 1)
    return nullptr;
  return dot;
}

// The tile `v` is the transpose of (a 2-D permute [1, 0] of it), else null.
Value* transposed_from(const Value* v) {
  const Op* d = v->def;
  if (!d || d->kind != OpKind::Permute || d->attr_ints("dims") != std::vector<int64_t>{1, 0}) return nullptr;
  return d->operand(0);
}

// Why the loop's dot is not swapped ("" when it is).
std::string why_not(const Op& dot) {
  const Type &a = dot.operand(0)->type, &r = dot.result()->type;
  if (!shape_is_static(r.shape) || r.rank() != 2 || a.rank() != 2) return "a tile without a static 2-D shape";
  if (is_f8(a.elem) && dot.operand(1)->type.elem == a.elem) {
    // f8 wgmma reads both operands K-major: b^T is, where b is a permute of an [N, K] tile (the
    // weights given as [N, K]); a^T is a's [M, K] tile, K-major.
    if (!transposed_from(dot.operand(1))) return "its operands are f8 and b is not a permute of an [N, K] tile (f8 wgmma reads both operands K-major)";
    if (transposed_from(dot.operand(0))) return "its operands are f8 and a is a permute (a^T would not be K-major, as f8 wgmma reads both operands)";
  } else if (scalar_bits(a.elem) != 16 || !is_float(a.elem) || dot.operand(1)->type.elem != a.elem) {
    return "its operands are not 16-bit or 8-bit floats of one type";
  }
  for (const Value* v : {dot.operand(0), dot.operand(1), dot.operand(2), dot.result()})
    if (!v->type.layout.empty()) return "a layout written on its operands or result (" + v->type.layout.str() + ")";
  if (r.elem != ScalarKind::F32) return "its accumulator is not f32";
  const std::vector<int64_t> S = static_shape(r.shape);
  if (S[0] != 8 && S[0] != 16 && S[0] != 32) return "M = " + std::to_string(S[0]) + " (the swap puts it on wgmma's n: 8, 16 or 32)";
  if (S[1] % 64 != 0 || S[1] > 256)
    return "N = " + std::to_string(S[1]) + " (the swap puts it on wgmma's 64-row blocks: 64, 128, 192 or 256)";
  return "";
}

Value* permuted(Kernel& k, Block& b, Value* v, const Op* before) {
  Type t = v->type;
  std::swap(t.shape[0], t.shape[1]);
  t.layout = {};
  return k.create_op(b, OpKind::Permute, {v}, {t}, {{"dims", std::vector<int64_t>{1, 0}}}, before->loc, 0, before)
      ->result();
}

}  // namespace

void swap_dot_operands(Kernel& k, const GpuLoweringOptions& o, PassStats& stats) {
  const ConstexprDecl* knob = k.find_constexpr("swap_operands");
  if (knob && knob->value != 0 && knob->value != 1)
    throw TesseraError(knob->loc, "knob swap_operands = " + std::to_string(knob->value) +
                                      ": 0 (the dot as written) or 1 (a dot of 8 to 32 rows as c^T = b^T a^T on wgmma)");
  if (!knob || knob->value != 1 || !o.wgmma) return;
  std::vector<Op*> loops;
  for (const auto& op : k.body->ops)
    if (carried_dot(*op)) loops.push_back(op.get());
  if (loops.empty())
    stats.notes.push_back("swap_operands = 1 not taken: no top-level loop carries only the accumulator of its one dot");
  for (Op* loop : loops) {
    Op* dot = carried_dot(*loop);
    if (const std::string why = why_not(*dot); !why.empty()) {
      stats.notes.push_back("dot at " + dot->loc.str() + ": swap_operands = 1 not taken: " + why);
      continue;
    }
    Block& top = *k.body;
    Block& body = loop->region(0);
    Type rt = dot->result()->type;
    std::swap(rt.shape[0], rt.shape[1]);
    rt.layout = {};
    // The start: a splat of the transposed shape, else the permute of the start.
    Value* init = loop->operand(3);
    Op* old_splat = init->def && init->def->kind == OpKind::Splat && init->def->operand(0)->type.is_scalar() ? init->def : nullptr;
    loop->operands[3] = old_splat ? k.create_op(top, OpKind::Splat, {old_splat->operand(0)}, {rt}, {}, old_splat->loc, 0, loop)->result()
                                  : permuted(k, top, init, loop);
    if (old_splat) {
      // (The old start goes where nothing else reads it.)
      if (uses_in(top, init) == 0)
        std::erase_if(top.ops, [&](const std::unique_ptr<Op>& u) { return u.get() == old_splat; });
    }
    Value* acc = body.args[1];
    acc->type = rt;
    Value* old = loop->result(0);
    loop->results[0]->type = rt;
    // The dot of the permuted operands, into the transposed accumulator.
    // (f8: b^T of b = permute(t) is t itself, the weights' [N, K] tile, K-major. 16-bit
    // operands keep the permute of b's permute, as the GPU has run them.)
    Value* bt = is_f8(dot->operand(0)->type.elem) ? transposed_from(dot->operand(1)) : nullptr;
    if (!bt) bt = permuted(k, body, dot->operand(1), dot);
    Value* at = permuted(k, body, dot->operand(0), dot);
    Value* old_b = dot->operand(1);
    dot->operands[0] = bt;
    dot->operands[1] = at;
    // (b's permute, read by nothing else now, goes, wherever it stands.)
    if (old_b->def && old_b->def->kind == OpKind::Permute && uses_in(top, old_b) == 0) {
      const Op* gone = old_b->def;
      std::erase_if(gone->parent->ops, [&](const std::unique_ptr<Op>& u) { return u.get() == gone; });
    }
    dot->results[0]->type = rt;
    // After the loop, the result in its own shape for every use.
    const Op* after = next_op(*loop);
    Type back = rt;
    std::swap(back.shape[0], back.shape[1]);
    Op* p = k.create_op(top, OpKind::Permute, {old}, {back}, {{"dims", std::vector<int64_t>{1, 0}}}, loop->loc, 0, after);
    replace_all_uses(k, old, p->result());
    p->operands[0] = old;  // (replace_all_uses turned the permute's own operand too)
    ++stats["swap-dot-operands.swapped"];
  }
}

}  // namespace tessera
