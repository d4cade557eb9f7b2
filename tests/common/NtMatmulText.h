// A matmul with B given as [N, K] (the layout of weights, and the one fp8 tensor cores read):
// c = scale * (a @ b^T), cast to c's dtype, in the text format. Shared by the cuda codegen and
// GPU tests of the sm_90a K-major wgmma path and of fp8 mma.sync.
#pragma once

#include <memory>
#include <string>

#include "passes/Passes.h"
#include "text/Text.h"

namespace tessera::testutil {

// `in` is the operand dtype (bf16, f16, f8e4m3, f8e5m2), `out` c's; tiles BM x BN x BK.
// `b_kn`: b is [K, N] instead, its tile fed to the dot as loaded (kernel @mm_nn).
inline std::string nt_matmul_text(const std::string& in, const std::string& out, int bm, int bn, int bk,
                                  int stages = 4, bool b_kn = false) {
  auto s = [](int v) { return std::to_string(v); };
  std::string acc = "tile<f32, [" + s(bm) + ", " + s(bn) + "]>";
  std::string load_b = b_kn ? "    %tbt = load_tile %b, %kt, %pn : tile<" + in + ", [" + s(bk) + ", " + s(bn) + "]>\n"
                            : "    %tb = load_tile %b, %pn, %kt : tile<" + in + ", [" + s(bn) + ", " + s(bk) + "]>\n"
                              "    %tbt = permute %tb {dims = [1, 0]} : tile<" + in + ", [" + s(bk) + ", " + s(bn) + "]>\n";
  return "kernel @mm_" + std::string(b_kn ? "nn" : "nt") + "(%a: view<" + in + ", [M, K]>, %b: view<" + in +
         (b_kn ? ", [K, N]>" : ", [N, K]>") + ", %scale: f32, %c: view<" + out + ", [M, N]>) {\n"
         "  grid {\n"
         "    %m = dim %a {axis = 0} : i32\n"
         "    %bm = const {value = " + s(bm) + "} : i32\n"
         "    %m1 = const {value = " + s(bm - 1) + "} : i32\n"
         "    %mr = add %m, %m1 : i32\n"
         "    %gm = div %mr, %bm : i32\n"
         "    %n = dim %b {axis = " + s(b_kn ? 1 : 0) + "} : i32\n"
         "    %bn = const {value = " + s(bn) + "} : i32\n"
         "    %n1 = const {value = " + s(bn - 1) + "} : i32\n"
         "    %nr = add %n, %n1 : i32\n"
         "    %gn = div %nr, %bn : i32\n"
         "    yield %gm, %gn\n"
         "  }\n"
         "  %pm = program_id {axis = 0} : i32\n"
         "  %pn = program_id {axis = 1} : i32\n"
         "  %k = dim %a {axis = 1} : i32\n"
         "  %bk = const {value = " + s(bk) + "} : i32\n"
         "  %zero = const {value = 0} : i32\n"
         "  %f0 = const {value = 0.0} : f32\n"
         "  %acc0 = splat %f0 : " + acc + "\n"
         "  %acc = for %zero, %k, %bk, %acc0 {pipeline = " + s(stages) + "} : " + acc + " {\n"
         "    ^(%kk: i32, %accc: " + acc + "):\n"
         "    %kt = div %kk, %bk : i32\n"
         "    %ta = load_tile %a, %pm, %kt : tile<" + in + ", [" + s(bm) + ", " + s(bk) + "]>\n"
         + load_b +
         "    %accn = dot %ta, %tbt, %accc : " + acc + "\n"
         "    yield %accn\n"
         "  }\n"
         "  %sc = splat %scale : " + acc + "\n"
         "  %scaled = mul %acc, %sc : " + acc + "\n"
         "  %out = cast %scaled : tile<" + out + ", [" + s(bm) + ", " + s(bn) + "]>\n"
         "  store_tile %c, %out, %pm, %pn\n"
         "}\n";
}

// That kernel, parsed, its constexprs bound.
inline std::unique_ptr<Kernel> nt_matmul(const std::string& in, const std::string& out, int bm, int bn, int bk,
                                         int stages = 4, bool b_kn = false) {
  return bind_constexprs(
      *parse_module(nt_matmul_text(in, out, bm, bn, bk, stages, b_kn), "nt.tile")->kernels.at(0), {});
}

}  // namespace tessera::testutil
