// Layout encodings: construction, text form, and the rules of fit (Layout.h).
#include "ir/Layout.h"

#include <algorithm>
#include <cstdint>

namespace tessera {

Layout Layout::blocked(std::vector<int64_t> per_thread, std::vector<int64_t> threads, std::vector<int64_t> warps,
                       std::vector<int64_t> order) {
  Layout l = of(Kind::Blocked);
  l.per_thread = std::move(per_thread);
  l.threads = std::move(threads);
  l.warps = std::move(warps);
  l.order = std::move(order);
  return l;
}

Layout Layout::mma(int64_t version, std::vector<int64_t> warps, std::vector<int64_t> instr) {
  Layout l = of(Kind::Mma);
  l.version = version;
  l.warps = std::move(warps);
  l.instr = std::move(instr);
  return l;
}

Layout Layout::dot_operand(const Layout& parent, int64_t operand, int64_t k_width) {
  Layout l = of(Kind::DotOperand);
  l.parent = std::make_shared<const Layout>(parent);
  l.operand = operand;
  l.k_width = k_width;
  return l;
}

Layout Layout::slice(const Layout& parent, int64_t dim) {
  Layout l = of(Kind::Slice);
  l.parent = std::make_shared<const Layout>(parent);
  l.dim = dim;
  return l;
}

Layout Layout::permuted(const Layout& parent, const std::vector<int64_t>& dims) {
  // permuted(permuted(p, a), b): result dim i is the inner result's dim b[i], which is p's dim
  // a[b[i]].
  if (parent.kind == Kind::Permuted && parent.parent && parent.dims.size() == dims.size()) {
    std::vector<int64_t> composed(dims.size());
    for (size_t i = 0; i < dims.size(); ++i) composed[i] = parent.dims[static_cast<size_t>(dims[i])];
    return permuted(*parent.parent, composed);
  }
  bool identity = true;
  for (size_t i = 0; i < dims.size(); ++i) identity = identity && dims[i] == static_cast<int64_t>(i);
  if (identity) return parent;
  Layout l = of(Kind::Permuted);
  l.parent = std::make_shared<const Layout>(parent);
  l.dims = dims;
  return l;
}

Layout Layout::shared(int64_t swizzle, int64_t pad, std::vector<int64_t> order) {
  Layout l = of(Kind::Shared);
  l.swizzle = swizzle;
  l.pad = pad;
  // Row-major (the last dim fastest) is the default, spelled without `order` (Layout.h's
  // "printed only when given" means when not row-major): one spelling, so that equal layouts
  // compare equal.
  bool row_major = true;
  for (size_t i = 0; i < order.size(); ++i) row_major = row_major && order[i] == static_cast<int64_t>(order.size() - 1 - i);
  if (!row_major) l.order = std::move(order);
  return l;
}

const char* layout_kind_name(Layout::Kind k) {
  switch (k) {
    case Layout::Kind::None: return "none";
    case Layout::Kind::Replicated: return "replicated";
    case Layout::Kind::Blocked: return "blocked";
    case Layout::Kind::Mma: return "mma";
    case Layout::Kind::DotOperand: return "dot_operand";
    case Layout::Kind::Slice: return "slice";
    case Layout::Kind::Shared: return "shared";
    case Layout::Kind::Permuted: return "permuted";
  }
  return "none";
}

Layout::Kind layout_kind_from_name(const std::string& s) {
  for (Layout::Kind k : {Layout::Kind::Replicated, Layout::Kind::Blocked, Layout::Kind::Mma,
                         Layout::Kind::DotOperand, Layout::Kind::Slice, Layout::Kind::Shared, Layout::Kind::Permuted})
    if (s == layout_kind_name(k)) return k;
  return Layout::Kind::None;
}

namespace {

std::string list(const std::vector<int64_t>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

// Saturates at INT64_MAX instead of wrapping (the counts are checked after).
int64_t product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v)
    if (__builtin_mul_overflow(p, x, &p)) return INT64_MAX;
  return p;
}

bool all_positive(const std::vector<int64_t>& v) {
  return std::all_of(v.begin(), v.end(), [](int64_t x) { return x >= 1; });
}

// "" when `extent` (-1: not static yet) is a multiple of `cover` (the pattern repeats over the
// tile) or divides it (a smaller dim, e.g. the size-1 dim of an expanded reduction: threads
// beyond it hold copies), else the misfit.
std::string divides(const char* what, int64_t cover, size_t dim, int64_t extent) {
  if (extent < 0 || (cover > 0 && (extent % cover == 0 || cover % extent == 0))) return "";
  return std::string(what) + " covers " + std::to_string(cover) + " elements along dim " + std::to_string(dim) +
         ", and the tile's " + std::to_string(extent) + " is neither a multiple nor a divisor of it";
}

// The rows and columns one repetition of an mma accumulator covers.
std::pair<int64_t, int64_t> mma_cover(const Layout& l) {
  if (l.version == 3) return {l.instr[0] * (l.warps[0] / 4), l.instr[1]};
  return {l.instr[0] * l.warps[0], l.instr[1] * l.warps[1]};
}

std::string mma_rules(const Layout& l) {
  if (l.version != 2 && l.version != 3)
    return "mma layout version must be 2 (mma.sync) or 3 (wgmma), got " + std::to_string(l.version);
  if (l.warps.size() != 2 || !all_positive(l.warps) || l.warps[0] > 32 || l.warps[1] > 32 || l.warps[0] * l.warps[1] > 32)
    return "mma layout warps must be two positive counts of at most 32 warps in all, got " + list(l.warps);
  if (l.instr.size() != 2) return "mma layout instr must be [m, n], got " + list(l.instr);
  if (l.version == 2 && l.instr != std::vector<int64_t>{16, 8})
    return "mma layout version 2 (mma.sync) has instr [16, 8], got " + list(l.instr);
  if (l.version == 3) {
    if (l.instr[0] != 64 || l.instr[1] < 8 || l.instr[1] > 256 || l.instr[1] % 8)
      return "mma layout version 3 (wgmma) has instr [64, N] with N a multiple of 8 up to 256, got " + list(l.instr);
    if (l.warps[0] % 4 || l.warps[1] != 1)
      return "mma layout version 3 (wgmma) spreads warpgroups of 4 warps along the rows: warps [4 * G, 1], got " +
             list(l.warps);
  }
  return "";
}

}  // namespace

std::string Layout::str() const {
  switch (kind) {
    case Kind::None: return "";
    case Kind::Replicated: return "replicated";
    case Kind::Blocked:
      return "blocked<per_thread = " + list(per_thread) + ", threads = " + list(threads) + ", warps = " + list(warps) +
             ", order = " + list(order) + ">";
    case Kind::Mma:
      return "mma<version = " + std::to_string(version) + ", warps = " + list(warps) + ", instr = " + list(instr) + ">";
    case Kind::DotOperand:
      return "dot_operand<operand = " + std::to_string(operand) + ", k_width = " + std::to_string(k_width) +
             ", parent = " + (parent ? parent->str() : "") + ">";
    case Kind::Slice:
      return "slice<dim = " + std::to_string(dim) + ", parent = " + (parent ? parent->str() : "") + ">";
    case Kind::Permuted:
      return "permuted<dims = " + list(dims) + ", parent = " + (parent ? parent->str() : "") + ">";
    case Kind::Shared:
      return "shared<swizzle = " + std::to_string(swizzle) + ", pad = " + std::to_string(pad) +
             (order.empty() ? std::string() : ", order = " + list(order)) + ">";
  }
  return "";
}

bool Layout::operator==(const Layout& o) const {
  if (kind != o.kind || per_thread != o.per_thread || threads != o.threads || warps != o.warps || order != o.order ||
      version != o.version || instr != o.instr || operand != o.operand || k_width != o.k_width || dim != o.dim ||
      dims != o.dims || swizzle != o.swizzle || pad != o.pad)
    return false;
  if (!parent || !o.parent) return !parent && !o.parent;
  return *parent == *o.parent;
}

namespace {

// Is `order` a permutation of 0..rank-1?
bool is_dims_permutation(std::vector<int64_t> order, size_t rank) {
  if (order.size() != rank) return false;
  std::sort(order.begin(), order.end());
  for (size_t d = 0; d < rank; ++d)
    if (order[d] != static_cast<int64_t>(d)) return false;
  return true;
}

}  // namespace

std::string layout_misfit(const Layout& l, const std::vector<int64_t>& shape) {
  const size_t rank = shape.size();
  switch (l.kind) {
    case Layout::Kind::None:
    case Layout::Kind::Replicated:
      return "";
    case Layout::Kind::Blocked: {
      for (const auto* v : {&l.per_thread, &l.threads, &l.warps, &l.order})
        if (v->size() != rank)
          return "blocked layout has " + std::to_string(v->size()) + " entries per field for a tile of rank " +
                 std::to_string(rank);
      if (!all_positive(l.per_thread) || !all_positive(l.threads) || !all_positive(l.warps))
        return "blocked layout counts must be positive";
      // Bounded before anything is multiplied: a warp has 32 threads, a program at most 32 warps,
      // and a thread at most kMaxLayoutPerThread elements per dim.
      for (size_t d = 0; d < rank; ++d)
        if (l.threads[d] > 32 || l.warps[d] > 32 || l.per_thread[d] > kMaxLayoutPerThread)
          return "blocked layout entries are at most 32 threads, 32 warps and " + std::to_string(kMaxLayoutPerThread) +
                 " elements per thread along a dim";
      if (product(l.warps) > 32) return "blocked layout warps " + list(l.warps) + " exceed the 32 warps of a program";
      if (product(l.threads) != 32)
        return "blocked layout threads " + list(l.threads) + " must multiply to a warp's 32, not " +
               std::to_string(product(l.threads));
      if (!is_dims_permutation(l.order, rank)) return "blocked layout order " + list(l.order) + " is not a permutation of the dims";
      for (size_t d = 0; d < rank; ++d)
        if (auto m = divides("blocked layout", l.per_thread[d] * l.threads[d] * l.warps[d], d, shape[d]); !m.empty())
          return m;
      return "";
    }
    case Layout::Kind::Mma: {
      if (auto m = mma_rules(l); !m.empty()) return m;
      // A tile of higher rank whose leading dims are 1 (a reshape's unit dims, for a store to
      // a view of that rank) is placed as its last two dims are.
      if (rank < 2) return "an mma layout is for 2-D tiles, not rank " + std::to_string(rank);
      for (size_t d = 0; d + 2 < rank; ++d)
        if (shape[d] != 1 && shape[d] >= 0)
          return "an mma layout on a tile of rank " + std::to_string(rank) + " needs its leading dims to be 1";
      auto [rows, cols] = mma_cover(l);
      if (auto m = divides("mma layout", rows, rank - 2, shape[rank - 2]); !m.empty()) return m;
      return divides("mma layout", cols, rank - 1, shape[rank - 1]);
    }
    case Layout::Kind::DotOperand: {
      if (!l.parent || (l.parent->kind != Layout::Kind::Mma && l.parent->kind != Layout::Kind::Blocked))
        return "a dot_operand layout's parent must be an mma or blocked layout (the dot result's), got " +
               (l.parent ? std::string(layout_kind_name(l.parent->kind)) : std::string("none"));
      if (l.operand != 0 && l.operand != 1) return "dot_operand operand must be 0 (A) or 1 (B), got " + std::to_string(l.operand);
      if (l.k_width < 1 || l.k_width > 16 || (l.k_width & (l.k_width - 1)))
        return "dot_operand k_width must be a power of two from 1 to 16, got " + std::to_string(l.k_width);
      if (rank != 2) return "a dot_operand layout is for 2-D tiles, not rank " + std::to_string(rank);
      if (l.parent->kind == Layout::Kind::Blocked) {
        // The parent is the result's layout: A shares its rows, B its columns.
        std::vector<int64_t> result = l.operand == 0 ? std::vector<int64_t>{shape[0], -1} : std::vector<int64_t>{-1, shape[1]};
        if (auto m = layout_misfit(*l.parent, result); !m.empty()) return "dot_operand's parent: " + m;
      } else if (auto m = mma_rules(*l.parent); !m.empty()) {
        return m;
      } else {
        // A's rows are the result's rows, B's columns the result's columns; k is split in
        // k_width-element steps.
        auto [rows, cols] = mma_cover(*l.parent);
        const size_t mn = l.operand == 0 ? 0 : 1, k = l.operand == 0 ? 1 : 0;
        if (auto m = divides("dot_operand's parent", l.operand == 0 ? rows : cols, mn, shape[mn]); !m.empty()) return m;
        if (auto m = divides("dot_operand's k_width", l.k_width, k, shape[k]); !m.empty()) return m;
      }
      return "";
    }
    case Layout::Kind::Slice: {
      if (!l.parent || l.parent->kind == Layout::Kind::Shared || l.parent->kind == Layout::Kind::None)
        return "a slice layout's parent must be a distributed layout";
      if (l.dim < 0 || l.dim > static_cast<int64_t>(rank))
        return "slice dim " + std::to_string(l.dim) + " is out of range for a tile of rank " + std::to_string(rank);
      std::vector<int64_t> parent_shape = shape;
      parent_shape.insert(parent_shape.begin() + l.dim, -1);
      if (auto m = layout_misfit(*l.parent, parent_shape); !m.empty()) return "slice parent: " + m;
      return "";
    }
    case Layout::Kind::Permuted: {
      // (A blocked parent permutes into a blocked layout: one spelling for one placement.)
      if (!l.parent || (l.parent->kind != Layout::Kind::Mma && l.parent->kind != Layout::Kind::DotOperand))
        return "a permuted layout's parent must be an mma or dot_operand layout, got " +
               (l.parent ? std::string(layout_kind_name(l.parent->kind)) : std::string("none"));
      if (!is_dims_permutation(l.dims, rank))
        return "permuted layout dims " + list(l.dims) + " is not a permutation of the tile's " + std::to_string(rank) + " dims";
      std::vector<int64_t> parent_shape(rank);
      for (size_t i = 0; i < rank; ++i) parent_shape[static_cast<size_t>(l.dims[i])] = shape[i];
      if (auto m = layout_misfit(*l.parent, parent_shape); !m.empty()) return "permuted parent: " + m;
      return "";
    }
    case Layout::Kind::Shared:
      if (l.swizzle != 0 && l.swizzle != 32 && l.swizzle != 64 && l.swizzle != 128)
        return "shared layout swizzle must be 0, 32, 64 or 128 bytes, got " + std::to_string(l.swizzle);
      if (l.pad < 0) return "shared layout pad must not be negative, got " + std::to_string(l.pad);
      if (l.swizzle && l.pad) return "a shared layout is swizzled or padded, not both";
      if (!l.order.empty() && !is_dims_permutation(l.order, rank))
        return "shared layout order " + list(l.order) + " is not a permutation of the tile's " + std::to_string(rank) +
               " dims";
      return "";
  }
  return "";
}

namespace {

using ThreadSet = std::vector<bool>;  // one flag per thread of the program

// Marks in `out` the threads of blocked layout `l` that hold a position of one repetition
// whose coordinate along each dim d is one of pos[d].
void blocked_holders(const Layout& l, const std::vector<std::vector<int64_t>>& pos, ThreadSet& out) {
  const size_t r = pos.size();
  std::vector<size_t> at(r, 0);
  for (;;) {
    int64_t lane = 0, warp = 0, lane_stride = 1, warp_stride = 1;
    for (int64_t d : l.order) {
      const int64_t c = pos[d][at[d]];
      lane += (c / l.per_thread[d]) % l.threads[d] * lane_stride;
      warp += c / (l.per_thread[d] * l.threads[d]) * warp_stride;
      lane_stride *= l.threads[d];
      warp_stride *= l.warps[d];
    }
    out[static_cast<size_t>(warp * 32 + lane)] = true;
    size_t d = 0;
    while (d < r && ++at[d] == pos[d].size()) at[d++] = 0;
    if (d == r) return;
  }
}

// Per dim of blocked layout `l`, the positions of one repetition that hold e[d]: e[d] mod cover
// when the tile is a multiple of the cover, and every position congruent to e[d] when the tile
// is smaller.
std::vector<int64_t> positions(const Layout& l, size_t d, int64_t extent, int64_t e) {
  const int64_t cover = l.per_thread[d] * l.threads[d] * l.warps[d];
  if (extent >= cover) return {e % cover};
  std::vector<int64_t> out;
  for (int64_t c = e; c < cover; c += extent) out.push_back(c);
  return out;
}

// The threads that hold element `e` (one index per dim of `shape`) in `l`; false when `l` is not
// a kind this can place.
bool holders(const Layout& l, const std::vector<int64_t>& shape, const std::vector<int64_t>& e, int num_warps,
             ThreadSet& out) {
  const size_t threads = static_cast<size_t>(32 * num_warps);
  if (l.kind == Layout::Kind::Replicated) {
    out.assign(threads, true);
    return true;
  }
  const Layout* b = l.kind == Layout::Kind::Slice ? l.parent.get() : &l;
  if (!b || b->kind != Layout::Kind::Blocked || product(b->warps) != num_warps) return false;
  // A slice's reduced dim: every thread along it holds the result, so the element is held by
  // the parent's holders of every position of one repetition along that dim: one position per
  // thread and warp along it is enough (the per-thread run only repeats them).
  const size_t rank = b->per_thread.size(), cut = l.kind == Layout::Kind::Slice ? static_cast<size_t>(l.dim) : rank;
  std::vector<std::vector<int64_t>> pos(rank);
  for (size_t d = 0, i = 0; d < rank; ++d) {
    if (d == cut) {
      for (int64_t k = 0; k < b->threads[d] * b->warps[d]; ++k) pos[d].push_back(k * b->per_thread[d]);
      continue;
    }
    pos[d] = positions(*b, d, shape[i], e[i]);
    ++i;
  }
  out.assign(threads, false);
  blocked_holders(*b, pos, out);
  return true;
}

}  // namespace

bool layouts_place_alike(const Layout& a, const Layout& b, const std::vector<int64_t>& shape, int num_warps) {
  if (a == b) return true;
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  if (numel > 4096 || num_warps < 1 || num_warps > 32 || !layout_misfit(a, shape).empty() ||
      !layout_misfit(b, shape).empty())
    return false;
  // Enumerating one repetition of each layout must stay small.
  for (const Layout* l : {&a, &b}) {
    const Layout* blocked = l->kind == Layout::Kind::Slice ? l->parent.get() : l;
    if (blocked && blocked->kind == Layout::Kind::Blocked)
      for (size_t d = 0; d < blocked->per_thread.size(); ++d)
        if (blocked->per_thread[d] * blocked->threads[d] * blocked->warps[d] > 4096) return false;
  }
  std::vector<int64_t> e(shape.size(), 0);
  ThreadSet ha, hb;
  for (int64_t i = 0; i < numel; ++i) {
    int64_t rest = i;
    for (size_t d = shape.size(); d-- > 0;) e[d] = rest % shape[d], rest /= shape[d];
    if (!holders(a, shape, e, num_warps, ha) || !holders(b, shape, e, num_warps, hb) || ha != hb) return false;
  }
  return true;
}

}  // namespace tessera
