// Tuning spaces: knobs from a kernel's constexprs and the declared codegen knobs, and the
// constraints that prune configurations before anything compiles.
#include "tune/Space.h"

#include <algorithm>

#include "cuda/CudaEmitter.h"
#include "cuda/RuntimeInternal.h"
#include "passes/Passes.h"
#include "support/Diagnostic.h"

namespace tessera::tune {

std::string config_str(const Config& c) {
  std::string s;
  for (const auto& [n, v] : c) s += (s.empty() ? "" : ",") + n + "=" + std::to_string(v);
  return s;
}

Config parse_config_str(const std::string& s, const std::string& what) {
  Config c;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t end = s.find(',', pos);
    if (end == std::string::npos) end = s.size();
    std::string item = s.substr(pos, end - pos);
    // Spaces around a name or a value are not part of it (a hand-written `--compare` line).
    auto trim = [](std::string t) {
      const size_t b = t.find_first_not_of(" \t");
      return b == std::string::npos ? std::string() : t.substr(b, t.find_last_not_of(" \t") + 1 - b);
    };
    size_t eq = item.find('=');
    const std::string name = eq == std::string::npos ? std::string() : trim(item.substr(0, eq));
    const std::string num = eq == std::string::npos ? std::string() : trim(item.substr(eq + 1));
    if (name.empty() || num.empty()) throw TesseraError(what + ": bad item '" + item + "' (expected NAME=VALUE)");
    if (c.count(name)) throw TesseraError(what + ": '" + name + "' given twice");
    size_t used = 0;
    int64_t v = 0;
    try {
      v = std::stoll(num, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != num.size()) throw TesseraError(what + ": bad value in '" + item + "' (expected an integer)");
    c[name] = v;
    pos = end + 1;
  }
  return c;
}

std::string sizes_key(const Sizes& s) { return config_str(s); }  // both name=value maps

bool knob_applies(const Knob& k, const std::string& target) {
  if (k.targets.empty()) return true;
  for (const std::string& t : k.targets)
    if (target == t || (target.rfind(t + ":", 0) == 0)) return true;
  return false;
}

const std::vector<KnobDecl>& codegen_knobs() {
  // Values as the emitters take them (src/cuda/EmitterInternal.h, Pipelining.cpp, EmitWgmma.cpp,
  // EmitDot.cpp, EmitMemory.cpp, EmitProgramPrefetch.cpp, EmitStruct.cpp). The first is the default.
  static const std::vector<KnobDecl> table = {
      {{"num_warps", KnobKind::Codegen, {0, 4, 8, 16, 32}, 0, {"cuda"}, "warps per CTA; 0: the backend's choice"}, "any"},
      {{"whole_tile_checks", KnobKind::Codegen, {0, 1}, 0, {"cuda"},
        "test a tile's bounds and alignment once, not per 16-byte vector (EmitMemory)"}, "any"},
      {{"mma_l2_prefetch", KnobKind::Codegen, {0, 64, 128, 256}, 0, {"cuda"},
        "cp.async ring asks L2 to fetch this many bytes around each chunk"}, "dot-loop"},
      {{"mma_spread_copies", KnobKind::Codegen, {0, 1}, 0, {"cuda"},
        "next stage's copies in pieces between the k16 steps' mma"}, "dot-loop"},
      {{"mma_early_last_step", KnobKind::Codegen, {0, 1}, 0, {"cuda"},
        "last k16 step's mma before the stage's wait"}, "dot-loop"},
      {{"min_blocks", KnobKind::Codegen, {1, 2}, 1, {"cuda"},
        "CTAs per SM that the ring's shared memory and __launch_bounds__ allow"}, "dot-loop"},
      {{"epilogue_buffers", KnobKind::Codegen, {2, 4}, 2, {"cuda:sm_90a"}, "TMA-store epilogue buffers"}, "dot-loop"},
      {{"cluster_m", KnobKind::Codegen, {1, 2}, 1, {"cuda:sm_90a"}, "CTA pairs sharing B by TMA multicast"}, "dot-loop"},
      {{"split_k", KnobKind::Codegen, {0, 2, 3, 4}, 0, {"cuda:sm_90a"},
        "CTAs sharing a wgmma program's K loop: 0 the runtime's rule (split_k_factor), n >= 2 n ways; read at launch"},
       "dot-loop"},
      {{"ring_stages", KnobKind::Codegen, {0, 6, 8}, 0, {"cuda:sm_90a"},
        "stages of a wgmma matmul's TMA ring (as many as fit): 0 the loop's pipeline annotation"},
       "dot-loop"},
      {{"swap_operands", KnobKind::Codegen, {0, 1}, 0, {"cuda:sm_90a"},
        "a wgmma dot whose M tile is 8, 16 or 32 rows computed as C^T = B^T A^T (that tile on wgmma's n)"},
       "dot-loop"},
      {{"stream_k", KnobKind::Codegen, {0, 1}, 0, {"cuda:sm_90a"},
        "a persistent wgmma matmul's last partial wave cut into equal shares of K work, one per CTA"}, "dot-loop"},
      {{"epilogue_overlap", KnobKind::Codegen, {1, 0}, 1, {"cuda:sm_90a"},
        "store a block during the next block's wgmma"}, "dot-loop"},
      {{"tma_store_epilogue", KnobKind::Codegen, {1, 0}, 1, {"cuda:sm_90a"}, "TMA-store epilogue"}, "dot-loop"},
      {{"tma_hint_a", KnobKind::Codegen, {0, 1, 2, 3}, 0, {"cuda:sm_90a"},
        "A's TMA cache hint: 0 auto, 1 evict_first, 2 evict_last, 3 none"}, "dot-loop"},
      {{"tma_hint_b", KnobKind::Codegen, {0, 1, 2, 3}, 0, {"cuda:sm_90a"},
        "B's TMA cache hint: 0 auto, 1 evict_first, 2 evict_last, 3 none"}, "dot-loop"},
      {{"prefetch_programs", KnobKind::Codegen, {2, 0, 1}, 2, {"cuda"},
        "persistent row kernels copy the next row ahead: 2 auto, 0 off, 1 forced"}, "rows"},
      {{"cpu_dot_mr", KnobKind::Codegen, {0, 1, 2, 4, 8}, 0, {"cpu"},
        "rows of tsr::dot_f32's register block; 0: the header's choice"}, "dot-loop"},
      {{"cpu_dot_nr", KnobKind::Codegen, {0, 8, 16, 32}, 0, {"cpu"},
        "columns of tsr::dot_f32's register block; 0: the header's choice"}, "dot-loop"},
      {{"struct_cp_async", KnobKind::Codegen, {0, 1}, 0, {"cuda"}, "Struct async_copy as cp.async"}, "struct"},
      {{"struct_tma", KnobKind::Codegen, {0, 1}, 0, {"cuda:sm_90a"}, "Struct async_copy as TMA"}, "struct"},
  };
  return table;
}

const KnobDecl* find_codegen_knob(const std::string& name) {
  for (const KnobDecl& d : codegen_knobs())
    if (d.knob.name == name) return &d;
  return nullptr;
}

namespace {

bool kernel_kind_matches(const Kernel& k, const std::string& kinds) {
  if (kinds == "any") return true;
  bool dot_loop = false, has_dot = false, has_struct = false;
  walk(const_cast<Kernel&>(k), [&](Op& op) {
    if (op.kind == OpKind::Dot) has_dot = true;
    if (op.kind == OpKind::AsyncCopy) has_struct = true;
    if (op.kind == OpKind::For && op.has_attr("pipeline"))
      for (auto& r : op.regions)
        if (r) walk(*r, [&](Op& inner) { dot_loop |= inner.kind == OpKind::Dot; });
  });
  if (kinds == "dot-loop") return dot_loop;
  if (kinds == "struct") return has_struct;
  if (kinds == "rows") return !has_dot;
  return false;
}

}  // namespace

std::string tiled_dim(const std::string& knob, const Sizes& sizes) {
  if (knob.rfind("BLOCK_", 0) == 0 && sizes.count(knob.substr(6))) return knob.substr(6);
  if ((knob == "BLOCK" || knob == "BLOCK_SIZE") && sizes.size() == 1) return sizes.begin()->first;
  return "";
}

int64_t Space::size() const {
  int64_t n = 1;
  for (const Knob& k : knobs) n *= static_cast<int64_t>(k.values.size());
  return n;
}

std::vector<Config> Space::enumerate() const {
  std::vector<Config> out;
  const int64_t n = size();
  out.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    Config c = fixed;
    int64_t rest = i;
    for (size_t j = knobs.size(); j-- > 0;) {
      const auto m = static_cast<int64_t>(knobs[j].values.size());
      c[knobs[j].name] = knobs[j].values[static_cast<size_t>(rest % m)];
      rest /= m;
    }
    out.push_back(std::move(c));
  }
  return out;
}

Config Space::defaults() const {
  Config c = fixed;
  for (const Knob& k : knobs) c[k.name] = k.default_value;
  return c;
}

namespace {

// On sm_90a a dot of fewer than 64 rows cannot take wgmma: the least candidate of 64 rows or
// more is another code path (the persistent TMA + wgmma loop, split-K), not only padding, when
// `v` (of knob `d`) is a dot's row count.
bool least_wgmma_rows(const Candidate& c, const ConstexprDecl& d, int64_t v, const std::string& dim) {
  if (c.target != "cuda:sm_90a" || v % 64 != 0) return false;
  int64_t least = 0;
  for (int64_t cand : d.candidates)
    if (cand >= 64 && cand % 64 == 0 && (least == 0 || cand < least)) least = cand;
  if (v != least) return false;
  // A dot of v rows whose left operand is loaded from a view whose rows are `dim`: the knob tiles
  // the dot's M (not its K or N, which only pad).
  bool rows = false;
  walk(const_cast<Kernel&>(c.bound), [&](Op& op) {
    if (op.kind != OpKind::Dot || !shape_is_static(op.result()->type.shape)) return;
    const auto sh = static_shape(op.result()->type.shape);
    if (sh.size() != 2 || sh[0] != v) return;
    const Op* load = op.operand(0)->def;
    if (!load || load->kind != OpKind::LoadTile) return;
    const Type& view = load->operand(0)->type;
    rows |= view.is_view() && view.rank() == 2 && !view.shape[0].is_static() && view.shape[0].symbol == dim;
  });
  return rows;
}

}  // namespace

Constraint tile_cover_constraint() {
  return {"tile-cover", "a BLOCK_X tile no larger than the least candidate that covers dim X",
          [](const Candidate& c) -> std::string {
            for (const auto& [name, v] : c.config) {
              std::string dim = tiled_dim(name, c.sizes);
              if (dim.empty()) continue;
              const ConstexprDecl* d = c.bound.find_constexpr(name);
              if (!d || d->candidates.empty()) continue;
              const int64_t size = c.sizes.at(dim);
              // The least candidate >= size (else the largest candidate) is the cover.
              int64_t cover = 0;
              for (int64_t cand : d->candidates)
                if (cand >= size && (cover == 0 || cand < cover)) cover = cand;
              if (cover != 0 && v > cover && !least_wgmma_rows(c, *d, v, dim))
                return name + " = " + std::to_string(v) + " > " + std::to_string(cover) + ", which covers " + dim +
                       " = " + std::to_string(size);
            }
            return "";
          }};
}

int64_t program_tile_bytes(const Kernel& bound) {
  int64_t bytes = 0;
  walk(const_cast<Kernel&>(bound), [&](Op& op) {
    for (const Value* r : op.results) {
      if (!r || !r->type.is_tile() || !shape_is_static(r->type.shape)) continue;
      // Narrow floats compute as float on the cpu backend.
      int eb = is_float(r->type.elem) ? std::max(4, scalar_bytes(r->type.elem)) : scalar_bytes(r->type.elem);
      bytes += shape_numel(r->type.shape) * eb;
    }
  });
  return bytes;
}

Constraint cpu_tile_bytes_constraint(int64_t limit) {
  return {"cpu-tile-bytes", "a program's tiles within " + std::to_string(limit >> 10) + " KiB",
          [limit](const Candidate& c) -> std::string {
            if (c.target != "cpu") return "";
            int64_t b = program_tile_bytes(c.bound);
            if (b <= limit) return "";
            return "tiles of " + std::to_string(b >> 10) + " KiB per program > " + std::to_string(limit >> 10) + " KiB";
          }};
}

int64_t cuda_smem_limit(const std::string& target) {
  return target == "cuda:sm_80" ? 163 * 1024 : target == "cuda:sm_89" ? 99 * 1024 : 227 * 1024;
}

Constraint cuda_smem_constraint() {
  return {"cuda-smem", "a pipelined loop's stages within the target's shared memory",
          [](const Candidate& c) -> std::string {
            if (c.target.rfind("cuda:", 0) != 0) return "";
            const int64_t limit = cuda_smem_limit(c.target);
            int64_t worst = 0;
            walk(const_cast<Kernel&>(c.bound), [&](Op& op) {
              if (op.kind != OpKind::For || !op.has_attr("pipeline")) return;
              const int64_t stages = op.attr_int("pipeline");
              int64_t stage = 0;
              for (auto& r : op.regions)
                if (r)
                  walk(*r, [&](Op& inner) {
                    if (inner.kind != OpKind::LoadTile) return;
                    for (const Value* v : inner.results)
                      if (v && v->type.is_tile() && shape_is_static(v->type.shape))
                        stage += shape_numel(v->type.shape) * scalar_bytes(v->type.elem);
                  });
              worst = std::max(worst, stages * stage);
            });
            if (worst <= limit) return "";
            return "pipelined stages of " + std::to_string(worst >> 10) + " KiB > " + std::to_string(limit >> 10) +
                   " KiB of shared memory on " + c.target;
          }};
}

namespace {

int64_t config_value(const Config& c, const std::string& name, int64_t fallback) {
  auto it = c.find(name);
  return it == c.end() ? fallback : it->second;
}

// A dot that swap_operands = 1 puts on wgmma (EmitWgmma.cpp's plan): 8, 16 or 32 rows, 64, 128,
// 192 or 256 columns, 16-bit operands (or fp8 with b transposed: both K-major), K steps of one or
// two 128-byte rows.
bool swappable_dot(const Op& dot) {
  if (!shape_is_static(dot.result()->type.shape) || !shape_is_static(dot.operand(0)->type.shape)) return false;
  const auto sh = static_shape(dot.result()->type.shape);
  if (sh.size() != 2 || !wgmma_swap_m(sh[0]) || !wgmma_swap_n(sh[1])) return false;
  const ScalarKind in = dot.operand(0)->type.elem;
  const bool f8 = in == ScalarKind::F8E4M3 || in == ScalarKind::F8E5M2;
  if (in != ScalarKind::BF16 && in != ScalarKind::F16 && !f8) return false;
  if (f8 && !(dot.operand(1)->def && dot.operand(1)->def->kind == OpKind::Permute)) return false;
  const int64_t k_bytes = static_shape(dot.operand(0)->type.shape)[1] * scalar_bytes(in);
  return k_bytes % 128 == 0 && k_bytes <= 256;
}

bool has_swappable_dot(const Kernel& bound) {
  bool any = false;
  walk(const_cast<Kernel&>(bound), [&](Op& op) { any |= op.kind == OpKind::Dot && swappable_dot(op); });
  return any;
}

// Whether the candidate has a dot on wgmma, what the persistent wgmma loop (and so its split-K
// and stream-K forms) needs: of a multiple of 64 rows, or swapped. (The swap is read from the
// config: prune binds one kernel per tile, whatever the codegen knobs.)
bool has_wgmma_rows(const Candidate& c) {
  const bool swapped = config_value(c.config, "swap_operands", 0) == 1;
  bool rows = false;
  walk(const_cast<Kernel&>(c.bound), [&](Op& op) {
    if (op.kind != OpKind::Dot || !shape_is_static(op.result()->type.shape)) return;
    const auto sh = static_shape(op.result()->type.shape);
    rows |= (sh.size() == 2 && sh[0] % 64 == 0) || (swapped && swappable_dot(op));
  });
  return rows;
}

// The programs of the candidate's grid at its sizes; -1 when the grid reads scalar parameters.
int64_t programs_of(const Candidate& c) {
  try {
    const auto g = cuda_grid_size(c.bound, c.sizes);
    return g[0] * g[1] * g[2];
  } catch (const TesseraError&) {
    return -1;
  }
}


}  // namespace

int64_t split_capacity(const Config& c, int64_t sms) {
  return sms * std::max<int64_t>(1, config_value(c, "min_blocks", 1));
}

int64_t launch_splits(const Config& c, int64_t programs, int64_t sms, int64_t loop_k) {
  auto it = c.find(kSplitKKnob);
  if (it == c.end()) return 1;
  if (it->second >= 2) return it->second;
  return it->second == 0 ? cuda::split_k_factor(programs, split_capacity(c, sms), loop_k) : 1;
}

Constraint cuda_split_k_constraint(int64_t sms) {
  return {"cuda-split-k",
          "split_k >= 2 only for wgmma dots (a multiple of 64 rows, or swapped), at most two waves once split, and not the "
          "split the runtime picks anyway",
          [sms](const Candidate& c) -> std::string {
            const int64_t s = config_value(c.config, kSplitKKnob, 0);
            if (s < 2 || c.target.rfind("cuda:", 0) != 0) return "";
            const std::string what = "split_k = " + std::to_string(s);
            if (!has_wgmma_rows(c)) return what + ": no dot of a multiple of 64 rows (wgmma), which a split needs";
            if (config_value(c.config, "cluster_m", 1) != 1)
              return what + " with cluster_m: the split compilation has no clusters";
            const int64_t programs = programs_of(c);
            if (programs < 0) return "";  // the runtime decides
            const int64_t capacity = split_capacity(c.config, sms);
            if (programs * s > 2 * capacity)
              return what + ": " + std::to_string(programs) + " programs x " + std::to_string(s) + " CTAs are over two waves";
            if (cuda::split_k_factor(programs, capacity, cuda_split_loop_k(c.bound, c.sizes)) == s)
              return what + " is what the runtime picks for " + std::to_string(programs) + " programs (split_k = 0)";
            return "";
          }};
}

Constraint cuda_swap_constraint() {
  return {"cuda-swap-operands",
          "swap_operands = 1 only for a dot of 8, 16 or 32 rows (else it changes nothing), without cluster_m (not taken "
          "with it)",
          [](const Candidate& c) -> std::string {
            if (config_value(c.config, "swap_operands", 0) != 1 || c.target.rfind("cuda:", 0) != 0) return "";
            if (!has_swappable_dot(c.bound))
              return "swap_operands = 1: no dot of 8, 16 or 32 rows and 64, 128, 192 or 256 columns on 16-bit or fp8 "
                     "operands (the swap takes only those)";
            if (config_value(c.config, "cluster_m", 1) != 1)
              return "swap_operands = 1 with cluster_m: the pairs are not taken (the batch's tile is the one they would share)";
            return "";
          }};
}

Constraint cuda_narrow_b_constraint() {
  return {"cuda-b-tile-96",
          "a dot of 96 columns only on sm_90a's wgmma (16-bit, a multiple of 64 rows): elsewhere its B rows of 12 "
          "16-byte chunks take no cp.async ring",
          [](const Candidate& c) -> std::string {
            if (c.target.rfind("cuda:", 0) != 0) return "";
            std::string why;
            walk(const_cast<Kernel&>(c.bound), [&](Op& op) {
              if (!why.empty() || op.kind != OpKind::Dot || !shape_is_static(op.result()->type.shape)) return;
              const auto sh = static_shape(op.result()->type.shape);
              if (sh.size() != 2 || sh[1] != 96) return;
              const ScalarKind in = op.operand(0)->type.elem;
              if (c.target != "cuda:sm_90a" || sh[0] % 64 != 0 || (in != ScalarKind::BF16 && in != ScalarKind::F16))
                why = "a dot of " + std::to_string(sh[0]) + " x 96 on " + c.target +
                      ": 96 columns are for sm_90a's wgmma (16-bit, a multiple of 64 rows); elsewhere the dot runs "
                      "without a ring";
            });
            return why;
          }};
}

Constraint cuda_stream_k_constraint(int64_t sms) {
  return {"cuda-stream-k",
          "stream_k = 1 only for wgmma dots whose programs end in a partial wave that the kernel shares out "
          "(fewer tiles than CTAs, at least half the CTAs, or after a full wave), without cluster_m or a split (which "
          "it replaces)",
          [sms](const Candidate& c) -> std::string {
            if (config_value(c.config, "stream_k", 0) != 1 || c.target.rfind("cuda:", 0) != 0) return "";
            if (!has_wgmma_rows(c)) return "stream_k = 1: no dot of a multiple of 64 rows (wgmma)";
            if (config_value(c.config, "cluster_m", 1) != 1) return "stream_k = 1 with cluster_m: the clusters are not taken";
            if (config_value(c.config, kSplitKKnob, 0) >= 2) return "stream_k = 1 with split_k: the split compilation runs";
            const int64_t programs = programs_of(c);
            if (programs < 0) return "";
            // A persistent wgmma kernel launches cuda::stream_k_ctas CTAs (one per
            // multiprocessor, or four per tile when that is fewer) and shares out the tiles
            // cuda::stream_k_tiles says (the emitter's tsr_L); the runtime's split takes
            // programs that fill at most a third of its capacity when their K loop is long enough.
            if (launch_splits(c.config, programs, sms, cuda_split_loop_k(c.bound, c.sizes)) > 1) return "stream_k = 1: the runtime splits " +
                                                                  std::to_string(programs) + " programs over K";
            if (cuda::stream_k_tiles(programs, cuda::stream_k_ctas(programs, sms)) == 0)
              return "stream_k = 1: " + std::to_string(programs) + " programs on " + std::to_string(sms) +
                     " CTAs leave no partial wave to share out";
            return "";
          }};
}

Constraint cpu_dot_block_constraint() {
  return {"cpu-dot-block", "cpu_dot_mr / cpu_dot_nr divide every dot's tile and differ from the header's own choice",
          [](const Candidate& c) -> std::string {
            auto get = [&](const char* n) {
              auto it = c.config.find(n);
              return it == c.config.end() ? int64_t{0} : it->second;
            };
            const int64_t mr = get("cpu_dot_mr"), nr = get("cpu_dot_nr");
            if (c.target != "cpu" || (mr == 0 && nr == 0)) return "";
            std::string why;
            walk(const_cast<Kernel&>(c.bound), [&](Op& op) {
              if (op.kind != OpKind::Dot || !why.empty() || !shape_is_static(op.result()->type.shape)) return;
              auto s = static_shape(op.result()->type.shape);
              if (s.size() != 2) return;
              const int64_t M = s[0], N = s[1];
              // tsr::dot_f32's own choice (src/cpu/runtime/tessera_cpu.h.inc).
              const int64_t NR = N % 32 == 0 ? 32 : N % 16 == 0 ? 16 : N % 8 == 0 ? 8 : 0;
              const int64_t nr_eff = nr > 0 && N % nr == 0 ? nr : NR;
              const int64_t MR = M % 8 == 0 && nr_eff == 32 ? 8 : M % 4 == 0 ? 4 : M % 2 == 0 ? 2 : 1;
              if (nr && (N % nr != 0 || nr == NR))
                why = "cpu_dot_nr = " + std::to_string(nr) + (N % nr ? " does not divide N = " + std::to_string(N) : " is the header's own choice");
              else if (mr && (M % mr != 0 || mr == MR))
                why = "cpu_dot_mr = " + std::to_string(mr) + (M % mr ? " does not divide M = " + std::to_string(M) : " is the header's own choice");
            });
            return why;
          }};
}

std::vector<std::string> grid_knobs(const Kernel& unbound) {
  std::vector<std::string> out;
  if (!unbound.grid) return out;
  walk(*unbound.grid, [&](Op& op) {
    if (op.kind != OpKind::Param) return;
    const Attr* n = op.find_attr("name");
    if (!n || !std::holds_alternative<std::string>(*n)) return;
    const std::string& name = std::get<std::string>(*n);
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
  });
  return out;
}

Space make_space(const Kernel& unbound, const std::string& target, const Config& defaults) {
  Space s;
  s.kernel = unbound.name;
  s.target = target;
  s.grid_knobs = grid_knobs(unbound);
  for (const ConstexprDecl& d : unbound.constexprs) {
    const KnobDecl* decl = find_codegen_knob(d.name);
    Knob k;
    k.name = d.name;
    k.kind = decl ? KnobKind::Codegen : KnobKind::Tile;
    k.values = d.candidates;
    k.targets = decl ? decl->knob.targets : std::vector<std::string>{};
    k.doc = decl ? decl->knob.doc : "tile constexpr";
    auto it = defaults.find(d.name);
    k.default_value = it != defaults.end() ? it->second : d.value;
    if (k.values.size() < 2 || !knob_applies(k, target)) {
      s.fixed[d.name] = k.default_value;  // "any value" (none to try), one value, or not this target's
      if (k.values.size() >= 2) s.elsewhere.push_back(std::move(k));
      continue;
    }
    if (std::find(k.values.begin(), k.values.end(), k.default_value) == k.values.end())
      k.default_value = k.values.front();
    s.knobs.push_back(std::move(k));
  }
  // Codegen knobs the kernel does not declare: the table's, for this target and kind of kernel.
  for (const KnobDecl& d : codegen_knobs()) {
    if (unbound.find_constexpr(d.knob.name) || !kernel_kind_matches(unbound, d.kernels)) continue;
    if (!knob_applies(d.knob, target)) {
      s.elsewhere.push_back(d.knob);
      continue;
    }
    Knob k = d.knob;
    if (auto it = defaults.find(k.name); it != defaults.end()) k.default_value = it->second;
    s.knobs.push_back(std::move(k));
  }
  s.constraints = {tile_cover_constraint(), cpu_tile_bytes_constraint(), cpu_dot_block_constraint(),
                   cuda_smem_constraint(), cuda_split_k_constraint(), cuda_stream_k_constraint(),
                   cuda_swap_constraint(), cuda_narrow_b_constraint()};
  return s;
}

std::unique_ptr<Kernel> with_codegen_knobs(const Kernel& k, const Config& knobs) {
  auto copy = k.clone();
  for (const auto& [n, v] : knobs)
    if (!k.find_constexpr(n)) copy->set_constexpr(n, v);
  return copy;
}

Config take_codegen_knobs(const Kernel& k, std::map<std::string, int64_t>& config) {
  Config knobs;
  for (auto it = config.begin(); it != config.end();) {
    if (!k.find_constexpr(it->first) && find_codegen_knob(it->first)) {
      knobs.insert(*it);
      it = config.erase(it);
    } else {
      ++it;
    }
  }
  return knobs;
}

std::unique_ptr<Kernel> bind_config(const Kernel& unbound, const Config& config) {
  auto k = with_codegen_knobs(unbound, config);
  PipelineOptions po;
  po.config = config;
  return run_pipeline(*k, po);
}

Pruned prune(const Space& space, const Kernel& unbound, const Sizes& sizes) {
  if (space.size() > kMaxEnumerated)
    throw TesseraError("the space of '" + space.kernel + "' on " + space.target + " has " +
                       std::to_string(space.size()) + " configurations, more than " + std::to_string(kMaxEnumerated) +
                       " to enumerate: fix some knobs with --config");
  Pruned out;
  // The bound tile-level IR depends on the tile knobs only: each combination of them is bound
  // once (null: it does not bind), the constraints judge every config.
  std::map<Config, std::unique_ptr<Kernel>> bound_by_tiles;
  for (Config& c : space.enumerate()) {
    Config tiles;
    for (const Knob& k : space.knobs)
      if (k.kind == KnobKind::Tile) tiles[k.name] = c.at(k.name);
    auto it = bound_by_tiles.find(tiles);
    if (it == bound_by_tiles.end()) {
      std::unique_ptr<Kernel> bound;
      try {
        bound = bind_config(unbound, c);
      } catch (const TesseraError&) {
        // a tile dim expression with no value, a verifier rule
      }
      it = bound_by_tiles.emplace(tiles, std::move(bound)).first;
    }
    if (!it->second) {
      ++out.removed_by["binds"];
      continue;
    }
    Candidate cand{c, *it->second, sizes, space.target};
    std::string verdict;
    for (const Constraint& con : space.constraints)
      if (!con.rejects(cand).empty()) {
        verdict = con.name;
        break;
      }
    if (verdict.empty()) out.configs.push_back(std::move(c));
    else ++out.removed_by[verdict];
  }
  return out;
}

}  // namespace tessera::tune
