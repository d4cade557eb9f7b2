// Switches read from the environment (A/B switches of the GPU check scripts, debugging aids):
// NAME=1 turns one on; any other value, or none, leaves it off. env_int reads a number.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "support/Diagnostic.h"

namespace tessera {

inline bool env_flag(const char* name) {
  const char* e = std::getenv(name);
  return e && std::string_view(e) == "1";
}

// NAME as a decimal integer (digits, an optional leading '-'), or nothing when NAME is unset or
// empty; any other text (a word, a space, a '+', a trailing character) is an error naming it,
// not a 0 the user never wrote (atoll's answer), and so is a value past 64 bits.
inline std::optional<int64_t> env_int(const char* name) {
  const char* e = std::getenv(name);
  if (!e || !*e) return std::nullopt;
  const char* digits = e + (*e == '-' ? 1 : 0);
  bool ok = *digits != '\0';
  for (const char* c = digits; *c; ++c) ok = ok && *c >= '0' && *c <= '9';
  if (!ok) throw TesseraError(std::string(name) + " = '" + e + "': not an integer");
  errno = 0;
  const long long v = std::strtoll(e, nullptr, 10);
  if (errno == ERANGE) throw TesseraError(std::string(name) + " = '" + e + "': out of the 64-bit range");
  return static_cast<int64_t>(v);
}

}  // namespace tessera
