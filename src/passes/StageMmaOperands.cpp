// stage-mma-operands (GPU lowering, after remove-layout-conversions): an mma.sync operand that
// the threads do not already hold where the instruction wants it goes through shared memory,
// and the IR says so. Its conversion to the dot_operand layout then reads a shared tile
// (`shared<swizzle = 0, pad = 8>`: rows padded by 16 bytes, so that the eight rows an ldmatrix
// phase reads fall in different banks), which the conversion before it writes. (A loaded
// 16-bit operand is such a shared tile from assign-layouts on, which the dot reads as it is:
// remove-layout-conversions has made its load write it, as for wgmma below.)
//
// Where the staged value is a load, through reshapes that only add or drop unit dims and
// permutes, with no other reader on the way, the load itself writes the shared tile (an
// asynchronous copy from global memory, no registers between) and the permutes become views
// of it in another `order`. That is the form a software pipeline can ring.
//
// Left in registers: FlashAttention's P, an accumulator converted to the A operand of a dot
// whose accumulator layout is the same (mma.sync's accumulator fragment is its A fragment).
//
// wgmma operands (sm_90a) are shared tiles already (assign-layouts: 128-byte swizzled); where
// one is a load, the same rewrite makes the load write the swizzled tile itself, and the
// conversion goes. So do an FMA dot's operands (assign-layouts: unswizzled shared tiles of 2-,
// 4- or 8-byte elements), through unit-dim reshapes only: a permute stays in registers, so
// that B is stored [K, N] and a warp's reads of its row k fall in different banks.
#include <algorithm>

#include "ir/IR.h"
#include "passes/BlockEdit.h"
#include "passes/Passes.h"

namespace tessera {

namespace {

int uses_of(Kernel& k, const Value* v) {
  int n = 0;
  walk(*k.body, [&](Op& op) {
    for (const Value* o : op.operands) n += o == v;
  });
  return n;
}

// The order (dims from fastest-varying) of a row-major tile of rank r.
std::vector<int64_t> row_major(int r) {
  std::vector<int64_t> o;
  for (int i = r - 1; i >= 0; --i) o.push_back(i);
  return o;
}

// Do only tensor-core dots (mma.sync, wgmma) read `v`? They read a shared tile in either
// order (ldmatrix.trans; wgmma's transpose bits), an FMA dot's B only [K, N].
bool read_by_tensor_cores(Kernel& k, const Value* v) {
  bool all = true, any = false;
  walk(*k.body, [&](Op& op) {
    for (const Value* o : op.operands)
      if (o == v) {
        any = true;
        all = all && op.kind == OpKind::Dot && op.result()->type.layout.kind == Layout::Kind::Mma;
      }
  });
  return any && all;
}

class Stage {
 public:
  explicit Stage(Kernel& k) : k_(k) {}

  void run(PassStats& stats) {
    std::vector<Op*> cs;
    walk(*k_.body, [&](Op& op) {
      if (op.kind == OpKind::ConvertLayout) cs.push_back(&op);
    });
    for (Op* c : cs) {
      const Type& rt = c->result()->type;
      const Layout& l = rt.layout;
      if (l.kind == Layout::Kind::Shared && c->operand(0)->type.layout.kind != Layout::Kind::Shared) {
        // A wgmma, loaded mma.sync or FMA-dot operand (assign-layouts gives them shared tiles
        // directly): where it is a load, the load writes the tile and the conversion goes.
        const bool fma = !read_by_tensor_cores(k_, c->result());
        if ((fma || scalar_bits(rt.elem) == 16) && load_into_shared(*c, l.swizzle, l.pad, /*permutes=*/!fma)) {
          ++stats["stage-mma-operands.loads-into-shared"];
          replace_all_uses(k_, c->result(), c->operand(0));
          c->parent->ops.erase(op_position(*c));
        }
        continue;
      }
      if (l.kind != Layout::Kind::DotOperand || !l.parent || l.parent->kind != Layout::Kind::Mma ||
          l.parent->version != 2 || scalar_bits(rt.elem) != 16)
        continue;
      Value* x = c->operand(0);
      if (x->type.layout.kind == Layout::Kind::Shared) continue;
      if (l.operand == 0 && x->type.layout == *l.parent) continue;  // the accumulator is the A fragment
      ++stats["stage-mma-operands.staged"];
      if (load_into_shared(*c, 0, 8)) {
        ++stats["stage-mma-operands.loads-into-shared"];
        continue;
      }
      Type st = x->type;
      st.layout = Layout::shared(0, 8);
      st.space = "shared";
      c->operands[0] = k_.create_op(*c->parent, OpKind::ConvertLayout, {x}, {st}, {}, c->loc, 0, c)->result();
    }
  }

 private:
  Kernel& k_;

  // `c`'s operand is a load (through unit-dim reshapes and permutes read by nothing else):
  // the load produces the shared tile, the ops after it views of it.
  bool load_into_shared(Op& c, int64_t swizzle, int64_t pad, bool permutes = true) {
    std::vector<Op*> chain;  // from c's operand's producer back to the load
    Value* v = c.operand(0);
    while (true) {
      Op* d = v->def;
      if (!d || uses_of(k_, v) != 1 || d->parent != c.parent) return false;
      chain.push_back(d);
      if (d->kind == OpKind::LoadTile) break;
      if (d->kind == OpKind::Reshape && only_unit_dims_change(d->operand(0)->type, v->type)) {
        v = d->operand(0);
        continue;
      }
      if (d->kind != OpKind::Permute || !permutes) return false;
      v = d->operand(0);
    }
    Op& load = *chain.back();
    const Type& lt = load.result()->type;
    // 16-bit tiles for the tensor cores; 1-, 2-, 4- or 8-byte ones for an FMA dot (unswizzled).
    // Asynchronous copies fill what lies past the view with +0: other pads stay in registers.
    const int eb = scalar_bytes(lt.elem);
    if (!(eb == 2 || (swizzle == 0 && (eb == 1 || eb == 4 || eb == 8))) || !pads_with_positive_zero(load) ||
        !loads_in_whole_chunks(lt))
      return false;
    // Row-major at the load; a reshape keeps the order of the dims it keeps; a permute
    // reorders them.
    std::vector<int64_t> order = row_major(lt.rank());
    auto set = [&](Value* r, const std::vector<int64_t>& o) {
      r->type.layout = Layout::shared(swizzle, pad, o);
      r->type.space = "shared";
    };
    set(load.result(), order);
    for (size_t i = chain.size() - 1; i-- > 0;) {
      Op& op = *chain[i];
      const Type& from = op.operand(0)->type;
      if (op.kind == OpKind::Reshape) {
        // Number the kept dims as the result's: the unit dims go, the rest keep their order.
        std::vector<int64_t> to_new(from.rank(), -1);
        std::vector<int64_t> kept_from, kept_to;
        for (int d = 0; d < from.rank(); ++d)
          if (!(from.shape[d].is_static() && from.shape[d].value == 1)) kept_from.push_back(d);
        const Type& rt = op.result()->type;
        for (int d = 0; d < rt.rank(); ++d)
          if (!(rt.shape[d].is_static() && rt.shape[d].value == 1)) kept_to.push_back(d);
        for (size_t j = 0; j < kept_from.size(); ++j) to_new[kept_from[j]] = kept_to[j];
        std::vector<int64_t> o;
        for (int64_t d : order)
          if (to_new[d] >= 0) o.push_back(to_new[d]);
        for (int d = rt.rank() - 1; d >= 0; --d)  // the unit dims, anywhere
          if (std::find(o.begin(), o.end(), d) == o.end()) o.push_back(d);
        order = o;
      } else {
        const std::vector<int64_t>& p = op.attr_ints("dims");  // result dim i is operand dim p[i]
        std::vector<int64_t> inv(p.size());
        for (size_t j = 0; j < p.size(); ++j) inv[p[j]] = static_cast<int64_t>(j);
        for (int64_t& d : order) d = inv[d];
      }
      set(op.result(), order);
    }
    return true;
  }
};

}  // namespace

void stage_mma_operands(Kernel& k, PassStats& stats) { Stage(k).run(stats); }

}  // namespace tessera
