"""One rank of DDP training of a torchvision model, as `atp testbed` runs it on each worker host:
the model's real gradients (every parameter, every step), inputs small enough for a 2-core machine
(random images of --image-size, fixed labels: the step's compute is the model's, the data's cost
is none). Rank 0 prints one JSON line: the model, its gradient size, the backend and algorithm,
and images per second per worker over the timed steps (after --warmup untimed ones).

    atp testbed FILE.yaml -- /usr/bin/python3 experiments/pytorch/train.py --model alexnet --backend atp
"""
import argparse
import datetime
import json
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torchvision

# This checkout's build of the backend if there is one (the experiment measures this code), else
# the installed one.
BUILD = Path(__file__).resolve().parents[2] / "build" / "python"
if (BUILD / "atp_torch").is_dir():
    sys.path.insert(0, str(BUILD))
import atp_torch  # noqa: E402,F401  registers "atp"

# The smallest input each model takes (AlexNet's first layers need 63 x 63).
MIN_IMAGE = {"alexnet": 64}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="alexnet", help="a torchvision.models name (default alexnet)")
    parser.add_argument("--backend", default="atp", help="atp or gloo (default atp)")
    parser.add_argument("--steps", type=int, default=5, help="timed steps (default 5)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps first (default 1)")
    parser.add_argument("--batch", type=int, default=2, help="images per rank per step (default 2)")
    parser.add_argument("--image-size", type=int, default=32, help="height and width of the images (default 32)")
    parser.add_argument("--timeout", type=float, default=300, help="init_process_group's timeout in s (default 300)")
    args = parser.parse_args()
    torch.set_num_threads(1)  # several ranks share the machine's cores
    dist.init_process_group(args.backend, timeout=datetime.timedelta(seconds=args.timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = getattr(torchvision.models, args.model)(num_classes=10)
    parameters = sum(p.numel() for p in model.parameters())
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.001)
    size = max(args.image_size, MIN_IMAGE.get(args.model, 0))
    data = torch.Generator().manual_seed(rank)
    images = torch.randn(args.batch, 3, size, size, generator=data)
    labels = torch.randint(0, 10, (args.batch,), generator=data)
    step_seconds, step_starts = [], []
    for step in range(args.warmup + args.steps):
        start, wall = time.perf_counter(), time.time()
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(ddp(images), labels).backward()
        optimizer.step()
        if step >= args.warmup:
            step_seconds.append(time.perf_counter() - start)
            step_starts.append(wall)
    # The job's pace is its slowest rank's.
    slowest = torch.tensor([sum(step_seconds)], dtype=torch.float64)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    if rank == 0:
        print(json.dumps({
            "model": args.model,
            "parameters": parameters,
            "gradient_bytes": 4 * parameters,
            "backend": args.backend,
            "algorithm": os.environ.get("ATP_ALGORITHM", "atp") if args.backend == "atp" else "gloo",
            "ranks": world,
            "batch": args.batch,
            "image_size": size,
            "steps": args.steps,
            "step_seconds": step_seconds,
            # When each timed step began (the wall clock, which every host of a testbed shares):
            # what tells which steps of two jobs ran at the same time.
            "step_starts": step_starts,
            "images_per_second_per_worker": args.batch * args.steps / slowest.item(),
            # Rank 0's loss recovery over the whole run (warm-up included): timeouts, resends, ...
            "atp_stats": atp_torch.stats(),
        }), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
