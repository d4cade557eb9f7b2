// Parsing and printing CUDA targets ("cuda:sm_80", "sm_90a").
#include <cctype>
#include <cstdlib>

#include "cuda/CudaBackend.h"
#include "support/Env.h"

namespace tessera {

std::optional<CudaTarget::Emitter> CudaTarget::emitter_from_environment() {
  const std::optional<int64_t> v = env_int("TESSERA_CUDA_FROM_LAYOUTS");
  if (!v) return std::nullopt;
  if (*v != 0 && *v != 1)
    throw TesseraError("TESSERA_CUDA_FROM_LAYOUTS = " + std::to_string(*v) +
                       ": expected 1 (the layout emitter) or 0 (the planning emitter); unset for the default");
  return *v == 1 ? Emitter::Layouts : Emitter::Planning;
}

// TESSERA_CUDA_FROM_LAYOUTS=1 or 0 picks the emitter; unset, CudaTarget::emitter's default.
static CudaTarget with_environment(CudaTarget t) {
  if (const auto e = CudaTarget::emitter_from_environment()) t.emitter = *e;
  return t;
}

CudaTarget CudaTarget::parse(const std::string& text) {
  std::string s = text;
  if (s.rfind("cuda:", 0) == 0) s = s.substr(5);
  if (s == "cuda" || s.empty()) return with_environment(CudaTarget{90, true});
  auto bad = [&]() {
    return TesseraError("unknown CUDA target '" + text +
                        "': expected cuda, cuda:sm_XY or sm_XY[a] with XY >= 70 (e.g. sm_80, sm_90a)");
  };
  if (s.rfind("sm_", 0) != 0) throw bad();
  std::string num = s.substr(3);
  CudaTarget t;
  if (!num.empty() && num.back() == 'a') {
    t.arch_specific = true;
    num.pop_back();
  }
  if (num.size() < 2 || num.size() > 3) throw bad();
  for (char c : num)
    if (!std::isdigit(static_cast<unsigned char>(c))) throw bad();
  t.sm = std::stoi(num);
  if (t.sm < 70) throw bad();
  return with_environment(t);
}

std::string CudaTarget::str() const { return "sm_" + std::to_string(sm) + (arch_specific ? "a" : ""); }

}  // namespace tessera
