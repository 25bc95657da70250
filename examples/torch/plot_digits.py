#!/usr/bin/python3
"""Plots OUT/digits.json (from train_digits.py): test accuracy per epoch and training seconds per
epoch, one line per backend, into OUT/digits.png.

    /usr/bin/python3 examples/torch/plot_digits.py [OUT]     # OUT: examples/torch/results by default

Needs matplotlib (Debian: python3-matplotlib).
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# gloo wide and pale, atp thin and dashed on top: where the accuracies are equal both stay visible.
STYLE = {"gloo": {"color": "tab:blue", "marker": "o", "markersize": 7, "linewidth": 4, "alpha": 0.45},
         "atp": {"color": "tab:orange", "marker": "s", "markersize": 3.5, "linewidth": 1.5, "linestyle": "--"}}


def main(argv):
    parser = argparse.ArgumentParser(description="Plot train_digits.py's results (OUT/digits.json) to OUT/digits.png.")
    parser.add_argument("out", nargs="?", default=os.path.join(HERE, "results"),
                        help="folder with digits.json; digits.png is written there (default: examples/torch/results)")
    args = parser.parse_args(argv)
    path = os.path.join(args.out, "digits.json")
    try:
        with open(path) as f:
            result = json.load(f)
    except FileNotFoundError:
        sys.exit(f"plot_digits.py: {path} does not exist; run examples/torch/train_digits.py --out {args.out} first.")
    runs = result.get("runs", {})
    if not runs:
        sys.exit(f"plot_digits.py: {path} has no finished run (errors: {result.get('errors')}).")
    try:
        import matplotlib
    except ImportError:
        sys.exit("plot_digits.py: matplotlib is not importable; apt-get install python3-matplotlib "
                 "and run with /usr/bin/python3.")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, (acc, secs) = plt.subplots(1, 2, figsize=(11, 4.2))
    for backend in ("gloo", "atp"):
        if backend not in runs:
            continue
        run = runs[backend]
        epochs = range(1, len(run["test_accuracy"]) + 1)
        style = STYLE[backend]
        acc.plot(epochs, run["test_accuracy"], label=f"{backend} (final {run['test_accuracy'][-1]:.2f}%)", **style)
        secs.plot(epochs, run["epoch_seconds"],
                  label=f"{backend} (mean {sum(run['epoch_seconds']) / len(run['epoch_seconds']):.3f} s, "
                        f"{run['steps_per_epoch']} steps)", **style)
    acc.set(xlabel="epoch", ylabel="test accuracy (%)", title="Test accuracy (held-out 20%)")
    secs.set(xlabel="epoch", ylabel="seconds", title="Training time per epoch (rank 0, evaluation excluded)")
    secs.set_ylim(bottom=0)
    for ax in (acc, secs):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        ax.legend()
    comparison = result.get("comparison")
    note = f"{result['ranks']} ranks on {result['cpus']} CPUs, batch {result['batch_size_per_rank']}/rank, lr {result['lr']}, seed {result['seed']}"
    if comparison:
        note += (f"\natp vs gloo: max |final param diff| {comparison['max_abs_param_diff']:.2g}, "
                 f"final accuracy diff {comparison['final_accuracy_diff_pp']:+.2f} points")
    fig.suptitle(f"MLP 64-128-10 on sklearn digits, DistributedDataParallel, torch {result['torch']}: {note}",
                 fontsize=9)
    fig.tight_layout()
    png = os.path.join(args.out, "digits.png")
    fig.savefig(png, dpi=110)
    print(f"wrote {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
