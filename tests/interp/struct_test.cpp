// The Struct layer's sequential meaning on the interpreter: pipes are FIFOs bounded by their
// stages, async copies read like load_tile and count as in flight until async_wait, warp_role
// regions run in program order, and every misuse is a located error (never a hang).
#include <gtest/gtest.h>

#include "Helpers.h"
#include "kernels/Library.h"
#include "runtime/Tensor.h"

namespace tessera::test {
namespace {

// A one-program kernel over x: view<f32, [N]> and y: view<f32, [N]> whose body is `body`.
std::string kernel(const std::string& body, const std::string& constexprs = "") {
  return "kernel @k(%x: view<f32, [N]>, %y: view<f32, [N]>) {\n" + constexprs +
         "  grid {\n"
         "    %one = const {value = 1} : i32\n"
         "    yield %one\n"
         "  }\n"
         "  %c0 = const {value = 0} : i32\n"
         "  %c1 = const {value = 1} : i32\n"
         "  %c2 = const {value = 2} : i32\n"
         "  %c3 = const {value = 3} : i32\n" +
         body + "}\n";
}

struct Outcome {
  Tensor x, y;
  std::string error;
};

// Runs `text` on x = random values of length n, y = -7 everywhere.
Outcome run(const std::string& text, int64_t n, const ConstexprConfig& cfg = {}) {
  Outcome r{random_tensor(ScalarKind::F32, {n}, 5), Tensor(ScalarKind::F32, {n}), ""};
  for (int64_t i = 0; i < n; ++i) r.y.set(i, -7.0);
  Parsed p = parse(text, cfg);
  r.error = run_error(p.k(), args_of({&r.x, &r.y}));
  return r;
}

// Pushes tiles 0, 1, 2 of x and pops them into tiles 0, 1, 2 of y: FIFO order copies x.
TEST(InterpStruct, PipeIsFirstInFirstOut) {
  std::string body =
      "  %p = pipe : pipe<f32, [3, 4]>\n"
      "  pipe_push %p, %x, %c0\n"
      "  pipe_push %p, %x, %c1\n"
      "  pipe_push %p, %x, %c2\n"
      "  %t0 = pipe_pop %p : tile<f32, [4]>\n"
      "  %t1 = pipe_pop %p : tile<f32, [4]>\n"
      "  %t2 = pipe_pop %p : tile<f32, [4]>\n"
      "  store_tile %y, %t0, %c0\n"
      "  store_tile %y, %t1, %c1\n"
      "  store_tile %y, %t2, %c2\n";
  // N = 10: the third tile is ragged; its padding (0) lands outside y and is dropped.
  Outcome r = run(kernel(body), 10);
  ASSERT_EQ(r.error, "<no error>");
  for (int64_t i = 0; i < 10; ++i) EXPECT_EQ(r.y.get(i), r.x.get(i)) << i;
}

// The ring wraps: pushes and pops interleave through a 2-stage pipe many times over.
TEST(InterpStruct, PipeRingWrapsInLoops) {
  std::string body =
      "  %p = pipe : pipe<f32, [2, 4]>\n"
      "  pipe_push %p, %x, %c0\n"
      "  %n = dim %x {axis = 0} : i32\n"
      "  %n3 = add %n, %c3 : i32\n"
      "  %c4 = const {value = 4} : i32\n"
      "  %tiles = div %n3, %c4 : i32\n"
      "  for %c0, %tiles, %c1 {\n"
      "    ^(%i: i32):\n"
      "    %j = add %i, %c1 : i32\n"
      "    pipe_push %p, %x, %j {pad = 5.0}\n"
      "    %t = pipe_pop %p : tile<f32, [4]>\n"
      "    store_tile %y, %t, %i\n"
      "    yield\n"
      "  }\n"
      "  %last = pipe_pop %p : tile<f32, [4]>\n";
  Outcome r = run(kernel(body), 37);
  ASSERT_EQ(r.error, "<no error>");
  for (int64_t i = 0; i < 37; ++i) EXPECT_EQ(r.y.get(i), r.x.get(i)) << i;
}

TEST(InterpStruct, PushOntoAFullPipeIsALocatedError) {
  std::string body =
      "  %p = pipe : pipe<f32, [2, 4]>\n"
      "  %n = dim %x {axis = 0} : i32\n"
      "  for %c0, %n, %c1 {\n"
      "    ^(%i: i32):\n"
      "    pipe_push %p, %x, %c0\n"
      "    yield\n"
      "  }\n"
      "  for %c0, %n, %c1 {\n"
      "    ^(%i: i32):\n"
      "    %t = pipe_pop %p : tile<f32, [4]>\n"
      "    yield\n"
      "  }\n";
  // Two pushes fit; the third finds both stages full (a hang on hardware).
  EXPECT_EQ(run(kernel(body), 2).error, "<no error>");
  EXPECT_EQ(run(kernel(body), 3).error,
            "'pipe_push' onto pipe %p, which already holds 2 tiles (its number of stages): in program order "
            "every push needs a free stage (pop first, or give the pipe more stages)");
  try {
    Parsed p = parse(kernel(body));
    Tensor x = random_tensor(ScalarKind::F32, {3}, 1), y(ScalarKind::F32, {3});
    std::vector<KernelArg> a = args_of({&x, &y});
    run_interp(p.k(), a);
    FAIL() << "no error";
  } catch (const TesseraError& e) {
    EXPECT_EQ(e.loc().line, 14);  // the pipe_push
  }
}

TEST(InterpStruct, PopFromAnEmptyPipeIsALocatedError) {
  std::string body =
      "  %p = pipe : pipe<f32, [2, 4]>\n"
      "  %n = dim %x {axis = 0} : i32\n"
      "  %more = cmp %n, %c2 {pred = \"gt\"} : i1\n"
      "  if %more {\n"
      "    pipe_push %p, %x, %c0\n"
      "    yield\n"
      "  } else {\n"
      "    yield\n"
      "  }\n"
      "  %t = pipe_pop %p : tile<f32, [4]>\n"
      "  store_tile %y, %t, %c0\n";
  EXPECT_EQ(run(kernel(body), 3).error, "<no error>");
  EXPECT_EQ(run(kernel(body), 2).error,
            "'pipe_pop' from pipe %p, which is empty: in program order every pop needs an earlier push");
}

TEST(InterpStruct, TilesLeftInAPipeAtTheEndAreAnError) {
  std::string body =
      "  %p = pipe : pipe<f32, [2, 4]>\n"
      "  %n = dim %x {axis = 0} : i32\n"
      "  %more = cmp %n, %c2 {pred = \"gt\"} : i1\n"
      "  pipe_push %p, %x, %c0\n"
      "  if %more {\n"
      "    %t = pipe_pop %p : tile<f32, [4]>\n"
      "    yield\n"
      "  } else {\n"
      "    yield\n"
      "  }\n";
  EXPECT_EQ(run(kernel(body), 3).error, "<no error>");
  EXPECT_EQ(run(kernel(body), 2).error,
            "'pipe' %p still holds tiles at the end of the program: every pushed tile must be popped");
}

// async_copy reads exactly what load_tile reads (ragged edge, pad), into the slot it names.
TEST(InterpStruct, AsyncCopyReadsLikeLoadTile) {
  std::string body =
      "  %buf = alloc : buffer<f32, [2, 8], space = \"shared\">\n"
      "  async_copy %buf, %x, %c1, %c1 {pad = -3.5}\n"
      "  async_copy %buf, %x, %c0, %c0 {pad = -3.5}\n"
      "  async_wait\n"
      "  %a = buffer_read %buf, %c1 : tile<f32, [8]>\n"
      "  %b = load_tile %x, %c1 {pad = -3.5} : tile<f32, [8]>\n"
      "  %d = sub %a, %b : tile<f32, [8]>\n"
      "  %z = buffer_read %buf, %c0 : tile<f32, [8]>\n"
      "  %s = add %z, %d : tile<f32, [8]>\n"
      "  store_tile %y, %s, %c0\n";
  Outcome r = run(kernel(body), 11);  // tile 1 covers 8..15: 3 real elements, 5 padded
  ASSERT_EQ(r.error, "<no error>");
  for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(r.y.get(i), r.x.get(i)) << i;
}

TEST(InterpStruct, ReadingASlotWhoseCopyIsInFlightIsAnError) {
  std::string copy =
      "  %buf = alloc : buffer<f32, [2, 4], space = \"shared\">\n"
      "  async_copy %buf, %x, %c0, %c0\n";
  EXPECT_EQ(run(kernel(copy + "  %t = buffer_read %buf, %c0 : tile<f32, [4]>\n"), 8).error,
            "'buffer_read' of slot (0) of buffer %buf while the async_copy (at 11:3) into it is in flight: wait for "
            "it (async_wait) first");
  // Another slot is free to read once written; the in-flight one is not free to overwrite.
  EXPECT_EQ(run(kernel(copy + "  async_copy %buf, %x, %c0, %c1\n"), 8).error,
            "'async_copy' into slot (0) of buffer %buf while the async_copy (at 11:3) into it is in flight: wait "
            "for it (async_wait) first");
  EXPECT_EQ(run(kernel(copy + "  %z = splat %c0 : tile<i32, [4]>\n"
                              "  %f = cast %z : tile<f32, [4]>\n"
                              "  buffer_write %buf, %f, %c0\n"),
                8)
                .error,
            "'buffer_write' into slot (0) of buffer %buf while the async_copy (at 11:3) into it is in flight: wait "
            "for it (async_wait) first");
  EXPECT_EQ(run(kernel(copy + "  async_wait\n  %t = buffer_read %buf, %c0 : tile<f32, [4]>\n"), 8).error,
            "<no error>");
}

TEST(InterpStruct, ReadingANeverWrittenSlotIsAnError) {
  std::string body =
      "  %buf = alloc : buffer<f32, [2, 4], space = \"shared\">\n"
      "  async_copy %buf, %x, %c0, %c0\n"
      "  async_wait\n"
      "  %t = buffer_read %buf, %c1 : tile<f32, [4]>\n";
  EXPECT_EQ(run(kernel(body), 8).error,
            "'buffer_read' of slot (1) of buffer %buf, which nothing has written (element (1, 0))");
}

TEST(InterpStruct, SlotIndexOutOfRangeIsAnError) {
  std::string body =
      "  %buf = alloc : buffer<f32, [2, 4], space = \"shared\">\n"
      "  %n = dim %x {axis = 0} : i32\n"
      "  async_copy %buf, %x, %n, %c0\n";
  EXPECT_EQ(run(kernel(body), 1).error, "<no error>");
  EXPECT_EQ(run(kernel(body), 2).error,
            "'async_copy' slot index is out of range for buffer %buf (its slots are [2])");
}

// Producer and consumer regions inside a loop run in program order each iteration; the
// consumer's result comes out of the region. y = 2 * x through a one-stage pipe.
TEST(InterpStruct, WarpRolesRunInProgramOrder) {
  std::string body =
      "  %p = pipe : pipe<f32, [1, 4]>\n"
      "  %n = dim %x {axis = 0} : i32\n"
      "  %n3 = add %n, %c3 : i32\n"
      "  %c4 = const {value = 4} : i32\n"
      "  %tiles = div %n3, %c4 : i32\n"
      "  %f0 = const {value = 0.0} : f32\n"
      "  %acc0 = splat %f0 : tile<f32, [4]>\n"
      "  %acc = for %c0, %tiles, %c1, %acc0 : tile<f32, [4]> {\n"
      "    ^(%i: i32, %a: tile<f32, [4]>):\n"
      "    warp_role {role = \"producer\"} {\n"
      "      %t = load_tile %x, %i : tile<f32, [4]>\n"
      "      %t2 = add %t, %t : tile<f32, [4]>\n"
      "      pipe_push %p, %t2\n"
      "      yield\n"
      "    }\n"
      "    %an = warp_role {role = \"consumer\"} : tile<f32, [4]> {\n"
      "      %u = pipe_pop %p : tile<f32, [4]>\n"
      "      store_tile %y, %u, %i\n"
      "      %s = add %a, %u : tile<f32, [4]>\n"
      "      yield %s\n"
      "    }\n"
      "    yield %an\n"
      "  }\n";
  Outcome r = run(kernel(body), 13);
  ASSERT_EQ(r.error, "<no error>");
  for (int64_t i = 0; i < 13; ++i) EXPECT_EQ(r.y.get(i), 2 * r.x.get(i)) << i;
}

// The Struct matmul computes bit for bit what the Lite matmul computes (same tiles, same
// accumulation order), whatever the number of stages.
TEST(InterpStruct, StructMatmulIsTheLiteMatmul) {
  Sizes s = {{"M", 45}, {"N", 38}, {"K", 51}};
  for (int64_t stages : {1, 3}) {
    for (ScalarKind dt : {ScalarKind::F32, ScalarKind::BF16}) {
      ConstexprConfig cfg = {{"BLOCK_M", 16}, {"BLOCK_N", 32}, {"BLOCK_K", 16}};
      auto lite = bind_constexprs(*find_library_kernel("matmul")->build(dt), cfg);
      cfg["STAGES"] = stages;
      auto st = bind_constexprs(*find_library_kernel("matmul_struct")->build(dt), cfg);
      std::vector<Tensor> a = make_random_tensors(*lite, s, 9), b = a;
      std::vector<KernelArg> aa = args_of({&a[0], &a[1], &a[2]}), ba = args_of({&b[0], &b[1], &b[2]});
      run_interp(*lite, aa);
      run_interp(*st, ba);
      ASSERT_EQ(a[2].data, b[2].data) << scalar_name(dt) << " STAGES=" << stages;
      EXPECT_NE(a[2].get(0), 0.0);
    }
  }
}

}  // namespace
}  // namespace tessera::test
