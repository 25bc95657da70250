#!/usr/bin/python3
"""PLink's Fig. 10 (its §5.6): Autotune reacting to a throttled link. Eight hosts under one switch
run FA (plink_fa) for 40 rounds; host h0's link drops to 0.4 of the others' rate (the paper: 5 to
2 Gbit/s) for a while, both ways. Once with `autotune: true`, once without; every result is checked.
- ns3 (default): 4 MiB per worker, 1 Gbit/s links (64-packet buffers, ECN at 16), h0 at 0.4 Gbit/s
  from 0.6 s to 1.6 s (simulated).
- netns: real processes and sockets, 1 MiB per worker, 200 Mbit/s links (ECN at 16), h0 at
  80 Mbit/s from 1.5 s to 3.5 s of the run (wall clock); needs root.

Reported: table.txt (each round's time in ms, both runs side by side, and the throttled rounds'
median), a JSON per run.

Usage: experiments/plink/fig10/run.py [--smoke] [--backend ns3|netns] [OUT_DIR]
       (--smoke: 12 short rounds, a short throttle; OUT_DIR by default results/, netns: results-netns/)
"""
import json
import os
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
import experiment  # noqa: E402


# Per backend: the link, the throttled rate (Gbit/s), elements, rounds and the throttle's window
# (microseconds), in full and for --smoke.
SETTINGS = {
    "ns3": ("{rate_gbps: 1, buffer_packets: 64, ecn_threshold_packets: 16}", 0.4,
            (1048576, 40, 600000, 1600000), (65536, 12, 50000, 150000)),
    "netns": ("{rate_mbps: 200, ecn_threshold_packets: 16}", 0.08,
              (262144, 40, 1500000, 3500000), (65536, 12, 300000, 900000)),
}


def scenario(backend, autotune, elements, rounds, start_us, end_us):
    link, throttled = SETTINGS[backend][0], SETTINGS[backend][1]
    hosts = "\n".join(f"    - {{name: h{i}, switch: s}}" for i in range(8))
    return (f"seed: 1\nlink: {link}\n"
            f"topology:\n  switches: [{{name: s}}]\n  hosts:\n{hosts}\n"
            f"faults:\n  - {{link: [h0, s], rate_gbps: {throttled}, from_us: {start_us}, until_us: {end_us}}}\n"
            f"jobs:\n  - {{name: fa, algorithm: plink_fa, autotune: {'true' if autotune else 'false'}, "
            f"workers: [{', '.join(f'h{i}' for i in range(8))}], elements: {elements}, rounds: {rounds}}}\n")


def main():
    args = experiment.arguments(__doc__, HERE, add=lambda p: p.add_argument("--backend", choices=sorted(SETTINGS),
                                                                          default="ns3"))
    if args.backend == "netns" and not (args.out_given or args.smoke):
        args.out = os.path.join(HERE, "results-netns")  # the committed netns runs
        os.makedirs(args.out, exist_ok=True)
    atp = experiment.atp_binary()
    elements, rounds, start_us, end_us = SETTINGS[args.backend][3 if args.smoke else 2]
    times = {}
    with tempfile.TemporaryDirectory() as gen:
        for autotune in (False, True):
            path = os.path.join(gen, "run.yaml")
            with open(path, "w") as f:
                f.write(scenario(args.backend, autotune, elements, rounds, start_us, end_us))
            run = experiment.run([atp, "run", "--backend", args.backend, "--json", path],
                                 f"atp run ({'with' if autotune else 'without'} Autotune)")
            with open(os.path.join(args.out, f"autotune-{str(autotune).lower()}.json"), "w") as f:
                f.write(run.stdout)
            job = json.loads(run.stdout)["jobs"][0]
            ends = job["round_end_seconds"]
            times[autotune] = (ends, job.get("replans", 0))
    with open(os.path.join(args.out, "table.txt"), "w") as f:
        f.write(f"# {args.backend}, 8 hosts, FA on {elements * 4} B, links {SETTINGS[args.backend][0]}, h0 at "
                f"{SETTINGS[args.backend][1]} Gbit/s from {start_us / 1e6} s to {end_us / 1e6} s; each round's time "
                f"in ms (* throttled when it ended)\n")
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
