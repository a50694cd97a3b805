#!/usr/bin/env python3
"""Plots for `sparkserve bench serve --plot DIR` (called by the command; usable by hand).

    plot_bench.py RESULT.json OUT_DIR

Writes latency CDFs (TTFT, TPOT, ITL, E2EL) for every run, and for a concurrency sweep
(`--sweep-concurrency`) throughput and latency against concurrency. Exits 3 with a clear message
when matplotlib is not installed (the JSON is already saved by then).
"""
import json
import os
import sys


def _cdf(ax, values, label):
    xs = sorted(values)
    if not xs:
        return
    n = len(xs)
    ax.step(xs, [(i + 1) / n for i in range(n)], where="post", label=label)


def _per_request_ms(run):
    ok = [e == "" for e in run["errors"]]
    ttft = [t * 1000 for t, good in zip(run["ttfts"], ok) if good]
    e2el = [t * 1000 for t, good in zip(run["e2els"], ok) if good]
    itl = [g * 1000 for gaps, good in zip(run["itls"], ok) if good for g in gaps]
    tpot = []
    for good, t, e, n in zip(ok, run["ttfts"], run["e2els"], run["output_lens"]):
        if good and n > 1:
            tpot.append((e - t) / (n - 1) * 1000)
    return {"TTFT": ttft, "TPOT": tpot, "ITL": itl, "E2EL": e2el}


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_bench.py: matplotlib is not installed (pip install matplotlib); no plots written, "
              f"results are in {argv[1]}", file=sys.stderr)
        return 3
    with open(argv[1]) as f:
        result = json.load(f)
    out = argv[2]
    os.makedirs(out, exist_ok=True)
    runs = result.get("runs", [result])
    written = []

    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    for run in runs:
        label = f"concurrency {run['max_concurrency']}" if run.get("max_concurrency") else "run"
        for ax, (name, values) in zip(axes.flat, _per_request_ms(run).items()):
            _cdf(ax, values, label)
            ax.set_title(f"{name} CDF")
            ax.set_xlabel(f"{name} (ms)")
            ax.set_ylabel("fraction of requests" if name != "ITL" else "fraction of gaps")
            ax.grid(True, alpha=0.3)
    for ax in axes.flat:
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.suptitle(f"{result.get('model_id', '')} {result.get('endpoint', '')}")
    fig.tight_layout()
    path = os.path.join(out, "latency_cdf.png")
    fig.savefig(path, dpi=100)
    written.append(path)
    plt.close(fig)

    if "runs" in result and runs:
        conc = [r["max_concurrency"] for r in runs]
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.5))
        a1.plot(conc, [r["output_throughput"] for r in runs], "o-", label="output tok/s")
        a1.plot(conc, [r["total_token_throughput"] for r in runs], "s-", label="total tok/s")
        a1.set_xlabel("max concurrency")
        a1.set_ylabel("tokens/s")
        a1.set_title("Throughput vs concurrency")
        for name in ("ttft", "tpot", "itl", "e2el"):
            a2.plot(conc, [r[f"median_{name}_ms"] for r in runs], "o-", label=f"median {name.upper()}")
            a2.plot(conc, [r[f"p99_{name}_ms"] for r in runs], "x--", label=f"p99 {name.upper()}")
        a2.set_xlabel("max concurrency")
        a2.set_ylabel("ms")
        a2.set_yscale("log")
        a2.set_title("Latency vs concurrency")
        for ax in (a1, a2):
            ax.set_xscale("log", base=2)
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=8)
        fig.tight_layout()
        path = os.path.join(out, "sweep.png")
        fig.savefig(path, dpi=100)
        written.append(path)
        plt.close(fig)
    for p in written:
        print(f"plot_bench.py: wrote {p}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
