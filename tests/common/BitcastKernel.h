// The bitcast kernel the cpu (tests/cpu/bitcast_test.cpp) and cuda compile
// (tests/cuda/bitcast_compile_test.cpp) tests share: every float width with its integers.
#pragma once

#include <regex>
#include <string>

namespace tessera::testutil {

// x holds random integer bits, y random float bits. o1 = x as F; o2 = o1 back as I (a NaN
// canonical); o3 = y as U; o4 = (y + y) as I (a NaN made by arithmetic); o5 = x as U as I.
inline const char* kBitcastKernel = R"(kernel @bc(%x: view<I, [N]>, %y: view<F, [N]>, %o1: view<F, [N]>, %o2: view<I, [N]>, %o3: view<U, [N]>, %o4: view<I, [N]>, %o5: view<I, [N]>) {
  grid {
    %n = dim %x {axis = 0} : i32
    %b = const {value = 32} : i32
    %b1 = const {value = 31} : i32
    %t = add %n, %b1 : i32
    %g = div %t, %b : i32
    yield %g
  }
  %pid = program_id {axis = 0} : i32
  %a = load_tile %x, %pid : tile<I, [32]>
  %f = bitcast %a : tile<F, [32]>
  store_tile %o1, %f, %pid
  %back = bitcast %f : tile<I, [32]>
  store_tile %o2, %back, %pid
  %b = load_tile %y, %pid : tile<F, [32]>
  %bu = bitcast %b : tile<U, [32]>
  store_tile %o3, %bu, %pid
  %bb = add %b, %b : tile<F, [32]>
  %bbi = bitcast %bb : tile<I, [32]>
  store_tile %o4, %bbi, %pid
  %au = bitcast %a : tile<U, [32]>
  %ai = bitcast %au : tile<I, [32]>
  store_tile %o5, %ai, %pid
}
)";

struct BitcastTypes {
  const char *f, *i, *u;  // a float type and two integer types of its width
};
inline const BitcastTypes kBitcastTypes[] = {{"f32", "i32", "u32"},    {"bf16", "i16", "u16"}, {"f16", "u16", "i16"},
                                             {"f8e4m3", "i8", "u8"}, {"f8e5m2", "u8", "i8"},  {"f64", "i64", "u64"}};

// kBitcastKernel with F, I and U replaced.
inline std::string bitcast_kernel(const std::string& f, const std::string& i, const std::string& u) {
  std::string text = std::regex_replace(kBitcastKernel, std::regex(R"(\bF\b)"), f);
  text = std::regex_replace(text, std::regex(R"(\bI\b)"), i);
  return std::regex_replace(text, std::regex(R"(\bU\b)"), u);
}

}  // namespace tessera::testutil
