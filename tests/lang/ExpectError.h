// Checking the located errors of builder programs (shared by the tests of this folder).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <regex>
#include <string>

#include "support/Diagnostic.h"

namespace tessera::langtest {

// Runs `body`, which must throw a TesseraError `file:line:COL: error: msg` (any column).
inline void expect_error_at(const std::string& file, int line, const std::string& msg,
                            const std::function<void()>& body) {
  try {
    body();
  } catch (const TesseraError& e) {
    std::string want_prefix = file + ":" + std::to_string(line) + ":";
    std::string what = e.what();
    ASSERT_EQ(what.rfind(want_prefix, 0), 0u) << what;
    std::string rest = what.substr(want_prefix.size());
    EXPECT_TRUE(std::regex_match(rest, std::regex("[0-9]+: error: .*"))) << what;
    EXPECT_EQ(e.message(), msg);
    return;
  }
  ADD_FAILURE() << "no error thrown; expected: " << msg;
}

}  // namespace tessera::langtest
