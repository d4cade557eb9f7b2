// Random damage to valid kernels: the verifier must report something (or nothing) and never
// crash, whatever pointers, types, attributes and regions it is handed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "ir/Verifier.h"
#include "text/Text.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> valid_sources() {
  std::vector<std::string> out;
  for (const char* dir : {"tests/text/data", "tests/passes/data", "tests/cli/data"}) {
    fs::path p = fs::path(TESSERA_SOURCE_DIR) / dir;
    if (!fs::exists(p)) continue;
    for (const auto& e : fs::directory_iterator(p)) {
      if (e.path().extension() != ".tile") continue;
      std::ifstream in(e.path());
      std::stringstream ss;
      ss << in.rdbuf();
      std::string text = ss.str();
      // Pass test files carry the expected output after a marker; the input is enough.
      if (auto cut = text.find("// ----- expect"); cut != std::string::npos) text.resize(cut);
      out.push_back(text);
    }
  }
  return out;
}

std::vector<Op*> ops_of(Kernel& k) {
  std::vector<Op*> ops;
  walk(k, [&](Op& op) { ops.push_back(&op); });
  return ops;
}

Type random_type(std::mt19937& rng) {
  const auto& kinds = all_scalar_kinds();
  ScalarKind e = kinds[rng() % kinds.size()];
  Shape s;
  int rank = static_cast<int>(rng() % 3);
  for (int i = 0; i < rank; ++i) {
    switch (rng() % 4) {
      case 0: s.emplace_back(static_cast<int64_t>(rng() % 5) - 1); break;
      case 1: s.emplace_back("BLOCK_N"); break;
      case 2: s.emplace_back("NOPE"); break;
      default: s.emplace_back(int64_t{16}); break;
    }
  }
  switch (rng() % 5) {
    case 0: return Type::scalar(e);
    case 1: return Type::view(e, s);
    case 2: return Type::ptr(e);
    case 3: return Type::none();
    default: return Type::tile(e, s);
  }
}

Attr random_attr(std::mt19937& rng) {
  switch (rng() % 5) {
    case 0: return static_cast<int64_t>(rng() % 7) - 3;
    case 1: return std::ldexp(static_cast<double>(rng() % 1000), -3);
    case 2: return std::string(rng() % 2 ? "sum" : "bogus");
    case 3: return std::vector<int64_t>{static_cast<int64_t>(rng() % 3), static_cast<int64_t>(rng() % 3)};
    default: return rng() % 2 == 0;
  }
}

void damage(Kernel& k, Kernel& foreign, std::mt19937& rng) {
  auto ops = ops_of(k);
  if (ops.empty()) return;
  Op& op = *ops[rng() % ops.size()];
  std::vector<Value*> values(k.params.begin(), k.params.end());
  for (Op* o : ops)
    for (Value* r : o->results) values.push_back(r);
  switch (rng() % 9) {
    case 0:  // any value of the kernel, visible or not
      if (!op.operands.empty() && !values.empty()) op.operands[rng() % op.operands.size()] = values[rng() % values.size()];
      break;
    case 1:
      if (!op.operands.empty()) op.operands[rng() % op.operands.size()] = nullptr;
      break;
    case 2:  // (a kernel without parameters or results has no values of its own)
      op.operands.push_back(rng() % 2 || values.empty() ? foreign.params[0] : values[rng() % values.size()]);
      break;
    case 3:
      if (!op.results.empty()) op.results[rng() % op.results.size()]->type = random_type(rng);
      break;
    case 4:
      if (!op.attrs.empty()) op.attrs[rng() % op.attrs.size()].value = random_attr(rng);
      else op.attrs.push_back({"axis", random_attr(rng)});
      break;
    case 5:  // drop an op (its results stay referenced elsewhere)
      if (op.parent && !op.parent->ops.empty()) op.parent->ops.erase(op.parent->ops.begin() + rng() % op.parent->ops.size());
      break;
    case 6:
      if (!op.regions.empty()) {
        Block& b = *op.regions[rng() % op.regions.size()];
        if (!b.ops.empty()) b.ops.pop_back();
        else if (!b.args.empty()) b.args.pop_back();
      }
      break;
    case 7:
      op.kind = static_cast<OpKind>(rng() % all_ops().size());
      break;
    default:
      if (!op.regions.empty()) op.regions.pop_back();
      else op.operands.clear();
      break;
  }
}

TEST(VerifyRobustness, RandomlyDamagedKernelsNeverCrash) {
  auto sources = valid_sources();
  ASSERT_FALSE(sources.empty());
  std::mt19937 rng(20240611);
  Kernel foreign;
  foreign.add_param(Type::scalar(ScalarKind::I32), "alien");
  int with_errors = 0, runs = 0;
  for (const auto& src : sources) {
    std::unique_ptr<Module> m;
    try {
      m = parse_module(src, "input.tile");
    } catch (const TesseraError&) {
      continue;  // files that test parse errors
    }
    for (const auto& k : m->kernels) {
      for (int trial = 0; trial < 150; ++trial) {
        auto c = k->clone();
        int hits = 1 + static_cast<int>(rng() % 3);
        for (int h = 0; h < hits; ++h) damage(*c, foreign, rng);
        VerifyOptions o;
        o.require_bound = rng() % 2;
        o.backend = rng() % 2 ? "cuda" : "";
        auto errors = verify(*c, o);
        for (const auto& e : errors) EXPECT_NE(std::string(e.what()).find("error: "), std::string::npos);
        with_errors += !errors.empty();
        ++runs;
      }
    }
  }
  // Most damage must be noticed; if nothing is, the verifier is not looking.
  EXPECT_GT(with_errors, runs / 2);
}

}  // namespace
}  // namespace tessera
