// The tuning database: one SQLite row per measurement (docs/tuning.md). Every failure (no
// such file where one is required, not a database, corrupt, locked past the busy timeout,
// written by a newer schema) is a TesseraError naming the file, never a crash; rows are written
// in one transaction, so a failed write loses none of those before it and adds none of its own.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "tune/Space.h"

struct sqlite3;

namespace tessera::tune {

// The schema this build reads and writes; a database with a higher one is refused.
inline constexpr int kSchemaVersion = 1;

// What a measurement is of: the key a best config is looked up by.
struct TuneKey {
  std::string kernel;       // the kernel's name (for people; the hash is the key)
  std::string kernel_hash;  // hash of the kernel's IR for the dtype, knobs unbound, without its
                            // constexprs' defaults and candidates (kernel_identity_hash)
  std::string shape;        // sizes_key of the sizes measured at
  std::string dtype;
  std::string target;       // "cpu", "cuda:sm_90a"
  std::string device;       // the CPU model and cores, or the GPU's name
  std::string compiler;     // Tessera's codegen version and the C++ compiler / NVRTC version
};

struct Record {
  TuneKey key;
  Config config;
  std::string status;  // "ok", "compile-error", "run-error", "check-failed", "timeout"
  double ms = 0;       // Measurement::ms (ok only)
  double noise = 0;    // Measurement::noise
  int64_t rounds = 0;
  std::string bound_hash;  // the IR after binding this config (what was compiled)
  int64_t unix_time = 0;
  std::string message;     // why it failed (empty when ok)
  // Measured again at the end of a tune, beside the default: the tune's decision.
  bool confirmed = false;
};

// A row written before a codegen knob that other rows of `rows` name existed was measured at the
// knob's table default (what the emitter did before the knob): its config gets that value, so
// that it is one config with the newer rows naming the default (Database::best, replay).
void complete_knob_defaults(std::vector<Record>& rows);

class Database {
 public:
  // Opens (creating when `create` and missing) the database at `path`, and checks its schema.
  // busy_ms: how long a write waits for another tuner's transaction before it is an error.
  Database(const std::string& path, bool create, int busy_ms = 5000);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  const std::string& path() const { return path_; }
  // Appends the rows in one transaction.
  void insert(const std::vector<Record>& rows);
  // The rows whose key matches `key` in every field but the shape (all shapes: training data)
  // or, when `same_shape`, in every field.
  std::vector<Record> select(const TuneKey& key, bool same_shape) const;
  // The config with the least time among passing rows of exactly `key` (each config's rows
  // averaged), among the confirmed rows when there are any (the last tunes' decisions), leaving
  // out a config with a failing row among those; or nullopt. A row that lacks a codegen knob
  // other rows of the key name counts as that knob's table default (find_codegen_knob: the
  // rows written before the knob existed ran it), and the config returned names it.
  std::optional<Config> best(const TuneKey& key) const;
  // Whether any row has this key's kernel, dtype, target and shape (whatever its device and
  // compiler): a cheap test before the key's device and compiler are worked out.
  bool has_shape(const TuneKey& key) const;
  // The shapes with any row of this key's kernel, dtype and target (whatever its device and
  // compiler), in the database's order.
  std::vector<std::string> shapes(const TuneKey& key) const;
  int64_t count() const;
  // Every row, in the order they were written.
  std::vector<Record> all() const;

  // One JSON object per line, every field of every row.
  void export_jsonl(std::ostream& out) const;
  // Reads what export_jsonl writes; returns the rows added. A malformed line is an error at
  // NAME:LINE:COL and adds nothing (the whole file is one transaction).
  int64_t import_jsonl(std::istream& in, const std::string& name);

 private:
  void exec(const std::string& sql) const;
  [[noreturn]] void fail(const std::string& what) const;
  std::string path_;
  sqlite3* db_ = nullptr;
};

// The database `tessera tune` and `tessera run` use: $TESSERA_TUNE_DB, else tuning.db in
// Tessera's cache directory ($TESSERA_CACHE_DIR, $XDG_CACHE_HOME/tessera, ~/.cache/tessera).
std::string default_database_path();

}  // namespace tessera::tune
