// print(parse(text)) == text over the corpus in tests/text/data, which must use every op.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <set>

#include "TextTestUtil.h"
#include "text/Text.h"

namespace tessera {
namespace {

using testing::read_file;
using testing::source_dir;
using testing::tile_files;

std::vector<std::filesystem::path> corpus() { return tile_files(source_dir() / "tests/text/data"); }

TEST(RoundTrip, CorpusIsNotEmpty) { EXPECT_GE(corpus().size(), 8u); }

TEST(RoundTrip, EveryFilePrintsBackExactly) {
  for (const auto& path : corpus()) {
    SCOPED_TRACE(path.string());
    std::string text = read_file(path);
    auto m = parse_module(text, path.string());
    ASSERT_FALSE(m->kernels.empty());
    std::string printed = print_module(*m);
    EXPECT_EQ(printed, text);
    // Stable: what the printer writes parses to the same text again.
    auto again = parse_module(printed, "printed");
    EXPECT_EQ(print_module(*again), printed);
  }
}

// A new op without a round-trip example fails here.
TEST(RoundTrip, CorpusUsesEveryOp) {
  std::set<OpKind> seen;
  for (const auto& path : corpus()) {
    auto m = parse_module(read_file(path), path.string());
    for (auto& k : m->kernels) walk(*k, [&](Op& op) { seen.insert(op.kind); });
  }
  for (const auto& info : all_ops())
    EXPECT_TRUE(seen.count(info.kind)) << "no round-trip example uses op '" << info.name << "'";
}

TEST(RoundTrip, CorpusCastsToEveryScalarType) {
  std::set<ScalarKind> cast_to;
  for (const auto& path : corpus()) {
    auto m = parse_module(read_file(path), path.string());
    for (auto& k : m->kernels)
      walk(*k, [&](Op& op) {
        if (op.kind == OpKind::Cast) cast_to.insert(op.result()->type.elem);
      });
  }
  for (ScalarKind s : all_scalar_kinds())
    EXPECT_TRUE(cast_to.count(s)) << "no cast to " << scalar_name(s);
}

// Kernels written by the C++ builder or by passes hold clashing, empty or unprintable name
// hints; the printer must still write text that parses back to the same program.
TEST(RoundTrip, PrinterRenamesClashingAndUnprintableNames) {
  Kernel k;
  k.name = "names";
  Value* x = k.add_param(Type::scalar(ScalarKind::F32), "x");
  Value* one = k.create_op(*k.grid, OpKind::Const, {}, {Type::scalar(ScalarKind::I32)},
                           {{"value", int64_t{1}}})->result();
  k.create_op(*k.grid, OpKind::Yield, {one}, {});
  one->name = "1";  // a number that fresh names must avoid
  Value* a = k.create_op(*k.body, OpKind::Exp, {x}, {x->type})->result();
  a->name = "t";
  Value* b = k.create_op(*k.body, OpKind::Log, {a}, {x->type})->result();
  b->name = "t";  // clashes with a
  Value* c = k.create_op(*k.body, OpKind::Sqrt, {b}, {x->type})->result();
  c->name = "bad name!";
  Value* d = k.create_op(*k.body, OpKind::Add, {c, a}, {x->type})->result();  // no name
  k.create_op(*k.body, OpKind::Neg, {d}, {x->type});

  std::string text = print_kernel(k);
  EXPECT_NE(text.find("%1 = const"), std::string::npos) << text;
  EXPECT_EQ(text.find("%t"), std::string::npos) << text;
  EXPECT_EQ(text.find("bad"), std::string::npos) << text;
  auto m = parse_module(text, "names");
  ASSERT_EQ(m->kernels.size(), 1u);
  EXPECT_EQ(print_kernel(*m->kernels[0]), text);
  // Uses still point at the right definitions after renaming.
  const Block& body = *m->kernels[0]->body;
  ASSERT_EQ(body.ops.size(), 5u);
  EXPECT_EQ(body.ops[3]->operand(0), body.ops[2]->result());
  EXPECT_EQ(body.ops[3]->operand(1), body.ops[0]->result());
}

// Random doubles (all bit patterns, including subnormals and extremes) and integers read back
// bit for bit.
TEST(RoundTrip, NumberAttributesReadBackExactly) {
  std::mt19937_64 rng(20240611);
  for (int i = 0; i < 2000; ++i) {
    uint64_t bits = rng();
    if (i % 4 == 1) bits &= 0x800fffffffffffffull;  // subnormal
    double v;
    std::memcpy(&v, &bits, sizeof v);
    int64_t n = static_cast<int64_t>(rng());
    if (i == 0) n = std::numeric_limits<int64_t>::min();
    if (i == 1) n = std::numeric_limits<int64_t>::max();
    Kernel k;
    k.name = "nums";
    k.create_op(*k.body, OpKind::Const, {}, {Type::scalar(ScalarKind::F64)}, {{"value", v}});
    k.create_op(*k.body, OpKind::Const, {}, {Type::scalar(ScalarKind::I64)}, {{"value", n}});
    auto m = parse_module(print_kernel(k), "nums");
    const Op& f = *m->kernels[0]->body->ops[0];
    const Op& g = *m->kernels[0]->body->ops[1];
    ASSERT_TRUE(std::holds_alternative<double>(*f.find_attr("value")));
    double r = std::get<double>(*f.find_attr("value"));
    if (std::isnan(v)) {
      EXPECT_TRUE(std::isnan(r));
    } else {
      uint64_t rbits;
      std::memcpy(&rbits, &r, sizeof r);
      EXPECT_EQ(rbits, bits) << print_kernel(k);
    }
    EXPECT_EQ(std::get<int64_t>(*g.find_attr("value")), n);
  }
}

TEST(RoundTrip, StringAttributesWithAnyBytesReadBackExactly) {
  std::mt19937 rng(77);
  for (int i = 0; i < 300; ++i) {
    std::string s(rng() % 40, '\0');
    for (char& c : s) c = static_cast<char>(rng() % 256);
    Kernel k;
    k.name = "strs";
    k.create_op(*k.body, OpKind::Raw, {}, {}, {{"name", std::string("r")}, {"cpp", s}});
    std::string text = print_kernel(k);
    EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 5) << "a raw newline in: " << text;
    auto m = parse_module(text, "strs");
    EXPECT_EQ(m->kernels[0]->body->ops[0]->attr_string("cpp"), s);
    EXPECT_EQ(print_module(*m), text);
  }
}

TEST(RoundTrip, TileTypeSpaceStringsAreEscaped) {
  Type t = Type::tile(ScalarKind::BF16, {"BM", 64});
  t.space = "sh\"ared";
  EXPECT_EQ(print_type(t), "tile<bf16, [BM, 64], space = \"sh\\\"ared\">");
}

// Every layout encoding prints every field and parses back to the same type.
TEST(RoundTrip, LayoutEncodings) {
  const Layout mma2 = Layout::mma(2, {4, 2}, {16, 8});
  const Layout blocked = Layout::blocked({1, 4}, {8, 4}, {4, 1}, {1, 0});
  const std::vector<std::pair<Layout, std::string>> cases = {
      {Layout::replicated(), "replicated"},
      {blocked, "blocked<per_thread = [1, 4], threads = [8, 4], warps = [4, 1], order = [1, 0]>"},
      {mma2, "mma<version = 2, warps = [4, 2], instr = [16, 8]>"},
      {Layout::mma(3, {8, 1}, {64, 128}), "mma<version = 3, warps = [8, 1], instr = [64, 128]>"},
      {Layout::dot_operand(mma2, 1, 2),
       "dot_operand<operand = 1, k_width = 2, parent = mma<version = 2, warps = [4, 2], instr = [16, 8]>>"},
      {Layout::slice(blocked, 1),
       "slice<dim = 1, parent = blocked<per_thread = [1, 4], threads = [8, 4], warps = [4, 1], order = [1, 0]>>"},
      {Layout::shared(128, 0), "shared<swizzle = 128, pad = 0>"},
      {Layout::shared(64, 0, {0, 1}), "shared<swizzle = 64, pad = 0, order = [0, 1]>"},
      {Layout::permuted(mma2, {1, 0}),
       "permuted<dims = [1, 0], parent = mma<version = 2, warps = [4, 2], instr = [16, 8]>>"},
  };
  for (const auto& [layout, text] : cases) {
    EXPECT_EQ(layout.str(), text);
    Type t = Type::tile(ScalarKind::F32, {128, 64});
    t.layout = layout;
    Kernel k;
    k.name = "tt";
    k.add_param(Type::view(ScalarKind::F32, {"M"}), "v");
    k.create_op(*k.body, OpKind::Splat, {k.params[0]}, {t});
    const std::string printed = print_kernel(k);
    EXPECT_NE(printed.find("layout = " + text + ">"), std::string::npos) << printed;
    auto m = parse_module(printed, "tt");
    EXPECT_EQ(m->kernels[0]->body->ops[0]->result()->type, t) << text;
    EXPECT_EQ(print_module(*m), printed);
  }
  EXPECT_NE(Layout::slice(blocked, 0), Layout::slice(blocked, 1));
  EXPECT_NE(Layout::shared(128, 0), Layout::shared(128, 0, {0, 1}));
  EXPECT_NE(Layout::dot_operand(mma2, 0, 2), Layout::dot_operand(Layout::mma(2, {2, 2}, {16, 8}), 0, 2));
  // A permuted layout composes, and the identity is the parent.
  EXPECT_EQ(Layout::permuted(Layout::permuted(mma2, {1, 0}), {1, 0}), mma2);
  EXPECT_EQ(Layout::permuted(mma2, {0, 1}), mma2);
  const Layout p3 = Layout::permuted(Layout::permuted(Layout::mma(3, {4, 1}, {64, 16}), {1, 0}), {1, 0});
  EXPECT_EQ(p3, Layout::mma(3, {4, 1}, {64, 16}));
}

TEST(RoundTrip, EmptyModule) {
  auto m = parse_module("  // nothing here\n", "empty");
  EXPECT_TRUE(m->kernels.empty());
  EXPECT_EQ(print_module(*m), "");
}

}  // namespace
}  // namespace tessera

// print_op_lines gives each op the line print_kernel writes for it (regions folded), so that
// comments in generated code use the same names as `tessera compile --emit ir`.
TEST(PrintOpLines, MatchesPrintKernel) {
  const char* text = R"(kernel @k(%x: view<f32, [N]>) {
  grid {
    %n = dim %x {axis = 0} : i32
    yield %n
  }
  %pid = program_id {axis = 0} : i32
  %v = gather %x, %pid : f32
  %c0 = const {value = 0} : i32
  %c1 = const {value = 1} : i32
  %r = for %c0, %pid, %c1, %v : f32 {
    ^(%i: i32, %acc: f32):
    %t = add %acc, %acc : f32
    yield %t
  }
  scatter %x, %r, %pid
}
)";
  auto m = tessera::parse_module(text, "k.tile");
  const tessera::Kernel& k = *m->kernels[0];
  auto lines = tessera::print_op_lines(k);
  std::string printed = tessera::print_kernel(k);
  size_t n = 0;
  tessera::walk(const_cast<tessera::Kernel&>(k), [&](tessera::Op& op) {
    ASSERT_TRUE(lines.count(&op)) << op.name();
    std::string line = lines[&op];
    if (!op.regions.empty()) {
      ASSERT_EQ(line.substr(line.size() - 6), " {...}");
      line = line.substr(0, line.size() - 6);
    }
    EXPECT_NE(printed.find(line), std::string::npos) << line;
    ++n;
  });
  EXPECT_EQ(n, lines.size());
  EXPECT_EQ(lines[k.body->ops[4].get()], "%r = for %c0, %pid, %c1, %v : f32 {...}");
}
