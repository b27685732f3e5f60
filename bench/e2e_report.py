#!/usr/bin/python3
"""Turns bench/e2e.sh's CSV (vocabctl bench --csv) and soak JSON into the
Markdown tables and a PNG plot (gnuplot); docs/performance.md, "End to end".

    /usr/bin/python3 bench/e2e_report.py e2e.csv soak.json --md e2e.md --png e2e.png
"""
import argparse
import csv
import json
import os
import shutil
import subprocess
import tempfile
from collections import defaultdict


def load(path):
    rows = defaultdict(dict)  # (label, rpc) -> {concurrency: row}, closed loop only
    fixed = []
    with open(path) as f:
        for r in csv.DictReader(f):
            for k in list(r):
                try:
                    r[k] = float(r[k])
                except (TypeError, ValueError):
                    pass
            if r["arrival"] == "closed-loop":
                rows[(r["label"], r["rpc"])][int(r["concurrency"])] = r
            elif r["label"] != "soak":
                fixed.append(r)
    return rows, fixed


def fmt(v, digits=1):
    return "-" if v is None else f"{v:,.{digits}f}"


def ratio(a, b):
    return "-" if not a or not b else f"{a / b:.2f}"


def rps(rows, key, c):
    r = rows.get(key, {}).get(c)
    return r["requests_per_s"] if r else None


def lat(rows, key, c, p):
    r = rows.get(key, {}).get(c)
    return r[f"lat_{p}_ms"] if r else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("soak")
    ap.add_argument("--md", required=True)
    ap.add_argument("--png", required=True)
    ap.add_argument("--batching", default="no")
    args = ap.parse_args()
    rows, fixed = load(args.csv)
    out = []

    out.append("**Embed, 128 tokens x 4096 hidden, F32 (2 MiB per response)**, closed loop, 2 connections\n")
    out.append("| concurrency | vocabd req/s | null req/s | vocabd / null | Python req/s | vocabd / Python "
               "| vocabd p50 / p99 ms | null p50 / p99 ms | Python p50 / p99 ms |")
    out.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for c in sorted(rows.get(("vocabd", "embed"), {})):
        v, n, p = (rps(rows, (l, "embed"), c) for l in ("vocabd", "null", "python"))
        lats = [f"{fmt(lat(rows, (l, 'embed'), c, 'p50'), 2)} / {fmt(lat(rows, (l, 'embed'), c, 'p99'), 2)}"
                for l in ("vocabd", "null", "python")]
        out.append(f"| {c} | {fmt(v)} | {fmt(n)} | {ratio(v, n)} | {fmt(p)} | {ratio(v, p)} | "
                   + " | ".join(lats) + " |")

    on_key = ("vocabd batching on", "score") if args.batching == "yes" else ("vocabd (no batcher)", "score")
    off_key = ("vocabd batching off", "score")
    out.append("\n**Score, 1 hidden row x 4096 per call, top-5 + target** (vocab 1024), closed loop, "
               "2 connections\n")
    if args.batching == "yes":
        out.append("| concurrency | batching on req/s | p99 ms | batching off req/s | p99 ms | on / off "
                   "| Python req/s | vocabd / Python | null req/s |")
        out.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    else:
        out.append("| concurrency | vocabd req/s | p99 ms | batching on | Python req/s | vocabd / Python "
                   "| null req/s |")
        out.append("|---:|---:|---:|---|---:|---:|---:|")
    for c in sorted(rows.get(on_key, {})):
        v = rps(rows, on_key, c)
        p = rps(rows, ("python", "score"), c)
        n = rps(rows, ("null", "score"), c)
        if args.batching == "yes":
            off = rps(rows, off_key, c)
            out.append(f"| {c} | {fmt(v)} | {fmt(lat(rows, on_key, c, 'p99'), 2)} | {fmt(off)} | "
                       f"{fmt(lat(rows, off_key, c, 'p99'), 2)} | {ratio(v, off)} | {fmt(p)} | {ratio(v, p)} | "
                       f"{fmt(n)} |")
        else:
            out.append(f"| {c} | {fmt(v)} | {fmt(lat(rows, on_key, c, 'p99'), 2)} | not in this vocabd build "
                       f"| {fmt(p)} | {ratio(v, p)} | {fmt(n)} |")

    out.append("\n**Latency at a fixed Poisson rate** (half of vocabd's best closed-loop req/s), "
               "measured from each arrival time\n")
    out.append("| RPC | rate /s | achieved req/s | p50 ms | p90 ms | p99 ms | p99.9 ms | max ms | errors |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in fixed:
        out.append(f"| {r['rpc']} | {fmt(r['rate'], 0)} | {fmt(r['requests_per_s'])} | {fmt(r['lat_p50_ms'], 3)} | "
                   f"{fmt(r['lat_p90_ms'], 3)} | {fmt(r['lat_p99_ms'], 3)} | {fmt(r['lat_p999_ms'], 3)} | "
                   f"{fmt(r['lat_max_ms'], 3)} | {int(r['errors'])} |")

    with open(args.soak) as f:
        soak = json.load(f)
    lv = soak["levels"][0]
    server = soak.get("server", {})
    drift = lv.get("p99_drift", {})
    out.append("\n**Soak** (embed, constant rate, 10 s windows)\n")
    out.append("| duration s | rate /s | requests | errors | p99 first / last window ms | drift | "
               "server RSS start / end MiB | verify checked / mismatches |")
    out.append("|---:|---:|---:|---:|---:|---:|---:|---:|")
    out.append(f"| {lv['elapsed_s']:.1f} | {lv['rate']:.0f} | {lv['requests']} | {lv['errors']} | "
               f"{drift.get('first_ms', 0):.2f} / {drift.get('last_ms', 0):.2f} | x{drift.get('ratio', 0):.2f} | "
               f"{server.get('rss_start_bytes', 0) / 2**20:.1f} / {server.get('rss_end_bytes', 0) / 2**20:.1f} | "
               f"{lv['verify']['checked']} / {lv['verify']['mismatches']} |")
    with open(args.md, "w") as f:
        f.write("\n".join(out) + "\n")
    print("\n".join(out))

    # Plot: requests/s against concurrency, Embed and Score side by side.
    gnuplot = shutil.which("gnuplot")
    if not gnuplot:
        print("gnuplot not found: no PNG")
        return
    series = {"embed": [("vocabd", "vocabd"), ("null", "null server"), ("python", "Python + NumPy")],
              "score": [(on_key[0], on_key[0]), (off_key[0], off_key[0]), ("null", "null server"),
                        ("python", "Python + NumPy")]}
    with tempfile.TemporaryDirectory() as tmp:
        plots = []
        for rpc, items in series.items():
            cmds = []
            for label, title in items:
                data = rows.get((label, rpc))
                if not data:
                    continue
                path = os.path.join(tmp, f"{rpc}-{len(cmds)}.dat")
                with open(path, "w") as f:
                    for c in sorted(data):
                        f.write(f"{c} {data[c]['requests_per_s']}\n")
                cmds.append(f"'{path}' using 1:2 with linespoints lw 2 pt 7 title '{title}'")
            plots.append((rpc, cmds))
        script = [f"set terminal png size 1200,480 font ',11'", f"set output '{args.png}'",
                  "set multiplot layout 1,2", "set logscale x 2", "set logscale y 10", "set grid",
                  "set xlabel 'concurrency (calls in flight)'", "set ylabel 'requests/s'", "set key left top"]
        titles = {"embed": "Embed 128 x 4096 F32 (2 MiB responses)", "score": "Score 1 x 4096, vocab 1024, top-5"}
        for rpc, cmds in plots:
            if cmds:
                script.append(f"set title '{titles[rpc]}'")
                script.append("plot " + ", ".join(cmds))
        script.append("unset multiplot")
        subprocess.run([gnuplot], input="\n".join(script), text=True, check=True)
    print(f"wrote {args.png}")


if __name__ == "__main__":
    main()
