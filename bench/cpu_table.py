#!/usr/bin/python3
"""Tabulates a bench/cpu.sh results file (JSON lines) as Markdown tables.

    bench/cpu_table.py bench/results/cpu-20250101-120000.jsonl

Throughput: per model and thread count, images/s as the median and the best
over the rounds, for ptrain and each PyTorch version.

Ratios (all of medians):
  ptrain/<torch>         ptrain against that PyTorch at the same thread count
  ptrain/<torch> best-T  ptrain against that PyTorch at its better of 1 and 2
                         threads for the model (the issue's target is
                         ptrain at 2 threads against this)
  GFLOP/s, % SGEMM       ptrain's achieved GFLOP/s (its flops_per_image x
                         images/s) and that as a share of the median SGEMM
                         rate ptrain bench --sgemm measured at those threads
  2T/1T                  ptrain's 2-thread images/s over its 1-thread images/s

Standard library only; runs under any python3.
"""

import json
import statistics
import sys


def load(path):
    meta, runs, sgemm = {}, [], {}
    dropped = host = 0
    probes = {}  # threads -> the slower probe around each run kept
    best = {}  # threads -> the best probe of the whole run
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            o = json.loads(line)
            if o.get("meta"):
                meta = o
                continue
            if o.get("error"):
                continue
            if o.get("host_best"):
                best[o["threads"]] = max(best.get(o["threads"], 0), o["host_best"])
            if o.get("contended") and not o.get("kept"):
                dropped += 1  # made again; see cpu.sh
                host += bool(o.get("host_contended"))
                continue
            if o.get("host_probe"):
                probes.setdefault(o["threads"], []).append(min(o["host_probe"]))
            if "sgemm_gflops" in o:
                sgemm.setdefault(o["threads"], []).append(o["sgemm_gflops"])
            else:
                runs.append(o)
    probes = {t: [g / best[t] for g in v] for t, v in probes.items() if best.get(t)}
    return meta, runs, sgemm, (dropped, host, probes)


def fw(o):
    return "ptrain" if o["framework"] == "ptrain" else "torch " + o["torch"]


def fmt(x, digits=0):
    if x is None:
        return "-"
    return f"{x:,.{digits}f}"


def ratio(a, b):
    return f"{a / b:.2f}x" if a and b else "-"


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    meta, runs, sgemm, (dropped, host, probes) = load(argv[1])
    models, threads, frameworks = [], [], []
    by = {}
    for o in runs:
        m, t, f = o["model"], o["threads"], fw(o)
        for lst, v in ((models, m), (threads, t), (frameworks, f)):
            if v not in lst:
                lst.append(v)
        by.setdefault((m, t, f), []).append(o)
    threads.sort()
    torches = [f for f in frameworks if f != "ptrain"]
    if meta:
        order = ["torch " + meta.get("torch_old", ""), "torch " + meta.get("torch_new", "")]
        torches.sort(key=lambda f: order.index(f) if f in order else 9)

    def ips(m, t, f, how=statistics.median):
        v = [o["images_per_s"] for o in by.get((m, t, f), [])]
        return how(v) if v else None

    def best_t(m, f):
        v = [ips(m, t, f) for t in threads if ips(m, t, f)]
        return max(v) if v else None

    if meta:
        print(f"ptrain {meta.get('ptrain', '?')} (git {meta.get('git', '?')}"
              f"{', uncommitted changes' if meta.get('git_dirty') else ''}); {meta.get('cpu', '?')}, "
              f"{meta.get('cores', '?')} cores; {meta.get('date', '?')}")
        # steps: one number for every model, or "model=N ..." (cpu.sh's per-model default)
        print(f"{meta.get('rounds', '?')} rounds of {meta.get('warmup', '?')} warm-up + timed steps per run "
              f"({meta.get('steps', '?')}); images/s median (best) over the rounds")
        print()

    print("Training throughput, images/s: median (best)")
    print()
    head = ["model", "batch", "threads"] + [f for f in ["ptrain"] + torches]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for m in models:
        for t in threads:
            batch = next((o["batch"] for f in frameworks for o in by.get((m, t, f), [])), "?")
            cells = [m, str(batch), str(t)]
            for f in ["ptrain"] + torches:
                med, best = ips(m, t, f), ips(m, t, f, max)
                n = len(by.get((m, t, f), []))
                cells.append(f"{fmt(med)} ({fmt(best)})" + (f" n={n}" if n and n != meta.get("rounds", n) else "")
                             if med else "-")
            print("| " + " | ".join(cells) + " |")
    print()

    print("ptrain against PyTorch (ratios of medians), and ptrain's efficiency")
    print()
    head = ["model", "threads"]
    for f in torches:
        head += [f"ptrain / {f}", f"ptrain / {f} best-T"]
    head += ["ptrain / best PyTorch", "ptrain GFLOP/s", "SGEMM GFLOP/s", "% of SGEMM", "ptrain 2T/1T"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for m in models:
        overall = max([v for v in (best_t(m, f) for f in torches) if v] or [0]) or None
        for t in threads:
            p = ips(m, t, "ptrain")
            cells = [m, str(t)]
            for f in torches:
                cells += [ratio(p, ips(m, t, f)), ratio(p, best_t(m, f))]
            cells.append(ratio(p, overall))
            gf = [o.get("gflops") for o in by.get((m, t, "ptrain"), []) if o.get("gflops") is not None]
            g = statistics.median(gf) if gf else None
            s = statistics.median(sgemm[t]) if sgemm.get(t) else None
            cells += [fmt(g, 1), fmt(s, 1), f"{100 * g / s:.0f}%" if g and s else "-"]
            p1 = ips(m, 1, "ptrain")
            cells.append(ratio(p, p1) if t != 1 else "-")
            print("| " + " | ".join(cells) + " |")
    print()

    if 2 in threads and torches:
        print("Target: ptrain at 2 threads against PyTorch at its better of 1 and 2 threads (medians)")
        print()
        for m in models:
            p = ips(m, 2, "ptrain")
            parts = []
            for f in torches:
                b = best_t(m, f)
                bt = max(threads, key=lambda t: ips(m, t, f) or 0)
                parts.append(f"{f} {fmt(b)} img/s at {bt}T -> {ratio(p, b)}")
            print(f"  {m}: ptrain {fmt(p)} img/s; " + "; ".join(parts))
        print()

    if sgemm:
        print("SGEMM (ptrain bench --sgemm, 2048^3): " + "; ".join(
            f"{t} thread{'s' if t != 1 else ''} median {statistics.median(v):.1f} GFLOP/s "
            f"(range {min(v):.1f}-{max(v):.1f})" for t, v in sorted(sgemm.items())))
    idle = [o.get("idle_pct") for o in runs if o.get("idle_pct") is not None and o.get("idle_pct") >= 0]
    if idle:
        print(f"machine idle before each run: min {min(idle)}%, median {statistics.median(idle)}%")
    kept = sum(1 for o in runs if o.get("kept"))
    if probes:
        print("host probe around each run kept (its slower SGEMM 1024^3 probe over the best of the whole run): "
              + "; ".join(f"{t}T min {min(v):.0%}, median {statistics.median(v):.0%}" for t, v in sorted(probes.items())))
    if dropped or kept:
        print(f"runs left out as contended (and made again): {dropped}"
              + (f", {host} of them for a slow host probe" if host else "")
              + (f"; contended runs kept after the retries ran out: {kept}" if kept else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
