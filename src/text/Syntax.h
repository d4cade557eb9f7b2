// Rules of the text format shared by the parser and the printer, so that what one writes the
// other reads. Internal to src/text.
#pragma once

#include <string_view>

#include "ir/Ops.h"

namespace tessera::text {

// Deeper region nesting is a parse error: it bounds the parser's recursion (fuzzed input must
// not overflow the stack) and no real kernel comes near it.
constexpr int kMaxRegionDepth = 200;

// The keyword written before region `i` of an op: `if ... {} else {}`, `while ... {} do {}`.
// The first region never has one.
inline std::string_view region_keyword(OpKind k, size_t i) {
  if (i == 0) return {};
  if (k == OpKind::If) return "else";
  if (k == OpKind::While) return "do";
  return {};
}

// Whether `s` can be written after '%' (value names) or '@' (kernel names).
inline bool is_plain_name(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.';
    if (!ok) return false;
  }
  return true;
}

}  // namespace tessera::text
