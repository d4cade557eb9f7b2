#!/usr/bin/env python3
"""Session 42 (issue 16): one-change variants of the layout emitter's matmul_struct source.

Usage: session42_variants.py SRC.cu OUTDIR
Writes OUTDIR/<v>/<basename of SRC> for each variant, to be compiled in place of the emitted
source with TESSERA_CUDA_OVERRIDE_DIR=OUTDIR/<v> (docs/cuda-backend.md). Every edit asserts
that it found its text, so a changed emitter fails here rather than timing the wrong thing.
  l1  the refill's whole-tile tests that do not change with k (row bound, stride, base
      alignment) made once before the loop, as the planning emitter's cp_tile_async flag is
  l2  each iteration's two ring-stage shared addresses converted once, at the iteration's top
  l3  the refill moved to the iteration's top, right after the barrier (the planning order)
  l4  l1 + l2 + l3
  l5  as emitted, with __launch_bounds__(128, 6) (at most 85 registers: l3 and l4 take fewer
      registers than the emitted source, so this separates their order from their occupancy)
  l6  l4 with the result stored straight from the accumulator registers (4-byte pairs), as the
      planning emitter does, in place of stage-epilogue-stores' trip through shared memory
  l7  as emitted, with l6's direct stores
"""
import os
import re
import sys


def sub1(text, old, new, count=None):
    n = text.count(old)
    assert n >= 1 and (count is None or n == count), f"{old[:60]!r}: found {n}"
    return text.replace(old, new)


def hoist_tests(s):
    # The refill's A and B tests inside the loop: `oR >= 0 && oR + 64 <= M && s0 % 8 == 0 &&
    # oK >= 0 && oK + 32 <= K && aligned(p + ...)`. With s0 % 8 == 0 and tile offsets that are
    # multiples of 8, the address is aligned iff the base is.
    pat_a = re.compile(r"if \((o\d+) >= 0 && \1 \+ 64 <= int64_t\(tsr_dim_M\) && tsr_p0_s0 % 8 == 0 && (o\d+) >= 0 && \2 \+ 32 <= int64_t\(tsr_dim_K\) && tsr::aligned_vec<uint16_t, 8>\(tsr_p0 \+ \1 \* tsr_p0_s0 \+ \2 \* tsr_p0_s1\)\)")
    pat_b = re.compile(r"if \((o\d+) >= 0 && \1 \+ 32 <= int64_t\(tsr_dim_K\) && tsr_p1_s0 % 8 == 0 && (o\d+) >= 0 && \2 \+ 64 <= int64_t\(tsr_dim_N\) && tsr::aligned_vec<uint16_t, 8>\(tsr_p1 \+ \1 \* tsr_p1_s0 \+ \2 \* tsr_p1_s1\)\)")
    s, na = pat_a.subn(lambda m: f"if (tsr_whole_a && {m.group(2)} + 32 <= int64_t(tsr_dim_K))", s)
    s, nb = pat_b.subn(lambda m: f"if (tsr_whole_b && {m.group(1)} + 32 <= int64_t(tsr_dim_K))", s)
    assert na == 2 and nb == 2, (na, nb)
    decl = ("  const bool tsr_whole_a = int64_t(v1) * 64 + 64 <= int64_t(tsr_dim_M) && tsr_p0_s0 % 8 == 0 && tsr::aligned_vec<uint16_t, 8>(tsr_p0);\n"
            "  const bool tsr_whole_b = int64_t(v2) * 64 + 64 <= int64_t(tsr_dim_N) && tsr_p1_s0 % 8 == 0 && tsr::aligned_vec<uint16_t, 8>(tsr_p1);\n")
    i = s.index("  int rs14 = 0;\n")
    return s[:i] + decl + s[i:]


def stage_addresses(s):
    anchor = "      (void)wm_; (void)wn_;\n"
    s = sub1(s, anchor, anchor + "      const uint32_t tsr_sa = tsr::smem_u32((sh15 + rs14 * 2560)), tsr_sb = tsr::smem_u32((sh16 + rs14 * 2304));\n", 1)
    s = sub1(s, "tsr::smem_u32((sh15 + rs14 * 2560))", "tsr_sa")
    s = sub1(s, "tsr::smem_u32((sh16 + rs14 * 2304))", "tsr_sb")
    # the declaration itself was rewritten too: restore it
    s = sub1(s, "const uint32_t tsr_sa = tsr_sa, tsr_sb = tsr_sb;",
             "const uint32_t tsr_sa = tsr::smem_u32((sh15 + rs14 * 2560)), tsr_sb = tsr::smem_u32((sh16 + rs14 * 2304));", 1)
    return s


def block_at(s, start):
    """The text from s[start] (a line holding an opening brace) to its matching closing brace line."""
    depth, i = 0, s.index("{", start)
    while True:
        c = s[i]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return start, s.index("\n", i) + 1
        i += 1


def refill_at_top(s):
    head = "        if (ks == 0) {  // the ring's refill, before the first k step's mma instructions\n"
    b = s.index(head)
    b, e = block_at(s, b)
    body = s[b + len(head):e]
    body = body[: body.rstrip().rfind("}")]  # drop the closing brace of `if (ks == 0)`
    s = s[:b] + s[e:]
    anchor = "    tsr::cp_async_wait<0>();  // this iteration's copies are in\n    __syncthreads();\n"
    assert s.count(anchor) == 1
    return s.replace(anchor, anchor + "    {  // refill at the top (variant l3)\n" + body + "    }\n")


def direct_stores(s):
    head = "  {  // through shared memory in 16-byte rows (stage-epilogue-stores)\n"
    b, e = block_at(s, s.index(head))
    direct = """  {  // direct 4-byte stores from the accumulator (variant l6 / l7)
    const int lr = ((tsr_lane >> 2) & 7) + ((tsr_warp >> 1) & 1) * 16, lc = (tsr_lane & 3) * 2 + (tsr_warp & 1) * 8;
    const int64_t o0 = int64_t(v1) * 64, o1 = int64_t(v2) * 64;
    const bool pairs = tsr::aligned_vec<uint16_t, 2>(tsr_p2) && tsr_p2_s0 % 2 == 0 && tsr_p2_s1 == 1;
    #pragma unroll
    for (int c = 0; c < 16; ++c) {
      const int64_t r = o0 + lr + (c % 2) * 8 + (c / 8) * 32, k = o1 + lc + ((c / 2) % 4) * 16;
      const uint16_t lo = tsr::f2bf(v96[c * 2]), hi = tsr::f2bf(v96[c * 2 + 1]);
      if (r < int64_t(tsr_dim_M)) {
        if (pairs && k + 1 < int64_t(tsr_dim_N)) {
          *reinterpret_cast<uint32_t*>(tsr_p2 + r * tsr_p2_s0 + k) = uint32_t(lo) | (uint32_t(hi) << 16);
        } else {
          if (k < int64_t(tsr_dim_N)) tsr_p2[r * tsr_p2_s0 + k * tsr_p2_s1] = lo;
          if (k + 1 < int64_t(tsr_dim_N)) tsr_p2[r * tsr_p2_s0 + (k + 1) * tsr_p2_s1] = hi;
        }
      }
    }
  }
"""
    assert "float v96[32];" in s
    return s[:b] + direct + s[e:]


def main():
    src, out = sys.argv[1], sys.argv[2]
    s = open(src).read()
    variants = {
        "l1": hoist_tests(s),
        "l2": stage_addresses(s),
        "l3": refill_at_top(s),
    }
    variants["l4"] = refill_at_top(stage_addresses(hoist_tests(s)))
    variants["l6"] = direct_stores(variants["l4"])
    variants["l7"] = direct_stores(s)
    variants["l5"] = sub1(s, "__launch_bounds__(128)", "__launch_bounds__(128, 6)", 1)
    for v, t in variants.items():
        os.makedirs(os.path.join(out, v), exist_ok=True)
        with open(os.path.join(out, v, os.path.basename(src)), "w") as f:
            f.write(t)
        print(v, "written", len(t.splitlines()), "lines")


main()
