// z = x + y over a 1-D tensor: one BLOCK-sized tile per program.
#include "kernels/Kernels.h"
#include "lang/Lang.h"

namespace tessera::kernels {

namespace {

std::unique_ptr<Kernel> build(ScalarKind dt) {
  using namespace lang;
  KernelBuilder k("vector_add");
  auto x = k.view("x", dt, {"N"}), y = k.view("y", dt, {"N"}), z = k.view("z", dt, {"N"});
  auto BLOCK = k.constexpr_("BLOCK", {256, 512, 1024, 2048, 4096}, 1024);
  k.grid({cdiv(x.dim(0), BLOCK)});
  auto pid = program_id(0);
  auto a = x.tile({BLOCK}).load({pid}).to(f32);
  auto b = y.tile({BLOCK}).load({pid}).to(f32);
  z.tile({BLOCK}).store({pid}, (a + b).to(dt));
  return k.finish();
}

void reference(std::vector<KernelArg>& args, const Sizes& sizes) {
  const Tensor &x = *args[0].tensor, &y = *args[1].tensor;
  Tensor& z = *args[2].tensor;
  for (int64_t i = 0; i < z.numel(); ++i) z.set(i, x.get(i) + y.get(i));
}

}  // namespace

LibraryKernel vector_add() {
  LibraryKernel k;
  k.name = "vector_add";
  k.summary = "z = x + y elementwise (dim N)";
  k.dtypes = float_dtypes();
  k.default_sizes = {{"N", 1 << 20}};
  k.build = build;
  k.reference = reference;
  k.bytes = [](const Sizes& s, ScalarKind dt) { return 3.0 * s.at("N") * scalar_bytes(dt); };
  k.flops = [](const Sizes& s, ScalarKind) { return 1.0 * s.at("N"); };
  return k;
}

}  // namespace tessera::kernels
