"""Markdown tables of the real-model suite from the runner's JSON files (``--json``).

    python -m bench.real_models.report ONE_THREAD.json [TWO_THREADS.json] [--baseline BEFORE.json]

ONE_THREAD.json: a ``--threads 1 [--memory]`` run; TWO_THREADS.json: a ``--threads 2`` run (its rows
carry our 1-thread time from the same rounds as ``ours-1t``); one ``--threads 1 2`` run may be given as
both (each table takes its own rows); BEFORE.json: an earlier run whose
``ours-raw`` (or ``ours``) column is shown as "before".
"""

from __future__ import annotations

import argparse
import json
import statistics

from bench.common import markdown_table


def _ms(v: float | None) -> str:
    return "" if v is None else f"{v * 1e3:.1f} ms"


def one_thread_table(rows: list[dict], memory: dict, before: dict) -> tuple[str, dict]:
    header = [
        "model",
        "batch",
        "before",
        "ours",
        "PyTorch eager",
        "onnxruntime",
        "ours GFLOP/s",
        "ours / ort",
        "ours / torch",
        "peak MiB ours / torch / ort",
    ]
    out, ort_ratios, torch_ratios = [], [], []
    for r in rows:
        t = r["times"]
        b = before.get((r["model"], r["batch"]))
        ro = t["ours"] / t["ort"] if "ort" in t else None
        rt = t["ours"] / t["torch"] if "torch" in t else None
        if ro is not None:
            ort_ratios.append(ro)
        if rt is not None:
            torch_ratios.append(rt)
        m = memory.get(f"{r['model']}:{r['batch']}", {})
        mem = " / ".join("?" if m.get(k) is None else f"{m[k]:.0f}" for k in ("ours", "torch", "ort")) if m else ""
        out.append(
            [
                r["model"],
                str(r["batch"]),
                _ms(b),
                _ms(t.get("ours")),
                _ms(t.get("torch")),
                _ms(t.get("ort")),
                f"{r['gflop'] / t['ours']:.0f}",
                "" if ro is None else f"{ro:.2f}",
                "" if rt is None else f"{rt:.2f}",
                mem,
            ]
        )
    summary = {
        "median_ours_over_ort": statistics.median(ort_ratios) if ort_ratios else None,
        "worst_ours_over_ort": max(ort_ratios) if ort_ratios else None,
        "worst_ours_over_torch": max(torch_ratios) if torch_ratios else None,
    }
    return markdown_table(out, header), summary


def two_thread_table(rows: list[dict]) -> str:
    header = ["model", "batch", "ours 1 thread", "ours 2 threads", "speedup", "PyTorch eager", "onnxruntime"]
    out = []
    for r in rows:
        t = r["times"]
        sp = t["ours-1t"] / t["ours"] if "ours-1t" in t else None
        out.append(
            [
                r["model"],
                str(r["batch"]),
                _ms(t.get("ours-1t")),
                _ms(t.get("ours")),
                "" if sp is None else f"{sp:.2f}x",
                _ms(t.get("torch")),
                _ms(t.get("ort")),
            ]
        )
    return markdown_table(out, header)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("one")
    ap.add_argument("two", nargs="?")
    ap.add_argument("--baseline")
    ap.add_argument("--memory", help="peak memory JSON ({'model:batch': {'ours': MiB, ...}}) to use instead")
    ap.add_argument("--skip-baseline", nargs="*", default=[], help="models whose baseline is not comparable")
    a = ap.parse_args(argv)
    one = json.load(open(a.one))
    if a.memory:
        one["memory"] = json.load(open(a.memory))
    before = {}
    if a.baseline:
        for r in json.load(open(a.baseline))["rows"]:
            t = r["times"]
            if r["model"] not in a.skip_baseline:
                before[(r["model"], r["batch"])] = t.get("ours-raw", t.get("ours"))
    rows1 = [r for r in one["rows"] if r.get("threads", 1) == 1]
    text, summary = one_thread_table(rows1, one.get("memory", {}), before)
    print(text)
    print()
    print(
        "median ours/ort {median_ours_over_ort:.2f}, worst ours/ort {worst_ours_over_ort:.2f}, "
        "worst ours/torch {worst_ours_over_torch:.2f}".format(**summary)
    )
    print("load averages during the rows:", ", ".join(f"{r['load']:.1f}" for r in rows1))
    if a.two:  # may be the same file as ONE_THREAD.json (a run with --threads 1 2): its 2-thread rows
        rows2 = [r for r in json.load(open(a.two))["rows"] if r.get("threads", 2) > 1]
        print()
        print(two_thread_table(rows2))
        print("load averages during the rows:", ", ".join(f"{r['load']:.1f}" for r in rows2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
