"""ATP's torch.distributed backend: ``import atp_torch`` registers "atp".

    import torch.distributed as dist
    import atp_torch  # noqa: F401  (registers the backend)
    dist.init_process_group("atp", init_method="env://")

allreduce (SUM, AVG) of float32, float16 and bfloat16 tensors is aggregated by the ATP
switches; every other operation and dtype goes to a Gloo group the backend makes on the same
store. Tensors on a GPU are staged through pinned host memory. Where the switches and PS are comes from the environment:

    ATP_LOCAL=1                      rank 0 starts a switch and a PS as its child processes
                                     (from the `atp` beside this package, or ATP_BINARY)
    ATP_SWITCH=HOST:PORT ATP_PS=HOST:PORT
                                     control addresses of this rank's running `atp switch` and
                                     of the `atp ps`
    ATP_TOPOLOGY=FILE                with ATP_LOCAL=1: rank 0 starts the switches of a scenario
                                     file's topology instead of one; rank r hangs under the
                                     switch of its first job's r-th worker, the PS under its PS's
    ATP_SWITCHES=HOST:PORT,...       further switches between the ranks' racks and the PS's
    ATP_BIND=IP                      where each rank's data socket binds (default: with ATP_SWITCH,
                                     the address this host reaches MASTER_ADDR from; else 127.0.0.1)
    ATP_ALGORITHM=atp|ps|rina|hierarchical|plink|plink_fa
                                     how the switches aggregate: towards the PS (atp, the
                                     default) or Rina's ring of racks (docs/rina.md), which
                                     fails loudly on Inf or NaN where atp carries them; or over
                                     TCP between the ranks, no switch adding (the switch
                                     variables are unused): the baseline hierarchical
                                     allreduce, PLink's two-level aggregation over the racks
                                     (plink) or its flat aggregation (plink_fa, docs/plink.md)
    ATP_RACK=NAME                    hierarchical, plink: this rank's rack (same name, same rack;
                                     default: ATP_SWITCH's value)
    ATP_GROUPING=probe               plink: group the ranks by PLink's probes instead of ATP_RACK
    ATP_CONNECTIONS=N                plink, plink_fa: TCP connections per pair of ranks (1)
    ATP_VALUES_PER_PACKET, ATP_SCALE, ATP_RTO_MS
                                     fragment width, a fragment's first fixed-point scale (later
                                     ones are picked per fragment), first retransmission timeout

A rank that cannot make progress (a peer died) fails its collective after init_process_group's
timeout instead of hanging.
"""

import inspect as _inspect

import torch.distributed as _dist

from . import _C

BACKEND = "atp"
__version__ = "@PROJECT_VERSION@"  # CMake writes project()'s version here


def _create_process_group(store, rank, size, timeout):
    """What torch calls to make an "atp" group: the backend, over the Gloo group that takes what
    ATP does not aggregate (torch's own, on ATP_BIND's address, under keys of its own in the same
    store), which the backend makes once the ATP job is set up."""

    def make_gloo():
        gloo_class = _dist.ProcessGroupGloo
        options = (getattr(gloo_class, "_Options", None) or gloo_class.Options)()
        options._timeout = timeout
        options._devices = [gloo_class.create_device(hostname=_C.bind_address())]
        return gloo_class(_dist.PrefixStore("atp_gloo", store), rank, size, options)

    return _C.create_process_group(store, rank, size, timeout, make_gloo)


def stats():
    """What loss recovery cost so far: one dict per live group of this process that the switches
    aggregate (ATP_ALGORITHM atp, ps or rina; groups over TCP have none), oldest first, with
    "algorithm", "job", "rank" and the endpoint's counters (atp and ps: gradient_packets_sent,
    retransmissions, timeouts, float_resends, requested_resends, ...; rina: packets_sent,
    retransmissions, timeouts, requests_sent, ...). Read it before destroy_process_group."""
    return _C.stats()


if BACKEND.upper() not in _dist.Backend._plugins:  # importing twice (reload) registers once
    if "devices" in _inspect.signature(_dist.Backend.register_backend).parameters:  # torch 2.x
        _dist.Backend.register_backend(BACKEND, _create_process_group, devices=["cpu", "cuda"])
    else:  # torch 1.13: a backend is a whole process group, for every device
        _dist.Backend.register_backend(BACKEND, _create_process_group)

__all__ = ["BACKEND", "__version__", "stats"]
