#include "ir/Type.h"

#include <cassert>

namespace tessera {

namespace {
struct ScalarInfo {
  ScalarKind kind;
  std::string_view name;
  int bits;
};
constexpr ScalarInfo kScalars[] = {
#define X(name, text, bits) {ScalarKind::name, text, bits},
    TESSERA_SCALAR_KINDS(X)
#undef X
};
}  // namespace

std::string_view scalar_name(ScalarKind k) { return kScalars[static_cast<int>(k)].name; }

std::optional<ScalarKind> scalar_from_name(std::string_view s) {
  for (const auto& info : kScalars)
    if (info.name == s) return info.kind;
  return std::nullopt;
}

int scalar_bits(ScalarKind k) { return kScalars[static_cast<int>(k)].bits; }
int scalar_bytes(ScalarKind k) { return k == ScalarKind::I1 ? 1 : scalar_bits(k) / 8; }

bool is_float(ScalarKind k) {
  switch (k) {
    case ScalarKind::F8E4M3:
    case ScalarKind::F8E5M2:
    case ScalarKind::F16:
    case ScalarKind::BF16:
    case ScalarKind::F32:
    case ScalarKind::F64:
      return true;
    default:
      return false;
  }
}
bool is_int(ScalarKind k) { return !is_float(k); }
bool is_bool(ScalarKind k) { return k == ScalarKind::I1; }
bool is_signed_int(ScalarKind k) {
  return k == ScalarKind::I8 || k == ScalarKind::I16 || k == ScalarKind::I32 || k == ScalarKind::I64;
}
bool is_unsigned_int(ScalarKind k) {
  return k == ScalarKind::U8 || k == ScalarKind::U16 || k == ScalarKind::U32 || k == ScalarKind::U64;
}

const std::vector<ScalarKind>& all_scalar_kinds() {
  static const std::vector<ScalarKind> all = [] {
    std::vector<ScalarKind> v;
    for (const auto& info : kScalars) v.push_back(info.kind);
    return v;
  }();
  return all;
}

std::string bitcast_type_error(ScalarKind from, ScalarKind to) {
  auto name = [](ScalarKind k) { return std::string(scalar_name(k)); };
  // i1 is one bit held in a byte: it has no bits to reinterpret.
  if (from == ScalarKind::I1 || to == ScalarKind::I1)
    return "has no i1 form (use cast), got " + name(from) + " to " + name(to);
  if (scalar_bits(from) != scalar_bits(to))
    return "needs element types of the same width, got " + name(from) + " (" + std::to_string(scalar_bits(from)) +
           " bits) to " + name(to) + " (" + std::to_string(scalar_bits(to)) + " bits)";
  return "";
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += s[i].str();
  }
  return out + "]";
}

bool shape_is_static(const Shape& s) {
  for (const auto& d : s)
    if (!d.is_static()) return false;
  return true;
}

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (const auto& d : s) {
    assert(d.is_static());
    n *= d.value;
  }
  return n;
}

std::vector<int64_t> static_shape(const Shape& s) {
  std::vector<int64_t> out;
  for (const auto& d : s) {
    assert(d.is_static());
    out.push_back(d.value);
  }
  return out;
}

std::string Type::str() const {
  std::string e(scalar_name(elem));
  switch (kind) {
    case Kind::None:
      return "none";
    case Kind::Scalar:
      return e;
    case Kind::Ptr:
      return "ptr<" + e + ">";
    case Kind::View:
      return "view<" + e + ", " + shape_str(shape) + ">";
    case Kind::Tile:
    case Kind::Buffer:
    case Kind::Pipe: {
      std::string out = std::string(kind == Kind::Tile ? "tile" : kind == Kind::Buffer ? "buffer" : "pipe") +
                        "<" + e + ", " + shape_str(shape);
      if (!layout.empty()) out += ", layout = " + layout.str();
      if (!space.empty()) out += ", space = \"" + space + "\"";
      return out + ">";
    }
  }
  return "none";
}

}  // namespace tessera
