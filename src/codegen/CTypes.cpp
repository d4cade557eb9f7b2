#include "codegen/CTypes.h"

namespace tessera::codegen {

// The C++ type values of kind `k` have while computing.
std::string ctype(ScalarKind k) {
  switch (k) {
    case ScalarKind::I1: return "uint8_t";
    case ScalarKind::I8: return "int8_t";
    case ScalarKind::I16: return "int16_t";
    case ScalarKind::I32: return "int32_t";
    case ScalarKind::I64: return "int64_t";
    case ScalarKind::U8: return "uint8_t";
    case ScalarKind::U16: return "uint16_t";
    case ScalarKind::U32: return "uint32_t";
    case ScalarKind::U64: return "uint64_t";
    case ScalarKind::F64: return "double";
    default: return "float";
  }
}

// The C++ type elements of kind `k` are stored as in tensors.
std::string stype(ScalarKind k) {
  switch (k) {
    case ScalarKind::F16:
    case ScalarKind::BF16: return "uint16_t";
    case ScalarKind::F8E4M3:
    case ScalarKind::F8E5M2: return "uint8_t";
    default: return ctype(k);
  }
}

std::string load_conv(ScalarKind k, const std::string& e) {
  switch (k) {
    case ScalarKind::BF16: return "tsr::bf2f(" + e + ")";
    case ScalarKind::F16: return "tsr::h2f(" + e + ")";
    case ScalarKind::F8E4M3: return "tsr::e4m32f(" + e + ")";
    case ScalarKind::F8E5M2: return "tsr::e5m22f(" + e + ")";
    case ScalarKind::I1: return "uint8_t(" + e + " != 0)";
    default: return e;
  }
}

std::string store_conv(ScalarKind k, const std::string& e) {
  switch (k) {
    case ScalarKind::BF16: return "tsr::f2bf(" + e + ")";
    case ScalarKind::F16: return "tsr::f2h(" + e + ")";
    case ScalarKind::F8E4M3: return "tsr::f2e4m3(" + e + ")";
    case ScalarKind::F8E5M2: return "tsr::f2e5m2(" + e + ")";
    default: return e;
  }
}

// A float expression (float or double) rounded to float kind `k`, as a compute-type value.
std::string fround(ScalarKind k, const std::string& e) {
  switch (k) {
    case ScalarKind::F32: return "float(" + e + ")";
    case ScalarKind::F64: return "double(" + e + ")";
    case ScalarKind::BF16: return "tsr::rbf16(float(" + e + "))";
    case ScalarKind::F16: return "tsr::rf16(float(" + e + "))";
    case ScalarKind::F8E4M3: return "tsr::rf8e4m3(float(" + e + "))";
    case ScalarKind::F8E5M2: return "tsr::rf8e5m2(float(" + e + "))";
    default: return e;
  }
}

// A double expression rounded once to float kind `k` (casts from f64 and from integers).
std::string dround(ScalarKind k, const std::string& e) {
  switch (k) {
    case ScalarKind::F32: return "float(" + e + ")";
    case ScalarKind::F64: return "double(" + e + ")";
    case ScalarKind::BF16: return "tsr::bf2f(tsr::f2bf_d(" + e + "))";
    case ScalarKind::F16: return "tsr::h2f(tsr::f2h(" + e + "))";
    case ScalarKind::F8E4M3: return "tsr::e4m32f(tsr::f2e4m3(" + e + "))";
    case ScalarKind::F8E5M2: return "tsr::e5m22f(tsr::f2e5m2(" + e + "))";
    default: return e;
  }
}

std::string bitcast_expr(ScalarKind from, ScalarKind to, const std::string& e) {
  const std::string U = "uint" + std::to_string(scalar_bits(from)) + "_t";
  std::string bits = is_float(from) ? "tsr::" + std::string(scalar_name(from)) + "_bits(" + e + ")" : U + "(" + e + ")";
  if (!is_float(to)) return ctype(to) + "(" + bits + ")";
  if (to == ScalarKind::F32) return "tsr::f32_of_bits(" + bits + ")";
  if (to == ScalarKind::F64) return "tsr::f64_of_bits(" + bits + ")";
  return load_conv(to, bits);  // the narrow formats' storage word
}

}  // namespace tessera::codegen
