#!/usr/bin/python3
"""Rina's §III-A: the ScatterReduce of a ring with a barrier after every step, whose time grows with
the ring's length and the workers' jitter (the paper's Equation 1), for a plain ring of N workers
and for Rina's ring of N/4 racks (ToRs that aggregate), by Monte Carlo beside the closed form.
The paper has only the model here (no measurement); so does this (model.py, plot.py).

Usage: experiments/rina/sec3a/run.py [--smoke] [OUT_DIR]
  full (10 seconds): N = 8..256, four jitters, 400 trials each; results.tsv and sec3a.png (a text
    table where matplotlib is missing) to experiments/rina/sec3a/results/
  --smoke (2 seconds): N = 8..32, two jitters, 50 trials; into OUT_DIR (default: a new temp dir)
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
import experiment  # noqa: E402


def main():
    args = experiment.arguments(__doc__, HERE)
    tsv = os.path.join(args.out, "results.tsv")
    experiment.run([experiment.PYTHON, os.path.join(HERE, "model.py")] + (["--smoke"] if args.smoke else []) + [tsv],
                   "model.py", capture=False)
    experiment.run([experiment.PYTHON, os.path.join(HERE, "plot.py"), tsv, os.path.join(args.out, "sec3a.png")],
                   "plot.py", capture=False)
    print(f"{experiment.script_name()}: {tsv}")


if __name__ == "__main__":
    main()
