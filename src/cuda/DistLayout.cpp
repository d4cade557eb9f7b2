// Placements of distributed layouts (DistLayout.h).
#include "cuda/DistLayout.h"

#include <algorithm>
#include <cstdint>
#include <unordered_map>

namespace tessera::cudagen {

namespace {

int log2_exact(int64_t x) {
  int b = 0;
  while ((int64_t{1} << b) < x) ++b;
  return (int64_t{1} << b) == x ? b : -1;
}

std::string num(int64_t v) { return std::to_string(v); }

// A digit of `radix` values feeding dim `dim` with coefficient `coef`, cut to the tile: a digit
// whose values all fall past the dim's extent wraps onto the first values (the layout covers
// more than the tile, and the copies need no slot of their own).
void add_digit(Dist& d, int dim, int64_t coef, int64_t radix) {
  if (radix <= 1) return;
  const int64_t S = d.shape[dim];
  if (coef >= S) return;
  if (coef * radix > S) {
    if (S % coef != 0) throw NotLowerable{"a layout that wraps a dim of " + num(S) + " unevenly"};
    radix = S / coef;
  }
  d.digits.push_back({radix, dim, coef});
}

Dist::Bit bit(const Dist& d, int dim, int64_t coef) {
  if (coef >= d.shape[dim]) return {};  // past the extent: these threads hold copies
  return {dim, coef};
}

void blocked(Dist& d, const Layout& l) {
  const int R = d.rank();
  if (static_cast<int>(l.per_thread.size()) != R || static_cast<int>(l.order.size()) != R)
    throw NotLowerable{"a blocked layout of another rank than its tile"};
  for (int64_t o : l.order) add_digit(d, static_cast<int>(o), 1, l.per_thread[o]);
  for (int64_t o : l.order) {
    const int64_t C = l.per_thread[o] * l.threads[o] * l.warps[o];
    if (d.shape[o] > C) {
      if (d.shape[o] % C != 0) throw NotLowerable{"a blocked layout that does not divide its tile"};
      add_digit(d, static_cast<int>(o), C, d.shape[o] / C);
    }
  }
  int lb = 0, wb = 0;
  for (int64_t o : l.order) {
    const int tb = log2_exact(l.threads[o]), wbits = log2_exact(l.warps[o]);
    if (tb < 0 || wbits < 0) throw NotLowerable{"a blocked layout with threads or warps not powers of two"};
    // (More lanes or warps than the program has: checked before the bits are placed, which
    // would index past them; found by review: a written warps = [8, 1] in a 4-warp program.)
    if (lb + tb > static_cast<int>(d.lane_bits.size()) || wb + wbits > static_cast<int>(d.warp_bits.size()))
      throw NotLowerable{"a blocked layout whose threads or warps are not the program's"};
    for (int j = 0; j < tb; ++j) d.lane_bits.at(lb++) = bit(d, static_cast<int>(o), l.per_thread[o] << j);
    for (int j = 0; j < wbits; ++j)
      d.warp_bits.at(wb++) = bit(d, static_cast<int>(o), l.per_thread[o] * l.threads[o] << j);
  }
  if (lb != 5 || wb != static_cast<int>(d.warp_bits.size()))
    throw NotLowerable{"a blocked layout whose threads or warps are not the program's"};
}

// mma.sync (v2, m16n8) accumulators and 16-bit operands; warp w is (w / wn % wm, w % wn) of the
// warp grid [wm, wn]: a grid of fewer warps than the program's (a tile smaller than the
// program's warps would cover) leaves the top warp bits copies. A wgmma (v3, m64nN) accumulator is the same placement with the warps all
// along M (wgmma.cuh: warp v of a warpgroup holds the m16n8 fragments of rows 16v .. 16v + 15,
// over the N / 8 column blocks), and so is its register A operand (the RS form).
void mma_v2(Dist& d, const Layout& acc, int operand) {
  if (acc.version == 3) {
    if (acc.warps.at(1) != 1 || acc.instr.at(0) != 64) throw NotLowerable{"a wgmma layout with warps along N"};
    if (operand == 1) throw NotLowerable{"a wgmma B operand in registers"};
  } else if (acc.version != 2) {
    throw NotLowerable{"an mma layout of version " + num(acc.version)};
  }
  const int64_t wm = acc.warps.at(0), wn = acc.warps.at(1);
  const int wmb = log2_exact(wm), wnb = log2_exact(wn);
  if (wmb < 0 || wnb < 0 || wmb + wnb > static_cast<int>(d.warp_bits.size()) ||
      (acc.version == 3 && wmb + wnb != static_cast<int>(d.warp_bits.size())))
    throw NotLowerable{"an mma warp grid of more warps than the program's"};
  const int64_t R0 = d.shape[0], R1 = d.shape[1];
  if (operand < 0) {  // the accumulator [M, N]
    add_digit(d, 1, 1, 2);
    add_digit(d, 0, 8, 2);
    add_digit(d, 1, 8 * wn, R1 / (8 * wn));
    add_digit(d, 0, 16 * wm, R0 / (16 * wm));
    d.lane_bits = {bit(d, 1, 2), bit(d, 1, 4), bit(d, 0, 1), bit(d, 0, 2), bit(d, 0, 4)};
    for (int j = 0; j < wnb; ++j) d.warp_bits[j] = bit(d, 1, int64_t{8} << j);
    for (int j = 0; j < wmb; ++j) d.warp_bits[wnb + j] = bit(d, 0, int64_t{16} << j);
  } else if (operand == 0) {  // A [M, K]
    if (R1 % 16 != 0) throw NotLowerable{"an mma A operand whose K is not a multiple of 16"};
    add_digit(d, 1, 1, 2);
    add_digit(d, 0, 8, 2);
    add_digit(d, 1, 8, 2);
    add_digit(d, 1, 16, R1 / 16);
    add_digit(d, 0, 16 * wm, R0 / (16 * wm));
    d.lane_bits = {bit(d, 1, 2), bit(d, 1, 4), bit(d, 0, 1), bit(d, 0, 2), bit(d, 0, 4)};
    for (int j = 0; j < wmb; ++j) d.warp_bits[wnb + j] = bit(d, 0, int64_t{16} << j);
  } else {  // B [K, N]
    if (R0 % 16 != 0) throw NotLowerable{"an mma B operand whose K is not a multiple of 16"};
    add_digit(d, 0, 1, 2);
    add_digit(d, 0, 8, 2);
    add_digit(d, 0, 16, R0 / 16);
    add_digit(d, 1, 8 * wn, R1 / (8 * wn));
    d.lane_bits = {bit(d, 0, 2), bit(d, 0, 4), bit(d, 1, 1), bit(d, 1, 2), bit(d, 1, 4)};
    for (int j = 0; j < wnb; ++j) d.warp_bits[j] = bit(d, 1, int64_t{8} << j);
  }
}

// An operand of a dot computed with FMAs (its parent, the accumulator's layout, is blocked): a
// thread holds the rows of A [M, K] (the columns of B [K, N]) its accumulator slots need, every
// k of them: the parent's placement of M (N), the whole of K in slots (A: k fastest, so that a
// row-major A loads in vectors; B: k slowest, after N's digits), and the lanes and warps that
// the parent spreads N (M) over hold copies.
Dist fma_operand(const Layout& l, const std::vector<int64_t>& shape, int warps) {
  const Layout& p = *l.parent;
  if (shape.size() != 2 || p.per_thread.size() != 2) throw NotLowerable{"an FMA dot operand of rank other than 2"};
  const int keep = l.operand == 0 ? 0 : 1, k = 1 - keep;
  std::vector<int64_t> ps = shape;
  ps[k] = p.per_thread[k] * p.threads[k] * p.warps[k];  // the other dim, as the parent covers it once
  Dist pd = make_dist(p, ps, warps), d;
  d.shape = shape;
  if (keep == 0) add_digit(d, k, 1, shape[k]);
  for (const Dist::Digit& g : pd.digits)
    if (g.dim == keep) d.digits.push_back(g);
  if (keep == 1) add_digit(d, k, 1, shape[k]);
  auto only_keep = [&](std::vector<Dist::Bit> bits) {
    for (Dist::Bit& b : bits)
      if (b.dim != keep) b = {};
    return bits;
  };
  d.lane_bits = only_keep(pd.lane_bits);
  d.warp_bits = only_keep(pd.warp_bits);
  return d;
}

}  // namespace

int64_t Dist::slots() const {
  int64_t n = 1;
  for (const Digit& g : digits) n *= g.radix;
  return n;
}

std::vector<int64_t> Dist::coord(int64_t s, int lane, int warp) const {
  std::vector<int64_t> c;
  coord_into(s, lane, warp, c);
  return c;
}

void Dist::coord_into(int64_t s, int lane, int warp, std::vector<int64_t>& c) const {
  c.assign(shape.size(), 0);
  for (const Digit& g : digits) {
    c[g.dim] += s % g.radix * g.coef;
    s /= g.radix;
  }
  for (size_t b = 0; b < lane_bits.size(); ++b)
    if (lane_bits[b].dim >= 0 && (lane >> b & 1)) c[lane_bits[b].dim] += lane_bits[b].coef;
  for (size_t b = 0; b < warp_bits.size(); ++b)
    if (warp_bits[b].dim >= 0 && (warp >> b & 1)) c[warp_bits[b].dim] += warp_bits[b].coef;
}

std::string Dist::const_expr(int d, const std::string& s) const {
  std::string e;
  int64_t stride = 1;
  for (const Digit& g : digits) {
    if (g.dim == d) {
      std::string v = stride == 1 ? s : "(" + s + ") / " + num(stride);
      v = "((" + v + ") % " + num(g.radix) + ")";
      e += (e.empty() ? "" : " + ") + (g.coef == 1 ? v : v + " * " + num(g.coef));
    }
    stride *= g.radix;
  }
  return e.empty() ? "0" : "(" + e + ")";
}

static std::string bit_terms(const std::vector<Dist::Bit>& bits, int d, const std::string& var) {
  std::string e;
  for (size_t b = 0; b < bits.size();) {
    if (bits[b].dim != d) {
      ++b;
      continue;
    }
    // A run of bits b.. whose coefficients double: one shift, mask and multiply.
    size_t n = 1;
    while (b + n < bits.size() && bits[b + n].dim == d && bits[b + n].coef == bits[b].coef << n) ++n;
    std::string t = "((" + var + " >> " + num(static_cast<int64_t>(b)) + ") & " + num((int64_t{1} << n) - 1) + ")";
    if (bits[b].coef != 1) t += " * " + num(bits[b].coef);
    e += (e.empty() ? "" : " + ") + t;
    b += n;
  }
  return e;
}

std::string Dist::thread_expr(int d) const {
  std::string l = bit_terms(lane_bits, d, "tsr_lane"), w = bit_terms(warp_bits, d, "tsr_warp");
  if (l.empty() && w.empty()) return "0";
  return "(" + l + (l.empty() || w.empty() ? "" : " + ") + w + ")";
}

std::string Dist::owner_expr() const {
  int64_t lm = 0, wm = 0;
  for (size_t b = 0; b < lane_bits.size(); ++b)
    if (lane_bits[b].dim < 0) lm |= int64_t{1} << b;
  for (size_t b = 0; b < warp_bits.size(); ++b)
    if (warp_bits[b].dim < 0) wm |= int64_t{1} << b;
  std::string e;
  if (lm) e = "(tsr_lane & " + num(lm) + ") == 0";
  if (wm) e += (e.empty() ? "" : " && ") + std::string("(tsr_warp & ") + num(wm) + ") == 0";
  return e.empty() ? "true" : "(" + e + ")";
}

std::string Dist::flat_expr(const std::string& s) const {
  std::string e;
  int64_t stride = 1;
  for (int d = rank() - 1; d >= 0; --d) {
    std::string c = "(" + const_expr(d, s) + " + " + thread_expr(d) + ")";
    e = (e.empty() ? "" : e + " + ") + (stride == 1 ? c : c + " * " + num(stride));
    stride *= shape[d];
  }
  return e.empty() ? "0" : "(" + e + ")";
}

Dist make_dist(const Layout& l, const std::vector<int64_t>& shape, int warps) {
  const int wb = log2_exact(warps);
  if (wb < 0) throw NotLowerable{"a program of " + num(warps) + " warps (not a power of two)"};
  Dist d;
  d.shape = shape;
  d.lane_bits.assign(5, {});
  d.warp_bits.assign(wb, {});
  for (int64_t e : shape)
    if (e < 1) throw NotLowerable{"a tile without a static shape"};
  switch (l.kind) {
    case Layout::Kind::Replicated:
      for (int i = d.rank() - 1; i >= 0; --i) add_digit(d, i, 1, shape[i]);
      break;
    case Layout::Kind::Blocked: blocked(d, l); break;
    case Layout::Kind::Mma:
      if (d.rank() > 2) {  // leading unit dims (ir/Layout.h): the last two dims' placement
        const int lead = d.rank() - 2;
        for (int i = 0; i < lead; ++i)
          if (shape[i] != 1) throw NotLowerable{"an mma layout on a tile whose leading dims are not 1"};
        Dist two = make_dist(l, {shape[lead], shape[lead + 1]}, warps);
        for (Dist::Digit g : two.digits) d.digits.push_back({g.radix, g.dim + lead, g.coef});
        auto shift = [&](std::vector<Dist::Bit>& out, const std::vector<Dist::Bit>& in) {
          for (size_t b = 0; b < in.size(); ++b) out[b] = in[b].dim < 0 ? in[b] : Dist::Bit{in[b].dim + lead, in[b].coef};
        };
        shift(d.lane_bits, two.lane_bits);
        shift(d.warp_bits, two.warp_bits);
        break;
      }
      if (d.rank() != 2) throw NotLowerable{"an mma layout on a tile of rank other than 2"};
      mma_v2(d, l, -1);
      break;
    case Layout::Kind::DotOperand:
      if (l.parent && l.parent->kind == Layout::Kind::Blocked) return fma_operand(l, shape, warps);
      if (!l.parent || l.parent->kind != Layout::Kind::Mma) throw NotLowerable{"a dot operand of another parent"};
      if (l.k_width != 2)
        throw NotLowerable{"an mma operand in registers of other than 16-bit elements (an f8 operand is read from a "
                           "K-major shared tile: A [M, K] as loaded, B [N, K] through a permute)"};
      if (d.rank() != 2) throw NotLowerable{"a dot operand of rank other than 2"};
      mma_v2(d, *l.parent, static_cast<int>(l.operand));
      break;
    case Layout::Kind::Slice: {
      std::vector<int64_t> ps = shape;
      ps.insert(ps.begin() + l.dim, 1);
      Dist p = make_dist(*l.parent, ps, warps);
      d.digits.clear();
      for (Dist::Digit g : p.digits) {
        if (g.dim == l.dim) continue;
        if (g.dim > l.dim) --g.dim;
        d.digits.push_back(g);
      }
      auto cut = [&](std::vector<Dist::Bit>& out, const std::vector<Dist::Bit>& in) {
        for (size_t b = 0; b < in.size(); ++b) {
          Dist::Bit x = in[b];
          if (x.dim == l.dim) x = {};
          else if (x.dim > l.dim) --x.dim;
          out[b] = x;
        }
      };
      cut(d.lane_bits, p.lane_bits);
      cut(d.warp_bits, p.warp_bits);
      break;
    }
    case Layout::Kind::Permuted: {
      // The parent's placement of the unpermuted tile, each digit and bit along its dim's place
      // in the result (parent dim dims[i] is result dim i).
      const size_t r = shape.size();
      if (l.dims.size() != r) throw NotLowerable{"a permuted layout of another rank"};
      std::vector<int64_t> ps(r);
      std::vector<int> where(r);
      for (size_t i = 0; i < r; ++i) {
        ps[static_cast<size_t>(l.dims[i])] = shape[i];
        where[static_cast<size_t>(l.dims[i])] = static_cast<int>(i);
      }
      Dist p = make_dist(*l.parent, ps, warps);
      d.digits.clear();
      for (Dist::Digit g : p.digits) d.digits.push_back({g.radix, where[static_cast<size_t>(g.dim)], g.coef});
      auto move = [&](std::vector<Dist::Bit>& out, const std::vector<Dist::Bit>& in) {
        for (size_t b = 0; b < in.size(); ++b) out[b] = in[b].dim < 0 ? in[b] : Dist::Bit{where[static_cast<size_t>(in[b].dim)], in[b].coef};
      };
      move(d.lane_bits, p.lane_bits);
      move(d.warp_bits, p.warp_bits);
      break;
    }
    default: throw NotLowerable{"tiles in shared memory or without a layout"};
  }
  // A thread's elements are a register array the printed code unrolls over: a replicated
  // [3000] tile (every thread holds all of it) kept NVRTC busy for minutes, and [1000] took
  // 18 s. Past kMaxSlots the planning emitter makes the kernel.
  if (d.slots() > kMaxSlots)
    throw NotLowerable{"a tile of " + num(d.slots()) + " elements a thread (more than " + num(kMaxSlots) + ")"};
  return d;
}

std::vector<int64_t> same_thread_slots(const Dist& from, const Dist& to, int threads,
                                       const std::function<std::vector<int64_t>(const std::vector<int64_t>&)>& src_coord) {
  auto flat = [&](const std::vector<int64_t>& c) {
    int64_t f = 0;
    for (size_t d = 0; d < c.size(); ++d) f = f * from.shape[d] + c[d];
    return f;
  };
  // Threads that differ only in bits neither layout places anything by (copies) hold the same
  // elements in both: one of each such group is checked.
  int64_t relevant = 0;
  for (const Dist* D : {&from, &to}) {
    for (size_t b = 0; b < D->lane_bits.size(); ++b)
      if (D->lane_bits[b].dim >= 0) relevant |= int64_t{1} << b;
    for (size_t b = 0; b < D->warp_bits.size(); ++b)
      if (D->warp_bits[b].dim >= 0) relevant |= int64_t{1} << (5 + b);
  }
  std::vector<int64_t> out(to.slots(), -1), c;
  std::vector<std::pair<int64_t, int64_t>> held;  // (flat index, slot), sorted
  for (int th = 0; th < threads; ++th) {
    if (th & ~relevant) continue;
    held.clear();
    for (int64_t s = 0; s < from.slots(); ++s) {
      from.coord_into(s, th & 31, th >> 5, c);
      held.emplace_back(flat(c), s);
    }
    std::sort(held.begin(), held.end());
    for (int64_t s = 0; s < to.slots(); ++s) {
      to.coord_into(s, th & 31, th >> 5, c);
      const int64_t f = flat(src_coord(c));
      auto it = std::lower_bound(held.begin(), held.end(), std::pair<int64_t, int64_t>{f, INT64_MIN});
      if (it == held.end() || it->first != f) return {};
      if (out[s] < 0) out[s] = it->second;
      else if (out[s] != it->second) return {};
    }
  }
  return out;
}

}  // namespace tessera::cudagen
