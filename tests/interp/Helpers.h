// Shared helpers for the interpreter tests: parse a kernel from text, make tensors, run.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>

#include "interp/Interpreter.h"
#include "ir/Verifier.h"
#include "passes/Passes.h"
#include "support/Float.h"
#include "text/Text.h"

namespace tessera::test {

struct Parsed {
  std::unique_ptr<Module> module;
  std::unique_ptr<Kernel> bound;  // constexprs bound (defaults unless given)
  Kernel& k() { return *bound; }
};

inline Parsed parse(const std::string& text, const ConstexprConfig& cfg = {}) {
  Parsed p;
  p.module = parse_module(text, "t.tile");
  p.bound = bind_constexprs(*p.module->kernels.at(0), cfg);
  // The programs the tests run are valid IR: the interpreter and the verifier agree.
  VerifyOptions vo;
  vo.require_bound = true;
  verify_or_throw(*p.bound, vo);
  return p;
}

// A tensor of random values (floats uniform in [-1, 1) rounded to dt; ints in [lo, hi)).
inline Tensor random_tensor(ScalarKind dt, std::vector<int64_t> shape, uint64_t seed,
                            int64_t lo = -8, int64_t hi = 8) {
  Tensor t(dt, std::move(shape));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uni(-1.0, 1.0);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (is_float(dt)) t.set(i, uni(rng));
    else t.set_int(i, lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo)));
  }
  return t;
}

inline std::vector<KernelArg> args_of(std::vector<Tensor*> ts) {
  std::vector<KernelArg> a;
  for (Tensor* t : ts) {
    KernelArg x;
    x.tensor = t;
    a.push_back(x);
  }
  return a;
}

// The message of the TesseraError that running `k` throws (without the location prefix).
inline std::string run_error(const Kernel& k, std::vector<KernelArg> args) {
  try {
    run_interp(k, args);
  } catch (const TesseraError& e) {
    return e.message();
  }
  return "<no error>";
}

}  // namespace tessera::test
