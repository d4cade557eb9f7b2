// A kernel over a 2-D grid of [16, 1024] f32 tiles (64 KiB: program prefetch by default), in the
// text format. Shared by the cuda codegen and GPU tests of program prefetch.
#pragma once

namespace tessera::testutil {

inline const char* kPrefetchGrid2dText = R"(kernel @k(%x: view<f32, [M, N]>, %y: view<f32, [M, N]>) {
  grid {
    %m = dim %x {axis = 0} : i32
    %n = dim %x {axis = 1} : i32
    %c16 = const {value = 16} : i32
    %c1024 = const {value = 1024} : i32
    %c15 = const {value = 15} : i32
    %c1023 = const {value = 1023} : i32
    %m1 = add %m, %c15 : i32
    %gm = div %m1, %c16 : i32
    %n1 = add %n, %c1023 : i32
    %gn = div %n1, %c1024 : i32
    yield %gm, %gn
  }
  %p = program_id {axis = 0} : i32
  %q = program_id {axis = 1} : i32
  %two = const {value = 2.0} : f32
  %t = load_tile %x, %p, %q : tile<f32, [16, 1024]>
  %s = splat %two : tile<f32, [16, 1024]>
  %u = mul %t, %s : tile<f32, [16, 1024]>
  %v = exp %u : tile<f32, [16, 1024]>
  store_tile %y, %v, %p, %q
}
)";

}  // namespace tessera::testutil
