#!/usr/bin/python3
"""Simulator speed: one 64-worker ATP job on the ns-3 backend and on the in-process network; link
packets per second of wall-clock and of CPU time.

Usage: experiments/ns3/speed/run.py [--smoke] [OUT_DIR]
  full (about 1 minute): JSON to experiments/ns3/speed/results/, PNG to docs/img/ns3-speed.png
  --smoke (a few seconds): a tiny tensor; JSON and PNG only into OUT_DIR (default: a new temp dir)
  OUT_DIR without --smoke: the full run's JSON and PNG go there instead.
Runs speed.yaml (the file next to this script; --smoke: the same 64 workers with 50 fragments per
round and 2 rounds, one untimed) once per backend, one after the other (never side by side: they
would share the cores): <backend>.json is atp's, <backend>-time.json its wall-clock and CPU time
(user + system of the command) and exit code.
"""
import json
import os
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import common  # noqa: E402
import experiment  # noqa: E402  (common put experiments/lib on the path)
import plot  # noqa: E402


def timed(command, out_path, time_path):
    """Runs command, its stdout to out_path, and writes {"wall_seconds", "cpu_seconds",
    "exit_code"} as JSON to time_path; returns the exit code."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    with open(out_path, "w") as out:
        rc = subprocess.call(command, stdout=out)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    with open(time_path, "w") as f:
        json.dump({"wall_seconds": wall, "cpu_seconds": cpu, "exit_code": rc}, f)
        f.write("\n")
    return rc


def main():
    r = common.Reproduction(HERE, __doc__)
    doc = common.load_yaml(os.path.join(HERE, "speed.yaml"))
    if r.smoke:
        doc["jobs"][0]["elements"] = 62 * 50
        doc["jobs"][0]["rounds"] = 2
    [path] = r.write({"speed": doc}, default_flow_style=None, width=120)
    for backend in ["ns3", "inproc"]:
        out = os.path.join(r.results, f"{backend}.json")
        rc = timed([r.atp, "run", "--backend", backend, "--json", path], out,
                   os.path.join(r.results, f"{backend}-time.json"))
        if rc != 0:
            experiment.fail(f"{r.atp} run --backend {backend} failed (exit {rc}, see {out})")
    r.plot_and_report(plot.main)


if __name__ == "__main__":
    main()
