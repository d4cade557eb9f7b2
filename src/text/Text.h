// The textual format of the Tile IR: printing and parsing.
//
// print(parse(text)) == text for text in canonical form (what the printer writes).
// Grammar and examples: docs/ir.md.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "ir/IR.h"

namespace tessera {

std::string print_kernel(const Kernel& k);
std::string print_module(const Module& m);
std::string print_type(const Type& t);  // same as Type::str()
// Each op's own line as print_kernel writes it (same value names; regions shown as `{...}`),
// for the comments of generated code and for error messages that quote an op.
std::unordered_map<const Op*, std::string> print_op_lines(const Kernel& k);

// Parse a module (one or more kernels). Ops get locations in `filename`. Throws TesseraError
// `FILE:LINE:COL: error: ...` on the first syntax error; parsing does not verify.
std::unique_ptr<Module> parse_module(std::string_view text, const std::string& filename);

}  // namespace tessera
