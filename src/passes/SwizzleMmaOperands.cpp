// swizzle-mma-operands (GPU lowering, kernels without wgmma dots): the shared tiles that only
// mma.sync dots read (ldmatrix) get a 128- or 64-byte swizzle instead of padded rows.
//
// assign-layouts and stage-mma-operands give an mma.sync operand rows padded by 16 bytes
// (`shared<swizzle = 0, pad = 8>`), which keeps the eight rows an ldmatrix phase reads in
// different banks. But then every odd row starts 16 bytes into a 32-byte piece of shared
// memory, and a cp.async of a 32-byte piece of global memory whose two 16-byte chunks land in
// two pieces of shared memory is split: Nsight Compute counted 1.5x the ideal L2 sectors and
// 2.6-3.75x the ideal shared wavefronts for every ring copy of matmul_struct (bench/RESULTS.md,
// session 42), whose warps then waited twice as long on their copies as the planning emitter's,
// whose tiles are XOR-swizzled. Here a tile whose stored rows are whole 128-byte lines (the
// fastest dim a multiple of 64 16-bit elements, the rows a multiple of 8) gets
// `shared<swizzle = 128, pad = 0>` (its order kept), as do the views (reshapes, permutes) of it
// the dots read: each 16-byte chunk of a row moves to chunk (chunk ^ row % 8) of the same row
// (tsr::sw128_index), so an ldmatrix phase's eight rows still fall in different banks, rows stay
// 128-byte aligned and a copy's 32-byte pieces stay whole. Rows of 64 bytes (a [64, 32] A tile
// of 16-bit elements: matmul_struct's) get the 64-byte swizzle instead (`shared<swizzle = 64,
// pad = 0>`, the TMA's SWIZZLE_64B pattern): chunk c ^ (row / 2 % 4), two rows to a 128-byte
// line (tsr::sw64_index). Shorter rows keep their padding (stat `short-rows`).
//
// Not in a kernel with a wgmma dot (its operands are swizzled by assign-layouts for the TMA,
// which swizzles by address bits; the emitter's TMA rings are only for such kernels), so on
// sm_90a for kernels lowered for mma.sync (the emitter's retry without wgmma, or a first
// lowering that found no wgmma dot). Not for 8-bit operands (the emitter indexes 16-bit
// swizzled tiles only), and not for tiles with readers other than mma.sync dots: a conversion
// of one to a dot operand layout (stage-mma-operands' computed operands, int4_dequant_matmul's
// B) counts as another reader, though the emitter reads that too with ldmatrix (not done yet:
// stat `other-readers`).
#include <functional>

#include "ir/IR.h"
#include "passes/Passes.h"

namespace tessera {

namespace {

bool padded_operand_tile(const Type& t) {
  return t.layout.kind == Layout::Kind::Shared && t.layout.swizzle == 0 && t.layout.pad == 8 && scalar_bits(t.elem) == 16 &&
         shape_is_static(t.shape);
}

// The readers of every value in the kernel.
std::unordered_map<const Value*, std::vector<std::pair<Op*, size_t>>> readers_of(Kernel& k) {
  std::unordered_map<const Value*, std::vector<std::pair<Op*, size_t>>> r;
  walk(*k.body, [&](Op& op) {
    for (size_t i = 0; i < op.operands.size(); ++i) r[op.operand(i)].push_back({&op, i});
  });
  return r;
}

}  // namespace

void swizzle_mma_operands(Kernel& k, const GpuLoweringOptions&, PassStats& stats) {
  if (has_mma_dot(*k.body, 3)) return;
  const auto readers = readers_of(k);
  std::vector<Value*> roots;  // the tiles written to shared memory: loads and conversions
  walk(*k.body, [&](Op& op) {
    if ((op.kind == OpKind::LoadTile || op.kind == OpKind::ConvertLayout) && op.results.size() == 1 &&
        padded_operand_tile(op.result()->type))
      roots.push_back(op.result());
  });
  for (Value* root : roots) {
    // The root and its views (reshapes, permutes in shared memory); every other reader must be
    // an mma.sync dot taking it as A or B.
    std::vector<Value*> tiles;
    bool only_dots = true;
    std::function<void(Value*)> visit = [&](Value* v) {
      tiles.push_back(v);
      auto it = readers.find(v);
      if (it == readers.end()) return;
      for (auto [op, i] : it->second) {
        if ((op->kind == OpKind::Reshape || op->kind == OpKind::Permute) && op->result()->type.layout.kind == Layout::Kind::Shared) {
          visit(op->result());
        } else if (!(op->kind == OpKind::Dot && i < 2 && op->result()->type.layout.kind == Layout::Kind::Mma &&
                     op->result()->type.layout.version == 2)) {
          only_dots = false;
        }
      }
    };
    visit(root);
    const Type& t = root->type;
    const std::vector<int64_t> S = static_shape(t.shape);
    const int64_t fastest = t.layout.order.empty() ? t.rank() - 1 : t.layout.order[0];
    const int64_t rows = shape_numel(t.shape) / std::max<int64_t>(1, S[fastest]);
    if (!only_dots) {
      ++stats["swizzle-mma-operands.other-readers"];
      continue;
    }
    const int64_t swizzle = S[fastest] % 64 == 0 ? 128 : S[fastest] % 32 == 0 ? 64 : 0;
    if (swizzle == 0 || rows % 8 != 0) {
      ++stats["swizzle-mma-operands.short-rows"];
      continue;
    }
    for (Value* v : tiles) v->type.layout = Layout::shared(swizzle, 0, v->type.layout.order);
    ++stats[swizzle == 128 ? "swizzle-mma-operands.swizzled" : "swizzle-mma-operands.swizzled-64"];
  }
}

}  // namespace tessera
