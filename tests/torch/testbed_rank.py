"""One rank of tests/torch/test_testbed.py, run by `atp testbed` on each worker host: a few DDP
steps of a small model from the same start on every rank, each rank with its own data, then its
parameters saved to OUT/BACKEND-rankR.pt. The environment is what `atp testbed` sets (or
test_real_hosts.py: torch's variables and the daemons' control addresses)."""
import argparse
import datetime
import os

import torch
import torch.distributed as dist

import atp_torch  # noqa: F401  registers the "atp" backend


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group(args.backend, timeout=datetime.timedelta(seconds=30))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    data = torch.Generator().manual_seed(1000 + rank)
    for _ in range(args.steps):
        x = torch.randn(32, 64, generator=data)
        y = torch.randint(0, 10, (32,), generator=data)
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
        optimizer.step()
    torch.save(model.state_dict(), os.path.join(args.out, f"{args.backend}-rank{rank}.pt"))
    print(f"rank {rank} of {dist.get_world_size()} done on {os.environ.get('ATP_HOST', 'its host')}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
