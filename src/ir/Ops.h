// Op kinds and their static description (name, arity, attributes), generated from Ops.def.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace tessera {

enum class OpKind : uint16_t {
#define OP(Enum, text, cls, minops, maxops, results, regions) Enum,
#include "ir/Ops.def"
#undef OP
};

enum class OpClass : uint8_t {
  Constant, Index, Create, Memory, Unary, Binary, Compare, Ternary, Cast, Shape, Dot, Reduce,
  Scan, Sort, Control, Terminator, Raw, Struct
};

// The kinds of attribute values. Number accepts an integer or a float literal.
enum class AttrKind : uint8_t { Int, Number, String, IntList, Bool };

struct AttrSpec {
  std::string_view name;
  AttrKind kind;
  bool required;
};

struct OpInfo {
  OpKind kind;
  std::string_view name;
  OpClass cls;
  int min_operands;
  int max_operands;  // -1: any
  int num_results;   // -1: any
  int num_regions;
  std::vector<AttrSpec> attrs;  // in printing order
  std::string_view doc;         // one line, for docs and `tessera ops`

  const AttrSpec* find_attr(std::string_view n) const;
};

const OpInfo& op_info(OpKind k);
std::optional<OpKind> op_from_name(std::string_view name);
const std::vector<OpInfo>& all_ops();

// The grid yield's attributes that say how programs map to CTAs other than one program per CTA
// (persistent CTAs, grouped order, CTA pairs, stream-K parts, program prefetch): none goes with
// `num_ctas` > 1, whose program id is the cluster's (the verifier; cluster-programs declines).
inline constexpr const char* kProgramMappingAttrs[] = {"persistent", "group_rows", "program_pairs", "stream_k",
                                                       "prefetch_buffers"};

}  // namespace tessera
