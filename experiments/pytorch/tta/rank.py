"""One rank of the time-to-accuracy experiment (experiments/pytorch/tta/run.py), run by
`atp testbed` on each worker host: DDP of a wide MLP (64 -> 2048 -> 2048 -> 10, 4.3 M parameters:
a 17 MB gradient, so that the links matter) on sklearn's handwritten digits, which ship with
Debian's python3-sklearn. The same seed, split, initial weights and sample order on every backend.
Rank 0 prints one JSON line per epoch: seconds since training began, train loss, test accuracy."""
import argparse
import datetime
import json
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

BUILD = Path(__file__).resolve().parents[3] / "build" / "python"
if (BUILD / "atp_torch").is_dir():
    sys.path.insert(0, str(BUILD))
import atp_torch  # noqa: E402,F401  registers "atp"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="atp")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch", type=int, default=16, help="per rank")
    parser.add_argument("--width", type=int, default=2048)
    parser.add_argument("--lr", type=float, default=0.02)
    args = parser.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group(args.backend, timeout=datetime.timedelta(seconds=300))
    rank, world = dist.get_rank(), dist.get_world_size()
    digits = load_digits()
    x = torch.tensor(digits.data, dtype=torch.float32) / 16.0
    y = torch.tensor(digits.target)
    train_idx, test_idx = train_test_split(range(len(y)), test_size=0.2, stratify=digits.target, random_state=0)
    x_train, y_train, x_test, y_test = x[train_idx], y[train_idx], x[test_idx], y[test_idx]
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, args.width), torch.nn.ReLU(), torch.nn.Linear(args.width, args.width),
                                torch.nn.ReLU(), torch.nn.Linear(args.width, 10))
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)
    sampler = torch.utils.data.DistributedSampler(torch.utils.data.TensorDataset(x_train, y_train), world, rank,
                                                  shuffle=True, seed=0)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x_train, y_train), batch_size=args.batch,
                                         sampler=sampler)
    dist.barrier()
    start = time.perf_counter()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        total, count = 0.0, 0
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(ddp(xb), yb)
            loss.backward()
            optimizer.step()
            total, count = total + loss.item() * len(yb), count + len(yb)
        elapsed = time.perf_counter() - start
        if rank == 0:
            with torch.no_grad():
                accuracy = (model(x_test).argmax(1) == y_test).float().mean().item() * 100
            print(json.dumps({"backend": args.backend, "epoch": epoch + 1, "seconds": elapsed,
                              "train_loss": total / count, "test_accuracy": accuracy}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
