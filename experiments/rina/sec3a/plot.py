#!/usr/bin/python3
"""Plot of the §III-A model (experiments/rina/sec3a/run.py): ScatterReduce time against the
workers, ring and Rina (racks of 4), one colour per jitter; Monte Carlo solid, Equation 1 dashed.

Usage: plot.py RESULTS.tsv OUT.png   (prints the table instead where matplotlib is missing)
"""
import csv
import sys


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot.py RESULTS.tsv OUT.png")
    with open(sys.argv[1]) as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        for r in rows:
            print("\t".join(r.values()))
        return
    fig, ax = plt.subplots(figsize=(7, 4.5))
    sigmas = sorted({r["sigma"] for r in rows}, key=float)
    for i, sigma in enumerate(sigmas):
        these = [r for r in rows if r["sigma"] == sigma]
        n = [int(r["workers"]) for r in these]
        color = f"C{i}"
        ax.plot(n, [float(r["ring_sim"]) for r in these], "o-", color=color, label=f"ring, sigma {sigma}")
        ax.plot(n, [float(r["ring_eq1"]) for r in these], "--", color=color, alpha=0.5)
        ax.plot(n, [float(r["rina_sim"]) for r in these], "s-", color=color, mfc="none", label=f"Rina, sigma {sigma}")
        ax.plot(n, [float(r["rina_eq1"]) for r in these], ":", color=color, alpha=0.5)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("workers N")
    ax.set_ylabel("ScatterReduce time (units of the gradient's transfer time)")
    ax.set_title("Rina §III-A: barriers per step, ring vs Rina (racks of 4); dashed: Eq. 1")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=120)


if __name__ == "__main__":
    main()
