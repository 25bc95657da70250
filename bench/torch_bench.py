#!/usr/bin/python3
"""The "atp" PyTorch backend against gloo, in one run (issue 22): DDP's start-up and training step,
and allreduce by tensor size.

Every rank runs both backends in the same process (atp is the default group, gloo a new_group),
alternating (each first in every other round, after an untimed round), on the same cores with the
same data:
- DDP: a model of about `--parameters` float32 parameters (square Linear layers; a fresh one for
  each wrap). Start-up: DistributedDataParallel(model), whose constructor broadcasts every
  parameter from rank 0 (dist._broadcast_coalesced, in DDP's 250 MiB buckets), timed from a
  barrier to the last rank done. Step: the median of `--steps` SGD steps of a batch of `--batch`
  random rows (forward, backward with DDP's bucketed allreduce, optimizer step).
- allreduce by size: float32 SUM of 1 to 4M values, the best of two blocks of calls per backend:
  whether small tensors should skip the switches (measured, not guessed).
Prints both tables with the ratio atp / gloo (below 1: atp faster), and writes JSON with --json.

    ATP_LOCAL=1 /usr/bin/python3 bench/torch_bench.py [--ranks 2] [--parameters 100e6]
"""
import argparse
import datetime
import json
import os
import socket
import statistics
import subprocess
import sys
import time


ALLREDUCE_SIZES = (1, 64, 1024, 16_384, 262_144, 4_194_304)  # float32 values


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def model_of(parameters, torch):
    """Square Linear layers of width 4096 (16.8M parameters each), as many as reach `parameters`."""
    width = 4096
    layers = max(1, round(parameters / (width * width + width)))
    torch.manual_seed(0)
    return torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(layers)]), width


def rank_main(args):
    import torch
    import torch.distributed as dist

    import atp_torch  # noqa: F401  registers "atp"

    rank = int(os.environ["RANK"])
    dist.init_process_group("atp", timeout=datetime.timedelta(seconds=args.timeout))
    groups = {"atp": None, "gloo": dist.new_group(backend="gloo")}
    results = {name: {"startup_s": [], "step_s": []} for name in groups}
    # Round 0 is a warm-up, not recorded: the first wrap in a process is about 3x faster than every
    # later one, whichever backend (0.35 s against 1.2 s here), which would favour the backend that
    # went first. Then each backend goes first in every other round.
    for repeat in range(args.repeats + 1):
        record = repeat > 0
        for name in ("gloo", "atp") if repeat % 2 == 0 else ("atp", "gloo"):
            group = groups[name]
            model, width = model_of(args.parameters, torch)  # a fresh one: DDP hooks its parameters
            if rank != 0:  # what the start-up broadcast must overwrite
                with torch.no_grad():
                    for p in model.parameters():
                        p.add_(1)
            dist.barrier(group=group)
            start = time.perf_counter()
            ddp = torch.nn.parallel.DistributedDataParallel(model, process_group=group)
            dist.barrier(group=group)
            if record:
                results[name]["startup_s"].append(time.perf_counter() - start)
            opt = torch.optim.SGD(ddp.parameters(), lr=1e-6)
            gen = torch.Generator().manual_seed(rank)
            steps = []
            for _ in range(args.steps):
                x = torch.randn(args.batch, width, generator=gen)
                dist.barrier(group=group)
                start = time.perf_counter()
                loss = ddp(x).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                steps.append(time.perf_counter() - start)
            if record:
                results[name]["step_s"].append(statistics.median(steps))
            parameters = sum(p.numel() for p in model.parameters())
            del ddp, opt, model
    sizes = {}
    for n in ALLREDUCE_SIZES:
        t = torch.ones(n)
        calls = max(3, min(200, 2_000_000 // n))
        for _ in range(2):
            for name in ("gloo", "atp"):
                dist.barrier(group=groups["gloo"])
                start = time.perf_counter()
                for _ in range(calls):
                    dist.all_reduce(t, group=groups[name])
                best = sizes.setdefault(str(n), {}).get(name, float("inf"))
                sizes[str(n)][name] = min(best, (time.perf_counter() - start) / calls)
    if rank == 0:
        print(json.dumps({"parameters": parameters, "results": results, "allreduce_s": sizes}), flush=True)
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--parameters", type=float, default=100e6, help="model size (float32 parameters)")
    parser.add_argument("--steps", type=int, default=3, help="timed training steps per backend and repeat")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=2,
                        help="rounds of both backends after an untimed one, each first in every other; medians over them")
    parser.add_argument("--timeout", type=float, default=300, help="init_process_group's timeout, seconds")
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--rank-main", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rank_main:
        return rank_main(args)
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE=str(args.ranks))
    env.setdefault("ATP_LOCAL", "1")
    started = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, __file__, "--rank-main", *sys.argv[1:]], stdout=subprocess.PIPE,
                              text=True, env=dict(env, RANK=str(r))) for r in range(args.ranks)]
    outputs = [p.communicate()[0] for p in procs]
    if any(p.returncode != 0 for p in procs):
        sys.exit(f"torch_bench: a rank failed (exit statuses {[p.returncode for p in procs]})")
    report = json.loads([line for line in outputs[0].splitlines() if line.startswith("{")][-1])
    report.update(ranks=args.ranks, batch=args.batch, steps=args.steps, repeats=args.repeats,
                  wall_s=time.perf_counter() - started, atp_local=env["ATP_LOCAL"])
    r = report["results"]
    print(f"{report['parameters'] / 1e6:.1f}M parameters, {args.ranks} ranks, batch {args.batch}, "
          f"medians of {args.repeats} repeats ({args.steps} steps each)")
    print("| what | gloo (s) | atp (s) | atp / gloo |")
    print("|---|---|---|---|")
    for key, what in (("startup_s", "DDP start-up (broadcast of every parameter)"),
                      ("step_s", "training step (forward, backward with allreduce, SGD)")):
        gloo, atp = statistics.median(r["gloo"][key]), statistics.median(r["atp"][key])
        report[key] = {"gloo": gloo, "atp": atp, "ratio": atp / gloo}
        print(f"| {what} | {gloo:.3f} | {atp:.3f} | {atp / gloo:.2f} |")
    print(f"\nallreduce (float32 SUM), {args.ranks} ranks, the best of two blocks of calls")
    print("| values | gloo (us) | atp (us) | atp / gloo |")
    print("|---|---|---|---|")
    for n, t in report["allreduce_s"].items():
        print(f"| {int(n):,} | {t['gloo'] * 1e6:.0f} | {t['atp'] * 1e6:.0f} | {t['atp'] / t['gloo']:.2f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
