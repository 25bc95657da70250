#!/usr/bin/python3
"""Data-parallel training on sklearn's handwritten digits with the "atp" backend, and with gloo.

An MLP (64 -> 128 -> 10) is trained with DistributedDataParallel by N ranks on this machine
(torch.multiprocessing.spawn), each rank on its shard of the training set (DistributedSampler).
With --backend both (the default) it runs gloo, then atp, from the same seed and the same initial
weights, so the two runs differ only in how gradients are summed: gloo adds float32, ATP adds
fixed-point int32 (value x 1e8, rounded) in a software switch and PS that rank 0 starts (ATP_LOCAL=1).

Per epoch it reports the mean training loss, the accuracy on the held-out test split (20%,
stratified) and the seconds rank 0 spent training (time.perf_counter around the epoch's steps;
evaluation excluded). Results go to OUT/digits.json; plot them with plot_digits.py.

    /usr/bin/python3 examples/torch/train_digits.py            # 4 ranks, gloo then atp
    /usr/bin/python3 examples/torch/train_digits.py --smoke    # 2 ranks, 2 epochs; exit 1 on failure

Run it with Debian's /usr/bin/python3 (python3-torch, python3-sklearn). atp_torch is found on the
path, or in the build tree (build/python) when it is not installed.
"""
import argparse
import datetime
import importlib
import json
import os
import platform
import shlex
import shutil
import socket
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
BUILD_PYTHON = os.path.join(REPO, "build", "python")

BACKENDS = ("gloo", "atp")
SEED = 0
TEST_FRACTION = 0.2
SMOKE_MAX_ACCURACY_GAP = 5.0  # percentage points the atp run may lose to gloo in --smoke


def fail(message):
    print(f"train_digits.py: {message}", file=sys.stderr)
    sys.exit(2)


def import_torch():
    try:
        importlib.import_module("torch")
    except ImportError:
        fail(f"torch is not importable by {sys.executable}; run with Debian's /usr/bin/python3 "
             "(apt-get install python3-torch).")


def import_atp_torch():
    """Imports atp_torch (registers the "atp" backend), from the path or from build/python."""
    try:
        importlib.import_module("atp_torch")
        return
    except ImportError:
        pass
    if os.path.isdir(BUILD_PYTHON) and BUILD_PYTHON not in sys.path:
        sys.path.insert(0, BUILD_PYTHON)  # spawned ranks get the parent's sys.path
    try:
        importlib.import_module("atp_torch")
    except ImportError as e:
        fail(f"atp_torch is not importable ({e}); build it with `cmake -S . -B build && cmake --build build` "
             "(needs python3-torch, libtorch-dev, python3-pybind11) and run with PYTHONPATH=build/python, "
             "or install it with `cmake --install build --component python`.")


def load_data(seed):
    """(x_train, y_train, x_test, y_test) as tensors: pixels 0..16 scaled to 0..1, a stratified split."""
    try:
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split
    except ImportError:
        fail("scikit-learn is not importable; apt-get install python3-sklearn (the digits data ship with it).")
    import torch

    digits = load_digits()
    x = digits.data.astype("float32") / 16.0
    y = digits.target.astype("int64")
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=TEST_FRACTION, stratify=y, random_state=seed)
    return (torch.from_numpy(x_train), torch.from_numpy(y_train),
            torch.from_numpy(x_test), torch.from_numpy(y_test))


def make_model():
    import torch.nn as nn
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_main(rank, size, backend, port, config, data, initial_state, run_dir):
    """One rank: DDP training for config["epochs"]; rank 0 evaluates and writes run_dir/BACKEND.{json,pt}."""
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

    torch.set_num_threads(1)  # 2 cores for all ranks (and the switch and PS in rank 0)
    torch.manual_seed(config["seed"])
    if backend == "atp":
        import_atp_torch()
        os.environ["ATP_LOCAL"] = "1"
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group(backend, rank=rank, world_size=size,
                            timeout=datetime.timedelta(seconds=config["timeout"]))

    x_train, y_train, x_test, y_test = data
    model = make_model()
    model.load_state_dict(initial_state)
    ddp = DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=config["lr"], momentum=config["momentum"])
    sampler = DistributedSampler(TensorDataset(x_train, y_train), num_replicas=size, rank=rank,
                                 shuffle=True, seed=config["seed"])
    loader = DataLoader(TensorDataset(x_train, y_train), batch_size=config["batch_size"], sampler=sampler)

    history = {"train_loss": [], "test_accuracy": [], "epoch_seconds": [], "epoch_seconds_max_rank": [],
               "steps_per_epoch": len(loader)}
    for epoch in range(config["epochs"]):
        sampler.set_epoch(epoch)
        ddp.train()
        loss_sum, samples = 0.0, 0
        start = time.perf_counter()
        for xb, yb in loader:
            optimizer.zero_grad(set_to_none=True)
            loss = F.cross_entropy(ddp(xb), yb)
            loss.backward()  # DDP allreduces the gradients here
            optimizer.step()
            loss_sum += loss.item() * len(yb)
            samples += len(yb)
        seconds = time.perf_counter() - start

        # Outside the timed part: the ranks' loss sums and times (all_gather of float64 is exact
        # in both backends: atp sends it through torch's store), and rank 0's evaluation.
        mine = torch.tensor([loss_sum, float(samples), seconds], dtype=torch.float64)
        everyone = [torch.zeros_like(mine) for _ in range(size)]
        dist.all_gather(everyone, mine)
        if rank == 0:
            total = torch.stack(everyone)
            model.eval()
            with torch.no_grad():
                accuracy = (model(x_test).argmax(1) == y_test).double().mean().item() * 100
            history["train_loss"].append(total[:, 0].sum().item() / total[:, 1].sum().item())
            history["test_accuracy"].append(accuracy)
            history["epoch_seconds"].append(seconds)
            history["epoch_seconds_max_rank"].append(total[:, 2].max().item())
            print(f"  [{backend}] epoch {epoch + 1:3d}/{config['epochs']}  loss {history['train_loss'][-1]:.4f}  "
                  f"test accuracy {accuracy:6.2f}%  {seconds:.3f} s", flush=True)

    if rank == 0:
        torch.save(model.state_dict(), os.path.join(run_dir, backend + ".pt"))
        with open(os.path.join(run_dir, backend + ".json"), "w") as f:
            json.dump(history, f)
    dist.barrier()
    dist.destroy_process_group()


def run_backend(backend, args, config, data, initial_state, run_dir, port):
    """Spawns args.ranks ranks; (history, state_dict, wall seconds) or raises RuntimeError."""
    import torch
    import torch.multiprocessing as mp

    print(f"{backend}: {args.ranks} ranks, {config['epochs']} epochs, port {port}", flush=True)
    started = time.perf_counter()
    context = mp.spawn(rank_main, args=(args.ranks, backend, port, config, data, initial_state, run_dir),
                       nprocs=args.ranks, join=False)
    deadline = started + args.run_timeout
    try:
        while not context.join(timeout=1):
            if time.perf_counter() > deadline:
                raise RuntimeError(f"the {backend} run did not finish within {args.run_timeout} s (--run-timeout)")
    except Exception as e:
        for p in context.processes:  # the ranks this run started
            if p.is_alive():
                p.terminate()
        for p in context.processes:
            p.join(5)
        message = str(e).strip().splitlines()
        raise RuntimeError(f"the {backend} run failed: " + (message[-1] if message else type(e).__name__)) from e
    wall = time.perf_counter() - started
    with open(os.path.join(run_dir, backend + ".json")) as f:
        history = json.load(f)
    state = torch.load(os.path.join(run_dir, backend + ".pt"))
    return history, state, wall


def print_table(runs):
    names = [b for b in BACKENDS if b in runs]
    epochs = max(len(runs[b]["test_accuracy"]) for b in names)
    head = f"{'epoch':>5}"
    for b in names:
        head += f" | {b + ' loss':>10} {b + ' acc %':>11} {b + ' s':>8}"
    if len(names) == 2:
        head += f" | {'acc diff pp':>11} {'time atp/gloo':>13}"
    print(head)
    print("-" * len(head))
    for e in range(epochs):
        line = f"{e + 1:>5}"
        for b in names:
            r = runs[b]
            line += f" | {r['train_loss'][e]:>10.4f} {r['test_accuracy'][e]:>11.2f} {r['epoch_seconds'][e]:>8.3f}"
        if len(names) == 2:
            a, g = runs["atp"], runs["gloo"]
            line += (f" | {a['test_accuracy'][e] - g['test_accuracy'][e]:>+11.2f}"
                     f" {a['epoch_seconds'][e] / g['epoch_seconds'][e]:>13.2f}")
        print(line)


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description="Train an MLP on sklearn's digits with DistributedDataParallel over the atp and/or gloo "
                    "backend (ranks spawned on this machine) and compare accuracy, time per epoch and final weights.",
        epilog="Results: OUT/digits.json (plot with examples/torch/plot_digits.py). Run with /usr/bin/python3.")
    parser.add_argument("--backend", choices=("atp", "gloo", "both"), default="both",
                        help="which backend(s) to train with; both: gloo, then atp from the same initial weights "
                             "(default: both)")
    parser.add_argument("--epochs", type=int, default=None, help="epochs (default: 20; 2 with --smoke)")
    parser.add_argument("--ranks", type=int, default=None, help="ranks (processes) (default: 4; 2 with --smoke)")
    parser.add_argument("--batch-size", type=int, default=16,
                        help="batch size per rank; the global batch is RANKS times it (default: 16)")
    parser.add_argument("--lr", type=float, default=0.05, help="SGD learning rate (default: 0.05)")
    parser.add_argument("--momentum", type=float, default=0.9, help="SGD momentum (default: 0.9)")
    parser.add_argument("--seed", type=int, default=SEED, help=f"seed of the weights, split and shuffling "
                        f"(default: {SEED})")
    parser.add_argument("--out", default=None,
                        help="folder for digits.json (default: examples/torch/results; a temporary folder with "
                             "--smoke)")
    parser.add_argument("--port", type=int, default=0,
                        help="rendezvous (MASTER_PORT) of the first run; the second uses PORT+1 "
                             "(default: free ports picked at start)")
    parser.add_argument("--timeout", type=float, default=60,
                        help="init_process_group's timeout in seconds: a collective that makes no progress for "
                             "this long fails (default: 60)")
    parser.add_argument("--run-timeout", type=float, default=600,
                        help="seconds a whole run may take before its ranks are stopped (default: 600)")
    parser.add_argument("--smoke", action="store_true",
                        help=f"quick check (2 ranks, 2 epochs, both backends): exit 1 if a run fails or atp's "
                             f"final accuracy is more than {SMOKE_MAX_ACCURACY_GAP:g} points below gloo's")
    args = parser.parse_args(argv)
    if args.smoke:
        if args.backend != "both":
            parser.error("--smoke compares both backends; leave out --backend")
        args.epochs = 2 if args.epochs is None else args.epochs
        args.ranks = 2 if args.ranks is None else args.ranks
        args.run_timeout = min(args.run_timeout, 120)
    args.epochs = 20 if args.epochs is None else args.epochs
    args.ranks = 4 if args.ranks is None else args.ranks
    for name in ("epochs", "ranks", "batch_size"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.lr <= 0:
        parser.error("--lr must be positive")
    if not 0 <= args.port <= 65534:
        parser.error("--port must be 0 (pick free ports) or a port below 65535")
    return args


def main(argv):
    args = parse_args(argv)
    import_torch()
    backends = BACKENDS if args.backend == "both" else (args.backend,)
    if "atp" in backends:
        import_atp_torch()  # fail early, in one sentence, rather than in every rank
    import torch

    out, scratch_out = args.out, args.out is None and args.smoke
    if out is None:  # --smoke without --out: a folder removed at the end unless the check fails
        out = tempfile.mkdtemp(prefix="digits-smoke-") if args.smoke else os.path.join(HERE, "results")
    os.makedirs(out, exist_ok=True)

    config = {"epochs": args.epochs, "batch_size": args.batch_size, "lr": args.lr, "momentum": args.momentum,
              "seed": args.seed, "timeout": args.timeout}
    data = load_data(args.seed)
    torch.manual_seed(args.seed)
    initial_state = {k: v.clone() for k, v in make_model().state_dict().items()}  # the same for every run
    print(f"digits: {len(data[0])} training samples ({args.ranks} shards), {len(data[2])} test samples; "
          f"MLP 64-128-10, {sum(v.numel() for v in initial_state.values())} parameters; torch {torch.__version__}",
          flush=True)

    runs, states, errors = {}, {}, {}
    with tempfile.TemporaryDirectory(prefix="digits-") as run_dir:
        for i, backend in enumerate(backends):
            port = args.port + i if args.port else free_port()
            try:
                history, state, wall = run_backend(backend, args, config, data, initial_state, run_dir, port)
            except RuntimeError as e:
                print(f"train_digits.py: {e}", file=sys.stderr)
                errors[backend] = str(e)
                continue
            history["run_seconds"] = wall  # spawn to exit: start-up, every epoch, evaluation, shut-down
            history["final_test_accuracy"] = history["test_accuracy"][-1]
            history["mean_epoch_seconds"] = sum(history["epoch_seconds"]) / len(history["epoch_seconds"])
            runs[backend], states[backend] = history, state

    result = {
        "command": " ".join(shlex.quote(a) for a in [sys.executable, os.path.relpath(__file__, os.getcwd())] + argv),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "model": "MLP 64-128-10 (ReLU), cross-entropy, SGD",
        "data": "sklearn.datasets.load_digits (8x8, 1797 images), pixels / 16, stratified 80/20 split",
        "train_samples": len(data[0]),
        "test_samples": len(data[2]),
        "ranks": args.ranks,
        "seed": args.seed,
        "epochs": args.epochs,
        "batch_size_per_rank": args.batch_size,
        "lr": args.lr,
        "momentum": args.momentum,
        "atp_scale": os.environ.get("ATP_SCALE", "1e8"),  # ATP's fixed-point scale (ATP_SCALE, default 1e8)
        "epoch_seconds_note": "rank 0's wall time of the epoch's training steps (time.perf_counter), evaluation "
                              "excluded; epoch_seconds_max_rank is the slowest rank's",
        "runs": runs,
        "errors": errors,
    }
    if len(runs) == 2:
        a, g = runs["atp"], runs["gloo"]
        per_tensor = {k: (states["atp"][k] - states["gloo"][k]).abs().max().item() for k in states["gloo"]}
        result["comparison"] = {
            "max_abs_param_diff": max(per_tensor.values()),
            "max_abs_param_diff_per_tensor": per_tensor,
            "max_abs_param": max(v.abs().max().item() for v in states["gloo"].values()),
            "accuracy_diff_pp": [x - y for x, y in zip(a["test_accuracy"], g["test_accuracy"])],
            "time_ratio_atp_over_gloo": [x / y for x, y in zip(a["epoch_seconds"], g["epoch_seconds"])],
            "final_accuracy_diff_pp": a["final_test_accuracy"] - g["final_test_accuracy"],
            "mean_epoch_time_ratio_atp_over_gloo": a["mean_epoch_seconds"] / g["mean_epoch_seconds"],
        }
    path = os.path.join(out, "digits.json")
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")

    if runs:
        print()
        print_table(runs)
        print()
        for b in (b for b in BACKENDS if b in runs):
            r = runs[b]
            print(f"{b}: final test accuracy {r['final_test_accuracy']:.2f}%, mean epoch {r['mean_epoch_seconds']:.3f} s "
                  f"({r['steps_per_epoch']} steps), whole run {r['run_seconds']:.1f} s")
    if "comparison" in result:
        c = result["comparison"]
        print(f"atp - gloo: final accuracy {c['final_accuracy_diff_pp']:+.2f} points, max |param diff| "
              f"{c['max_abs_param_diff']:.3g} (largest |param| {c['max_abs_param']:.3g}), mean epoch time "
              f"x{c['mean_epoch_time_ratio_atp_over_gloo']:.2f}")
    print(f"wrote {path}" + (" (removed at the end if the check passes)" if scratch_out else ""))

    if not args.smoke:
        return 1 if errors else 0
    if errors:
        print(f"smoke: FAILED: {'; '.join(errors.values())}", file=sys.stderr)
        return 1
    gap = runs["gloo"]["final_test_accuracy"] - runs["atp"]["final_test_accuracy"]
    if gap > SMOKE_MAX_ACCURACY_GAP:
        print(f"smoke: FAILED: atp's final accuracy is {gap:.2f} points below gloo's "
              f"(at most {SMOKE_MAX_ACCURACY_GAP:g} allowed)", file=sys.stderr)
        return 1
    if scratch_out:
        shutil.rmtree(out, ignore_errors=True)
    print(f"smoke: OK (atp {runs['atp']['final_test_accuracy']:.2f}%, gloo {runs['gloo']['final_test_accuracy']:.2f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
