#!/usr/bin/python3
"""Time to accuracy (ATP's Fig. 11/12) emulated with PyTorch: the same DDP training (rank.py: a wide
MLP on sklearn's digits, one seed) on 8 ranks in 2 racks of the netns testbed at 200 Mbit/s, with
each backend; per epoch the seconds since training began and the test accuracy, and the time each
backend needed to reach --target. Writes OUT_DIR/results.json and OUT_DIR/table.txt (needs root).

    experiments/pytorch/tta/run.py [--algorithms gloo,atp] [--epochs 10] [--target 95] [--rate 200] [OUT_DIR]
"""
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "experiments" / "pytorch" / "fig8"))
from run import scenario  # noqa: E402  the same two racks as Fig. 8
sys.path.insert(0, str(ROOT / "experiments" / "lib"))
import experiment  # noqa: E402


def main():
    def flags(parser):
        parser.add_argument("--algorithms", default="gloo,atp")
        parser.add_argument("--epochs", type=int, default=10)
        parser.add_argument("--target", type=float, default=95.0, help="test accuracy in percent (default 95)")
        parser.add_argument("--rate", type=int, default=200, help="link rate in Mbit/s (default 200)")

    args = experiment.arguments(__doc__, str(Path(__file__).resolve().parent), add=flags, smoke=False)
    args.out = Path(args.out)
    experiment.require_root("atp testbed: network namespaces")
    atp = experiment.atp_binary()
    file = args.out / "two-racks.yaml"
    file.write_text(scenario(args.rate, 4))
    results = {}
    for algorithm in args.algorithms.split(","):
        backend = "gloo" if algorithm == "gloo" else "atp"
        env = dict(os.environ, **({"ATP_ALGORITHM": algorithm} if backend == "atp" else {}))
        done = subprocess.run([atp, "testbed", str(file), "--time-limit", "1800", "--", "/usr/bin/python3",
                               str(Path(__file__).parent / "rank.py"), "--backend", backend, "--epochs",
                               str(args.epochs)], capture_output=True, text=True, env=env)
        epochs = [json.loads(l[len("[w0] "):]) for l in done.stdout.splitlines() if l.startswith("[w0] {")]
        # The runner's own lines: what each switch aggregated and reclaimed, where packets were dropped.
        testbed = [l for l in done.stderr.splitlines() if l.startswith("atp testbed: ")]
        results[algorithm] = {"exit": done.returncode, "epochs": epochs, "testbed": testbed}
        if done.returncode != 0:
            results[algorithm]["error"] = (done.stderr.strip().splitlines() or ["no output"])[-1]
        (args.out / "results.json").write_text(json.dumps(results, indent=1))
    lines = [f"# 8 ranks in 2 racks, {args.rate} Mbit/s; time to {args.target}% test accuracy",
             f"{'algorithm':<10} {'final acc':>9} {'s to target':>11} {'s/epoch':>8}"]
    for algorithm, r in results.items():
        e = r["epochs"]
        if not e:
            lines.append(f"{algorithm:<10} failed: {r.get('error', '')}")
            continue
        # Accuracies are fractions of 360 images: compare at 0.01 points, not float32 noise.
        reached = next((x["seconds"] for x in e if round(x["test_accuracy"], 2) >= args.target), None)
        lines.append(f"{algorithm:<10} {e[-1]['test_accuracy']:>9.2f} "
                     f"{reached if reached is not None else float('nan'):>11.1f} {e[-1]['seconds'] / len(e):>8.2f}")
    (args.out / "table.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    sys.exit(1 if any("error" in r for r in results.values()) else 0)


if __name__ == "__main__":
    main()
