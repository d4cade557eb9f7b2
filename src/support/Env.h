// Switches read from the environment (A/B switches of the GPU check scripts, debugging aids):
// NAME=1 turns one on; any other value, or none, leaves it off.
#pragma once

#include <cstdlib>
#include <string_view>

namespace tessera {

inline bool env_flag(const char* name) {
  const char* e = std::getenv(name);
  return e && std::string_view(e) == "1";
}

}  // namespace tessera
