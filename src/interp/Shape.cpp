// Tile creation and shape ops: splat, arange, broadcast, expand_dims, reshape, permute,
// extract_tile, insert_tile. All are pure data movement (no rounding).
#include <numeric>

#include "interp/Exec.h"

namespace tessera::interp {

namespace {

[[noreturn]] void fail(const Op& op, const std::string& msg) { throw TesseraError(op.loc, msg); }

std::vector<int64_t> strides_of(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) s[d - 1] = s[d] * shape[d];
  return s;
}

// Copy element src[from] to dst[to] regardless of the data kind.
inline void copy_elem(RValue& dst, int64_t to, const RValue& src, int64_t from) {
  if (src.floats()) dst.f[to] = src.f[from];
  else dst.i[to] = src.i[from];
}

// Visit every multi-index of `shape` in row-major order with its flat index.
template <class Fn>
void for_each_index(const std::vector<int64_t>& shape, Fn fn) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<int64_t> c(shape.size(), 0);
  for (int64_t flat = 0; flat < n; ++flat) {
    fn(flat, c);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++c[d] < shape[d]) break;
      c[d] = 0;
    }
  }
}

int64_t scalar_index(Machine& m, const Op& op, size_t i) {
  const RValue& v = m.val(op, op.operand(i));
  if (v.floats() || v.numel() != 1)
    fail(op, std::string(op.name()) + " index operand " + std::to_string(i) +
                 " must be an integer scalar");
  return v.i[0];
}

// The sub-tile (extract_tile / insert_tile) at the scalar indices starting at operand `first`;
// returns the element offset of the sub-tile's origin in each dim.
std::vector<int64_t> subtile_origin(Machine& m, const Op& op, size_t first,
                                    const std::vector<int64_t>& whole,
                                    const std::vector<int64_t>& part, const Type& whole_type) {
  if (op.operands.size() != first + whole.size() || part.size() != whole.size())
    fail(op, std::string(op.name()) + " needs one index per dim of " + whole_type.str());
  std::vector<int64_t> idx, origin;
  bool bad = false;
  for (size_t d = 0; d < whole.size(); ++d) {
    if (part[d] <= 0 || whole[d] % part[d] != 0)
      fail(op, std::string(op.name()) + ": sub-tile shape " + dims_str(part) +
                   " does not divide " + whole_type.str());
    int64_t i = scalar_index(m, op, first + d);
    idx.push_back(i);
    bad |= i < 0 || i >= whole[d] / part[d];
    origin.push_back(i * part[d]);
  }
  if (bad) {
    std::vector<int64_t> count;
    for (size_t d = 0; d < whole.size(); ++d) count.push_back(whole[d] / part[d]);
    fail(op, std::string(op.name()) + " index " + coords_str(idx) + " is out of range: " +
                 whole_type.str() + " holds " + dims_str(count) + " sub-tiles of " +
                 dims_str(part));
  }
  return origin;
}

}  // namespace

void exec_shape(Machine& m, const Op& op) {
  if (op.results.size() != 1) fail(op, std::string(op.name()) + " must have one result");
  const Type& rt = op.result()->type;
  if (!rt.is_tile()) fail(op, std::string(op.name()) + " must produce a tile");
  RValue r = RValue::of_type(rt);
  switch (op.kind) {
    case OpKind::Splat: {
      const RValue& s = m.val(op, op.operand(0));
      if (s.numel() != 1 || s.elem != rt.elem)
        fail(op, "splat needs a scalar of the tile's element type");
      if (r.floats()) std::fill(r.f.begin(), r.f.end(), s.f[0]);
      else std::fill(r.i.begin(), r.i.end(), s.i[0]);
      break;
    }
    case OpKind::Arange: {
      int64_t start = op.has_attr("start") ? op.attr_int("start") : 0;
      for (int64_t j = 0; j < r.numel(); ++j) r.set_i(j, start + j);
      break;
    }
    case OpKind::Broadcast: {
      const RValue& s = m.val(op, op.operand(0));
      if (s.elem != rt.elem) fail(op, "broadcast keeps the element type");
      if (s.scalar || s.numel() == 1) {
        for (int64_t j = 0; j < r.numel(); ++j) copy_elem(r, j, s, 0);
        break;
      }
      if (s.shape.size() != r.shape.size())
        fail(op, "broadcast of " + op.operand(0)->type.str() + " to " + rt.str() + " changes rank");
      std::vector<int64_t> st = strides_of(s.shape);
      for (size_t d = 0; d < st.size(); ++d) {
        if (s.shape[d] == 1) st[d] = 0;  // a size-1 dim repeats its one element
        else if (s.shape[d] != r.shape[d])
          fail(op, "cannot broadcast " + op.operand(0)->type.str() + " to " + rt.str());
      }
      for_each_index(r.shape, [&](int64_t flat, const std::vector<int64_t>& c) {
        int64_t src = 0;
        for (size_t d = 0; d < c.size(); ++d) src += c[d] * st[d];
        copy_elem(r, flat, s, src);
      });
      break;
    }
    case OpKind::ExpandDims:
    case OpKind::Reshape: {
      const RValue& s = m.val(op, op.operand(0));
      if (s.elem != rt.elem || s.numel() != r.numel())
        fail(op, std::string(op.name()) + " of " + op.operand(0)->type.str() + " to " + rt.str() +
                     " changes the element type or count");
      r.f = s.f;
      r.i = s.i;
      break;
    }
    case OpKind::Permute: {
      const RValue& s = m.val(op, op.operand(0));
      const auto& dims = op.attr_ints("dims");
      std::vector<int64_t> sst = strides_of(s.shape), st;
      std::vector<bool> seen(s.shape.size(), false);
      if (dims.size() != s.shape.size() || r.shape.size() != s.shape.size())
        fail(op, "permute dims must be a permutation of the operand's dims");
      for (size_t d = 0; d < dims.size(); ++d) {
        if (dims[d] < 0 || dims[d] >= static_cast<int64_t>(dims.size()) || seen[dims[d]] ||
            r.shape[d] != s.shape[dims[d]])
          fail(op, "permute dims must be a permutation of the operand's dims");
        seen[dims[d]] = true;
        st.push_back(sst[dims[d]]);
      }
      for_each_index(r.shape, [&](int64_t flat, const std::vector<int64_t>& c) {
        int64_t src = 0;
        for (size_t d = 0; d < c.size(); ++d) src += c[d] * st[d];
        copy_elem(r, flat, s, src);
      });
      break;
    }
    case OpKind::ExtractTile: {
      const RValue& s = m.val(op, op.operand(0));
      auto origin = subtile_origin(m, op, 1, s.shape, r.shape, op.operand(0)->type);
      std::vector<int64_t> st = strides_of(s.shape);
      for_each_index(r.shape, [&](int64_t flat, const std::vector<int64_t>& c) {
        int64_t src = 0;
        for (size_t d = 0; d < c.size(); ++d) src += (origin[d] + c[d]) * st[d];
        copy_elem(r, flat, s, src);
      });
      break;
    }
    case OpKind::InsertTile: {
      const RValue& s = m.val(op, op.operand(0));
      const RValue& sub = m.val(op, op.operand(1));
      if (sub.elem != s.elem) fail(op, "insert_tile needs a sub-tile of the tile's element type");
      auto origin = subtile_origin(m, op, 2, s.shape, sub.shape, op.operand(0)->type);
      r = s;
      std::vector<int64_t> st = strides_of(s.shape);
      for_each_index(sub.shape, [&](int64_t flat, const std::vector<int64_t>& c) {
        int64_t dst = 0;
        for (size_t d = 0; d < c.size(); ++d) dst += (origin[d] + c[d]) * st[d];
        copy_elem(r, dst, sub, flat);
      });
      break;
    }
    default: fail(op, "interpreter: unexpected op " + std::string(op.name()));
  }
  m.set(op.result(), std::move(r));
}

}  // namespace tessera::interp
