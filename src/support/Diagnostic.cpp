#include "support/Diagnostic.h"

#include <unordered_map>

namespace tessera {

std::string Loc::str() const {
  if (!known()) return "<unknown>";
  return *file + ":" + std::to_string(line) + ":" + std::to_string(col);
}

Loc Loc::in_file(const std::string& file, int line, int col) {
  // Intern file names so that ops from the same file share one string.
  static thread_local std::unordered_map<std::string, std::shared_ptr<const std::string>> names;
  auto& p = names[file];
  if (!p) p = std::make_shared<const std::string>(file);
  return Loc{p, line, col};
}

Loc Loc::from(const std::source_location& sl) {
  return in_file(sl.file_name(), static_cast<int>(sl.line()), static_cast<int>(sl.column()));
}

std::string TesseraError::format(const Loc& loc, const std::string& msg) {
  if (!loc.known()) return "error: " + msg;
  return loc.str() + ": error: " + msg;
}

}  // namespace tessera
