// An environment variable set for a scope (an A/B switch a test turns on), restored to what it
// was (or unset) when the scope ends, a failed assertion's early return included.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

namespace tessera::testutil {

class ScopedEnv {
 public:
  ScopedEnv(std::string name, const std::string& value) : name_(std::move(name)) {
    if (const char* e = std::getenv(name_.c_str())) old_ = e;
    ::setenv(name_.c_str(), value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) ::setenv(name_.c_str(), old_->c_str(), 1);
    else ::unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

}  // namespace tessera::testutil
