#!/usr/bin/python3
"""ATP's Fig. 8 emulated with PyTorch: DDP training of torchvision models on 8 ranks in 2 racks
(4 per rack, the PS behind the core switch) of the netns testbed at 200 Mbit/s and 1 Gbit/s, each
algorithm at its defaults: images per second per worker, and each one's ratio to gloo's.

Every run is `atp testbed` on a generated scenario file with experiments/pytorch/train.py on each
worker host (needs root). Writes OUT_DIR/results.json (one row per run), OUT_DIR/table.txt and
OUT_DIR/fig8.png.

    experiments/pytorch/fig8/run.py [--rates 200,1000] [--models alexnet,resnet18,mobilenet_v2]
        [--algorithms gloo,atp,ps,rina,hierarchical,plink] [--steps 4] [--warmup 2] [--batch 8] [OUT_DIR]
    experiments/pytorch/fig8/run.py --smoke [OUT_DIR]   # 2 racks x 2 ranks, 1 Gbit/s, resnet18, gloo and atp
"""
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
TRAIN = ROOT / "experiments" / "pytorch" / "train.py"
sys.path.insert(0, str(ROOT / "experiments" / "lib"))
import experiment  # noqa: E402
# What the paper calls each: gloo is PyTorch's own allreduce (a ring over TCP), ps the parameter
# server baseline (ATP's protocol, switches only forwarding), the rest the atp backend's algorithms.
LABELS = {"gloo": "Gloo (ring, TCP)", "atp": "ATP", "ps": "PS (no INA)", "rina": "Rina",
          "hierarchical": "hierarchical (TCP)", "plink": "PLink (TCP)"}


def scenario(rate_mbps, per_rack):
    """Two racks of `per_rack` workers under a core switch, the PS under the core."""
    hosts = [f"    - {{name: w{r * per_rack + i}, switch: tor{r}}}" for r in range(2) for i in range(per_rack)]
    workers = ", ".join(f"w{i}" for i in range(2 * per_rack))
    return "\n".join([
        "seed: 1",
        f"link: {{rate_mbps: {rate_mbps}}}",
        "topology:",
        "  switches:",
        "    - {name: tor0, aggregators: 4096}",
        "    - {name: tor1, aggregators: 4096}",
        "    - {name: core, aggregators: 4096}",
        "  hosts:",
        *hosts,
        "    - {name: ps, switch: core}",
        "  links: [[tor0, core], [tor1, core]]",
        "jobs:",
        f"  - {{name: train, workers: [{workers}], ps: [ps]}}",
        ""])


def run_one(atp, file, model, algorithm, args):
    backend = "gloo" if algorithm == "gloo" else "atp"
    env = dict(os.environ)
    if backend == "atp":
        env["ATP_ALGORITHM"] = algorithm
    command = [atp, "testbed", str(file), "--time-limit", str(args.run_timeout), "--", "/usr/bin/python3", str(TRAIN),
               "--model", model, "--backend", backend, "--steps", str(args.steps), "--warmup", str(args.warmup),
               "--batch", str(args.batch)]
    start = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    row = {"model": model, "algorithm": algorithm, "exit": done.returncode,
           "wall_seconds": round(time.monotonic() - start, 1)}
    for line in done.stdout.splitlines():
        if line.startswith("[w0] {"):
            row.update(json.loads(line[len("[w0] "):]))
    found = re.findall(r"ended; packets aggregated by switch: ([^;\n]*)", done.stderr)
    if found:
        row["switch_aggregations"] = {k: int(v) for k, v in (p.split() for p in found[-1].split(", "))}
    reclaimed = re.findall(r"aggregators reclaimed by timeout: ([^\n]*)", done.stderr)
    if reclaimed:
        row["switch_reclaims"] = {k: int(v) for k, v in (p.split() for p in reclaimed[-1].split(", "))}
    if done.returncode != 0 or "images_per_second_per_worker" not in row:
        row["error"] = (done.stderr.strip().splitlines() or ["no output"])[-1]
        tail = [l for l in done.stdout.splitlines() if "Error" in l or "error" in l]
        if tail:
            row["error"] += " | " + tail[-1]
    return row


def table(rows):
    lines = ["# images per second per worker (8 ranks in 2 racks unless --smoke); ratio: to gloo's in the same row",
             f"{'rate':>6} {'model':<13} {'algorithm':<13} {'images/s':>9} {'x gloo':>7} {'step s':>7}"]
    for r in rows:
        gloo = next((g for g in rows if g["rate_mbps"] == r["rate_mbps"] and g["model"] == r["model"]
                     and g["algorithm"] == "gloo" and "images_per_second_per_worker" in g), None)
        if "images_per_second_per_worker" not in r:
            lines.append(f"{r['rate_mbps']:>6} {r['model']:<13} {r['algorithm']:<13} failed: {r.get('error', '')}")
            continue
        ips = r["images_per_second_per_worker"]
        ratio = f"{ips / gloo['images_per_second_per_worker']:.2f}" if gloo else "-"
        step = sum(r["step_seconds"]) / len(r["step_seconds"])
        lines.append(f"{r['rate_mbps']:>6} {r['model']:<13} {r['algorithm']:<13} {ips:>9.3f} {ratio:>7} {step:>7.2f}")
    return "\n".join(lines) + "\n"


def plot(rows, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rates = sorted({r["rate_mbps"] for r in rows})
    fig, axes = plt.subplots(1, len(rates), figsize=(6 * len(rates), 4), squeeze=False)
    for ax, rate in zip(axes[0], rates):
        here = [r for r in rows if r["rate_mbps"] == rate]
        models = list(dict.fromkeys(r["model"] for r in here))
        algorithms = list(dict.fromkeys(r["algorithm"] for r in here))
        width = 0.8 / max(1, len(algorithms))
        for k, a in enumerate(algorithms):
            values = []
            for m in models:
                r = next((x for x in here if x["model"] == m and x["algorithm"] == a), {})
                g = next((x for x in here if x["model"] == m and x["algorithm"] == "gloo"), {})
                ok = "images_per_second_per_worker" in r and "images_per_second_per_worker" in g
                values.append(r["images_per_second_per_worker"] / g["images_per_second_per_worker"] if ok else 0)
            ax.bar([i + k * width for i in range(len(models))], values, width, label=LABELS.get(a, a))
        ax.axhline(1.0, color="grey", linewidth=0.8)
        ax.set_xticks([i + width * (len(algorithms) - 1) / 2 for i in range(len(models))])
        ax.set_xticklabels(models)
        ax.set_ylabel("training throughput / Gloo's")
        ax.set_title(f"{rate} Mbit/s links")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def main():
    def flags(parser):
        parser.add_argument("--rates", default="200,1000", help="link rates in Mbit/s (default 200,1000)")
        parser.add_argument("--models", default="alexnet,resnet18,mobilenet_v2")
        parser.add_argument("--algorithms", default="gloo,atp,ps,rina,hierarchical,plink")
        parser.add_argument("--steps", type=int, default=4, help="timed steps per run (default 4)")
        parser.add_argument("--warmup", type=int, default=2,
                            help="untimed steps first (default 2: DDP rebuilds its buckets after the first)")
        parser.add_argument("--batch", type=int, default=8, help="images per rank per step (default 8)")
        parser.add_argument("--run-timeout", type=int, default=1200, help="seconds one run may take (default 1200)")

    args = experiment.arguments(__doc__, str(Path(__file__).resolve().parent), add=flags)
    args.out = Path(args.out)
    experiment.require_root("atp testbed: network namespaces")
    atp = experiment.atp_binary()
    per_rack = 2 if args.smoke else 4
    if args.smoke:
        args.rates, args.models, args.algorithms, args.steps, args.warmup = "1000", "resnet18", "gloo,atp", 1, 1
    rows = []
    for rate in [int(r) for r in args.rates.split(",")]:
        file = args.out / f"two-racks-{rate}mbps.yaml"
        file.write_text(scenario(rate, per_rack))
        for model in args.models.split(","):
            for algorithm in args.algorithms.split(","):
                row = run_one(atp, file, model, algorithm, args)
                row["rate_mbps"] = rate
                rows.append(row)
                print(table([row]).splitlines()[-1], flush=True)
                (args.out / "results.json").write_text(json.dumps(rows, indent=1))
    (args.out / "table.txt").write_text(table(rows))
    print(table(rows), end="")
    plot(rows, args.out / "fig8.png")
    failed = [r for r in rows if "error" in r]
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
