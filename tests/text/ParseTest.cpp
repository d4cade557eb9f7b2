// Parser behaviour beyond round trips: locations, scoping, attribute handling, and robustness
// against malformed input (always a located TesseraError, never a crash or a hang).
#include <gtest/gtest.h>

#include <random>

#include "TextTestUtil.h"
#include "text/Text.h"

namespace tessera {
namespace {

using testing::read_file;
using testing::source_dir;
using testing::tile_files;

const char* kHeader =
    "kernel @k(%x: view<f32, [M, N]>) {\n"
    "  grid {\n"
    "    %m = dim %x {axis = 0} : i32\n"
    "    yield %m\n"
    "  }\n";

// Parses `body` after the header (5 lines) and returns the error text, or "" when it parses.
std::string error_of(const std::string& body) {
  try {
    parse_module(std::string(kHeader) + body, "t.tile");
  } catch (const TesseraError& e) {
    return e.what();
  }
  return "";
}

TEST(Parse, LocationsPointAtFirstTokenOfEachOp) {
  std::string text =
         "// leading comment\n"
         "kernel @k(%x: view<f32, [M, N]>) {\n"
         "  constexpr B = 4 in [4, 8]\n"
         "  grid {\n"
         "    %m = dim %x {axis = 0} : i32\n"
         "    yield %m\n"
         "  }\n"
         "  %p = program_id {axis = 0} : i32\n"
         "     store_tile %x, %t, %p, %p\n"
         "}\n";
  // store_tile uses an undefined %t: check the error location, then fix and check op locs.
  try {
    parse_module(text, "loc.tile");
    FAIL();
  } catch (const TesseraError& e) {
    EXPECT_EQ(e.loc().line, 9);
    EXPECT_EQ(e.loc().col, 21);
    EXPECT_EQ(*e.loc().file, "loc.tile");
  }
  text.replace(text.find("%t,"), 2, "%p");
  auto m = parse_module(text, "loc.tile");
  const Kernel& k = *m->kernels[0];
  EXPECT_EQ(k.loc.str(), "loc.tile:2:1");
  EXPECT_EQ(k.constexprs[0].loc.str(), "loc.tile:3:3");
  EXPECT_EQ(k.grid->ops[0]->loc.str(), "loc.tile:5:5");
  EXPECT_EQ(k.grid->ops[1]->loc.str(), "loc.tile:6:5");
  EXPECT_EQ(k.body->ops[0]->loc.str(), "loc.tile:8:3");
  EXPECT_EQ(k.body->ops[1]->loc.str(), "loc.tile:9:6");
}

TEST(Parse, StructureOfParsedKernel) {
  auto m = parse_module(read_file(source_dir() / "tests/text/data/matmul.tile"), "mm");
  const Kernel& k = *m->kernels[0];
  EXPECT_EQ(k.name, "matmul");
  ASSERT_EQ(k.params.size(), 3u);
  EXPECT_EQ(k.params[0]->type, Type::view(ScalarKind::F16, {"M", "K"}));
  ASSERT_EQ(k.constexprs.size(), 4u);
  EXPECT_EQ(k.constexprs[1].name, "BN");
  EXPECT_EQ(k.constexprs[1].value, 128);
  EXPECT_EQ(k.constexprs[1].candidates, (std::vector<int64_t>{64, 128, 256}));
  EXPECT_TRUE(k.constexprs[3].candidates.empty());
  const Op* loop = nullptr;
  for (const auto& op : k.body->ops)
    if (op->kind == OpKind::For) loop = op.get();
  ASSERT_NE(loop, nullptr);
  EXPECT_EQ(loop->attr_int("pipeline"), 3);
  ASSERT_EQ(loop->regions.size(), 1u);
  const Block& r = loop->region(0);
  ASSERT_EQ(r.args.size(), 2u);
  EXPECT_EQ(r.args[0]->name, "kk");
  EXPECT_EQ(r.args[0]->block, &r);
  EXPECT_EQ(r.parent, loop);
  EXPECT_EQ(r.args[1]->type.layout, Layout::mma(2, {2, 2}, {16, 8}));
  EXPECT_EQ(r.args[1]->type.space, "registers");
  // The loop reads the kernel parameter %a from inside its region.
  const Op& lt = *r.ops[1];
  EXPECT_EQ(lt.kind, OpKind::LoadTile);
  EXPECT_EQ(lt.operand(0), k.params[0]);
  EXPECT_EQ(r.ops.back()->kind, OpKind::Yield);
  EXPECT_EQ(loop->result()->name, "acc");
}

TEST(Parse, AttributesAreStoredInTableOrder) {
  auto text = std::string(kHeader) +
              "  %p = program_id {axis = 0} : i32\n"
              "  %t = load_tile %x, %p, %p : tile<f32, [2, 4]>\n"
              "  %s = reduce %t {kind = \"sum\", axis = 1} : tile<f32, [2]>\n}\n";
  auto m = parse_module(text, "t");
  const Op& r = *m->kernels[0]->body->ops[2];
  ASSERT_EQ(r.attrs.size(), 2u);
  EXPECT_EQ(r.attrs[0].name, "axis");
  EXPECT_EQ(r.attrs[1].name, "kind");
  EXPECT_NE(print_module(*m).find("{axis = 1, kind = \"sum\"}"), std::string::npos);
}

TEST(Parse, NumberAttributesKeepIntOrFloat) {
  auto text = std::string(kHeader) +
              "  %a = const {value = 3} : f32\n"
              "  %b = const {value = 3.0} : f32\n"
              "  %c = const {value = -inf} : f32\n"
              "  %d = const {value = nan} : f32\n"
              "  %e = const {value = 2.5e-3} : f32\n}\n";
  auto m = parse_module(text, "t");
  const auto& ops = m->kernels[0]->body->ops;
  EXPECT_TRUE(std::holds_alternative<int64_t>(*ops[0]->find_attr("value")));
  EXPECT_TRUE(std::holds_alternative<double>(*ops[1]->find_attr("value")));
  EXPECT_EQ(ops[2]->attr_number("value"), -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(ops[3]->attr_number("value")));
  EXPECT_EQ(ops[4]->attr_number("value"), 0.0025);
  EXPECT_NE(print_module(*m).find("{value = 0.0025}"), std::string::npos);
}

TEST(Parse, ScopingOfRegionsAndBlocks) {
  // Outer values are visible inside regions.
  EXPECT_EQ(error_of("  %c = const {value = 1} : i1\n"
                     "  %r = if %c : i32 {\n    yield %c\n  } else {\n    yield %c\n  }\n}\n"),
            "");
  // Sibling regions may reuse a name: the first is out of scope in the second.
  EXPECT_EQ(error_of("  %c = const {value = 1} : i1\n"
                     "  %r = if %c : i1 {\n    %v = not %c : i1\n    yield %v\n"
                     "  } else {\n    %v = not %c : i1\n    yield %v\n  }\n}\n"),
            "");
  // A region's values are not visible after it.
  EXPECT_EQ(error_of("  %c = const {value = 1} : i1\n"
                     "  %r = if %c : i1 {\n    %v = not %c : i1\n    yield %v\n"
                     "  } else {\n    yield %c\n  }\n  %w = not %v : i1\n}\n"),
            "t.tile:13:12: error: use of undefined value '%v'");
  // Redefining a visible name inside a region is an error.
  EXPECT_EQ(error_of("  %c = const {value = 1} : i1\n"
                     "  %r = if %c : i1 {\n    %c = not %c : i1\n    yield %c\n"
                     "  } else {\n    yield %c\n  }\n}\n"),
            "t.tile:8:5: error: redefinition of value '%c'");
  // An op's results are defined after its regions: the region cannot use them.
  EXPECT_EQ(error_of("  %c = const {value = 1} : i1\n"
                     "  %r = if %c : i1 {\n    yield %r\n  } else {\n    yield %c\n  }\n}\n"),
            "t.tile:8:11: error: use of undefined value '%r'");
  // A region argument may not shadow a parameter.
  EXPECT_EQ(error_of("  %c = const {value = 1.0} : f32\n"
                     "  %t = splat %c : tile<f32, [4]>\n"
                     "  %s = reduce_with %t {axis = 0} : f32 {\n"
                     "    ^(%x: f32, %b: f32):\n    yield %b\n  }\n}\n"),
            "t.tile:9:7: error: redefinition of value '%x'");
  // Duplicate parameter names.
  EXPECT_EQ(error_of("}\nkernel @j(%a: i32, %a: i32) {\n  grid {\n  }\n}\n"),
            "t.tile:7:20: error: redefinition of value '%a'");
}

TEST(Parse, InlineErrors) {
  EXPECT_EQ(error_of("  %a = const {value = 1} : i32\n  %b = add %a, %a : i32, : i32\n}\n"),
            "t.tile:7:26: error: expected a type");
  EXPECT_EQ(error_of("  %a = const {value = 1} : i32\n  %b = add %a %a : i32\n}\n"),
            "t.tile:7:15: error: expected ',' between operands");
  EXPECT_EQ(error_of("  %a = const {value = 1} : i32\n  %b = add %a, %a {} : i32\n}\n"),
            "t.tile:7:19: error: op 'add' takes no region");
  EXPECT_EQ(error_of("  %a = const {value = 1, } : i32\n}\n"),
            "t.tile:6:26: error: expected an attribute name");
  EXPECT_EQ(error_of("  %a = const {value = } : i32\n}\n"),
            "t.tile:6:23: error: attribute 'value' of 'const' must be a number");
  EXPECT_EQ(error_of("  %a = const {value = 1} : tile<f32, [4, 4], space = \"s\", space = \"t\">\n}\n"),
            "t.tile:6:59: error: duplicate 'space' in a tile type");
  EXPECT_EQ(error_of("  %a = const {value = 1} : view<f32, [4 4]>\n}\n"),
            "t.tile:6:41: error: expected ',' or ']' in a shape");
  EXPECT_EQ(error_of("  %a = const {value = 1} : i32\n  yield %a,\n}\n"),
            "t.tile:8:1: error: expected an operand after ','");
  EXPECT_EQ(error_of("  %a = const {value = \"x\\x4\"} : i32\n}\n"),
            "t.tile:6:25: error: expected two hex digits after '\\x'");
  EXPECT_EQ(error_of("  %a = const {value = 1} : i32\n  % = neg %a : i32\n}\n"),
            "t.tile:7:3: error: expected a value name after '%'");
  EXPECT_EQ(error_of("  %a = const {value = 1} : i32\n  %b = neg %a : i32\n"),
            "t.tile:8:1: error: unexpected end of input, expected '}'");
  EXPECT_EQ(error_of("  %a = const {value = -} : i32\n}\n"),
            "t.tile:6:23: error: attribute 'value' of 'const' must be a number");
  EXPECT_EQ(error_of("  %a = const {value = 1.} : i32\n}\n"),
            "t.tile:6:23: error: invalid number '1.'");
  EXPECT_EQ(error_of("  %a = const {value = -9223372036854775809} : i64\n}\n"),
            "t.tile:6:23: error: integer literal '-9223372036854775809' is out of range");
  EXPECT_EQ(error_of("  %a = const {value = -9223372036854775808} : i64\n}\n"), "");
  EXPECT_EQ(error_of("  %a = const {value = 1} : i32\nkernel @j() {\n  grid {\n  }\n}\n"),
            "t.tile:7:1: error: expected '}' before 'kernel'");
  EXPECT_EQ(error_of("  constexpr B = 4\n}\n"),
            "t.tile:6:3: error: constexpr declarations must come before 'grid'");
}

TEST(Parse, NestingUpToTheLimitParsesAndBeyondIsAnError) {
  auto nested = [](int depth) {
    std::string s = std::string(kHeader) + "  %c = const {value = 1} : i1\n";
    for (int i = 0; i < depth; ++i) s += "if %c {\n";
    for (int i = 0; i < depth; ++i) s += "yield\n} else {\nyield\n}\n";
    return s + "}\n";
  };
  auto m = parse_module(nested(200), "deep");
  EXPECT_EQ(parse_module(print_module(*m), "deep2")->kernels.size(), 1u);
  EXPECT_THROW(parse_module(nested(201), "deep"), TesseraError);
  // Far beyond the limit: an error, not a stack overflow.
  try {
    parse_module(nested(100000), "deep");
    FAIL();
  } catch (const TesseraError& e) {
    EXPECT_EQ(e.message(), "regions nested deeper than 200 levels");
    EXPECT_EQ(e.loc().line, 7 + 200);
  }
}

// Every proper prefix of a corpus file, random byte edits and random junk: each either parses
// or throws a TesseraError with a location inside the input.
void expect_clean_outcome(const std::string& text) {
  try {
    auto m = parse_module(text, "fuzz");
    (void)print_module(*m);
  } catch (const TesseraError& e) {
    ASSERT_TRUE(e.loc().known()) << e.what();
    ASSERT_EQ(std::string(e.what()).rfind("fuzz:", 0), 0u) << e.what();
  }
}

TEST(Parse, TruncatedInputGivesLocatedErrors) {
  std::string text = read_file(source_dir() / "tests/text/data/control.tile");
  for (size_t n = 0; n < text.size(); ++n) {
    std::string prefix = text.substr(0, n);
    // The only prefixes that parse are those ending between kernels: empty, or all of it.
    bool blank = prefix.find_first_not_of(" \n") == std::string::npos;
    bool whole = n > text.rfind('}');
    try {
      parse_module(prefix, "trunc");
      EXPECT_TRUE(blank || whole) << "prefix of " << n << " bytes parsed";
    } catch (const TesseraError& e) {
      EXPECT_FALSE(blank || whole);
      EXPECT_TRUE(e.loc().known());
    }
  }
}

TEST(Parse, MutatedAndRandomInputNeverCrashes) {
  std::mt19937 rng(12345);
  auto files = tile_files(source_dir() / "tests/text/data");
  std::vector<std::string> corpus;
  for (const auto& f : files) corpus.push_back(read_file(f));
  const std::string alphabet = "%@{}[]()<>,:=^\"\\-.0123456789e /\nabcxyz_";
  for (int i = 0; i < 3000; ++i) {
    std::string t = corpus[rng() % corpus.size()];
    int edits = 1 + rng() % 4;
    for (int e = 0; e < edits; ++e) {
      size_t pos = rng() % t.size();
      switch (rng() % 3) {
        case 0: t[pos] = alphabet[rng() % alphabet.size()]; break;
        case 1: t.erase(pos, 1 + rng() % 8); break;
        case 2: t.insert(pos, 1, static_cast<char>(rng() % 256)); break;
      }
      if (t.empty()) t = "x";
    }
    expect_clean_outcome(t);
  }
  for (int i = 0; i < 500; ++i) {
    std::string junk(rng() % 200, '\0');
    for (char& c : junk) c = static_cast<char>(rng() % 256);
    expect_clean_outcome(junk);
  }
}

TEST(Parse, PathologicalInputs) {
  expect_clean_outcome(std::string(100000, '{'));
  expect_clean_outcome("kernel @k() {\n  grid {\n" + std::string(100000, '9') + "\n");
  expect_clean_outcome("kernel @k() { grid { %a = const {value = \"" + std::string(100000, 'a'));
  expect_clean_outcome(std::string(1, '\0'));
  expect_clean_outcome("// only a comment without a newline");
  std::string wide = std::string(kHeader) + "  %a = const {value = 1} : i32\n  yield %a";
  for (int i = 0; i < 20000; ++i) wide += ", %a";
  expect_clean_outcome(wide + "\n}\n");
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// The printed type of `%t = arange : tile<i32, [SHAPE]>` with constexprs A, B, C declared.
std::string printed_shape(const std::string& shape) {
  std::string text = "kernel @k(%x: view<f32, [M, N]>) {\n  constexpr A = 8\n  constexpr B = 4\n  constexpr C = 2\n"
                     "  grid {\n    %m = dim %x {axis = 0} : i32\n    yield %m\n  }\n"
                     "  %t = arange : tile<i32, [" + shape + "]>\n}\n";
  auto m = parse_module(text, "t.tile");
  return shape_str(m->kernels[0]->body->ops[0]->result()->type.shape);
}

TEST(Parse, ShapeExpressionsPrintCanonicallyAndReadBack) {
  const std::pair<const char*, const char*> cases[] = {
      {"A/2", "[A / 2]"},
      {"A-2", "[A - 2]"},
      {"A -2", "[A - 2]"},
      {"A - -2", "[A - -2]"},
      {"(A+B)*C", "[(A + B) * C]"},
      {"A-(B-C)", "[A - (B - C)]"},
      {"(A-B)-C", "[A - B - C]"},
      {"A*(B/C)", "[A * (B / C)]"},
      {"A*B/C", "[A * B / C]"},
      {"A+B*C", "[A + B * C]"},
      {"cdiv(A,3)*2", "[cdiv(A, 3) * 2]"},
      {"min(A, max(B, C + 1))", "[min(A, max(B, C + 1))]"},
      {"((A))", "[A]"},
      {"4, A / B", "[4, A / B]"},
  };
  for (const auto& [in, out] : cases) {
    SCOPED_TRACE(in);
    EXPECT_EQ(printed_shape(in), out);
    std::string canonical(out);
    EXPECT_EQ(printed_shape(canonical.substr(1, canonical.size() - 2)), out);
  }
  // The builder's operators give the same trees, so the same text.
  Dim a("A"), b("B"), c("C");
  EXPECT_EQ((a - (b - c)).str(), "A - (B - C)");
  EXPECT_EQ(((a + b) * c).str(), "(A + B) * C");
  EXPECT_EQ((cdiv(a, 3) * 2).str(), "cdiv(A, 3) * 2");
  EXPECT_EQ(min(a, max(b, c + 1)).str(), "min(A, max(B, C + 1))");
  EXPECT_EQ(a / 2, Dim("A") / Dim(2));
}

TEST(Parse, ShapeExpressionErrors) {
  auto shape_error = [](const std::string& shape) {
    try {
      printed_shape(shape);
    } catch (const TesseraError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(shape_error("A /"), "t.tile:9:31: error: expected a dimension (an integer, a constexpr name or an expression)");
  EXPECT_EQ(shape_error("min(A)"), "t.tile:9:33: error: expected ',' between the operands of 'min'");
  EXPECT_EQ(shape_error("A * 2.5"), "t.tile:9:32: error: expected a dimension (an integer, a constexpr name or an expression)");
  EXPECT_EQ(shape_error("A - -9223372036854775808"), "");
  EXPECT_EQ(shape_error("A -9223372036854775808"),
            "t.tile:9:30: error: integer literal '9223372036854775808' is out of range");
  std::string deep(70, '(');
  EXPECT_EQ(shape_error(deep + "A" + std::string(70, ')')),
            "t.tile:9:93: error: shape expression nested deeper than 64 levels");
  std::string chain = "A";
  for (int i = 0; i < 300; ++i) chain += " + 1";
  EXPECT_NE(shape_error(chain).find("shape expression has more than 256 operators"), std::string::npos);
}

}  // namespace
}  // namespace tessera
