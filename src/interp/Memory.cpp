// Memory ops on views: load_tile/store_tile (padding / dropping out-of-bounds elements),
// gather/scatter with masks, atomics. Tensors hold native bit patterns; values cross over
// exactly (they are already rounded/wrapped to the view's element type).
#include <cmath>
#include <cstring>

#include "interp/Exec.h"
#include "support/Float.h"

namespace tessera::interp {

namespace {

[[noreturn]] void fail(const Op& op, const std::string& msg) { throw TesseraError(op.loc, msg); }

inline double read_f(const Tensor& t, int64_t off) {
  if (t.dtype == ScalarKind::F32) {
    float v;
    std::memcpy(&v, t.data.data() + off * 4, 4);
    return v;
  }
  return t.get(off);
}

inline void write_f(Tensor& t, int64_t off, double v) {
  if (t.dtype == ScalarKind::F32) {
    float f = static_cast<float>(v);
    std::memcpy(t.data.data() + off * 4, &f, 4);
    return;
  }
  t.set(off, v);
}

// Element `j` of value `v` written to / read from tensor offset `off`.
inline void store_elem(Tensor& t, int64_t off, const RValue& v, int64_t j) {
  if (v.floats()) write_f(t, off, v.f[j]);
  else t.set_int(off, v.i[j]);
}
inline void load_elem(RValue& r, int64_t j, const Tensor& t, int64_t off) {
  if (r.floats()) r.f[j] = read_f(t, off);
  else r.i[j] = t.get_int(off);
}

void check_elem(const Op& op, const ViewArg& v, const RValue& val) {
  if (val.elem != v.tensor->dtype)
    fail(op, std::string(op.name()) + " of " + std::string(scalar_name(val.elem)) +
                 " values into view '" + v.param->name + "' of " +
                 std::string(scalar_name(v.tensor->dtype)));
}

int64_t scalar_index(const Machine& m, const Op& op, size_t i) {
  const RValue& v = m.val(op, op.operand(i));
  if (v.floats() || v.numel() != 1)
    fail(op, std::string(op.name()) + " tile index operand " + std::to_string(i) +
                 " must be an integer scalar");
  return v.i[0];
}

// Visit the tile at tile index (operands first..first+rank-1) of view v, row by row: fn(tile
// flat index of the row start, view offset of the row start, first and last+1 in-bounds column).
// Rows entirely out of bounds are skipped.
template <class Fn>
void for_each_tile_row(const Machine& m, const Op& op, size_t first, const ViewArg& v,
                       const std::vector<int64_t>& tshape, Fn fn) {
  size_t rank = v.shape.size();
  if (op.operands.size() < first + rank || tshape.size() != rank)
    fail(op, std::string(op.name()) + " needs one tile index per dim of view '" + v.param->name +
                 "' (rank " + std::to_string(rank) + ")");
  if (rank == 0) {
    fn(0, 0, 0, 1);
    return;
  }
  std::vector<int64_t> origin(rank);
  for (size_t d = 0; d < rank; ++d) origin[d] = scalar_index(m, op, first + d) * tshape[d];
  int64_t cols = tshape[rank - 1];
  int64_t lo = std::max<int64_t>(0, -origin[rank - 1]);
  int64_t hi = std::min<int64_t>(cols, v.shape[rank - 1] - origin[rank - 1]);
  if (lo >= hi) return;
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < rank; ++d) rows *= tshape[d];
  std::vector<int64_t> c(rank - 1, 0);
  for (int64_t row = 0; row < rows; ++row) {
    bool in = true;
    int64_t off = origin[rank - 1] * v.strides[rank - 1];
    for (size_t d = 0; d + 1 < rank; ++d) {
      int64_t g = origin[d] + c[d];
      in &= g >= 0 && g < v.shape[d];
      off += g * v.strides[d];
    }
    if (in) fn(row * cols, off, lo, hi);
    for (size_t d = rank - 1; d-- > 0;) {
      if (++c[d] < tshape[d]) break;
      c[d] = 0;
    }
  }
}

void fill_pad(const Op& op, RValue& r) {
  const Attr* a = op.find_attr("pad");
  if (!a) return;  // already zero
  if (auto* iv = std::get_if<int64_t>(a)) {
    for (int64_t j = 0; j < r.numel(); ++j) r.set_i(j, *iv);
  } else if (auto* dv = std::get_if<double>(a)) {
    if (!r.floats() && !std::isfinite(*dv))
      fail(op, std::string(op.name()) + " pad " + attr_str(*a) + " needs a float view");
    for (int64_t j = 0; j < r.numel(); ++j) r.set_f(j, *dv);
  } else {
    fail(op, std::string(op.name()) + " pad must be a number");
  }
}

// The per-element indices of gather / scatter / atomic ops: `rank` index operands starting at
// `first`, all scalars or all tiles of one shape, then an optional i1 mask of that shape.
struct Lanes {
  int64_t n = 1;
  std::vector<const RValue*> idx;
  const RValue* mask = nullptr;
  std::vector<int64_t> shape;  // of the indices ({} for scalars)

  bool on(int64_t j) const { return !mask || mask->i[mask->scalar ? 0 : j] != 0; }
  // The view offset of lane j, or -1 when out of bounds; `coords` receives the indices.
  int64_t offset(const ViewArg& v, int64_t j, std::vector<int64_t>& coords) const {
    int64_t off = 0;
    bool in = true;
    for (size_t d = 0; d < idx.size(); ++d) {
      int64_t g = idx[d]->i[idx[d]->scalar ? 0 : j];
      coords[d] = g;
      in &= g >= 0 && g < v.shape[d];
      off += g * v.strides[d];
    }
    return in ? off : -1;
  }
};

Lanes lanes(const Machine& m, const Op& op, size_t first, const ViewArg& v, bool allow_mask) {
  size_t rank = v.shape.size();
  size_t extra = op.operands.size() - std::min(op.operands.size(), first + rank);
  if (op.operands.size() < first + rank || extra > (allow_mask ? 1u : 0u))
    fail(op, std::string(op.name()) + " needs one index per dim of view '" + v.param->name +
                 "' (rank " + std::to_string(rank) + ")" + (allow_mask ? " and an optional mask" : ""));
  Lanes l;
  for (size_t d = 0; d < rank; ++d) {
    const RValue& x = m.val(op, op.operand(first + d));
    if (x.floats()) fail(op, std::string(op.name()) + " indices must be integers");
    if (d == 0) {
      l.shape = x.shape;
      l.n = x.numel();
    } else if (x.shape != l.shape) {
      fail(op, std::string(op.name()) + " indices must all have one shape");
    }
    l.idx.push_back(&x);
  }
  if (extra) {
    l.mask = &m.val(op, op.operand(first + rank));
    if (l.mask->elem != ScalarKind::I1 || l.mask->numel() != l.n)
      fail(op, std::string(op.name()) + " mask must be i1 of the indices' shape");
  }
  return l;
}

[[noreturn]] void out_of_bounds(const Op& op, const ViewArg& v, const std::vector<int64_t>& c) {
  fail(op, std::string(op.name()) + " index " + coords_str(c) + " is out of bounds for view '" +
               v.param->name + "' of shape " + dims_str(v.shape));
}

RValue result_value(const Op& op) {
  if (op.results.size() != 1 || !op.result()->type.is_value())
    fail(op, std::string(op.name()) + " must have one scalar or tile result");
  return RValue::of_type(op.result()->type);
}

// The value operand's element j (a scalar value applies to every lane).
inline int64_t lane_of(const RValue& v, int64_t j) { return v.scalar && v.numel() == 1 ? 0 : j; }

void check_lanes(const Op& op, const RValue& val, const Lanes& l) {
  if (val.numel() != l.n && val.numel() != 1)
    fail(op, std::string(op.name()) + " value has " + std::to_string(val.numel()) +
                 " elements for " + std::to_string(l.n) + " indices");
}

void atomic(Machine& m, const Op& op, ViewArg& v) {
  const std::string& kind = op.attr_string("kind");
  if (kind != "add" && kind != "max" && kind != "min")
    fail(op, "atomic kind '" + kind + "' is not one of add, max, min");
  const RValue& val = m.val(op, op.operand(1));
  check_elem(op, v, val);
  Lanes l = lanes(m, op, 2, v, true);
  check_lanes(op, val, l);
  RValue r = result_value(op);
  if (r.numel() != l.n || r.elem != val.elem) fail(op, "atomic result must be shaped like its indices");
  std::vector<int64_t> c(v.shape.size());
  Tensor& t = *v.tensor;
  ScalarKind e = val.elem;
  bool uns = is_unsigned_int(e);
  for (int64_t j = 0; j < l.n; ++j) {
    if (!l.on(j)) continue;
    int64_t off = l.offset(v, j, c);
    if (off < 0) out_of_bounds(op, v, c);
    int64_t k = lane_of(val, j);
    if (val.floats()) {
      double old = read_f(t, off), x = val.f[k];
      r.f[j] = old;
      double nv = kind == "add" ? old + x : kind == "max" ? fmax_nan(old, x) : fmin_nan(old, x);
      write_f(t, off, round_to_float(e, nv));
    } else {
      int64_t old = t.get_int(off), x = val.i[k];
      r.i[j] = old;
      int64_t nv;
      if (kind == "add") nv = static_cast<int64_t>(static_cast<uint64_t>(old) + static_cast<uint64_t>(x));
      else if (kind == "max") nv = (uns ? static_cast<uint64_t>(x) > static_cast<uint64_t>(old) : x > old) ? x : old;
      else nv = (uns ? static_cast<uint64_t>(x) < static_cast<uint64_t>(old) : x < old) ? x : old;
      t.set_int(off, nv);
    }
  }
  m.set(op.result(), std::move(r));
}

void atomic_cas(Machine& m, const Op& op, ViewArg& v) {
  const RValue& cmp = m.val(op, op.operand(1));
  const RValue& val = m.val(op, op.operand(2));
  check_elem(op, v, cmp);
  check_elem(op, v, val);
  Lanes l = lanes(m, op, 3, v, false);
  check_lanes(op, cmp, l);
  check_lanes(op, val, l);
  RValue r = result_value(op);
  if (r.numel() != l.n || r.elem != val.elem) fail(op, "atomic_cas result must be shaped like its indices");
  std::vector<int64_t> c(v.shape.size());
  Tensor& t = *v.tensor;
  for (int64_t j = 0; j < l.n; ++j) {
    int64_t off = l.offset(v, j, c);
    if (off < 0) out_of_bounds(op, v, c);
    int64_t kc = lane_of(cmp, j), kv = lane_of(val, j);
    load_elem(r, j, t, off);
    // Compare bit patterns, as the hardware does (so -0 != +0 and a NaN matches itself).
    bool eq = r.floats() ? float_to_bits(r.elem, r.f[j]) == float_to_bits(r.elem, cmp.f[kc])
                         : r.i[j] == cmp.i[kc];
    if (eq) store_elem(t, off, val, kv);
  }
  m.set(op.result(), std::move(r));
}

}  // namespace

RValue load_view_tile(Machine& m, const Op& op, size_t view_i, size_t first, const std::vector<int64_t>& shape) {
  ViewArg& v = m.view(op, op.operand(view_i));
  RValue r = RValue::make(v.tensor->dtype, false, shape);
  fill_pad(op, r);
  const Tensor& t = *v.tensor;
  for_each_tile_row(m, op, first, v, r.shape, [&](int64_t row, int64_t off, int64_t lo, int64_t hi) {
    for (int64_t c = lo; c < hi; ++c) load_elem(r, row + c, t, off + c);
  });
  return r;
}

void exec_memory(Machine& m, const Op& op) {
  ViewArg& v = m.view(op, op.operand(0));
  switch (op.kind) {
    case OpKind::LoadTile: {
      RValue r = result_value(op);
      if (r.elem != v.tensor->dtype) fail(op, "load_tile result element type differs from the view's");
      m.set(op.result(), load_view_tile(m, op, 0, 1, r.shape));
      return;
    }
    case OpKind::StoreTile: {
      const RValue& val = m.val(op, op.operand(1));
      check_elem(op, v, val);
      Tensor& t = *v.tensor;
      for_each_tile_row(m, op, 2, v, val.shape, [&](int64_t row, int64_t off, int64_t lo, int64_t hi) {
        for (int64_t c = lo; c < hi; ++c) store_elem(t, off + c, val, row + c);
      });
      return;
    }
    case OpKind::Gather: {
      Lanes l = lanes(m, op, 1, v, true);
      RValue r = result_value(op);
      if (r.numel() != l.n || r.elem != v.tensor->dtype)
        fail(op, "gather result must be shaped like its indices, of the view's element type");
      fill_pad(op, r);
      std::vector<int64_t> c(v.shape.size());
      for (int64_t j = 0; j < l.n; ++j) {
        if (!l.on(j)) continue;
        int64_t off = l.offset(v, j, c);
        if (off >= 0) load_elem(r, j, *v.tensor, off);
      }
      m.set(op.result(), std::move(r));
      return;
    }
    case OpKind::Scatter: {
      const RValue& val = m.val(op, op.operand(1));
      check_elem(op, v, val);
      Lanes l = lanes(m, op, 2, v, true);
      check_lanes(op, val, l);
      std::vector<int64_t> c(v.shape.size());
      // Check every lane first so that a failing scatter leaves the view untouched.
      for (int64_t j = 0; j < l.n; ++j)
        if (l.on(j) && l.offset(v, j, c) < 0) out_of_bounds(op, v, c);
      for (int64_t j = 0; j < l.n; ++j)  // row-major order: the last duplicate wins
        if (l.on(j)) store_elem(*v.tensor, l.offset(v, j, c), val, lane_of(val, j));
      return;
    }
    case OpKind::Atomic: atomic(m, op, v); return;
    case OpKind::AtomicCas: atomic_cas(m, op, v); return;
    default: fail(op, "interpreter: unexpected op " + std::string(op.name()));
  }
}

}  // namespace tessera::interp
