#!/usr/bin/python3
"""ATP's Fig. 20 emulated with PyTorch: several DDP training jobs at once on the same switches and
links of the netns testbed (2 racks of 4 hosts under a core, the PS under the core; each job has
the same number of ranks in each rack), each job's images per second per worker beside the same
jobs on gloo and beside each job alone.

Every run is `atp testbed` with experiments/pytorch/train.py on each job's hosts (needs root).
Writes OUT_DIR/results.json and OUT_DIR/table.txt.

    experiments/pytorch/fig20/run.py [--jobs 2] [--rate 200] [--model resnet18] [--steps 12]
        [--warmup 2] [--batch 8] [--backends gloo,atp] [OUT_DIR]

Together, a job's images/s are counted over the steps it ran while every job was in its timed
steps (the jobs start a few seconds apart and their first, warm-up steps differ in length; a pace
taken over each job's own steps counted one job's steps against the other's warm-up or end).
"""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "experiments" / "lib"))
import experiment  # noqa: E402
TRAIN = ROOT / "experiments" / "pytorch" / "train.py"
HOSTS_PER_RACK = 4


def scenario(rate_mbps, jobs):
    """The jobs' workers: job j takes host j, j + jobs, ... of each rack (round robin)."""
    hosts = [f"    - {{name: w{r * HOSTS_PER_RACK + i}, switch: tor{r}}}" for r in range(2)
             for i in range(HOSTS_PER_RACK)]
    lines = ["seed: 1", f"link: {{rate_mbps: {rate_mbps}}}", "topology:", "  switches:",
             "    - {name: tor0, aggregators: 4096}", "    - {name: tor1, aggregators: 4096}",
             "    - {name: core, aggregators: 4096}", "  hosts:", *hosts, "    - {name: ps, switch: core}",
             "  links: [[tor0, core], [tor1, core]]", "jobs:"]
    for j, workers in enumerate(jobs):
        lines.append(f"  - {{name: job{j}, workers: [{', '.join(workers)}], ps: [ps]}}")
    return "\n".join(lines) + "\n"


def job_hosts(jobs):
    per_job = HOSTS_PER_RACK // jobs
    return [[f"w{r * HOSTS_PER_RACK + j + k * jobs}" for r in range(2) for k in range(per_job)] for j in range(jobs)]


def run(atp, out, name, jobs, backend, args):
    file = out / f"{name}.yaml"
    file.write_text(scenario(args.rate, jobs))
    command = [atp, "testbed", str(file), "--time-limit", "1200", "--", "/usr/bin/python3", str(TRAIN),
               "--model", args.model, "--backend", backend, "--steps", str(args.steps), "--warmup",
               str(args.warmup), "--batch", str(args.batch)]
    done = subprocess.run(command, capture_output=True, text=True)
    rows = []
    for j, workers in enumerate(jobs):
        row = {"run": name, "backend": backend, "job": j, "hosts": workers, "exit": done.returncode}
        for line in done.stdout.splitlines():
            if line.startswith(f"[{workers[0]}] {{"):
                row.update(json.loads(line[len(workers[0]) + 3:]))
        if "images_per_second_per_worker" not in row:
            row["error"] = (done.stderr.strip().splitlines() or ["no output"])[-1]
        rows.append(row)
    return rows


def overlapping(rows, batch):
    """Each job's images/s per worker over its timed steps that began and ended while every job of
    the run was in its timed steps (the window from the last job's first timed step to the first
    job's last one); None where a job has fewer than 2 such steps."""
    spans = [[(t, t + d) for t, d in zip(r.get("step_starts", []), r.get("step_seconds", []))] for r in rows]
    if not all(spans):
        return [None] * len(rows)
    begin, end = max(s[0][0] for s in spans), min(s[-1][1] for s in spans)
    paces = []
    for s in spans:
        inside = [b - a for a, b in s if a >= begin and b <= end]
        paces.append(batch * len(inside) / sum(inside) if len(inside) >= 2 else None)
    return paces


def main():
    def flags(parser):
        parser.add_argument("--jobs", type=int, default=2, choices=(2, 4), help="jobs at once (default 2)")
        parser.add_argument("--rate", type=int, default=200, help="link rate in Mbit/s (default 200)")
        parser.add_argument("--model", default="resnet18")
        parser.add_argument("--backends", default="gloo,atp")
        parser.add_argument("--steps", type=int, default=12)
        parser.add_argument("--warmup", type=int, default=2)
        parser.add_argument("--batch", type=int, default=8)

    args = experiment.arguments(__doc__, str(Path(__file__).resolve().parent), add=flags, smoke=False)
    args.out = Path(args.out)
    experiment.require_root("atp testbed: network namespaces")
    atp = experiment.atp_binary()
    jobs = job_hosts(args.jobs)
    rows = []
    for backend in args.backends.split(","):
        together = run(atp, args.out, f"together-{backend}", jobs, backend, args)
        for r, pace in zip(together, overlapping(together, args.batch)):
            r["images_per_second_per_worker_overlapping"] = pace
        rows += together
        for j, workers in enumerate(jobs):
            rows += run(atp, args.out, f"alone{j}-{backend}", [workers], backend, args)
        (args.out / "results.json").write_text(json.dumps(rows, indent=1))
    ips = {}
    for r in rows:
        together = r["run"].startswith("together")
        ips[(r["run"].split("-")[0], r["backend"], r["job"] if together else int(r["run"][5]))] = \
            r.get("images_per_second_per_worker_overlapping" if together else "images_per_second_per_worker")
    lines = [f"# {args.jobs} jobs of {len(jobs[0])} ranks, {args.model}, {args.rate} Mbit/s: images/s per worker"
             " (together: over the steps each job ran while all were in their timed steps)",
             f"{'backend':<8} {'job':>3} {'together':>9} {'alone':>9} {'together/alone':>15}"]
    for backend in args.backends.split(","):
        for j in range(len(jobs)):
            t, a = ips.get(("together", backend, j)), ips.get((f"alone{j}", backend, j))
            ratio = f"{t / a:.2f}" if t and a else "-"
            lines.append(f"{backend:<8} {j:>3} {t or 0:>9.3f} {a or 0:>9.3f} {ratio:>15}")
    for backend in args.backends.split(","):
        together = [ips.get(("together", backend, j)) or 0 for j in range(len(jobs))]
        if min(together) > 0:
            lines.append(f"# {backend}, together: the fastest job / the slowest {max(together) / min(together):.2f}")
    backends = args.backends.split(",")
    if "gloo" in backends and "atp" in backends:
        t_atp = sum(ips.get(("together", "atp", j)) or 0 for j in range(len(jobs)))
        t_gloo = sum(ips.get(("together", "gloo", j)) or 0 for j in range(len(jobs)))
        if t_gloo:
            lines.append(f"# together, atp's jobs / gloo's jobs (sum of images/s): {t_atp / t_gloo:.2f}")
    (args.out / "table.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    sys.exit(1 if any("error" in r for r in rows) else 0)


if __name__ == "__main__":
    main()
