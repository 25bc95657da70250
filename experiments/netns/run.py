#!/usr/bin/python3
"""Runs the multi-rack testbed experiments (issue 4) on the netns backend: the allreduce benchmark
against the baselines, Fig. 9's traffic into the PS, two jobs on a small table, and an ATP job
against a TCP flow with congestion control on and off. Needs root and a built ./build/atp
(./run.sh test builds it).

Usage: experiments/netns/run.py [--smoke] [OUT_DIR]
  JSON to experiments/netns/results/ and plots to docs/img/, or both to OUT_DIR (--smoke: a new
  temporary folder); --smoke: benchmark sizes up to 4 MiB, the same scenarios.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
import experiment  # noqa: E402

SCENARIOS = ["fig9", "fig9-rack-only", "two-jobs-small-table", "tcp-competition", "tcp-competition-cc-off"]


def main():
    args = experiment.arguments(__doc__, HERE)
    # Checked first, so a missing piece is not found after twelve minutes of measurements.
    atp = experiment.atp_binary()
    experiment.require_modules(["matplotlib"], "python3-matplotlib")
    out = args.out
    images = out if args.out_given or args.smoke else os.path.join(experiment.REPO, "docs", "img")
    # One job, 8 workers in 2 racks, the PS under the core; every link 200 Mbit/s. Exit 1: a run
    # failed (recorded in the JSON, with why); anything else stops the experiment.
    done = experiment.run([atp, "bench", "allreduce", "--backend", "netns", "--workers", "8", "--racks", "2",
                           "--rate-mbps", "200", "--min-bytes", "4K", "--max-bytes", "4M" if args.smoke else "64M",
                           "--factor", "4", "--iters", "5", "--warmup", "1", "--algorithms", "atp,ring,gloo,ps,ps_nn",
                           "--json"], "atp bench allreduce", ok=(0, 1), stdout=os.path.join(out, "allreduce.json"))
    if done.returncode == 1:
        print(f"{experiment.script_name()}: a benchmark run failed (see allreduce.json)", file=sys.stderr)
    for name in SCENARIOS:
        experiment.run([atp, "run", "--backend", "netns", "--json", os.path.join(HERE, name + ".yaml")],
                       f"atp run on {name}.yaml", stdout=os.path.join(out, name + ".json"))
    experiment.run([experiment.PYTHON, os.path.join(HERE, "plot.py"), out, images], "plot.py", capture=False)


if __name__ == "__main__":
    main()
