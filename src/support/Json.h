// JSON text for the outputs that write it by hand (`--json`, the tuning database's JSON Lines).
#pragma once

#include <string>

namespace tessera {

// `s` as a JSON string literal: quoted, with '"' and '\' escaped and control characters as \uXXXX.
std::string json_str(const std::string& s);

}  // namespace tessera
