// The tuning database: rows, best config, schema version, corrupt / foreign / locked files,
// JSON Lines, and the lookup `tessera run` makes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "kernels/Library.h"
#include "support/Diagnostic.h"
#include "tune/Database.h"
#include "tune/Lookup.h"

namespace tessera::tune {
namespace {

using ::testing::HasSubstr;

std::string temp_db(const std::string& name) {
  std::string p = testing::TempDir() + "/tune_db_" + std::to_string(::getpid()) + "_" + name;
  std::filesystem::remove(p);
  return p;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const TesseraError& e) {
    return e.what();
  }
  return "";
}

TuneKey key(const std::string& shape) { return {"matmul", "h1", shape, "f32", "cpu", "dev", "cc"}; }

Record row(const std::string& shape, int64_t bm, double ms, const std::string& status = "ok") {
  Record r;
  r.key = key(shape);
  r.config = {{"BLOCK_M", bm}, {"BLOCK_N", 32}};
  r.status = status;
  r.ms = ms;
  r.noise = 0.01;
  r.rounds = 3;
  r.bound_hash = "b" + std::to_string(bm);
  r.message = status == "ok" ? "" : "first: \"y[0]\"\tgot 1";
  return r;
}

TEST(Database, StoresRowsAndPicksTheFastestPassingConfig) {
  std::string p = temp_db("best");
  Database db(p, true);
  db.insert({row("M=10", 16, 2.0), row("M=10", 32, 1.0), row("M=10", 64, 0.5, "check-failed"), row("M=20", 64, 0.1),
             row("M=10", 32, 1.4)});
  EXPECT_EQ(db.count(), 5);
  EXPECT_EQ(db.best(key("M=10"))->at("BLOCK_M"), 32);  // 1.2 on average: not the failed 0.5
  EXPECT_EQ(db.best(key("M=20"))->at("BLOCK_M"), 64);
  EXPECT_FALSE(db.best(key("M=30")));
  EXPECT_EQ(db.select(key("M=10"), true).size(), 4u);
  EXPECT_EQ(db.select(key("M=10"), false).size(), 5u);  // every shape: training data
  TuneKey other = key("M=10");
  other.device = "another machine";
  EXPECT_FALSE(db.best(other));
  // Reopened, the rows are there.
  Database again(p, false);
  EXPECT_EQ(again.count(), 5);
}

TEST(Database, ATunesConfirmedDecisionOutranksALuckyRow) {
  Database db(temp_db("confirmed"), true);
  Record lucky = row("M=10", 16, 0.5), chosen = row("M=10", 32, 0.9), dflt = row("M=10", 64, 1.0);
  chosen.confirmed = dflt.confirmed = true;
  db.insert({lucky, row("M=10", 32, 0.8), chosen, dflt});
  EXPECT_EQ(db.best(key("M=10"))->at("BLOCK_M"), 32);
  EXPECT_TRUE(db.select(key("M=10"), true)[2].confirmed);
  EXPECT_FALSE(db.select(key("M=10"), true)[0].confirmed);
}

// A config that failed one of its confirmed rows (a check, a timeout in a tune's
// confirmation) is never the pick, though its passing row is the fastest.
TEST(Database, AConfigThatFailedAConfirmedRowIsNotPicked) {
  Database db(temp_db("confirmed_failed"), true);
  Record fast = row("M=10", 16, 0.5), fast_failed = row("M=10", 16, 0), steady = row("M=10", 32, 0.9);
  fast_failed.status = "check-failed";
  fast.confirmed = fast_failed.confirmed = steady.confirmed = true;
  db.insert({fast, fast_failed, steady});
  EXPECT_EQ(db.best(key("M=10"))->at("BLOCK_M"), 32);
}

// Rows written before the ring_stages knob existed ran its table default (0): they are one config
// with the rows that name ring_stages = 0, averaged and failed together.
TEST(Database, ARowWithoutACodegenKnobIsTheKnobsDefault) {
  Database db(temp_db("knob_default"), true);
  Record old_fast = row("M=10", 16, 0.5), new_slow = row("M=10", 16, 1.5), other = row("M=10", 32, 0.9),
         deeper = row("M=10", 16, 0.95);
  new_slow.config["ring_stages"] = 0;
  other.config["ring_stages"] = 0;
  deeper.config["ring_stages"] = 8;
  db.insert({old_fast, new_slow, other, deeper});
  // BLOCK_M 16 at the default ring: (0.5 + 1.5) / 2 = 1.0, not the old row's 0.5.
  std::optional<Config> best = db.best(key("M=10"));
  ASSERT_TRUE(best);
  EXPECT_EQ(best->at("BLOCK_M"), 32);
  EXPECT_EQ(best->at("ring_stages"), 0);
  // An old failing row (no ring_stages) fails the config that names the default.
  Record failed = row("M=10", 32, 0, "check-failed");
  db.insert({failed});
  best = db.best(key("M=10"));
  ASSERT_TRUE(best);
  EXPECT_EQ(best->at("BLOCK_M"), 16);
  EXPECT_EQ(best->at("ring_stages"), 8);
}

TEST(Database, ANewerSchemaIsRefused) {
  std::string p = temp_db("newer");
  { Database db(p, true); }
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(p.c_str(), &raw), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(raw, "PRAGMA user_version = 2", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(raw);
  EXPECT_THAT(error_of([&] { Database db(p, false); }), HasSubstr("written by a newer Tessera (schema 2; this one reads 1)"));
}

TEST(Database, CorruptForeignAndMissingFilesAreErrors) {
  std::string garbage = temp_db("garbage");
  std::ofstream(garbage) << std::string(4096, 'x');
  EXPECT_THAT(error_of([&] { Database db(garbage, true); }), HasSubstr("tuning database " + garbage + ": "));
  std::string foreign = temp_db("foreign");
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(foreign.c_str(), &raw), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(raw, "CREATE TABLE t (x)", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(raw);
  EXPECT_THAT(error_of([&] { Database db(foreign, true); }), HasSubstr("a SQLite database of something else"));
  EXPECT_THAT(error_of([&] { Database db(temp_db("missing"), false); }), HasSubstr("no such file"));
  // A database whose pages were overwritten halfway.
  std::string torn = temp_db("torn");
  {
    Database db(torn, true);
    std::vector<Record> rows;
    for (int i = 0; i < 400; ++i) rows.push_back(row("M=" + std::to_string(i), 16, 1.0));
    db.insert(rows);
  }
  {
    std::fstream f(torn, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(1024);
    f << std::string(20000, '\x7f');
  }
  EXPECT_THAT(error_of([&] {
                Database db(torn, false);
                db.select(key("M=3"), false);
                db.insert({row("M=1", 16, 1.0)});
              }),
              HasSubstr("tuning database " + torn));
}

TEST(Database, ALockedDatabaseIsAnErrorAndLosesNoRows) {
  std::string p = temp_db("locked");
  Database db(p, true, 50);
  db.insert({row("M=1", 16, 1.0)});
  sqlite3* other = nullptr;
  ASSERT_EQ(sqlite3_open(p.c_str(), &other), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(other, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr), SQLITE_OK);
  EXPECT_THAT(error_of([&] { db.insert({row("M=2", 16, 1.0)}); }), HasSubstr("locked"));
  sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(other);
  db.insert({row("M=3", 16, 1.0)});
  EXPECT_EQ(db.count(), 2);
}

TEST(Database, ConcurrentWritersLoseNoRows) {
  std::string p = temp_db("concurrent");
  { Database db(p, true); }
  std::vector<pid_t> kids;
  for (int w = 0; w < 3; ++w) {
    pid_t pid = ::fork();
    if (pid == 0) {
      int code = 0;
      try {
        Database db(p, false);
        for (int t = 0; t < 20; ++t) db.insert({row("M=" + std::to_string(w), t, 1.0), row("M=9", t, 2.0)});
      } catch (...) {
        code = 1;
      }
      std::_Exit(code);
    }
    kids.push_back(pid);
  }
  for (pid_t k : kids) {
    int st = 0;
    ::waitpid(k, &st, 0);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  Database db(p, false);
  EXPECT_EQ(db.count(), 3 * 20 * 2);
  EXPECT_EQ(db.select(key("M=9"), true).size(), 60u);
}

TEST(Database, JsonLinesRoundTrip) {
  Database a(temp_db("a"), true);
  Record c = row("M=10", 16, 2.0);
  c.confirmed = true;
  a.insert({c, row("M=10", 64, 0, "timeout")});
  std::ostringstream out;
  a.export_jsonl(out);
  const std::string text = out.str();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2);
  EXPECT_THAT(text, HasSubstr("\"config\": {\"BLOCK_M\": 16, \"BLOCK_N\": 32}"));
  EXPECT_THAT(text, HasSubstr("\"confirmed\": 1}\n"));
  Database b(temp_db("b"), true);
  std::istringstream in(out.str());
  EXPECT_EQ(b.import_jsonl(in, "rows.jsonl"), 2);
  std::ostringstream again;
  b.export_jsonl(again);
  EXPECT_EQ(again.str(), out.str());
  // A malformed line is located and adds nothing.
  std::istringstream bad(out.str() + "{\"kernel\": \"x\", \"ms\": }\n");
  EXPECT_THAT(error_of([&] { b.import_jsonl(bad, "rows.jsonl"); }), HasSubstr("rows.jsonl:3:23: error: expected a number"));
  std::istringstream missing("{\"kernel\": \"x\"}\n");
  EXPECT_THAT(error_of([&] { b.import_jsonl(missing, "m.jsonl"); }), HasSubstr("needs kernel_hash"));
  EXPECT_EQ(b.count(), 2);
}

TEST(Database, RunLooksTheBestConfigUpByTheKernelsKey) {
  std::string p = temp_db("lookup");
  auto k = find_library_kernel("matmul")->build(ScalarKind::F32);
  const Sizes sizes = {{"M", 33}, {"N", 65}, {"K", 17}};
  EXPECT_FALSE(lookup_tuned(*k, "f32", "cpu", sizes, p));  // no database: the defaults
  {
    Database db(p, true);
    Record r;
    r.key = make_key(*k, "f32", "cpu", sizes);
    r.config = {{"BLOCK_M", 32}, {"BLOCK_N", 16}, {"BLOCK_K", 16}, {"mma_l2_prefetch", 64}, {"cpu_dot_mr", 2}};
    r.status = "ok";
    r.ms = 1;
    db.insert({r});
  }
  auto got = lookup_tuned(*k, "f32", "cpu", sizes, p);
  ASSERT_TRUE(got);
  // The kernel's own constexprs and the cpu's codegen knobs, not the cuda ones.
  EXPECT_EQ(*got, (Config{{"BLOCK_M", 32}, {"BLOCK_N", 16}, {"BLOCK_K", 16}, {"cpu_dot_mr", 2}}));
  EXPECT_FALSE(lookup_tuned(*k, "bf16", "cpu", sizes, p));
  // Shape buckets: another shape of the bucket (M 33..64, N 65..128, K 17..32) takes the
  // nearest tuned shape's config; another bucket, none.
  EXPECT_EQ(shape_bucket({{"M", 33}, {"N", 65}, {"K", 16}}), "K=16,M=64,N=128");
  std::string at;
  EXPECT_EQ(lookup_tuned(*k, "f32", "cpu", {{"M", 50}, {"N", 100}, {"K", 32}}, p, &at), got);
  EXPECT_EQ(at, "K=17,M=33,N=65");
  {
    Database db(p, true);
    Record r;
    r.key = make_key(*k, "f32", "cpu", {{"M", 60}, {"N", 65}, {"K", 17}});
    r.config = {{"BLOCK_M", 64}, {"BLOCK_N", 16}, {"BLOCK_K", 16}};
    r.status = "ok";
    r.ms = 1;
    db.insert({r});
  }
  EXPECT_EQ(lookup_tuned(*k, "f32", "cpu", {{"M", 50}, {"N", 65}, {"K", 17}}, p, &at),
            (Config{{"BLOCK_M", 64}, {"BLOCK_N", 16}, {"BLOCK_K", 16}}));
  EXPECT_EQ(at, "K=17,M=60,N=65");  // nearer than M=33
  EXPECT_EQ(lookup_tuned(*k, "f32", "cpu", sizes, p, &at), got);
  EXPECT_EQ(at, "");  // the exact shape
  EXPECT_FALSE(lookup_tuned(*k, "f32", "cpu", {{"M", 65}, {"N", 65}, {"K", 17}}, p));
  auto other = find_library_kernel("matmul")->build(ScalarKind::BF16);
  EXPECT_FALSE(lookup_tuned(*other, "f32", "cpu", sizes, p));  // another IR hash
  // The same kernel with a smaller space (the key does not hold it): a row whose value is no
  // longer a candidate is not taken; one whose values all are still is.
  auto fewer = k->clone();
  fewer->find_constexpr("BLOCK_M")->candidates = {64, 128};
  EXPECT_FALSE(lookup_tuned(*fewer, "f32", "cpu", sizes, p));
  fewer->find_constexpr("BLOCK_M")->candidates = {16, 32};
  EXPECT_EQ(lookup_tuned(*fewer, "f32", "cpu", sizes, p), got);
}

}  // namespace
}  // namespace tessera::tune
