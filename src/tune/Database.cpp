// The tuning database over SQLite (schema in create_schema; docs/tuning.md).
#include "tune/Database.h"

#include <sqlite3.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <istream>
#include <ostream>
#include <set>
#include <sys/stat.h>

#include <filesystem>
#include <system_error>

#include "runtime/DiskCache.h"

#include "support/Diagnostic.h"
#include "support/Json.h"

namespace tessera::tune {

namespace {

// 'TSRA': a SQLite file of another program is refused, not misread.
constexpr int kApplicationId = 0x54535241;

// One prepared statement, finalized on scope exit.
struct Stmt {
  sqlite3_stmt* s = nullptr;
  ~Stmt() { sqlite3_finalize(s); }
};

std::string json_num(double v) {
  if (!std::isfinite(v)) return "0";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// A reader of the flat JSON objects export_jsonl writes: string and number fields, and one
// level of nested object of integers (the config).
class JsonLine {
 public:
  JsonLine(const std::string& text, const std::string& file, int line) : t_(text), file_(file), line_(line) {}

  void parse(Record& r) {
    ws();
    expect('{');
    bool first = true;
    bool seen_config = false;
    while (true) {
      ws();
      if (peek() == '}' && first) {
        ++p_;
        break;
      }
      std::string key = str();
      ws();
      expect(':');
      ws();
      if (key == "config") {
        r.config = object_of_ints();
        seen_config = true;
      } else if (key == "ms" || key == "noise" || key == "rounds" || key == "unix_time" || key == "confirmed") {
        double v = num();
        if (key == "confirmed") r.confirmed = v != 0;
        if (key == "ms") r.ms = v;
        if (key == "noise") r.noise = v;
        if (key == "rounds") r.rounds = static_cast<int64_t>(v);
        if (key == "unix_time") r.unix_time = static_cast<int64_t>(v);
      } else {
        std::string v = str();
        std::string* field = key == "kernel"       ? &r.key.kernel
                             : key == "kernel_hash" ? &r.key.kernel_hash
                             : key == "shape"       ? &r.key.shape
                             : key == "dtype"       ? &r.key.dtype
                             : key == "target"      ? &r.key.target
                             : key == "device"      ? &r.key.device
                             : key == "compiler"    ? &r.key.compiler
                             : key == "status"      ? &r.status
                             : key == "bound_hash"  ? &r.bound_hash
                             : key == "message"     ? &r.message
                                                    : nullptr;
        if (!field) error("unknown field '" + key + "'");
        *field = v;
      }
      first = false;
      ws();
      if (peek() == ',') {
        ++p_;
        continue;
      }
      expect('}');
      break;
    }
    ws();
    if (p_ != t_.size()) error("text after the object");
    if (r.key.kernel_hash.empty() || r.key.shape.empty() || r.key.target.empty() || r.status.empty() || !seen_config)
      error("a row needs kernel_hash, shape, target, status and config");
  }

 private:
  [[noreturn]] void error(const std::string& msg) const {
    throw TesseraError(Loc::in_file(file_, line_, static_cast<int>(p_) + 1), msg);
  }
  char peek() const { return p_ < t_.size() ? t_[p_] : '\0'; }
  void ws() {
    while (p_ < t_.size() && (t_[p_] == ' ' || t_[p_] == '\t' || t_[p_] == '\r')) ++p_;
  }
  void expect(char c) {
    if (peek() != c) error(std::string("expected '") + c + "'");
    ++p_;
  }
  std::string str() {
    expect('"');
    std::string out;
    while (true) {
      if (p_ >= t_.size()) error("unterminated string");
      char c = t_[p_++];
      if (c == '"') return out;
      if (c != '\\') {
        out += c;
        continue;
      }
      char e = peek();
      ++p_;
      if (e == '"' || e == '\\' || e == '/') out += e;
      else if (e == 'n') out += '\n';
      else if (e == 't') out += '\t';
      else if (e == 'u' && p_ + 4 <= t_.size()) {
        unsigned v = 0;
        for (int i = 0; i < 4; ++i) {
          char h = t_[p_++];
          v = v * 16 + (h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : 99);
          if (v > 0xffff) error("bad \\u escape");
        }
        if (v >= 0x80) error("only ASCII \\u escapes are read");
        out += static_cast<char>(v);
      } else {
        error("bad escape");
      }
    }
  }
  double num() {
    const char* begin = t_.c_str() + p_;
    char* end = nullptr;
    double v = std::strtod(begin, &end);
    if (end == begin || !std::isfinite(v)) error("expected a number");
    p_ += static_cast<size_t>(end - begin);
    return v;
  }
  Config object_of_ints() {
    Config c;
    expect('{');
    ws();
    if (peek() == '}') {
      ++p_;
      return c;
    }
    while (true) {
      ws();
      std::string k = str();
      ws();
      expect(':');
      ws();
      double v = num();
      if (v != std::floor(v) || std::fabs(v) > 2147483647.0) error("config value of '" + k + "' is not an i32");
      c[k] = static_cast<int64_t>(v);
      ws();
      if (peek() == ',') {
        ++p_;
        continue;
      }
      expect('}');
      return c;
    }
  }
  const std::string& t_;
  std::string file_;
  int line_;
  size_t p_ = 0;
};

}  // namespace

std::string default_database_path() {
  if (const char* p = std::getenv("TESSERA_TUNE_DB"); p && *p) return p;
  return default_cache_dir() + "/tuning.db";  // beside the compile cache
}

void Database::fail(const std::string& what) const {
  std::string msg = db_ ? sqlite3_errmsg(db_) : "cannot open";
  throw TesseraError("tuning database " + path_ + ": " + what + ": " + msg);
}

void Database::exec(const std::string& sql) const {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "error";
    sqlite3_free(err);
    throw TesseraError("tuning database " + path_ + ": " + msg);
  }
}

Database::Database(const std::string& path, bool create, int busy_ms) : path_(path) {
  struct stat st {};
  const bool exists = ::stat(path.c_str(), &st) == 0;
  if (exists && !S_ISREG(st.st_mode)) throw TesseraError("tuning database " + path + ": not a regular file");
  if (!exists && !create) throw TesseraError("tuning database " + path + ": no such file");
  if (!exists) {
    // The directory, as the compile cache makes its own (a failure shows when sqlite opens).
    std::error_code ec;
    if (const auto dir = std::filesystem::path(path).parent_path(); !dir.empty())
      std::filesystem::create_directories(dir, ec);
  }
  int flags = SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0);
  if (sqlite3_open_v2(path.c_str(), &db_, flags, nullptr) != SQLITE_OK) {
    std::string msg = db_ ? sqlite3_errmsg(db_) : "cannot open";
    sqlite3_close(db_);
    db_ = nullptr;
    throw TesseraError("tuning database " + path + ": " + msg);
  }
  sqlite3_busy_timeout(db_, busy_ms);
  try {
    // Reading the header is where a file that is not a database says so.
    Stmt s;
    if (sqlite3_prepare_v2(db_, "PRAGMA user_version", -1, &s.s, nullptr) != SQLITE_OK) fail("cannot read");
    if (sqlite3_step(s.s) != SQLITE_ROW) fail("cannot read");
    const int version = sqlite3_column_int(s.s, 0);
    Stmt a;
    if (sqlite3_prepare_v2(db_, "PRAGMA application_id", -1, &a.s, nullptr) != SQLITE_OK || sqlite3_step(a.s) != SQLITE_ROW)
      fail("cannot read");
    const int app = sqlite3_column_int(a.s, 0);
    if (version > kSchemaVersion)
      throw TesseraError("tuning database " + path + ": written by a newer Tessera (schema " + std::to_string(version) +
                         "; this one reads " + std::to_string(kSchemaVersion) + "): not read");
    if (version == 0) {
      Stmt t;
      if (sqlite3_prepare_v2(db_, "SELECT count(*) FROM sqlite_master", -1, &t.s, nullptr) != SQLITE_OK ||
          sqlite3_step(t.s) != SQLITE_ROW)
        fail("cannot read");
      if (sqlite3_column_int(t.s, 0) != 0)
        throw TesseraError("tuning database " + path + ": a SQLite database of something else (no Tessera schema)");
      exec("BEGIN IMMEDIATE");
      exec("CREATE TABLE IF NOT EXISTS measurements ("
           " id INTEGER PRIMARY KEY, kernel TEXT NOT NULL, kernel_hash TEXT NOT NULL, shape TEXT NOT NULL,"
           " dtype TEXT NOT NULL, target TEXT NOT NULL, device TEXT NOT NULL, compiler TEXT NOT NULL,"
           " config TEXT NOT NULL, status TEXT NOT NULL, ms REAL NOT NULL, noise REAL NOT NULL,"
           " rounds INTEGER NOT NULL, bound_hash TEXT NOT NULL, unix_time INTEGER NOT NULL, message TEXT NOT NULL,"
           " confirmed INTEGER NOT NULL);"
           "CREATE INDEX IF NOT EXISTS by_key ON measurements (kernel_hash, dtype, target, device, compiler, shape);"
           "PRAGMA application_id = " + std::to_string(kApplicationId) + ";"
           "PRAGMA user_version = " + std::to_string(kSchemaVersion) + ";");
      exec("COMMIT");
    } else if (app != kApplicationId) {
      throw TesseraError("tuning database " + path + ": a SQLite database of something else (application id)");
    }
  } catch (...) {
    sqlite3_close(db_);
    db_ = nullptr;
    throw;
  }
}

Database::~Database() { sqlite3_close(db_); }

void Database::insert(const std::vector<Record>& rows) {
  exec("BEGIN IMMEDIATE");
  try {
    Stmt s;
    if (sqlite3_prepare_v2(db_,
                           "INSERT INTO measurements (kernel, kernel_hash, shape, dtype, target, device, compiler, config,"
                           " status, ms, noise, rounds, bound_hash, unix_time, message, confirmed)"
                           " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                           -1, &s.s, nullptr) != SQLITE_OK)
      fail("cannot write");
    for (const Record& r : rows) {
      sqlite3_reset(s.s);
      const std::string cfg = config_str(r.config);
      const std::string* texts[] = {&r.key.kernel, &r.key.kernel_hash, &r.key.shape, &r.key.dtype,
                                    &r.key.target, &r.key.device,      &r.key.compiler, &cfg, &r.status};
      int i = 1;
      for (const std::string* t : texts) sqlite3_bind_text(s.s, i++, t->c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_double(s.s, i++, r.ms);
      sqlite3_bind_double(s.s, i++, r.noise);
      sqlite3_bind_int64(s.s, i++, r.rounds);
      sqlite3_bind_text(s.s, i++, r.bound_hash.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_int64(s.s, i++, r.unix_time ? r.unix_time : static_cast<int64_t>(std::time(nullptr)));
      sqlite3_bind_text(s.s, i++, r.message.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_int(s.s, i++, r.confirmed ? 1 : 0);
      if (sqlite3_step(s.s) != SQLITE_DONE) fail("cannot write");
    }
    exec("COMMIT");
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

namespace {

Record read_row(sqlite3_stmt* s, const std::string& path) {
  auto text = [&](int i) {
    const unsigned char* t = sqlite3_column_text(s, i);
    return t ? std::string(reinterpret_cast<const char*>(t)) : std::string();
  };
  Record r;
  r.key = {text(0), text(1), text(2), text(3), text(4), text(5), text(6)};
  r.config = parse_config_str(text(7), "tuning database " + path + ": config");
  r.status = text(8);
  r.ms = sqlite3_column_double(s, 9);
  r.noise = sqlite3_column_double(s, 10);
  r.rounds = sqlite3_column_int64(s, 11);
  r.bound_hash = text(12);
  r.unix_time = sqlite3_column_int64(s, 13);
  r.message = text(14);
  r.confirmed = sqlite3_column_int(s, 15) != 0;
  return r;
}

constexpr const char* kColumns =
    "kernel, kernel_hash, shape, dtype, target, device, compiler, config, status, ms, noise, rounds, bound_hash,"
    " unix_time, message, confirmed";

}  // namespace

std::vector<Record> Database::select(const TuneKey& key, bool same_shape) const {
  std::string sql = std::string("SELECT ") + kColumns +
                    " FROM measurements WHERE kernel_hash = ? AND dtype = ? AND target = ? AND device = ?"
                    " AND compiler = ?" + (same_shape ? " AND shape = ?" : "") + " ORDER BY id";
  Stmt s;
  if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &s.s, nullptr) != SQLITE_OK) fail("cannot read");
  const std::string* binds[] = {&key.kernel_hash, &key.dtype, &key.target, &key.device, &key.compiler, &key.shape};
  for (int i = 0; i < (same_shape ? 6 : 5); ++i) sqlite3_bind_text(s.s, i + 1, binds[i]->c_str(), -1, SQLITE_TRANSIENT);
  std::vector<Record> out;
  int rc;
  while ((rc = sqlite3_step(s.s)) == SQLITE_ROW) out.push_back(read_row(s.s, path_));
  if (rc != SQLITE_DONE) fail("cannot read");
  return out;
}

bool Database::has_shape(const TuneKey& key) const {
  Stmt s;
  if (sqlite3_prepare_v2(db_,
                         "SELECT 1 FROM measurements WHERE kernel_hash = ? AND dtype = ? AND target = ? AND shape = ?"
                         " LIMIT 1",
                         -1, &s.s, nullptr) != SQLITE_OK)
    fail("cannot read");
  const std::string* binds[] = {&key.kernel_hash, &key.dtype, &key.target, &key.shape};
  for (int i = 0; i < 4; ++i) sqlite3_bind_text(s.s, i + 1, binds[i]->c_str(), -1, SQLITE_TRANSIENT);
  const int rc = sqlite3_step(s.s);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) fail("cannot read");
  return rc == SQLITE_ROW;
}

std::vector<std::string> Database::shapes(const TuneKey& key) const {
  Stmt s;
  if (sqlite3_prepare_v2(db_, "SELECT DISTINCT shape FROM measurements WHERE kernel_hash = ? AND dtype = ? AND target = ?",
                         -1, &s.s, nullptr) != SQLITE_OK)
    fail("cannot read");
  const std::string* binds[] = {&key.kernel_hash, &key.dtype, &key.target};
  for (int i = 0; i < 3; ++i) sqlite3_bind_text(s.s, i + 1, binds[i]->c_str(), -1, SQLITE_TRANSIENT);
  std::vector<std::string> out;
  int rc;
  while ((rc = sqlite3_step(s.s)) == SQLITE_ROW) out.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(s.s, 0)));
  if (rc != SQLITE_DONE) fail("cannot read");
  return out;
}

void complete_knob_defaults(std::vector<Record>& rows) {
  std::map<std::string, int64_t> defaults;
  for (const Record& r : rows)
    for (const auto& [name, v] : r.config)
      if (const KnobDecl* decl = find_codegen_knob(name)) defaults.emplace(name, decl->knob.default_value);
  for (Record& r : rows)
    for (const auto& [name, v] : defaults) r.config.emplace(name, v);
}

std::optional<Config> Database::best(const TuneKey& key) const {
  struct Sum {
    double ms = 0;
    int n = 0;
    Config config;
  };
  std::map<std::string, Sum> by_config;  // (keyed by config_str: the order ties are broken in)
  std::vector<Record> rows = select(key, true);
  complete_knob_defaults(rows);  // an older row and the rows naming the default: one config
  const bool any_confirmed =
      std::any_of(rows.begin(), rows.end(), [](const Record& r) { return r.confirmed && r.status == "ok"; });
  // A config with a failing row among those (a check that failed, a timeout in a tune's
  // confirmation) is never the pick, whatever its passing rows say.
  std::set<std::string> failed;
  for (const Record& r : rows)
    if (r.status != "ok" && (r.confirmed || !any_confirmed)) failed.insert(config_str(r.config));
  for (const Record& r : rows)
    if (r.status == "ok" && r.ms > 0 && (r.confirmed || !any_confirmed)) {
      Sum& sum = by_config[config_str(r.config)];
      sum.ms += r.ms;
      ++sum.n;
      sum.config = r.config;
    }
  std::optional<Config> best;
  double best_ms = 0;
  for (const auto& [key_str, sum] : by_config) {
    if (failed.count(key_str)) continue;
    const double ms = sum.ms / sum.n;
    if (!best || ms < best_ms) {
      best = sum.config;
      best_ms = ms;
    }
  }
  return best;
}

int64_t Database::count() const {
  Stmt s;
  if (sqlite3_prepare_v2(db_, "SELECT count(*) FROM measurements", -1, &s.s, nullptr) != SQLITE_OK ||
      sqlite3_step(s.s) != SQLITE_ROW)
    fail("cannot read");
  return sqlite3_column_int64(s.s, 0);
}

std::vector<Record> Database::all() const {
  Stmt s;
  if (sqlite3_prepare_v2(db_, (std::string("SELECT ") + kColumns + " FROM measurements ORDER BY id").c_str(), -1, &s.s,
                         nullptr) != SQLITE_OK)
    fail("cannot read");
  std::vector<Record> out;
  int rc;
  while ((rc = sqlite3_step(s.s)) == SQLITE_ROW) out.push_back(read_row(s.s, path_));
  if (rc != SQLITE_DONE) fail("cannot read");
  return out;
}

void Database::export_jsonl(std::ostream& out) const {
  for (const Record& r : all()) {
    std::string cfg;
    for (const auto& [n, v] : r.config) cfg += (cfg.empty() ? "" : ", ") + json_str(n) + ": " + std::to_string(v);
    out << "{\"kernel\": " << json_str(r.key.kernel) << ", \"kernel_hash\": " << json_str(r.key.kernel_hash)
        << ", \"shape\": " << json_str(r.key.shape) << ", \"dtype\": " << json_str(r.key.dtype)
        << ", \"target\": " << json_str(r.key.target) << ", \"device\": " << json_str(r.key.device)
        << ", \"compiler\": " << json_str(r.key.compiler) << ", \"config\": {" << cfg << "}"
        << ", \"status\": " << json_str(r.status) << ", \"ms\": " << json_num(r.ms)
        << ", \"noise\": " << json_num(r.noise) << ", \"rounds\": " << r.rounds
        << ", \"bound_hash\": " << json_str(r.bound_hash) << ", \"unix_time\": " << r.unix_time
        << ", \"message\": " << json_str(r.message) << ", \"confirmed\": " << (r.confirmed ? 1 : 0) << "}\n";
  }
}

int64_t Database::import_jsonl(std::istream& in, const std::string& name) {
  std::vector<Record> rows;
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    Record r;
    JsonLine(line, name, n).parse(r);
    rows.push_back(std::move(r));
  }
  if (in.bad()) throw TesseraError(name + ": read error");
  insert(rows);
  return static_cast<int64_t>(rows.size());
}

}  // namespace tessera::tune
