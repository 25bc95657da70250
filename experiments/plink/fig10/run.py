#!/usr/bin/python3
"""PLink's Fig. 10 (its §5.6) on ns-3: Autotune reacting to a throttled link. Eight hosts under one
switch run FA (plink_fa) on 4 MiB per worker for 40 rounds over 1 Gbit/s links (64-packet
buffers, ECN at 16); host h0's link drops to 0.4 Gbit/s (the paper: 5 to 2 Gbit/s) from 0.6 s to
1.6 s, both ways. Once with `autotune: true`, once without; every result is checked.

Reported: table.txt (each round's time in ms, both runs side by side, and the throttled rounds'
median), a JSON per run.

Usage: run.py [--smoke] OUT_DIR   (--smoke: 12 rounds of 256 KiB, the throttle from 0.05 s to 0.15 s)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def scenario(autotune, elements, rounds, start_us, end_us):
    hosts = "\n".join(f"    - {{name: h{i}, switch: s}}" for i in range(8))
    return (f"seed: 1\nlink: {{rate_gbps: 1, buffer_packets: 64, ecn_threshold_packets: 16}}\n"
            f"topology:\n  switches: [{{name: s}}]\n  hosts:\n{hosts}\n"
            f"faults:\n  - {{link: [h0, s], rate_gbps: 0.4, from_us: {start_us}, until_us: {end_us}}}\n"
            f"jobs:\n  - {{name: fa, algorithm: plink_fa, autotune: {'true' if autotune else 'false'}, "
            f"workers: [{', '.join(f'h{i}' for i in range(8))}], elements: {elements}, rounds: {rounds}}}\n")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("out")
    args = parser.parse_args()
    atp = os.environ.get("ATP", os.path.join(os.path.dirname(__file__), "..", "..", "..", "build", "atp"))
    if not os.access(atp, os.X_OK):
        sys.exit(f"run.py: {atp} is not built; build the atp target (or set ATP=path/to/atp)")
    elements, rounds, start_us, end_us = (65536, 12, 50000, 150000) if args.smoke else (1048576, 40, 600000, 1600000)
    os.makedirs(args.out, exist_ok=True)
    times = {}
    with tempfile.TemporaryDirectory() as gen:
        for autotune in (False, True):
            path = os.path.join(gen, "run.yaml")
            with open(path, "w") as f:
                f.write(scenario(autotune, elements, rounds, start_us, end_us))
            run = subprocess.run([atp, "run", "--backend", "ns3", "--json", path], capture_output=True, text=True)
            if run.returncode != 0:
                sys.exit(f"run.py: atp run failed ({'with' if autotune else 'without'} Autotune): "
                         f"{run.stderr.strip() or run.stdout[-500:]}")
            with open(os.path.join(args.out, f"autotune-{str(autotune).lower()}.json"), "w") as f:
                f.write(run.stdout)
            job = json.loads(run.stdout)["jobs"][0]
            ends = job["round_end_seconds"]
            times[autotune] = (ends, job.get("replans", 0))
    with open(os.path.join(args.out, "table.txt"), "w") as f:
        f.write(f"# ns-3, 8 hosts, FA on {elements * 4} B, 1 Gbit/s links, h0 at 0.4 Gbit/s from {start_us / 1e6} s "
                f"to {end_us / 1e6} s; each round's time in ms (* throttled when it ended)\n")
        f.write(f"{'round':>5}{'without':>10}{'with':>10}\n")
        throttled = {False: [], True: []}
        for r in range(rounds):
            row = f"{r:>5}"
            for autotune in (False, True):
                ends = times[autotune][0]
                ms = 1e3 * (ends[r] - (ends[r - 1] if r else 0))
                mark = "*" if start_us / 1e6 < ends[r] <= end_us / 1e6 else " "
                if mark == "*":
                    throttled[autotune].append(ms)
                row += f"{ms:>9.1f}{mark}"
            f.write(row + "\n")
        f.write(f"# replans with Autotune: {times[True][1]}; throttled rounds' median: without "
                f"{statistics.median(throttled[False]):.1f} ms, with {statistics.median(throttled[True]):.1f} ms "
                f"({statistics.median(throttled[False]) / statistics.median(throttled[True]):.2f}x)\n")
    print(open(os.path.join(args.out, "table.txt")).read(), end="")


if __name__ == "__main__":
    main()
