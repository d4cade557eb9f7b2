// Struct ops on the cpu backend against the interpreter: the corpus kernels and the library's
// Struct matmul at ragged sizes, every stage count and size 1; and the run-time faults, which
// the cpu backend reports with the interpreter's message at the same op.
#include <fstream>
#include <sstream>

#include "CpuTestUtil.h"
#include "kernels/Library.h"

namespace tessera::cputest {
namespace {

std::unique_ptr<Module> corpus_struct() {
  std::ifstream in(std::string(TESSERA_SOURCE_DIR) + "/tests/text/data/struct.tile");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_module(ss.str(), "struct.tile");
}

TEST(CpuStruct, PipeMatmulMatchesInterpreter) {
  auto m = corpus_struct();
  const Kernel& k = *m->find("pipe_matmul");
  for (int64_t stages : {1, 2, 3})
    for (const Sizes& s : {Sizes{{"M", 37}, {"N", 45}, {"K", 29}}, Sizes{{"M", 1}, {"N", 1}, {"K", 1}},
                           Sizes{{"M", 32}, {"N", 16}, {"K", 8}}}) {
      SCOPED_TRACE("STAGES=" + std::to_string(stages) + " M=" + std::to_string(s.at("M")));
      auto b = bind_constexprs(k, {{"STAGES", stages}, {"BK", stages == 2 ? 16 : 8}});
      EXPECT_GT(expect_same_as_interp(*b, s, 3 + stages), 0);
    }
}

TEST(CpuStruct, DoubleBufferedRowsMatchInterpreter) {
  auto m = corpus_struct();
  const Kernel& k = *m->find("double_buffered_rows");
  for (int64_t block : {16, 64})
    for (const Sizes& s : {Sizes{{"M", 5}, {"N", 100}}, Sizes{{"M", 1}, {"N", 1}}, Sizes{{"M", 3}, {"N", 64}}}) {
      SCOPED_TRACE("BLOCK=" + std::to_string(block) + " N=" + std::to_string(s.at("N")));
      auto b = bind_constexprs(k, {{"BLOCK", block}});
      EXPECT_GT(expect_same_as_interp(*b, s, 17), 0);
    }
}

TEST(CpuStruct, LibraryStructMatmulMatchesInterpreter) {
  const LibraryKernel& lk = *find_library_kernel("matmul_struct");
  for (int64_t stages : {1, 2, 4})
    for (ScalarKind dt : {ScalarKind::F32, ScalarKind::BF16}) {
      SCOPED_TRACE(std::string(scalar_name(dt)) + " STAGES=" + std::to_string(stages));
      auto k = bind_constexprs(*lk.build(dt), {{"BLOCK_M", 32}, {"BLOCK_N", 16}, {"BLOCK_K", 16}, {"STAGES", stages}});
      EXPECT_GT(expect_same_as_interp(*k, {{"M", 70}, {"N", 33}, {"K", 50}}, 8), 0);
      EXPECT_GT(expect_same_as_interp(*k, {{"M", 1}, {"N", 1}, {"K", 1}}, 9), 0);
    }
}

// The error of running `text` (bound with `cfg`) on the interpreter and on the cpu backend, on
// inputs of size N = n; both must be the same located message.
void expect_same_fault(const std::string& text, int64_t n, const std::string& message) {
  auto m = parse_module(text, "fault.tile");
  auto k = bind_constexprs(*m->kernels.at(0), {});
  auto compiled = compile_cpu(*k, test_options());
  std::string errs[2];
  for (int backend = 0; backend < 2; ++backend) {
    std::vector<Tensor> ts = make_random_tensors(*k, {{"N", n}}, 1);
    auto a = args_for(*k, ts);
    try {
      if (backend == 0) run_interp(*k, a);
      else compiled->run(a);
      errs[backend] = "<no error>";
    } catch (const TesseraError& e) {
      errs[backend] = e.what();
    }
  }
  EXPECT_EQ(errs[0], message);
  EXPECT_EQ(errs[1], errs[0]) << "cpu and interpreter disagree";
}

std::string fault_kernel(const std::string& body) {
  return "kernel @k(%x: view<f32, [N]>, %y: view<f32, [N]>) {\n"
         "  grid {\n"
         "    %g = const {value = 1} : i32\n"
         "    yield %g\n"
         "  }\n"
         "  %c0 = const {value = 0} : i32\n"
         "  %c1 = const {value = 1} : i32\n"
         "  %p = pipe : pipe<f32, [2, 4]>\n"
         "  %n = dim %x {axis = 0} : i32\n" +
         body + "}\n";
}

TEST(CpuStruct, FaultsAreReportedLikeTheInterpreter) {
  // More pushes than stages before the first pop: a deadlock on hardware.
  std::string full = fault_kernel(
      "  for %c0, %n, %c1 {\n"
      "    ^(%i: i32):\n"
      "    pipe_push %p, %x, %c0\n"
      "    yield\n"
      "  }\n"
      "  for %c0, %n, %c1 {\n"
      "    ^(%i: i32):\n"
      "    %t = pipe_pop %p : tile<f32, [4]>\n"
      "    store_tile %y, %t, %c0\n"
      "    yield\n"
      "  }\n");
  expect_same_fault(full, 2, "<no error>");
  expect_same_fault(full, 3,
                    "fault.tile:12:5: error: 'pipe_push' onto pipe %p, which already holds 2 tiles (its number of "
                    "stages): in program order every push needs a free stage (pop first, or give the pipe more stages)");
  // A pop that only some sizes feed, and a push that only some sizes drain.
  std::string branchy = fault_kernel(
      "  %big = cmp %n, %c1 {pred = \"gt\"} : i1\n"
      "  if %big {\n"
      "    pipe_push %p, %x, %c0\n"
      "    yield\n"
      "  } else {\n"
      "    yield\n"
      "  }\n"
      "  %t = pipe_pop %p : tile<f32, [4]>\n"
      "  store_tile %y, %t, %c0\n");
  expect_same_fault(branchy, 2, "<no error>");
  expect_same_fault(branchy, 1,
                    "fault.tile:17:3: error: 'pipe_pop' from pipe %p, which is empty: in program order every pop "
                    "needs an earlier push");
  std::string left = fault_kernel(
      "  %big = cmp %n, %c1 {pred = \"gt\"} : i1\n"
      "  pipe_push %p, %x, %c0\n"
      "  if %big {\n"
      "    %t = pipe_pop %p : tile<f32, [4]>\n"
      "    store_tile %y, %t, %c0\n"
      "    yield\n"
      "  } else {\n"
      "    yield\n"
      "  }\n");
  expect_same_fault(left, 2, "<no error>");
  expect_same_fault(left, 1,
                    "fault.tile:8:3: error: 'pipe' %p still holds tiles at the end of the program: every pushed tile "
                    "must be popped");
  std::string range = fault_kernel(
      "  %buf = alloc : buffer<f32, [3, 4], space = \"shared\">\n"
      "  %s = sub %n, %c1 : i32\n"
      "  async_copy %buf, %x, %s, %c0\n"
      "  async_wait\n"
      "  %t = buffer_read %buf, %s : tile<f32, [4]>\n"
      "  store_tile %y, %t, %c0\n");
  expect_same_fault(range, 3, "<no error>");
  expect_same_fault(range, 4,
                    "fault.tile:12:3: error: 'async_copy' slot index is out of range for buffer %buf (its slots are [3])");
}

}  // namespace
}  // namespace tessera::cputest
