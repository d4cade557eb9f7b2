// Textual IR in, IR out: each tests/passes/data/*.tile file holds
//   // run: PASS[, PASS...]          the passes to run, in order; the last may be
//                                   split-reduction (the split schedule): the expected output
//                                   is then its partial and merge kernels, or the kernel as
//                                   it was when it refused
//   // config: NAME=VALUE ...        optional, for bind-constexprs
//   // stats: KEY=VALUE ...          optional, statistics the passes must report
//   // target: sm_90a | sm_90a-split-k | sm_89 | sm_80  optional, for the GPU lowering passes
//                                   (default sm_90a; sm_90a-split-k: its split-K compilation)
//   // note: TEXT                    optional, repeatable: a note some pass gave contains TEXT
//   <input kernel>
//   // ----- expect
//   <the kernel after the passes, exactly as print_kernel writes it>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ir/Verifier.h"
#include "passes/Passes.h"
#include "text/Text.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

const fs::path kDir = fs::path(TESSERA_SOURCE_DIR) / "tests" / "passes" / "data";

std::vector<std::string> case_files() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(kDir))
    if (e.path().extension() == ".tile") out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// The words after `// KEY: ` on the line that starts with it, split on spaces and commas.
std::vector<std::string> directive(const std::string& text, const std::string& key) {
  std::string tag = "// " + key + ": ";
  std::vector<std::string> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(tag, 0) != 0) continue;
    std::string rest = line.substr(tag.size());
    std::replace(rest.begin(), rest.end(), ',', ' ');
    std::istringstream words(rest);
    for (std::string w; words >> w;) out.push_back(w);
  }
  return out;
}

std::pair<std::string, int64_t> key_value(const std::string& kv) {
  auto eq = kv.find('=');
  return {kv.substr(0, eq), std::stoll(kv.substr(eq + 1))};
}

void run_pass(const std::string& name, Kernel& k, const ConstexprConfig& config, const GpuLoweringOptions& target,
              PassStats& stats) {
  for (const Pass& p : pipeline_passes(config))
    if (p.name == name) return p.run(k, stats);
  for (const Pass& p : gpu_lowering_passes(target))
    if (p.name == name) return p.run(k, stats);
  FAIL() << "unknown pass " << name;
}

class PassFile : public testing::TestWithParam<std::string> {};

TEST_P(PassFile, OutputMatches) {
  std::ifstream in(kDir / GetParam());
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  const std::string marker = "// ----- expect\n";
  auto split = text.find(marker);
  ASSERT_NE(split, std::string::npos) << "missing '" << marker << "'";
  std::string input = text.substr(0, split);
  std::string expect = text.substr(split + marker.size());

  ConstexprConfig config;
  for (const auto& kv : directive(input, "config")) config.insert(key_value(kv));
  auto passes = directive(input, "run");
  ASSERT_FALSE(passes.empty());
  GpuLoweringOptions target{90, true};
  for (const auto& t : directive(input, "target")) {
    ASSERT_TRUE(t == "sm_90a" || t == "sm_90a-split-k" || t == "sm_90a-stream-k" || t == "sm_89" || t == "sm_80")
        << "target " << t;
    target.split_k = t == "sm_90a-split-k";
    target.stream_k = t == "sm_90a-stream-k";
    if (t == "sm_80") target = {80, false};
    if (t == "sm_89") target = {89, false};
  }

  auto m = parse_module(input, GetParam());
  ASSERT_EQ(m->kernels.size(), 1u);
  Kernel& k = *m->kernels[0];
  verify_or_throw(k);
  PassStats stats;
  const bool split_schedule = passes.back() == "split-reduction";
  if (split_schedule) passes.pop_back();
  for (const auto& p : passes) run_pass(p, k, config, target, stats);
  EXPECT_EQ(verify(k).size(), 0u) << "the output does not verify";
  std::string got = print_kernel(k);
  if (split_schedule) {
    SplitKernels s = split_reduction(k, stats);
    if (s.partial) {
      EXPECT_EQ(verify(*s.partial, {true}).size(), 0u) << "the partial kernel does not verify";
      EXPECT_EQ(verify(*s.merge, {true}).size(), 0u) << "the merge kernel does not verify";
      got = print_kernel(*s.partial) + "\n" + print_kernel(*s.merge);
    }
  }
  // TESSERA_UPDATE_PASS_FILES=1 writes what the passes give as the expected output (read the
  // diff before committing it).
  if (const char* u = std::getenv("TESSERA_UPDATE_PASS_FILES"); u && std::string(u) == "1") {
    std::ofstream(kDir / GetParam()) << input << marker << got;
    return;
  }
  EXPECT_EQ(got, expect);
  for (const auto& kv : directive(input, "stats")) {
    auto [key, value] = key_value(kv);
    EXPECT_EQ(stats[key], value) << key;
  }
  std::istringstream lines(input);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("// note: ", 0) != 0) continue;
    std::string want = line.substr(9);
    bool found = std::any_of(stats.notes.begin(), stats.notes.end(),
                             [&](const std::string& n) { return n.find(want) != std::string::npos; });
    EXPECT_TRUE(found) << "no note contains '" << want << "'";
  }
}

INSTANTIATE_TEST_SUITE_P(Data, PassFile, testing::ValuesIn(case_files()),
                         [](const testing::TestParamInfo<std::string>& info) {
                           std::string n = info.param.substr(0, info.param.size() - 5);
                           std::replace_if(n.begin(), n.end(), [](char c) { return !isalnum(c); }, '_');
                           return n;
                         });

}  // namespace
}  // namespace tessera
