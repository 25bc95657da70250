"""One rank of a test job: ``rank_main.py SCENARIO RANK SIZE PORT TIMEOUT_S``.

Runs SCENARIO (a function below) with the "atp" default group (and a gloo group where it
compares), then prints one JSON line {"rank", "ok", ...results} or {"rank", "ok": false, "error"}.
Run by test_atp_backend.py, one process per rank (forked from a server that imported this
module), on 127.0.0.1.
"""
import datetime
import faulthandler
import json
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist

import atp_torch  # noqa: F401  registers "atp"

SCALE = 2.0 ** 26  # the first call's fixed-point scale: ATP_SCALE's default 1e8 rounded down to a power of two
# Where the scenarios put their tensors and models ("cuda": staged through the host by the
# backend), and the backend string of the default group ("cpu:gloo,cuda:atp" on torch 2.x).
DEVICE = os.environ.get("ATP_TEST_DEVICE", "cpu")
BACKEND = os.environ.get("ATP_TEST_BACKEND", "atp")


def inputs(rank, n, seed):
    """Rank `rank`'s input: seeded normals, with a few values large enough to saturate int32 at
    SCALE (|x| > 21.47), which makes ATP take its float32 overflow path for those fragments."""
    x = np.random.default_rng(seed * 1000 + rank).normal(0, 1, n).astype(np.float32)
    x[::997] *= 100
    return x


def allreduce_vs_gloo(rank, size, gloo):
    out = {}
    for op_name, op in (("sum", dist.ReduceOp.SUM), ("avg", dist.ReduceOp.AVG)):
        for n in (1, 1000, 100_003):
            x = inputs(rank, n, seed=n)
            a = torch.from_numpy(x.copy())
            dist.all_reduce(a, op=op)
            if op == dist.ReduceOp.AVG:
                g = torch.from_numpy(x.copy())
                dist.all_reduce(g, group=gloo)
                g /= size
            else:
                g = torch.from_numpy(x.copy())
                dist.all_reduce(g, group=gloo)
            every = np.stack([inputs(r, n, seed=n) for r in range(size)]).astype(np.float64)
            exact = every.sum(axis=0) / (size if op == dist.ReduceOp.AVG else 1)
            out[f"{op_name}_{n}"] = {
                "atp_vs_exact": float(np.max(np.abs(a.numpy() - exact))),
                "gloo_vs_exact": float(np.max(np.abs(g.numpy() - exact))),
                "atp_vs_gloo": float(np.max(np.abs(a.numpy() - g.numpy()))),
                "max_abs_sum": float(np.max(np.abs(every).sum(axis=0))),
            }
    # A non-contiguous tensor is reduced in place like a contiguous one.
    t = torch.arange(20, dtype=torch.float32).reshape(4, 5).t()
    dist.all_reduce(t)
    out["non_contiguous_ok"] = bool(torch.equal(t, torch.arange(20, dtype=torch.float32).reshape(4, 5).t() * size))
    out["stats"] = atp_torch.stats()
    return out


def batches(rank, steps, batch, device=None):
    """Rank `rank`'s seeded training data: `steps` batches of `batch` rows of 20."""
    gen = torch.Generator().manual_seed(100 + rank)
    return [torch.randn(batch, 20, generator=gen).to(device or DEVICE) for _ in range(steps)]


def loss_of(model, x):
    return ((model(x) - x[:, :1]) ** 2).mean()


def train(model, rank, steps, batch):
    """`steps` SGD steps of a DDP `model` on this rank's seeded data; its parameters, flattened."""
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for x in batches(rank, steps, batch):
        loss = loss_of(model, x)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def ddp(rank, size, gloo):
    """A few DDP steps with the atp group and with gloo, from the same start and data."""
    results = {}
    for name, group in (("atp", None), ("gloo", gloo)):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(20, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)).to(DEVICE)
        if rank != 0:  # different on purpose: DDP's start-up broadcast must make them equal
            with torch.no_grad():
                for p in model.parameters():
                    p.add_(rank)
        flat = train(torch.nn.parallel.DistributedDataParallel(model, process_group=group), rank, 5, 32)
        everyone = [torch.zeros_like(flat) for _ in range(size)]
        dist.all_gather(everyone, flat)
        results[name] = flat
        results[name + "_identical_on_every_rank"] = all(torch.equal(everyone[0], e) for e in everyone)
    return {
        "atp_identical_on_every_rank": results["atp_identical_on_every_rank"],
        "gloo_identical_on_every_rank": results["gloo_identical_on_every_rank"],
        "atp_vs_gloo": float((results["atp"] - results["gloo"]).abs().max()),
    }


def every_op(rank, size, gloo):
    """Every torch.distributed operation on the atp group, each checked against its exact value
    (small integers, which every dtype holds exactly, so float sums through ATP are exact too);
    then the group still works. One entry per operation: True, or what went wrong. On DEVICE
    (torch 2.x's default device, where it is not the CPU)."""
    if DEVICE != "cpu":
        torch.set_default_device(DEVICE)
    out = {}
    ReduceOp = dist.ReduceOp

    def check(name, call):
        try:
            ok = call()
            out[name] = True if ok else "wrong values"
        except Exception as e:  # reported per operation, so that one failure hides no other
            out[name] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"

    def of(r, dtype=torch.float32):  # rank r's input
        return (torch.arange(6, dtype=torch.float64) + r + 1).to(dtype)

    def reduced(op):
        every = torch.stack([of(r, torch.float64) for r in range(size)])
        return {ReduceOp.SUM: every.sum(0), ReduceOp.MAX: every.max(0).values, ReduceOp.MIN: every.min(0).values,
                ReduceOp.PRODUCT: every.prod(0), ReduceOp.AVG: every.mean(0)}[op]

    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int32, torch.int64):
        ops = [ReduceOp.SUM, ReduceOp.MAX, ReduceOp.MIN, ReduceOp.PRODUCT]
        if dtype.is_floating_point:
            ops.append(ReduceOp.AVG)
        for op in ops:
            def allreduce(dtype=dtype, op=op):
                t = of(rank, dtype)
                dist.all_reduce(t, op=op)
                return torch.equal(t, reduced(op).to(dtype))
            names = {ReduceOp.SUM: "sum", ReduceOp.MAX: "max", ReduceOp.MIN: "min", ReduceOp.PRODUCT: "product",
                     ReduceOp.AVG: "avg"}
            check(f"all_reduce_{str(dtype)[6:]}_{names[op]}", allreduce)

    def broadcast():
        t = of(rank)
        dist.broadcast(t, src=size - 1)
        return torch.equal(t, of(size - 1))

    def all_gather():
        parts = [torch.zeros(6) for _ in range(size)]
        dist.all_gather(parts, of(rank))
        whole = torch.zeros(6 * size)
        dist.all_gather_into_tensor(whole, of(rank))
        return all(torch.equal(parts[r], of(r)) for r in range(size)) and torch.equal(whole, torch.cat(parts))

    def reduce():
        t = of(rank, torch.int64)
        dist.reduce(t, dst=0, op=ReduceOp.SUM)
        return rank != 0 or torch.equal(t, reduced(ReduceOp.SUM).to(torch.int64))

    def gather_scatter():
        parts = [torch.zeros(6) for _ in range(size)] if rank == 0 else None
        dist.gather(of(rank), parts, dst=0)
        got = torch.zeros(6)
        dist.scatter(got, [of(10 + r) for r in range(size)] if rank == 0 else None, src=0)
        return (rank != 0 or all(torch.equal(parts[r], of(r)) for r in range(size))) and torch.equal(got, of(10 + rank))

    def reduce_scatter():
        mine = torch.zeros(6)
        dist.reduce_scatter(mine, [of(rank) * (r + 1) for r in range(size)])
        tensor_form = torch.zeros(6)
        dist.reduce_scatter_tensor(tensor_form, torch.cat([of(rank) * (r + 1) for r in range(size)]))
        expected = reduced(ReduceOp.SUM).float() * (rank + 1)
        return torch.equal(mine, expected) and torch.equal(tensor_form, expected)

    def all_to_all():
        got = [torch.zeros(2) for _ in range(size)]
        dist.all_to_all(got, [torch.tensor([rank, r], dtype=torch.float32) for r in range(size)])
        single = torch.zeros(size)
        dist.all_to_all_single(single, torch.arange(size, dtype=torch.float32) + 10 * rank)
        return (all(torch.equal(got[r], torch.tensor([r, rank], dtype=torch.float32)) for r in range(size)) and
                torch.equal(single, torch.tensor([10.0 * r + rank for r in range(size)])))

    def send_recv():  # a ring: to the next rank, from the previous one
        got = torch.zeros(6)
        sent = dist.isend(of(rank), (rank + 1) % size)
        dist.recv(got, (rank - 1) % size)
        sent.wait()
        return torch.equal(got, of((rank - 1) % size))

    def objects():
        gathered = [None] * size
        dist.all_gather_object(gathered, {"rank": rank})
        box = [{"from": rank}]
        dist.broadcast_object_list(box, src=0)
        return gathered == [{"rank": r} for r in range(size)] and box == [{"from": 0}]

    def barrier():
        dist.barrier()
        # ProcessGroup.monitored_barrier (dist.monitored_barrier itself is torch's for Gloo groups only)
        dist.distributed_c10d._get_default_group().monitored_barrier(datetime.timedelta(seconds=30))
        return True

    def sparse():  # nn.Embedding(sparse=True)'s gradients
        t = torch.sparse_coo_tensor(torch.tensor([[0, 2]]), torch.tensor([rank + 1.0, 2.0]), (4,))
        dist.all_reduce(t)
        return torch.equal(t.to_dense().cpu(), torch.tensor([size * (size + 1) / 2, 0.0, 2.0 * size, 0.0]))

    def sequence_numbers():  # torch's check that ranks call the same collectives (new_group sets it)
        group = dist.new_group(backend="atp")
        backend = group._get_backend(torch.device(DEVICE)) if hasattr(group, "_get_backend") else group
        before = backend._get_sequence_number_for_group()
        seen = [None] * size
        dist.all_gather_object(seen, before, group=group)
        ones = torch.ones(100_000)
        dist.all_reduce(ones, group=group)
        after = backend._get_sequence_number_for_group()
        dist.destroy_process_group(group)
        afters = [None] * size
        dist.all_gather_object(afters, after)
        return (seen == [before] * size and after > before and afters == [after] * size and
                torch.equal(ones, torch.full_like(ones, size)))

    for name, call in (("broadcast", broadcast), ("all_gather", all_gather), ("reduce", reduce),
                       ("gather_scatter", gather_scatter), ("reduce_scatter", reduce_scatter),
                       ("all_to_all", all_to_all), ("send_recv", send_recv), ("objects", objects),
                       ("barrier", barrier), ("sparse", sparse), ("sequence_numbers", sequence_numbers)):
        if (size > 1 or name != "send_recv") and (DEVICE == "cpu" or name != "sparse"):
            check(name, call)
    # An average of integers is refused in one sentence, and the group still works after.
    try:
        dist.all_reduce(torch.ones(4, dtype=torch.int64), op=ReduceOp.AVG)
        out["avg_of_ints"] = None
    except RuntimeError as e:
        out["avg_of_ints"] = str(e).splitlines()[0]
    t = torch.ones(8)
    dist.all_reduce(t)
    out["after"] = t.tolist()
    big = torch.ones(100_000)
    dist.all_reduce(big)
    out["after_big"] = bool(torch.equal(big, torch.full_like(big, size)))
    return out


def ddp_options(rank, size, gloo):
    """DDP with the options many users set (an unused branch with find_unused_parameters, a
    static graph, the fp16 compression hook), on atp and on gloo from the same start and data."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    class Net(torch.nn.Module):
        def __init__(self, unused):
            super().__init__()
            self.used = torch.nn.Linear(20, 1)
            if unused:  # never in the graph: DDP allreduces an int flag per parameter for it
                self.unused = torch.nn.Linear(20, 1)

        def forward(self, x):
            return self.used(x)

    results = {}
    for option in ("find_unused_parameters", "static_graph", "fp16_compress_hook"):
        flats = {}
        for name, group in (("atp", None), ("gloo", gloo)):
            torch.manual_seed(0)
            model = torch.nn.parallel.DistributedDataParallel(
                Net(unused=option != "fp16_compress_hook").to(DEVICE), process_group=group,
                find_unused_parameters=option == "find_unused_parameters",
                static_graph=option == "static_graph")
            if option == "fp16_compress_hook":
                model.register_comm_hook(group, default_hooks.fp16_compress_hook)
            flats[name] = train(model, rank, 4, 16)
        results[option] = float((flats["atp"] - flats["gloo"]).abs().max())
    return results


def fsdp(rank, size, gloo):
    """A few steps of FSDP (torch 2.x's fully_shard: its reduce_scatter_tensor and
    all_gather_into_tensor) on the atp group, on DEVICE, against the same steps taken without
    any sharding on every rank's data at once, on the CPU: the mean of the ranks' losses has the
    gradient FSDP averages. (torch 2.x's FullyShardedDataParallel needs an accelerator, and gloo
    reduces no AVG, which fully_shard asks for: neither makes a reference on the CPU.)"""
    from torch.distributed.device_mesh import DeviceMesh

    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError:  # torch < 2.6
        from torch.distributed._composable.fsdp import fully_shard

    def net():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(20, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))

    steps, batch = 4, 16
    model = net().to(DEVICE)
    mesh = DeviceMesh.from_group(dist.group.WORLD, DEVICE)
    for layer in model:
        if any(True for _ in layer.parameters()):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    train(model, rank, steps, batch)
    sharded = torch.cat([p.full_tensor().detach().reshape(-1).cpu() for p in model.parameters()])

    reference = net()
    opt = torch.optim.SGD(reference.parameters(), lr=0.05)
    data = [batches(r, steps, batch, "cpu") for r in range(size)]
    for step in range(steps):
        loss = sum(loss_of(reference, data[r][step]) for r in range(size)) / size
        opt.zero_grad()
        loss.backward()
        opt.step()
    whole = torch.cat([p.detach().reshape(-1) for p in reference.parameters()])
    return {"atp_vs_reference": float((sharded - whole).abs().max()), "parameters": sharded.numel()}


def dead_rank(rank, size, gloo):
    """The last rank dies right after the job started; the others' allreduce must fail."""
    dist.barrier()
    if rank == size - 1:
        os._exit(17)
    start = time.monotonic()
    try:
        dist.all_reduce(torch.ones(100_000))
        return {"failed": False, "seconds": time.monotonic() - start}
    except RuntimeError as e:
        return {"failed": True, "seconds": time.monotonic() - start, "error": str(e).splitlines()[0]}


def late_rank(rank, size, gloo):
    """Never reached: the last rank comes long after the timeout, so init_process_group fails."""
    return {}


def all_reduce_outcome(n):
    try:
        dist.all_reduce(torch.ones(n))
        return {"failed": False}
    except RuntimeError as e:
        return {"failed": True, "error": str(e).splitlines()[0]}


def sizes_differ_in_fragments(rank, size, gloo):
    """Ranks all-reduce tensors of different sizes: every rank must fail, none may succeed with
    values mixed from several calls."""
    return all_reduce_outcome(1000 * (rank + 1))


def sizes_differ_in_the_last_fragment(rank, size, gloo):
    """The same number of packets, but not of values: the padding of one is another's value."""
    return all_reduce_outcome(1000 + rank)


def nan_and_inf(rank, size, gloo):
    """NaN and Inf survive the fixed point: a NaN anywhere gives NaN, +Inf and -Inf give NaN,
    +Inf alone gives +Inf; the values around them stay exact."""
    t = torch.full((300,), float(rank + 1))
    if rank == 0:
        t[10] = float("nan")
        t[20] = float("inf")
        t[30] = float("inf")
    if rank == 1:
        t[20] = float("-inf")
    dist.all_reduce(t)
    expected = float(sum(r + 1 for r in range(size)))
    others = [i for i in range(300) if i not in (10, 20, 30)]
    return {
        "nan": str(t[10].item()),
        "inf_minus_inf": str(t[20].item()),
        "inf": str(t[30].item()),
        "others_exact": bool(all(t[i].item() == expected for i in others)),
    }


SCENARIOS = {f.__name__: f for f in (allreduce_vs_gloo, ddp, every_op, ddp_options, fsdp, dead_rank, late_rank,
                                     sizes_differ_in_fragments, sizes_differ_in_the_last_fragment,
                                     nan_and_inf)}


def wait_for_peers_after_a_failed_start(rank, size, timeout, line):
    """Rank 0 serves the job's TCPStore. A rank 0 that refused at once (a bad setting) and exited
    could be gone while a peer was still connecting to the store (seen once in 40 forked jobs under
    load: rank 1 timed out connecting after rank 0 had refused; torch 1.13 makes a client's second
    connection after every rank has checked in), and that peer then waited out its timeout
    instead of refusing as rank 0 did. With ATP_TEST_DONE_DIR (run_ranks sets it) each rank marks
    itself done there, and a rank 0 that failed waits, at most the timeout, until every rank has."""
    done = os.environ.get("ATP_TEST_DONE_DIR")
    if not done:
        return
    open(os.path.join(done, str(rank)), "w").close()
    if rank != 0 or line.get("ok"):
        return
    deadline = time.monotonic() + timeout
    while len(os.listdir(done)) < size and time.monotonic() < deadline:
        time.sleep(0.01)


def main(argv):
    scenario, rank, size, port, timeout = argv[0], *map(int, argv[1:4]), float(argv[4])
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    # A rank that hangs prints where (every thread's Python stack) and exits, well before the test's limit.
    faulthandler.dump_traceback_later(3 * timeout + 20, exit=True)
    line = {"rank": rank}
    if scenario == "late_rank" and rank == size - 1:
        time.sleep(3 * timeout + 2)
    start = time.monotonic()
    try:
        dist.init_process_group(BACKEND, rank=rank, world_size=size, timeout=datetime.timedelta(seconds=timeout))
        gloo = dist.new_group(backend="gloo")
        line.update(ok=True, **SCENARIOS[scenario](rank, size, gloo))
    except Exception as e:  # reported to the test, which decides
        line.update(ok=False, error=f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
                    seconds=time.monotonic() - start)
    print(json.dumps(line), flush=True)
    wait_for_peers_after_a_failed_start(rank, size, timeout, line)
    # os._exit: a scenario that broke the job (dead_rank) must not wait in interpreter teardown;
    # destroy_process_group ends a healthy job the way users do.
    if line.get("ok") and scenario != "dead_rank":
        dist.destroy_process_group()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
