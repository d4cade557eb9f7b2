#!/usr/bin/env python3
"""The autotuner's H200 figure (issue 20; docs/tuning.md), driven after bench/tune_cuda_figure.sh
has built the CLI: bf16 matmul at 50 LLM GEMM shapes over a sub-space of the cuda knobs (tiles,
cluster_m, min_blocks, split_k, stream_k), each shape

  - tuned with `tessera tune` measuring at most 5% of its pruned space (the budget per shape), every shape in one process (one CUDA context, each config loaded once),
    into one database, the larger shapes first so that the small ones learn from them;
  - measured exhaustively (`tune --exhaustive`: every config of the pruned space once, then the 8
    fastest and the default in 3 rounds), into a database of its own so that the tunes learn
    nothing from it; kept as data (bench/data/tune_cuda_matmul_exhaustive_50_splitk.jsonl.xz): the
    configs already there are not measured again (`--exhaustive --missing` measures those the
    data lacks: shapes not swept yet, configs a grown space added), so a figure that runs out of
    time in one call is finished by a second one after that file is committed;
  - cuBLAS through torch.matmul, timed by triton's do_bench (as the tuner times), in the same call;
  - the tuned config and the exhaustive data's fastest timed again side by side (`tune --compare`),
    so that "within 2%" also compares two figures of one call.

Each phase ends at its deadline (seconds from the start of the device call, which the shell
script passes): the tunes first (the figure's main part), then cuBLAS, then the exhaustive
sweeps with what is left. A candidate that hangs on the GPU ends its tune process (the watchdog
stores it as a timeout); the phase then starts again with the shapes not done, and that config
is left out at that shape. Prints the table and writes it, the data and a tarball to --work and
--out.

BACKEND=cpu runs the same driver on the cpu backend at three small f32 shapes over a small space
(no cuBLAS): how the driver itself is tested without a GPU.
"""
import argparse
import json
import lzma
import math
import os
import subprocess
import sys
import tarfile
import time

# N,K of the weights (out, in features), then the batch sizes M.
NK = [(6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336),   # Llama-3-8B: qkv, o, gate_up, down
      (4608, 3584), (3584, 3584), (18944, 3584), (3584, 18944),   # Qwen2.5-7B: qkv, o, up, down
      (1536, 7168), (7168, 2048)]                                 # DeepSeek-V3: q_a, an expert's down
MS = [1, 16, 128, 1024, 4096]
# The sub-space: the tiles (BLOCK_M x BLOCK_N x BLOCK_K), 2-CTA clusters (cluster_m), the
# occupancy hint (min_blocks), the runtime's split over K (split_k: 0 its own rule, 2-4 ways,
# kept only where programs are few: cuda-split-k) and stream-K (stream_k, kept where a partial
# last wave is: cuda-stream-k), and since session 28 swap_operands, since session 29 BLOCK_N 96
# (16-bit only; not in the exhaustive data yet: the sweep measures it): 8960 configs before
# pruning (378-852 after at M = 1, 1024, 4096), 240 of them without split_k
# (session 16's figure, bench/data/tune_cuda_matmul_exhaustive_50.jsonl.xz); the other codegen knobs
# fixed at their defaults (bf16 matmul on sm_90a has 550 million configs in all). The default
# config (size_configs) is in it, and is what `tessera run` binds without a database.
CUDA_KNOBS = ("num_warps=0,whole_tile_checks=0,mma_l2_prefetch=0,mma_spread_copies=0,mma_early_last_step=0,"
              "epilogue_buffers=2,epilogue_overlap=1,tma_store_epilogue=1,tma_hint_a=0,tma_hint_b=0,ring_stages=0")
EXH_DATA = "bench/data/tune_cuda_matmul_exhaustive_50_splitk.jsonl.xz"


def log(start, msg):
    print(f"[{time.time() - start:.0f} s] {msg}", file=sys.stderr, flush=True)


def shape_key(s):
    """'M=1,N=6144,K=4096' -> the database's shape key (dims sorted by name)."""
    d = dict(kv.split("=") for kv in s.split(","))
    return ",".join(f"{k}={d[k]}" for k in sorted(d))


def run_shapes(args, base, shapes, extra, out_jsonl, deadline, start, what):
    """`tessera tune ... --shapes` over `shapes`, again over those not done when a process ends
    early (a hung candidate: the watchdog stored it and ended the process), until all are done or
    the deadline. Returns {shape: JSON result} (an "error" key for a shape that failed)."""
    done = {}
    todo = list(shapes)
    attempts = 0
    while todo and attempts < 5:
        left = deadline - (time.time() - start)
        if left < 5:
            log(start, f"{what}: deadline, {len(todo)} shapes not done")
            break
        attempts += 1
        path = os.path.join(args.work, f"{what}_shapes_{attempts}.txt")
        with open(path, "w") as f:
            f.write("\n".join(todo) + "\n")
        cmd = base + ["--shapes", path, "--json"] + extra
        err_path = os.path.join(args.work, f"{what}_{attempts}.log")
        with open(err_path, "w") as err:
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True)
            try:
                out, _ = p.communicate(timeout=left)
            except subprocess.TimeoutExpired:
                p.kill()
                out, _ = p.communicate()
                log(start, f"{what}: deadline reached inside a run")
        with open(out_jsonl, "a") as f:
            for line in out.splitlines():
                try:
                    r = json.loads(line)
                except ValueError:
                    continue
                s = r.get("shape") or ",".join(f"{k}={r['sizes'][k]}" for k in ("M", "N", "K") if k in r["sizes"])
                # The shapes file's spelling: match by the sorted key.
                for t in todo:
                    if shape_key(t) == shape_key(s):
                        done[t] = r
                f.write(line + "\n")
        before = len(todo)
        todo = [t for t in todo if t not in done]
        if todo:
            tail = open(err_path).read().strip().splitlines()[-1:] or [""]
            log(start, f"{what}: process ended with {p.returncode}, {before - len(todo)} shapes done, "
                       f"{len(todo)} left ({tail[0][:200]})")
        if time.time() - start > deadline:
            break
    return done


def cublas(args, shapes, start, timeout):
    code = r'''
import json, sys
import torch
from triton.testing import do_bench
res = {}
a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
for _ in range(200): a @ a  # out of idle clocks
for s in sys.argv[2:]:
    d = dict(kv.split("=") for kv in s.split(","))
    m, n, k = int(d["M"]), int(d["N"]), int(d["K"])
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    res[s] = do_bench(lambda: x @ w, warmup=10, rep=40, return_mode="median")
json.dump(res, open(sys.argv[1], "w"))
print(f"cuBLAS: {len(res)} shapes")
'''
    path = os.path.join(args.work, "cublas.json")
    try:
        p = subprocess.run([sys.executable, "-c", code, path] + shapes, capture_output=True, text=True,
                           timeout=max(timeout, 5))
        log(start, (p.stdout.strip() or p.stderr.strip().splitlines()[-1:] or ["cuBLAS: no output"])[-1][:300])
    except subprocess.TimeoutExpired:
        log(start, "cuBLAS: deadline")
    try:
        return json.load(open(path))
    except (OSError, ValueError):
        return {}


# Codegen knobs added after the kept data began, per target, with the value its rows were
# measured at (the knob's table default, as `tessera tune` completes such rows): a row of that
# target without one is that config.
NEW_KNOBS = {"cuda:sm_90a": {"ring_stages": 0, "swap_operands": 0}}


def read_exhaustive(paths):
    """{shape key: {config json: least ms}} over the "ok" rows of exported databases (configs
    completed with their target's NEW_KNOBS, so that a tuned config names the same key as the
    old rows)."""
    best = {}
    for path in paths:
        if not os.path.exists(path):
            continue
        opener = lzma.open if path.endswith(".xz") else open
        with opener(path, "rt") as f:
            for line in f:
                r = json.loads(line)
                if r["status"] != "ok":
                    continue
                c = json.dumps({**NEW_KNOBS.get(r.get("target"), {}), **r["config"]}, sort_keys=True)
                t = best.setdefault(r["shape"], {})
                t[c] = min(t.get(c, 1e30), r["ms"])
    return best


def exhaustive_best(exh, s):
    """The exhaustive data's fastest config at shape s (a dict) and its least time, or (None, None)."""
    e = exh.get(shape_key(s), {})
    if not e:
        return None, None
    c = min(e, key=e.get)
    return json.loads(c), e[c]


def side_by_side(args, base, shapes, tuned, exh, deadline, start, timing):
    """The tuned config and the exhaustive data's fastest, timed again side by side at each shape
    in one `tessera tune --compare` process (the same call, alternating rounds): the data's times
    come from sweeps of other calls and its least is over however many rows a config has (the
    finalists' several rounds, the others' one), so "within 2%" from them alone compares unlike
    figures. Returns {shape: tuned ms / exhaustive best ms} (1.0 where they are one config)."""
    out = {}
    # The larger M first, as the tunes ran (a deadline then cuts the decode shapes, whose configs
    # are quick to time again in the next call).
    todo = [s for s in sorted(shapes, key=lambda s: -int(dict(kv.split("=") for kv in s.split(","))["M"]))
            if (tuned.get(s) or {}).get("best") and exhaustive_best(exh, s)[0]]
    for s in todo:
        t = tuned[s]["best"]
        best, _ = exhaustive_best(exh, s)
        if json.dumps(t["config"], sort_keys=True) == json.dumps(best, sort_keys=True):
            out[s] = 1.0
            continue
        left = deadline - (time.time() - start)
        if left < 5:
            log(start, f"side by side: deadline, {len(todo) - len(out)} of {len(todo)} shapes not compared")
            break
        path = os.path.join(args.work, "compare.txt")
        with open(path, "w") as f:
            for c in (t["config"], best):
                f.write(",".join(f"{k}={v}" for k, v in sorted(c.items())) + "\n")
        cmd = base + ["--size", s, "--compare", path, "--db", os.path.join(args.work, "compare.db"), "--json"] + timing
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=left)
        except subprocess.TimeoutExpired:
            log(start, "side by side: deadline reached inside a run")
            break
        with open(os.path.join(args.work, "compare.jsonl"), "a") as f:
            f.write(p.stdout)
        try:
            r = json.loads(p.stdout.strip().splitlines()[-1])["compare"]
        except (ValueError, IndexError, KeyError):
            log(start, f"side by side {s}: {(p.stderr.strip().splitlines() or ['no output'])[-1][:200]}")
            continue
        if r[0]["status"] == "ok" and r[1]["status"] == "ok" and r[1]["ms"] > 0:
            out[s] = r[0]["ms"] / r[1]["ms"]
        else:
            log(start, f"side by side {s}: " + ", ".join(f'{x["status"]} {x.get("message", "")[:80]}' for x in r))
    return out


def table(shapes, tuned, exh, cb, cfg_keys, sbs=None):
    def cfg(c):
        return ",".join(f"{k}={v}" for k, v in sorted(c.items()) if k.startswith("BLOCK") or k in cfg_keys)

    def fmt(x):
        return f"{x:.4g}" if x else "-"

    lines = ["| shape | measured of pruned | tuning s | tuned ms | tuned config | default ms | tuned/default "
             "| exh. best ms | tuned cfg in exh. ms | tuned vs exh. best | same call | cuBLAS ms | cuBLAS/tuned |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    sbs = sbs or {}
    speed, vs_cublas, within, fractions, secs = [], [], [], [], []
    for s in shapes:
        t = tuned.get(s)
        e = exh.get(shape_key(s), {})
        eb = min(e.values()) if e else None
        c = cb.get(s)
        if not t or not t.get("best"):
            why = (t or {}).get("error", "not tuned")
            lines.append(f"| {s} | {why[:60]} | | | | | | {fmt(eb)} | | | | {fmt(c)} | |")
            continue
        b = t["best"]["ms"]
        d = t["default"]["ms"] if t["default"]["status"] == "ok" else None
        frac = t["measured"] / max(t["pruned"], 1)
        fractions.append(frac)
        secs.append(t["seconds"])
        su = d / b if d else None
        if su:
            speed.append(su)
        mine = e.get(json.dumps(t["best"]["config"], sort_keys=True)) if e else None
        w = mine / eb - 1 if mine and eb else None
        if w is not None:
            within.append(w)
        r = c / b if c else None
        if r:
            vs_cublas.append(r)
        lines.append(f"| {s} | {t['measured']} of {t['pruned']} ({100 * frac:.1f}%) | {t['seconds']:.3g} | {b:.4g} | "
                     f"{cfg(t['best']['config'])} | {fmt(d)} | {su and f'{su:.2f}x' or '-'} | {fmt(eb)} | {fmt(mine)} | "
                     f"{'-' if w is None else f'{100 * w:+.1f}%'} | "
                     f"{f'{100 * (sbs[s] - 1):+.1f}%' if s in sbs else '-'} | {fmt(c)} | {r and f'{r:.2f}x' or '-'} |")

    def geo(v):
        return math.exp(sum(map(math.log, v)) / len(v)) if v else float("nan")

    n = len(shapes)
    lines.append("")
    lines.append(f"tuned {len(fractions)} of {n} shapes, measuring at most {100 * max(fractions, default=0):.1f}% of the "
                 f"pruned space, {sum(secs):.0f} s of tuning ({max(secs, default=0):.1f} s at most per shape)")
    lines.append(f"within 2% of the exhaustive best: {sum(w <= 0.02 for w in within)} of {len(within)} shapes with "
                 f"exhaustive data (worst {100 * max(within, default=float('nan')):+.1f}%)")
    same = [v - 1 for v in sbs.values()]
    lines.append(f"within 2% of the exhaustive best, the two timed side by side in this call: "
                 f"{sum(w <= 0.02 for w in same)} of {len(same)} shapes compared "
                 f"(worst {100 * max(same, default=float('nan')):+.1f}%)")
    lines.append(f"tuned over default: geomean {geo(speed):.3f}x (min {min(speed, default=float('nan')):.2f}x)")
    lines.append(f"tuned over cuBLAS (cuBLAS ms / tuned ms): geomean {geo(vs_cublas):.3f}x, "
                 f"{sum(r >= 1.0 for r in vs_cublas)} of {len(vs_cublas)} at >= 1.0x, "
                 f"min {min(vs_cublas, default=float('nan')):.2f}x")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tessera", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--out", default="")
    ap.add_argument("--start", type=float, default=time.time(), help="the device call's start (epoch seconds)")
    args = ap.parse_args()
    env = os.environ
    backend = env.get("BACKEND", "cuda")
    start = args.start
    total = float(env.get("TOTAL", 530))           # the whole call, build included
    tune_until = float(env.get("TUNE_UNTIL", total - 150))
    cublas_until = float(env.get("CUBLAS_UNTIL", tune_until + 45))
    cmp_s = float(env.get("CMP_S", 90))  # the side-by-side step's share of the end of the call
    os.makedirs(args.work, exist_ok=True)
    for f in os.listdir(args.work):
        if f.endswith((".json", ".jsonl", ".db", ".log", ".txt")):
            os.remove(os.path.join(args.work, f))

    if backend == "cpu":
        shapes = ["M=37,N=29,K=19", "M=64,N=48,K=40", "M=5,N=40,K=33"]
        base = [args.tessera, "tune", "matmul", "-b", "cpu", "--config",
                "BLOCK_K=16,cpu_dot_mr=0,cpu_dot_nr=0"]
        exh_data = env.get("EXH_DATA", os.path.join(args.work, "none.jsonl.xz"))  # never the repo's
        timing = ["--rounds", "2", "--timeout", "120"]
        exh_timing = ["--rounds", "2", "--finalists", "3", "--timeout", "120"]
        cmp_timing = ["--rounds", "3", "--timeout", "120"]
    else:
        shapes = [f"M={m},N={n},K={k}" for m in MS for n, k in NK]
        base = [args.tessera, "tune", "matmul", "--dtype", "bf16", "-b", "cuda", "--config", env.get("KNOBS", CUDA_KNOBS)]
        exh_data = env.get("EXH_DATA", EXH_DATA)
        # Ranking: do_bench with a short rep; the tune's confirmation and the exhaustive finalists
        # take more rounds.
        timing = ["--rounds", "2", "--rep", env.get("REP", "10"), "--timeout", "20"]
        exh_timing = ["--rounds", "3", "--finalists", "8", "--rep", env.get("EXH_REP", "5"), "--timeout", "20"]
        cmp_timing = ["--rounds", "5", "--rep", env.get("REP", "10"), "--timeout", "20"]
    if env.get("NSHAPES"):
        shapes = shapes[:int(env["NSHAPES"])]
    with open(os.path.join(args.work, "shapes.txt"), "w") as f:
        f.write("\n".join(shapes) + "\n")

    # The pruned space of each shape (split_k's constraint depends on the programs, so N as well
    # as M changes it): the budget is 5% of it. The --space calls run in parallel.
    def space_of(s):
        p = subprocess.run(base + ["--size", s, "--space"], capture_output=True, text=True)
        for line in p.stdout.splitlines():
            if line.startswith("size "):
                return int(line.split("pruned ")[1].split()[0]), line
        return 0, p.stderr.strip()
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 4) as pool:
        spaces = dict(zip(shapes, pool.map(space_of, shapes)))
    budgets = {}
    for s in shapes:
        pruned, line = spaces[s]
        budgets[s] = int(env["BUDGET"]) if env.get("BUDGET") else max(1, pruned * 5 // 100)
    log(start, f"spaces: pruned {min(p for p, _ in spaces.values())}-{max(p for p, _ in spaces.values())} configs, "
               f"budgets {min(budgets.values())}-{max(budgets.values())}; at {shapes[0]}: {spaces[shapes[0]][1]}")

    if backend == "cuda":
        # Every config compiled first in parallel (the cubins do not depend on the shape): at
        # M=128 (BLOCK_M 16-128), with the split-K compilations of those whose programs are few
        # at N=1536; then M=1's split-K ones.
        log(start, "compile every config (NVRTC on every core)")
        with open(os.path.join(args.work, "compile.txt"), "w") as f:
            for s in ("M=128,N=1536,K=7168", "M=1,N=1536,K=7168"):
                p = subprocess.run(base + ["--size", s, "--compile-only", "--timeout", "120"], capture_output=True,
                                   text=True, timeout=300)
                f.write(p.stdout + p.stderr)
                log(start, (p.stdout.strip().splitlines() or p.stderr.strip().splitlines() or [""])[0][:200])
        if env.get("DRY"):
            p = subprocess.run(base + ["--size", shapes[0]], capture_output=True, text=True)
            log(start, "dry run: " + (p.stderr.strip().splitlines() or [""])[-1])
            return 0

    # 1. The tunes, the larger M first (the small shapes' 3 measurements then have a history).
    order = sorted(shapes, key=lambda s: -int(dict(kv.split("=") for kv in s.split(","))["M"]))
    tuned = {}
    # The shapes in that order, a tune process for each run of one budget (they share the
    # database, so the order of learning stays the larger M first).
    groups = []
    for s in order:
        if groups and budgets[groups[-1][0]] == budgets[s]:
            groups[-1].append(s)
        else:
            groups.append([s])
    for group in groups:
        budget = budgets[group[0]]
        log(start, f"tune {len(group)} shapes, budget {budget} (until {tune_until:.0f} s)")
        tuned.update(run_shapes(args, base + ["--db", os.path.join(args.work, "tuned.db"), "--budget",
                                              str(budget)] + timing,
                                group, [], os.path.join(args.work, "tuned.jsonl"), tune_until, start, "tune"))

    # 2. cuBLAS.
    cb = {}
    if backend == "cuda":
        log(start, "cuBLAS through torch")
        cb = cublas(args, shapes, start, cublas_until - (time.time() - start))

    # 3. Exhaustive, for the configs the kept data lacks: its rows go into the sweep's database
    # first, and `--exhaustive --missing` measures at each shape only the pruned configs without
    # a row there (a whole shape the data lacks; the configs a grown space added), beside the
    # default and the finalists again; a shape with nothing new measures nothing.
    kept_shapes = set(read_exhaustive([exh_data]))
    # The shapes the data lacks first (a call cut short then adds the most).
    # SWEEP_M (e.g. "1024,4096,128"): shapes of those batch sizes next, in that order (a grown
    # space swept over two calls covers the shapes it was grown for in the first).
    first_m = [int(x) for x in env.get("SWEEP_M", "").split(",") if x]
    def sweep_rank(s):
        m = int(dict(kv.split("=") for kv in s.split(","))["M"])
        return (shape_key(s) in kept_shapes, first_m.index(m) if m in first_m else len(first_m))
    missing = sorted(shapes, key=sweep_rank)
    log(start, f"exhaustive: {len(kept_shapes & {shape_key(s) for s in shapes})} shapes in {exh_data}, the "
               f"configs they lack measured (until {total:.0f} s)")
    exh_db = os.path.join(args.work, "exhaustive.db")
    if os.path.exists(exh_db):
        os.remove(exh_db)
    if os.path.exists(exh_data):
        plain = os.path.join(args.work, "kept.jsonl")
        with lzma.open(exh_data, "rt") as f, open(plain, "w") as out:
            out.write(f.read())
        p = subprocess.run([args.tessera, "tune", "--db", exh_db, "--import", plain], capture_output=True, text=True)
        log(start, (p.stdout.strip() or p.stderr.strip())[:200])
        if p.returncode != 0:  # the merged file below would lose the kept rows
            log(start, "exhaustive: the kept data did not import; no sweep, no data written")
            return 1
    if missing:
        run_shapes(args, base + ["--db", exh_db, "--exhaustive", "--missing"] + exh_timing, missing, [],
                   os.path.join(args.work, "exhaustive_runs.jsonl"), total - 10 - cmp_s, start, "exhaustive")
    # Every row (the kept ones and the new; a shape cut at the deadline keeps what it measured,
    # and the next call measures the rest), for `git add` (the file is small). The table's
    # exhaustive best is over those rows: at a shape whose sweep was cut, over what it holds.
    merged = os.path.join(args.work, os.path.basename(EXH_DATA))
    p = subprocess.run([args.tessera, "tune", "--db", exh_db, "--export", "-"], capture_output=True, text=True)
    with lzma.open(merged, "wt") as out:
        out.write(p.stdout)
    exh = read_exhaustive([merged])

    # 4. The tuned config against the exhaustive best, side by side in this call.
    log(start, f"side by side: the tuned config and the exhaustive best at each shape (until {total - 5:.0f} s)")
    sbs = side_by_side(args, base, shapes, tuned, exh, total - 5, start, cmp_timing)

    text = table(shapes, tuned, exh, cb, ("cluster_m", "min_blocks", "split_k", "stream_k", "swap_operands"), sbs)
    print(text, end="")
    with open(os.path.join(args.work, "table.md"), "w") as f:
        f.write(text)
    if args.out and os.path.isdir(args.out) and os.path.abspath(args.out) != os.path.abspath(args.work):
        with open(os.path.join(args.out, "tune_cuda_table.md"), "w") as f:
            f.write(text)
        os.system(f"cp '{merged}' '{args.out}/'")
        with tarfile.open(os.path.join(args.out, "tune_cuda_data.tar.gz"), "w:gz") as tar:
            for f in sorted(os.listdir(args.work)):
                if f.endswith((".json", ".jsonl", ".txt", ".log")):
                    tar.add(os.path.join(args.work, f), arcname=f)
    log(start, f"done; data in {args.work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
