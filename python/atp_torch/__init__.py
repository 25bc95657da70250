"""ATP's torch.distributed backend: ``import atp_torch`` registers "atp".

    import torch.distributed as dist
    import atp_torch  # noqa: F401  (registers the backend)
    dist.init_process_group("atp", init_method="env://")

allreduce (SUM, AVG) of float32 CPU tensors is aggregated by an ATP switch; broadcast, allgather
and barrier go through torch's store (exact, for control data such as DDP's start-up). Where the
switch and PS are comes from the environment:

    ATP_LOCAL=1                      rank 0 starts a switch and a PS as its child processes
                                     (from the `atp` beside this package, or ATP_BINARY)
    ATP_SWITCH=HOST:PORT ATP_PS=HOST:PORT
                                     control addresses of a running `atp switch` and `atp ps`
    ATP_BIND=IP                      where each rank's data socket binds (default 127.0.0.1)
    ATP_VALUES_PER_PACKET, ATP_SCALE, ATP_RTO_MS
                                     fragment width, fixed-point scale, first retransmission timeout

A rank that cannot make progress (a peer died) fails its collective after init_process_group's
timeout instead of hanging.
"""

import torch.distributed as _dist

from . import _C

BACKEND = "atp"

if BACKEND.upper() not in _dist.Backend._plugins:  # importing twice (reload) registers once
    _dist.Backend.register_backend(BACKEND, _C.create_process_group)

__all__ = ["BACKEND"]
