// Source locations and user-facing errors.
//
// Every op carries a Loc; every error Tessera reports to a user is a TesseraError whose
// message is already formatted as `FILE:LINE:COL: error: ...` when a location is known.
#pragma once

#include <memory>
#include <source_location>
#include <stdexcept>
#include <string>

namespace tessera {

struct Loc {
  // Shared so that thousands of ops from one file hold one copy of the file name.
  std::shared_ptr<const std::string> file;
  int line = 0;
  int col = 0;

  bool known() const { return file && line > 0; }
  std::string str() const;  // "file:line:col", or "<unknown>"

  static Loc in_file(const std::string& file, int line, int col);
  // The call site of a C++ builder call (std::source_location), for the embedded language.
  static Loc from(const std::source_location& sl);
};

// The one exception type for errors caused by user input (text, builder programs,
// arguments, sizes). Internal invariant violations use assert-like aborts only where
// user input cannot reach them.
class TesseraError : public std::runtime_error {
 public:
  TesseraError(const Loc& loc, const std::string& msg)
      : std::runtime_error(format(loc, msg)), loc_(loc), msg_(msg) {}
  explicit TesseraError(const std::string& msg) : TesseraError(Loc{}, msg) {}

  const Loc& loc() const { return loc_; }
  const std::string& message() const { return msg_; }  // without the location prefix

  static std::string format(const Loc& loc, const std::string& msg);

 private:
  Loc loc_;
  std::string msg_;
};

}  // namespace tessera
