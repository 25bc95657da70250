#!/usr/bin/python3
"""The smallest "atp" job: every rank allreduces a tensor and checks the sum. Started by torchrun
(or anything that sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT: init_method env://):

    ATP_LOCAL=1 /usr/bin/python3 -m torch.distributed.run --nproc_per_node 4 \\
        --redirects 2 --tee 2 --log_dir /tmp/atp-logs examples/torch/hello_allreduce.py
"""
import datetime

import torch
import torch.distributed as dist

import atp_torch  # noqa: F401  registers the "atp" backend

dist.init_process_group("atp", init_method="env://", timeout=datetime.timedelta(seconds=30))
rank, size = dist.get_rank(), dist.get_world_size()
t = torch.arange(100_000, dtype=torch.float32) / 1000 + rank
dist.all_reduce(t)
want = torch.arange(100_000, dtype=torch.float32) / 1000 * size + size * (size - 1) / 2
print(f"rank {rank} of {size}: allreduce of {t.numel()} floats, max error {float((t - want).abs().max()):.2e}",
      flush=True)
dist.destroy_process_group()
