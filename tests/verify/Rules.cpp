// Verifier rules on IR built directly with the Kernel API, including IR the text format cannot
// express (null operands, foreign values, missing regions): the verifier must report each one
// with its exact message and never crash.
#include <gtest/gtest.h>

#include <random>

#include "ir/Verifier.h"

namespace tessera {
namespace {

using S = ScalarKind;

// A small valid kernel: grid yields dim 0 of %x; the body loads a tile and stores it back.
struct Fixture {
  Kernel k;
  Value* x;
  Value* y;
  Op* c0;
  Op* load;

  Fixture() {
    k.name = "k";
    k.loc = Loc::in_file("t.tile", 1, 1);
    x = k.add_param(Type::view(S::F32, {"M", "N"}), "x");
    y = k.add_param(Type::view(S::F32, {"M", "N"}), "y");
    k.constexprs.push_back({"BLOCK", 16, {16, 32}, Loc::in_file("t.tile", 2, 3)});
    Op* d = k.create_op(*k.grid, OpKind::Dim, {x}, {Type::scalar(S::I32)}, {{"axis", int64_t{0}}}, at(3));
    k.create_op(*k.grid, OpKind::Yield, {d->result()}, {}, {}, at(4));
    c0 = k.create_op(*k.body, OpKind::Const, {}, {Type::scalar(S::I32)}, {{"value", int64_t{0}}}, at(5));
    load = k.create_op(*k.body, OpKind::LoadTile, {x, c0->result(), c0->result()},
                       {Type::tile(S::F32, {16, "BLOCK"})}, {}, at(6));
  }
  static Loc at(int line) { return Loc::in_file("t.tile", line, 3); }
  Op* add(OpKind kind, std::vector<Value*> ops, std::vector<Type> types, std::vector<NamedAttr> attrs = {},
          int line = 10, size_t regions = 0, Block* b = nullptr) {
    return k.create_op(b ? *b : *k.body, kind, std::move(ops), types, std::move(attrs), at(line), regions);
  }
  std::vector<std::string> errors(const VerifyOptions& o = {}) {
    std::vector<std::string> out;
    for (const auto& e : verify(k, o)) out.push_back(e.what());
    return out;
  }
  std::string first(const VerifyOptions& o = {}) {
    auto e = errors(o);
    return e.empty() ? "(none)" : e.front();
  }
};

TEST(Verify, ValidKernelHasNoErrors) {
  Fixture f;
  f.add(OpKind::StoreTile, {f.y, f.load->result(), f.c0->result(), f.c0->result()}, {});
  EXPECT_EQ(f.errors(), std::vector<std::string>{});
}

// Constexprs are declared by name in the generated C++ and CUDA: names those give a meaning
// are located errors; ordinary names, upper or lower case, are not.
TEST(Verify, ConstexprNamesTheGeneratedCodeUses) {
  for (const char* bad : {"int", "for", "A", "pid1", "np2", "v12", "buf2_x", "i3", "o_", "a0_", "tsr_tid", "tsrx",
                          "int64_t", "size_t", "NAN", "INFINITY", "INT64_MAX", "UINT8_C", "threadIdx", "gridDim",
                          "__B", "_Q"}) {
    Fixture f;
    f.k.constexprs.push_back({bad, 4, {}, Loc::in_file("t.tile", 3, 3)});
    EXPECT_EQ(f.first().rfind("t.tile:3:3: error: constexpr " + std::string(bad) + ": ", 0), 0u) << bad << ": " << f.first();
  }
  for (const char* good : {"BLOCK_N", "HD", "K", "k", "v", "num_warps", "K2", "split_k", "b2b", "Tile_1", "_x"}) {
    Fixture f;
    f.add(OpKind::StoreTile, {f.y, f.load->result(), f.c0->result(), f.c0->result()}, {});
    f.k.constexprs.push_back({good, 4, {}, Loc::in_file("t.tile", 3, 3)});
    EXPECT_EQ(f.errors(), std::vector<std::string>{}) << good;
  }
}

TEST(Verify, NullOperand) {
  Fixture f;
  f.add(OpKind::Add, {f.c0->result(), nullptr}, {Type::scalar(S::I32)});
  EXPECT_EQ(f.errors(), std::vector<std::string>{"t.tile:10:3: error: 'add' operand 1 is null"});
}

TEST(Verify, ForeignValue) {
  Fixture f;
  Kernel other;
  Value* alien = other.add_param(Type::scalar(S::I32), "alien");
  f.add(OpKind::Add, {f.c0->result(), alien}, {Type::scalar(S::I32)});
  EXPECT_EQ(f.first(), "t.tile:10:3: error: 'add' operand 1 does not belong to kernel 'k'");
}

TEST(Verify, ValueFromGridIsNotVisibleInBody) {
  Fixture f;
  Value* m = f.k.grid->ops[0]->result();
  m->name = "m";
  f.add(OpKind::Add, {m, m}, {Type::scalar(S::I32)});
  EXPECT_EQ(f.first(),
            "t.tile:10:3: error: 'add' operand 0 (%m) is a value of the grid block: grid values are visible only in the "
            "grid block (compute it again in the body, e.g. with dim or program_id)");
}

TEST(Verify, UseBeforeDefinition) {
  Fixture f;
  Op* a = f.add(OpKind::Add, {f.c0->result(), f.c0->result()}, {Type::scalar(S::I32)}, {}, 10);
  Op* b = f.add(OpKind::Mul, {f.c0->result(), f.c0->result()}, {Type::scalar(S::I32)}, {}, 11);
  b->results[0]->name = "later";
  a->operands[1] = b->result();
  EXPECT_EQ(f.first(), "t.tile:10:3: error: 'add' operand 1 (%later) is used before its definition");
}

TEST(Verify, RegionValueNotVisibleAfterTheRegion) {
  Fixture f;
  Value* c = f.c0->result();
  Op* loop = f.add(OpKind::For, {c, c, c}, {}, {}, 10, 1);
  Block& body = loop->region(0);
  f.k.add_block_arg(body, Type::scalar(S::I32), "i");
  Op* inner = f.add(OpKind::Add, {body.args[0], body.args[0]}, {Type::scalar(S::I32)}, {}, 11, 0, &body);
  inner->results[0]->name = "t";
  f.add(OpKind::Yield, {}, {}, {}, 12, 0, &body);
  f.add(OpKind::Add, {inner->result(), c}, {Type::scalar(S::I32)}, {}, 13);
  EXPECT_EQ(f.first(), "t.tile:13:3: error: 'add' operand 0 (%t) is defined in another region and is not visible here");
}

TEST(Verify, RegionWithoutYield) {
  Fixture f;
  Value* c = f.c0->result();
  Op* loop = f.add(OpKind::For, {c, c, c}, {}, {}, 10, 1);
  f.k.add_block_arg(loop->region(0), Type::scalar(S::I32), "i");
  EXPECT_EQ(f.errors(), std::vector<std::string>{"t.tile:10:3: error: 'for' region 0 does not end with 'yield'"});
}

TEST(Verify, MissingRegionsAndNullRegion) {
  Fixture f;
  Value* c = f.c0->result();
  f.add(OpKind::For, {c, c, c}, {}, {}, 10, 0);
  Op* loop2 = f.add(OpKind::For, {c, c, c}, {}, {}, 11, 1);
  loop2->regions[0].reset();
  EXPECT_EQ(f.errors(), (std::vector<std::string>{"t.tile:10:3: error: 'for' expects 1 region, got 0",
                                                  "t.tile:11:3: error: 'for' region 0 is null"}));
}

TEST(Verify, NullResultAndNullOpDoNotCrash) {
  Fixture f;
  Op* a = f.add(OpKind::Add, {f.c0->result(), f.c0->result()}, {Type::scalar(S::I32)});
  a->results[0] = nullptr;
  f.k.body->ops.push_back(nullptr);
  EXPECT_EQ(f.errors(), (std::vector<std::string>{"t.tile:10:3: error: 'add' result 0 is null",
                                                  "t.tile:1:1: error: null op in a block of kernel 'k'"}));
}

TEST(Verify, ResultCount) {
  Fixture f;
  f.add(OpKind::StoreTile, {f.y, f.load->result(), f.c0->result(), f.c0->result()}, {Type::scalar(S::I32)});
  EXPECT_EQ(f.first(), "t.tile:10:3: error: 'store_tile' expects 0 results, got 1");
}

TEST(Verify, AttributeKindAndPresence) {
  Fixture f;
  Value* t = f.load->result();
  f.add(OpKind::Reduce, {t}, {Type::tile(S::F32, {16})}, {{"axis", std::string("one")}, {"kind", std::string("sum")}}, 10);
  f.add(OpKind::Reduce, {t}, {Type::tile(S::F32, {16})}, {{"axis", int64_t{1}}}, 11);
  f.add(OpKind::Reduce, {t}, {Type::tile(S::F32, {16})}, {{"axis", int64_t{1}}, {"kind", std::string("sum")}, {"bogus", true}}, 12);
  EXPECT_EQ(f.errors(), (std::vector<std::string>{
                            "t.tile:10:3: error: 'reduce' attribute 'axis' must be an integer, got \"one\"",
                            "t.tile:11:3: error: 'reduce' is missing required attribute 'kind'",
                            "t.tile:12:3: error: 'reduce' has unknown attribute 'bogus'"}));
}

TEST(Verify, OneMistakeGivesOneMessage) {
  Fixture f;
  Value* c = f.c0->result();
  Op* fl = f.add(OpKind::Const, {}, {Type::scalar(S::F32)}, {{"value", 1.5}}, 9);
  Op* bad = f.add(OpKind::Add, {c, fl->result()}, {Type::scalar(S::I32)}, {}, 10);
  Op* use = f.add(OpKind::Mul, {bad->result(), bad->result()}, {Type::scalar(S::I32)}, {}, 11);
  f.add(OpKind::Sub, {use->result(), fl->result()}, {Type::scalar(S::I32)}, {}, 12);
  EXPECT_EQ(f.errors(), std::vector<std::string>{
                            "t.tile:10:3: error: 'add' operands must have the same type, got i32 and f32"});
}

TEST(Verify, RequireBound) {
  Fixture f;
  VerifyOptions o;
  o.require_bound = true;
  EXPECT_EQ(f.first(), "(none)");
  EXPECT_EQ(f.first(o), "t.tile:6:3: error: 'load_tile' result type tile<f32, [16, BLOCK]> has unbound constexpr dim 'BLOCK'");
}

TEST(Verify, RawBodyPerBackend) {
  Fixture f;
  f.add(OpKind::Raw, {f.c0->result()}, {Type::scalar(S::I32)}, {{"name", std::string("myop")}, {"cpp", std::string("return a;")}});
  VerifyOptions cuda;
  cuda.backend = "cuda";
  VerifyOptions cpp;
  cpp.backend = "cpp";
  EXPECT_EQ(f.first(), "(none)");
  EXPECT_EQ(f.first(cpp), "(none)");
  EXPECT_EQ(f.first(cuda), "t.tile:10:3: error: 'raw' op 'myop' has no body for backend 'cuda'");
}

TEST(Verify, RawOperandMustBeValue) {
  Fixture f;
  f.add(OpKind::Raw, {f.x}, {}, {{"name", std::string("r")}});
  EXPECT_EQ(f.first(), "t.tile:10:3: error: 'raw' operand 0 must be a scalar or a tile, got view<f32, [M, N]>");
}

TEST(Verify, ConstexprDuplicateAndCandidates) {
  Fixture f;
  f.k.constexprs.push_back({"BLOCK", 32, {}, Fixture::at(3)});
  f.k.constexprs.push_back({"W", 3, {1, 2, 4}, Fixture::at(4)});
  EXPECT_EQ(f.errors(), (std::vector<std::string>{"t.tile:3:3: error: constexpr BLOCK is declared twice",
                                                  "t.tile:4:3: error: constexpr W = 3 is not one of its candidates [1, 2, 4]"}));
}

TEST(Verify, KernelParams) {
  Fixture f;
  f.k.add_param(Type::ptr(S::F32), "p");
  f.k.add_param(Type::view(S::F32, {}), "v");
  EXPECT_EQ(f.errors(), (std::vector<std::string>{
                            "t.tile:1:1: error: kernel 'k' parameter %p must be a view or a scalar, got ptr<f32>",
                            "t.tile:1:1: error: kernel 'k' parameter %v must be a view of rank >= 1, got view<f32, []>"}));
}

TEST(Verify, EmptyGrid) {
  Kernel k;
  k.name = "e";
  k.loc = Loc::in_file("e.tile", 1, 1);
  EXPECT_EQ(verify(k).size(), 1u);
  EXPECT_STREQ(verify(k)[0].what(), "e.tile:1:1: error: grid of kernel 'e' must end with 'yield' of 1 to 3 i32 sizes");
  k.grid.reset();
  k.body.reset();
  EXPECT_EQ(verify(k).size(), 2u);
  EXPECT_THROW(verify_or_throw(k), TesseraError);
}

TEST(Verify, DotAllowedPairs) {
  struct Case {
    S in, acc;
    bool ok;
  };
  const Case cases[] = {{S::F16, S::F32, true},   {S::F16, S::F16, true},   {S::BF16, S::F32, true},
                        {S::BF16, S::BF16, false}, {S::F8E4M3, S::F32, true}, {S::F8E5M2, S::F16, false},
                        {S::F32, S::F32, true},   {S::F64, S::F64, true},   {S::F32, S::F64, false},
                        {S::I8, S::I32, true},    {S::U8, S::U32, true},    {S::I8, S::U32, false},
                        {S::I32, S::I32, false}};
  for (const Case& c : cases) {
    Fixture f;
    Op* a = f.add(OpKind::Cast, {f.load->result()}, {Type::tile(c.in, {16, "BLOCK"})}, {}, 8);
    Op* b = f.add(OpKind::Reshape, {a->result()}, {Type::tile(c.in, {"BLOCK", 16})}, {}, 9);
    Op* acc = f.add(OpKind::Splat, {f.c0->result()}, {Type::tile(S::I32, {16, 16})}, {}, 10);
    Op* accc = f.add(OpKind::Cast, {acc->result()}, {Type::tile(c.acc, {16, 16})}, {}, 11);
    f.add(OpKind::Dot, {a->result(), b->result(), accc->result()}, {Type::tile(c.acc, {16, 16})}, {}, 12);
    std::string want = c.ok ? "(none)"
                            : "t.tile:12:3: error: 'dot' does not support " + std::string(scalar_name(c.in)) +
                                  " inputs with a " + std::string(scalar_name(c.acc)) + " accumulator";
    EXPECT_EQ(f.first(), want) << scalar_name(c.in) << " -> " << scalar_name(c.acc);
  }
}

TEST(Verify, ConstRangesPerType) {
  std::mt19937 rng(7);
  for (S kind : {S::I8, S::I16, S::U8, S::U16, S::I32}) {
    int bits = scalar_bits(kind);
    bool sgn = is_signed_int(kind);
    int64_t hi = sgn ? (int64_t{1} << (bits - 1)) - 1 : (int64_t{1} << bits) - 1;
    int64_t lo = sgn ? -(int64_t{1} << (bits - 1)) : 0;
    std::uniform_int_distribution<int64_t> in(lo, hi);
    for (int trial = 0; trial < 5; ++trial) {
      int64_t v = in(rng);
      for (int64_t val : {v, hi + 1 + (v & 7), lo - 1 - (v & 7)}) {
        Fixture f;
        f.add(OpKind::Const, {}, {Type::scalar(kind)}, {{"value", val}});
        bool fits = val >= lo && val <= hi;
        std::string want = fits ? "(none)"
                                : "t.tile:10:3: error: 'const' value " + std::to_string(val) + " does not fit in " +
                                      std::string(scalar_name(kind));
        EXPECT_EQ(f.first(), want);
      }
    }
  }
}

TEST(Verify, VisibleValuesInsideNestedRegions) {
  Fixture f;
  Value* c = f.c0->result();
  Value* t = f.load->result();
  Op* loop = f.add(OpKind::For, {c, c, c, t}, {t->type}, {}, 10, 1);
  Block& body = loop->region(0);
  Value* i = f.k.add_block_arg(body, Type::scalar(S::I32), "i");
  Value* acc = f.k.add_block_arg(body, t->type, "acc");
  Op* cond = f.add(OpKind::Cmp, {i, c}, {Type::scalar(S::I1)}, {{"pred", std::string("lt")}}, 11, 0, &body);
  Op* br = f.add(OpKind::If, {cond->result()}, {t->type}, {}, 12, 2, &body);
  Op* sum = f.add(OpKind::Add, {acc, t}, {t->type}, {}, 13, 0, &br->region(0));
  f.add(OpKind::Yield, {sum->result()}, {}, {}, 14, 0, &br->region(0));
  f.add(OpKind::Yield, {acc}, {}, {}, 15, 0, &br->region(1));
  f.add(OpKind::Yield, {br->result()}, {}, {}, 16, 0, &body);
  f.add(OpKind::StoreTile, {f.y, loop->result(), c, c}, {}, {}, 17);
  EXPECT_EQ(f.errors(), std::vector<std::string>{});
  // The same value yielded from the wrong region type is caught at the yield.
  br->region(1).ops.back()->operands[0] = i;
  EXPECT_EQ(f.first(), "t.tile:15:3: error: 'yield' in 'if' else region operand 0 has type i32, expected tile<f32, [16, BLOCK]>");
}

}  // namespace
}  // namespace tessera
