// libFuzzer target: arbitrary bytes through the parser, the verifier, the printer and, for
// input that verifies, the pass pipeline.
//
// A TesseraError is the correct answer to bad input; anything else (another exception, a
// crash, a sanitizer report, a hang) is a bug. For input that verifies, the printed text must
// parse again and print identically (the printer's output is canonical by definition), and
// the pipeline may reject a kernel only with a TesseraError.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "ir/Verifier.h"
#include "passes/Passes.h"
#include "text/Text.h"

namespace {

[[noreturn]] void fail(const char* what, const std::string& a, const std::string& b) {
  std::fprintf(stderr, "fuzz_parse: %s\n--- first ---\n%s\n--- second ---\n%s\n", what, a.c_str(),
               b.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    auto m = tessera::parse_module(text, "fuzz.tile");
    bool valid = true;
    for (const auto& k : m->kernels) valid &= tessera::verify(*k).empty();
    std::string printed = tessera::print_module(*m);
    if (!valid) return 0;
    std::unique_ptr<tessera::Module> again;
    try {
      again = tessera::parse_module(printed, "printed.tile");
    } catch (const tessera::TesseraError& e) {
      fail("printed IR of a valid module does not parse", printed, e.what());
    }
    std::string reprinted = tessera::print_module(*again);
    if (reprinted != printed) fail("print(parse(print(m))) != print(m)", printed, reprinted);
    for (const auto& k : m->kernels) {
      try {
        tessera::run_pipeline(*k, {});
      } catch (const tessera::TesseraError&) {
        // e.g. a constexpr default outside its candidates: reported at binding, by design.
      }
    }
  } catch (const tessera::TesseraError&) {
    // Rejecting malformed input with a located error is the expected outcome.
  }
  return 0;
}
