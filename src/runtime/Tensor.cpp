// Host tensors: element access in the dtype's native bit pattern, argument binding and random
// inputs.
#include "runtime/Tensor.h"

#include <cstring>
#include <random>

#include "support/Float.h"

namespace tessera {

Tensor::Tensor(ScalarKind dt, std::vector<int64_t> s) : dtype(dt), shape(std::move(s)) {
  data.assign(static_cast<size_t>(numel() * scalar_bytes(dtype)), 0);
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

namespace {

uint64_t load_bits(const uint8_t* p, int bytes) {
  switch (bytes) {
    case 1: return *p;
    case 2: { uint16_t v; std::memcpy(&v, p, 2); return v; }
    case 4: { uint32_t v; std::memcpy(&v, p, 4); return v; }
    default: { uint64_t v; std::memcpy(&v, p, 8); return v; }
  }
}

void store_bits(uint8_t* p, int bytes, uint64_t v) {
  switch (bytes) {
    case 1: *p = static_cast<uint8_t>(v); break;
    case 2: { auto w = static_cast<uint16_t>(v); std::memcpy(p, &w, 2); break; }
    case 4: { auto w = static_cast<uint32_t>(v); std::memcpy(p, &w, 4); break; }
    default: std::memcpy(p, &v, 8); break;
  }
}

}  // namespace

double Tensor::get(int64_t i) const {
  int b = scalar_bytes(dtype);
  uint64_t bits = load_bits(data.data() + i * b, b);
  if (is_float(dtype)) return float_from_bits(dtype, bits);
  int64_t v = wrap_int(dtype, static_cast<int64_t>(bits));
  if (dtype == ScalarKind::U64) return static_cast<double>(static_cast<uint64_t>(v));
  return static_cast<double>(v);
}

int64_t Tensor::get_int(int64_t i) const {
  int b = scalar_bytes(dtype);
  uint64_t bits = load_bits(data.data() + i * b, b);
  if (is_float(dtype)) return float_to_int(ScalarKind::I64, float_from_bits(dtype, bits));
  return wrap_int(dtype, static_cast<int64_t>(bits));
}

void Tensor::set(int64_t i, double v) {
  int b = scalar_bytes(dtype);
  uint64_t bits = is_float(dtype) ? float_to_bits(dtype, v)
                                  : static_cast<uint64_t>(float_to_int(dtype, v));
  store_bits(data.data() + i * b, b, bits);
}

void Tensor::set_int(int64_t i, int64_t v) {
  int b = scalar_bytes(dtype);
  uint64_t bits = is_float(dtype) ? float_to_bits(dtype, int_to_float(dtype, v, false))
                                  : static_cast<uint64_t>(wrap_int(dtype, v));
  store_bits(data.data() + i * b, b, bits);
}

namespace {

std::string param_desc(const Kernel& k, const Value* p) {
  return "argument '" + p->name + "' of kernel '" + k.name + "'";
}

}  // namespace

Sizes bind_dims(const Kernel& k, const std::vector<KernelArg>& args) {
  if (args.size() != k.params.size())
    throw TesseraError(k.loc, "kernel '" + k.name + "' takes " + std::to_string(k.params.size()) +
                                  " arguments, got " + std::to_string(args.size()));
  Sizes sizes;
  std::map<std::string, std::string> bound_by;  // dim name -> the view that bound it
  for (size_t i = 0; i < k.params.size(); ++i) {
    const Value* p = k.params[i];
    const KernelArg& a = args[i];
    std::string ty = p->type.str();
    if (!p->type.is_view()) {
      if (a.tensor)
        throw TesseraError(k.loc, param_desc(k, p) + " is a scalar (" + ty + ") but got a tensor");
      continue;
    }
    const Tensor* t = a.tensor;
    if (!t) throw TesseraError(k.loc, param_desc(k, p) + " needs a tensor (" + ty + ")");
    if (t->dtype != p->type.elem)
      throw TesseraError(k.loc, param_desc(k, p) + " has dtype " +
                                    std::string(scalar_name(t->dtype)) + ", expected " +
                                    std::string(scalar_name(p->type.elem)) + " (" + ty + ")");
    if (static_cast<int>(t->shape.size()) != p->type.rank())
      throw TesseraError(k.loc, param_desc(k, p) + " has rank " + std::to_string(t->shape.size()) +
                                    ", expected " + std::to_string(p->type.rank()) + " (" + ty +
                                    ")");
    for (size_t d = 0; d < t->shape.size(); ++d) {
      int64_t n = t->shape[d];
      if (n < 0 || n > INT32_MAX)
        throw TesseraError(k.loc, param_desc(k, p) + " has size " + std::to_string(n) +
                                      " in dim " + std::to_string(d) +
                                      ", outside [0, 2^31) (" + ty + ")");
      const Dim& want = p->type.shape[d];
      if (want.is_static()) {
        if (want.value != n)
          throw TesseraError(k.loc, param_desc(k, p) + " has size " + std::to_string(n) +
                                        " in dim " + std::to_string(d) + ", expected " +
                                        std::to_string(want.value) + " (" + ty + ")");
        continue;
      }
      auto it = sizes.find(want.symbol);
      if (it == sizes.end()) {
        sizes[want.symbol] = n;
        bound_by[want.symbol] = p->name;
      } else if (it->second != n) {
        throw TesseraError(k.loc, "dim '" + want.symbol + "' is " + std::to_string(n) + " in '" +
                                      p->name + "' but " + std::to_string(it->second) + " in '" +
                                      bound_by[want.symbol] + "'");
      }
    }
    size_t want_bytes = static_cast<size_t>(t->numel() * scalar_bytes(t->dtype));
    if (t->data.size() != want_bytes)
      throw TesseraError(k.loc, param_desc(k, p) + " holds " + std::to_string(t->data.size()) +
                                    " bytes, its shape needs " + std::to_string(want_bytes));
  }
  return sizes;
}

std::vector<int64_t> view_shape(const Kernel& k, const Value& view, const Sizes& sizes) {
  std::vector<int64_t> shape;
  for (const Dim& d : view.type.shape) {
    if (d.is_static()) {
      shape.push_back(d.value);
      continue;
    }
    auto it = sizes.find(d.symbol);
    if (it == sizes.end())
      throw TesseraError(k.loc, "no size given for dim '" + d.symbol + "' of view '" + view.name +
                                    "' of kernel '" + k.name + "'");
    if (it->second < 0)
      throw TesseraError(k.loc, "dim '" + d.symbol + "' has negative size " +
                                    std::to_string(it->second));
    shape.push_back(it->second);
  }
  return shape;
}

std::vector<Tensor> make_random_tensors(const Kernel& k, const Sizes& sizes, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Tensor> out;
  for (const Value* p : k.view_params()) {
    Tensor t(p->type.elem, view_shape(k, *p, sizes));
    ScalarKind dt = t.dtype;
    int64_t n = t.numel();
    std::uniform_real_distribution<double> uni(-1.0, 1.0);
    for (int64_t i = 0; i < n; ++i) {
      if (is_float(dt)) t.set(i, uni(rng));
      else if (is_bool(dt)) t.set_int(i, static_cast<int64_t>(rng() & 1));
      else if (is_unsigned_int(dt)) t.set_int(i, static_cast<int64_t>(rng() % 16));
      else t.set_int(i, static_cast<int64_t>(rng() % 16) - 8);
    }
    bool all_zero = true;
    for (int64_t i = 0; i < n && all_zero; ++i) all_zero = t.get(i) == 0;
    if (all_zero && n > 0) t.set_int(0, 1);
    out.push_back(std::move(t));
  }
  return out;
}

std::vector<KernelArg> make_args(const Kernel& k, std::vector<Tensor>& tensors,
                                 const Sizes& sizes) {
  std::vector<KernelArg> args;
  size_t next = 0;
  for (const Value* p : k.params) {
    KernelArg a;
    if (p->type.is_view()) {
      if (next >= tensors.size())
        throw TesseraError(k.loc, "no tensor for " + param_desc(k, p));
      a.tensor = &tensors[next++];
    } else {
      auto it = sizes.find(p->name);
      if (is_float(p->type.elem)) a.scalar = it != sizes.end() ? static_cast<double>(it->second) : 0.5;
      else a.scalar = it != sizes.end() ? it->second : int64_t{1};
    }
    args.push_back(a);
  }
  return args;
}

}  // namespace tessera
