#!/usr/bin/env python3
"""PyTorch's own distributed test suite on the backend "atp" and on "gloo", side by side (issue 22).

What it runs
------------
torch.testing._internal.distributed.distributed_test (Debian's torch 1.13), the way torch's
test/distributed/test_distributed_spawn.py runs it: the class
TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase) whose setUp starts
WORLD_SIZE rank processes that each run the test, with BACKEND, WORLD_SIZE, TEMP_DIR (holding
`barrier/`) and INIT_METHOD (file://, torch's default variant) in the environment. That class
lives in suite_worker.py; this script starts one worker per backend
(`python -c 'import suite_worker; suite_worker.main()'`), hands it the tests, watches it and
compares. Backends run one after the other, or with --concurrent at the same time, each
with its own worker, folders and switches (CI: the ranks mostly wait, so two at once take about
the slower one's time on 2 cores; the results are the same, checked side by side).

- One test at a time; each gets its own log in --log-dir (its ranks' output too). A test is
  `pass`, `fail` (with the first line of the first rank's exception), `skip` (with the reason:
  the suite's decorator, or the one a rank gave when it exited with a skip code) or `timeout`.
- Per-test limit (--timeout, default 120 s): the suite's own mechanism (MultiProcessTestCase
  terminates the ranks and fails the test), reported as `timeout`. If the worker itself gives no
  result for --timeout + 60 s, its whole process group is killed, the test is a `timeout`, and a
  new worker takes the tests left.
- --start-method: `spawn` (default, torch's) or `forkserver`: every rank is forked from a server
  process that imported this suite (torch, atp_torch) once and ran nothing else. Same tests, same
  results (checked test by test at 2 and 3 ranks), 4-6x faster on 2 cores: use it in CI.
- BACKEND=atp: suite_worker imports atp_torch and adds "atp" to DistTestCases.backend_feature
  "plugin", "ddp", "subgroup" and "gpu" (--atp-features: the sets gloo is in) before the suite
  module is imported, in the worker and in every rank, so that atp is held to what gloo is.
  ATP_LOCAL=1 unless ATP_SWITCH is set, so every process group's rank 0 starts a switch and a PS.
  atp_torch must be importable: --atp-path DIR (the folder holding atp_torch/) or PYTHONPATH.
- DDP: TestDistBackend._run turns on DDP's experimental ReplicatedTensor path, which imports
  torch.distributed._shard, which Debian's torch 1.13 cannot import under Python 3.11: every DDP
  test then fails on both backends. By default the worker turns that switch off (suite_worker.py
  says how), for both backends alike; --replicated-tensor keeps torch's behaviour.
- Debian does not package `expecttest`: expecttest.py here is a stub (ACCEPT and TestCase, all
  that torch's common_utils uses), found first on the worker's path.

What counts
-----------
Only tests that gloo passes on the same machine, in the same run. Of those, a test that the
suite's own decorators skip for atp (a gate on the backend's name that atp does not meet) is
excluded and listed with the decorator's reason (docs/pytorch-suite.md lists them).
--ungate runs them on atp anyway, reported apart and never counted. Every other test that gloo
passes must pass on atp: a failure, a timeout or a skip that only atp gets makes the exit status
1. Nothing is excluded by test name in this harness.

The measured tables (torch 1.13 at 2, 3 and 4 ranks; torch 2.11 at 2, 3, 4 and 8) and the
commands: docs/pytorch-suite.md.

Usage
-----
    cd tests/torch/torch_suite
    python3 run_suite.py --backend both --world-size 2 --start-method forkserver --concurrent \
        --atp-path /path/to/dir_with_atp_torch --json /tmp/suite.json          # CI
    python3 run_suite.py --backend atp -k all_reduce -k 'test_gather_*'       # a subset
Options: --backend atp|gloo|both (both), --world-size N (2), -k PATTERN (repeatable; a
substring, or a glob with * ? [), --json OUT, --timeout S (120), --log-dir DIR,
--start-method spawn|forkserver, --concurrent, --atp-features LIST, --replicated-tensor, --ungate,
--init-method file|env, --list (the tests and the suite's static skips; nothing runs),
--verbose (every test's row), --compare GLOO_DIR ATP_DIR (nothing runs: the side-by-side report
of two one-backend runs, from their log folders, as when the two ran at once on one machine).
Exit status: with both backends, 0 when every counted test passes on atp, else 1; with one,
1 if any test fails or times out; 1 also when the suite cannot be imported; 2 on a usage error.
"""

import argparse
import collections
import concurrent.futures
import fnmatch
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
GRACE_S = 60  # beyond --timeout before the worker itself counts as stuck


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", choices=("atp", "gloo", "both"), default="both")
    p.add_argument("--world-size", type=int, default=2)
    p.add_argument("-k", dest="patterns", action="append", default=[],
                   help="run the tests whose name contains PATTERN (or matches it, with * or ?)")
    p.add_argument("--json", dest="json_out", help="write every result to this file")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per test (default 120)")
    p.add_argument("--log-dir", help="per-test logs (default: a new folder under /tmp)")
    p.add_argument("--atp-path", help="folder that holds the atp_torch package")
    p.add_argument("--atp-features", default="plugin,ddp,subgroup,gpu",
                   help="DistTestCases.backend_feature sets that get 'atp' (default plugin,ddp,subgroup,gpu)")
    p.add_argument("--init-method", choices=("file", "env"), default="file")
    p.add_argument("--replicated-tensor", action="store_true",
                   help="keep torch's DDP+ReplicatedTensor switch on (every DDP test then fails on "
                        "Python 3.11 for both backends); default: off, see suite_worker.py")
    p.add_argument("--start-method", choices=("spawn", "forkserver"), default="spawn",
                   help="how ranks start: spawn (torch's way, default); forkserver (each rank forked "
                        "from a process that imported the suite once: faster)")
    p.add_argument("--concurrent", action="store_true",
                   help="with --backend both: run the two backends at once, each its own worker "
                        "(about the slower one's time where ranks wait more than they compute)")
    p.add_argument("--ungate", action="store_true",
                   help="also run on atp the tests the suite skips for atp by name (reported apart, not counted)")
    p.add_argument("--list", action="store_true", help="list the tests and the suite's static skips")
    p.add_argument("--verbose", action="store_true", help="print every test's row in the table")
    p.add_argument("--compare", nargs=2, metavar=("GLOO_DIR", "ATP_DIR"),
                   help="run nothing: compare two runs of one backend each, from their log folders "
                        "(--log-dir's gloo/ and atp/; results.jsonl and list.jsonl there), even a run "
                        "cut short; give the runs' --world-size and --timeout for the report's title")
    p.add_argument("--python", default=sys.executable)
    args = p.parse_args(argv)
    if args.world_size < 2:
        p.error("--world-size must be at least 2")
    return args


def selected(name, patterns):
    if not patterns:
        return True
    for pat in patterns:
        if any(c in pat for c in "*?["):
            if fnmatch.fnmatchcase(name, pat):
                return True
        elif pat in name:
            return True
    return False


class Worker:
    """One suite_worker process (its own session, so that it and its ranks go together)."""

    live = set()  # started and not closed: killed with this process (stop_workers)

    def __init__(self, args, backend, config, logdir):
        self.results = config["results"]
        env = dict(os.environ)
        path = [HERE] + ([os.path.abspath(args.atp_path)] if args.atp_path else [])
        if env.get("PYTHONPATH"):
            path.append(env["PYTHONPATH"])
        temp_dir = tempfile.mkdtemp(prefix="temp_dir_", dir=logdir)
        os.makedirs(os.path.join(temp_dir, "barrier"), exist_ok=True)
        env.update(
            PYTHONPATH=os.pathsep.join(path),
            BACKEND=backend,
            WORLD_SIZE=str(args.world_size),
            TEMP_DIR=temp_dir,
            INIT_METHOD=("file://" + os.path.join(temp_dir, "shared_init_file")
                         if args.init_method == "file" else "env://"),
            ATP_SUITE_CONFIG=json.dumps(config),
            ATP_SUITE_FEATURES=args.atp_features,
            ATP_SUITE_START_METHOD=args.start_method,
            ATP_SUITE_REPLICATED_TENSOR="1" if args.replicated_tensor else "0",
            PYTHONUNBUFFERED="1",
            PYTHONHASHSEED="0",  # the suite's skip reasons print sets: the same order every run
            TMPDIR=temp_dir,  # the suite's FileStore files, which it leaves, go with the logs
        )
        if backend == "atp" and not env.get("ATP_SWITCH"):
            env["ATP_LOCAL"] = "1"
        self.log = open(os.path.join(logdir, "worker.log"), "a")
        self.proc = subprocess.Popen(
            [args.python, "-c", "import suite_worker; suite_worker.main()"],
            env=env, cwd=temp_dir, stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT,
            start_new_session=True)
        Worker.live.add(self)

    def kill(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()

    def close(self):
        Worker.live.discard(self)
        self.log.close()


def stop_workers(signum, frame):
    """SIGTERM (`timeout`, tools/torch-kit.sh suites) or SIGINT: the workers, in sessions of their
    own, would outlive this process and their ranks with them."""
    for worker in list(Worker.live):
        worker.kill()
    sys.exit(128 + signum)


def read_events(path, offset):
    """New complete JSON lines of `path` from byte `offset`: (events, new offset)."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
    except FileNotFoundError:
        return [], offset
    end = data.rfind(b"\n") + 1
    return [json.loads(line) for line in data[:end].splitlines() if line.strip()], offset + end


def list_tests(args, backend, logdir):
    results = os.path.join(logdir, "list.jsonl")
    config = dict(list=True, timeout=args.timeout, results=results, logdir=logdir)
    worker = Worker(args, backend, config, logdir)
    rc = worker.proc.wait()
    worker.close()
    events, _ = read_events(results, 0)
    if rc != 0 or not events:
        with open(os.path.join(logdir, "worker.log")) as f:
            sys.exit("run_suite: the suite does not import with BACKEND=%s (exit %s):\n%s"
                     % (backend, rc, f.read()[-3000:]))
    return events[0]["tests"]


def log_result(results_path, ev):
    """A result the harness gives (the worker is gone), written beside the worker's own so that the
    log folder holds every result (--compare reads it); returns the offset past it."""
    with open(results_path, "a") as f:
        f.write(json.dumps(ev) + "\n")
    return os.path.getsize(results_path)


def run_backend(args, backend, logdir):
    """Runs the selected tests on `backend`; returns ({test: result}, wall seconds)."""
    os.makedirs(logdir, exist_ok=True)
    started = time.monotonic()
    listed = list_tests(args, backend, logdir)
    plan = [name for name, _ in listed if selected(name, args.patterns)]
    ungate = []
    if args.ungate and backend == "atp":
        gloo_dir = os.path.join(logdir, "gloo_list")
        os.makedirs(gloo_dir, exist_ok=True)
        gloo_static = {name for name, reason in list_tests(args, "gloo", gloo_dir) if reason}
        ungate = [name for name, reason in listed if reason and name not in gloo_static and name in plan]
        ungate_reasons.update((name, reason) for name, reason in listed if name in ungate)
    results = {}
    total = len(plan)
    results_path = os.path.join(logdir, "results.jsonl")
    offset = 0
    while len(results) < total:
        todo = [name for name in plan if name not in results]
        config = dict(timeout=args.timeout, results=results_path, logdir=logdir, tests=todo, ungate=ungate)
        worker = Worker(args, backend, config, logdir)
        current, since = None, time.monotonic()
        while True:
            events, offset = read_events(results_path, offset)
            for ev in events:
                if ev["event"] == "start":
                    current, since = ev["test"], time.monotonic()
                elif ev["event"] == "result":
                    current = None
                    results[ev["test"]] = ev
                    report_progress(backend, len(results), total, ev)
            if worker.proc.poll() is not None:
                events, offset = read_events(results_path, offset)
                for ev in events:
                    if ev["event"] == "result":
                        results[ev["test"]] = ev
                        report_progress(backend, len(results), total, ev)
                if len(results) < total:
                    name = current or next(n for n in plan if n not in results)
                    ev = dict(event="result", test=name, status="fail", static=False,
                              seconds=round(time.monotonic() - since, 2),
                              detail="harness: the worker exited (status %s) during this test; see %s"
                              % (worker.proc.returncode, os.path.join(logdir, "worker.log")))
                    results[name] = ev
                    offset = log_result(results_path, ev)
                    report_progress(backend, len(results), total, ev)
                break
            if current is not None and time.monotonic() - since > args.timeout + GRACE_S:
                worker.kill()
                ev = dict(event="result", test=current, status="timeout", static=False,
                          seconds=round(time.monotonic() - since, 2),
                          detail="harness: no result after %d s; the worker and its ranks were killed"
                          % (args.timeout + GRACE_S))
                results[current] = ev
                offset = log_result(results_path, ev)
                report_progress(backend, len(results), total, ev)
                break
            time.sleep(0.2)
        worker.close()
    return results, time.monotonic() - started


def report_progress(backend, done, total, ev):
    status = ev["status"].upper()
    extra = ""
    if ev["status"] != "pass":
        extra = "  " + (ev.get("detail") or "")[:150]
    print("[%s %3d/%d] %-62s %-7s %6.1fs%s" % (backend, done, total, ev["test"], status, ev.get("seconds", 0), extra),
          flush=True)


def counts(results):
    c = collections.Counter(r["status"] for r in results.values())
    return [len(results), c["pass"], c["fail"], c["skip"], c["timeout"]]


ungate_reasons = {}  # test: the decorator's reason, for tests run with --ungate


def compare(results):
    """The comparison of issue 22: {category: [(test, detail)]}."""
    gloo, atp = results["gloo"], results["atp"]
    out = collections.OrderedDict((k, []) for k in (
        "gloo_passes", "atp_passes", "excluded", "atp_fails", "atp_timeouts", "atp_skips", "atp_not_run",
        "atp_only_passes", "ungated"))
    for name in sorted(gloo):
        g, a = gloo[name], atp.get(name)
        if a is None:  # --compare of an atp run cut short
            if g["status"] == "pass":
                out["gloo_passes"].append((name, ""))
                out["atp_not_run"].append((name, "not in atp's results"))
            continue
        if g["status"] != "pass":
            if a["status"] == "pass":
                out["atp_only_passes"].append((name, "gloo: %s %s" % (g["status"], g.get("detail", ""))))
            continue
        out["gloo_passes"].append((name, ""))
        if a.get("ungated"):
            reason = ungate_reasons.get(name, "")
            out["excluded"].append((name, reason))
            out["ungated"].append((name, "%s: %s%s" % (reason, a["status"], (" " + a["detail"]) if a["detail"] else "")))
        elif a["status"] == "pass":
            out["atp_passes"].append((name, ""))
        elif a["status"] == "skip" and a.get("static"):
            out["excluded"].append((name, a["detail"]))
        elif a["status"] == "skip":
            out["atp_skips"].append((name, a["detail"]))
        elif a["status"] == "timeout":
            out["atp_timeouts"].append((name, a["detail"]))
        else:
            out["atp_fails"].append((name, a["detail"]))
    return out


def grouped(rows):
    groups = collections.OrderedDict()
    for name, detail in sorted(rows, key=lambda r: (r[1], r[0])):
        groups.setdefault(detail, []).append(name)
    return sorted(groups.items(), key=lambda kv: -len(kv[1]))


def print_report(args, results, walls):
    ws = args.world_size
    print("\n== torch %s distributed_test, world size %d, per-test timeout %g s ==" % (TORCH_VERSION, ws, args.timeout))
    print("%-8s %6s %6s %6s %6s %8s %9s" % ("backend", "tests", "pass", "fail", "skip", "timeout", "wall"))
    for b in results:
        print("%-8s %6d %6d %6d %6d %8d %8.0fs" % tuple([b] + counts(results[b]) + [walls[b]]))
    for b in results:
        skips = [(n, r["detail"]) for n, r in results[b].items() if r["status"] == "skip"]
        print("\n%s skips (%d), by reason:" % (b, len(skips)))
        for reason, names in grouped(skips):
            print("  %3d  %s" % (len(names), reason[:140]))
        bad = [(n, ("[--ungate] " if r.get("ungated") else "") + r["status"] + ": " + r["detail"])
               for n, r in results[b].items() if r["status"] in ("fail", "timeout")]
        if bad:
            print("%s failures and timeouts (%d):" % (b, len(bad)))
            for reason, names in grouped(bad):
                print("  %3d  %s\n       %s" % (len(names), reason[:200], " ".join(names)))
    if set(results) != {"gloo", "atp"}:
        return 0
    c = compare(results)
    must = len(c["gloo_passes"]) - len(c["excluded"])
    print("\n== side by side: tests gloo passes ==")
    print("  gloo passes                                  %4d" % len(c["gloo_passes"]))
    print("  excluded: the suite skips them for atp by name %3d" % len(c["excluded"]))
    print("  counted                                      %4d" % must)
    print("  atp passes                                   %4d" % len(c["atp_passes"]))
    print("  atp fails                                    %4d" % len(c["atp_fails"]))
    print("  atp times out (hangs)                        %4d" % len(c["atp_timeouts"]))
    print("  atp skips (at run time, gloo does not)       %4d" % len(c["atp_skips"]))
    if c["atp_not_run"]:
        print("  not run on atp (its run was cut short)       %4d" % len(c["atp_not_run"]))
    for title, key in (("excluded (the suite's decorator, for atp)", "excluded"),
                       ("atp fails, by error", "atp_fails"), ("atp timeouts", "atp_timeouts"),
                       ("atp skips", "atp_skips"), ("not run on atp", "atp_not_run"),
                       ("excluded tests run on atp anyway (--ungate; not counted)", "ungated"),
                       ("atp passes what gloo does not (not counted)", "atp_only_passes")):
        if c[key]:
            print("\n%s:" % title)
            for reason, names in grouped(c[key]):
                print("  %3d  %s\n       %s" % (len(names), reason[:200], " ".join(names)))
    if args.verbose:
        print("\n%-62s %-8s %-8s" % ("test", "gloo", "atp"))
        for name in sorted(results["gloo"]):
            print("%-62s %-8s %-8s" % (name, results["gloo"][name]["status"],
                                       results["atp"].get(name, {}).get("status", "-")))
    failing = len(c["atp_fails"]) + len(c["atp_timeouts"]) + len(c["atp_skips"]) + len(c["atp_not_run"])
    print("\nRESULT: %d of %d counted tests that gloo passes pass on atp%s"
          % (len(c["atp_passes"]), must, "" if failing == 0 else "; %d do not" % failing))
    return 1 if failing else 0


def write_json(args, results, walls):
    if not args.json_out:
        return
    doc = dict(torch=TORCH_VERSION, world_size=args.world_size, timeout_s=args.timeout,
               atp_features=args.atp_features.split(","), wall_s={b: round(w, 1) for b, w in walls.items()},
               results={b: {n: {k: v for k, v in r.items() if k not in ("event", "test")}
                            for n, r in sorted(rs.items())} for b, rs in results.items()})
    if set(results) == {"gloo", "atp"}:
        doc["comparison"] = {k: [list(x) for x in v] for k, v in compare(results).items()}
    with open(args.json_out, "w") as f:
        json.dump(doc, f, indent=1)


def load_run(logdir):
    """A finished or cut-short run of one backend, from its log folder: ({test: result}, wall seconds).
    The tests that --ungate ran go into ungate_reasons with their decorator's reason."""
    events, _ = read_events(os.path.join(logdir, "results.jsonl"), 0)
    if not events:
        sys.exit("run_suite: no results in %s (give a backend's folder: LOG_DIR/gloo or LOG_DIR/atp)" % logdir)
    results = {ev["test"]: ev for ev in events if ev["event"] == "result"}
    # From the first test's start to the end of the last result (a run killed mid-test ends with a
    # start that has none).
    started = {ev["test"]: ev["time"] for ev in events if ev["event"] == "start"}
    ends = [started[name] + r.get("seconds", 0) for name, r in results.items() if name in started]
    wall = max(ends) - min(started.values()) if ends else 0.0
    listed, _ = read_events(os.path.join(logdir, "list.jsonl"), 0)
    reasons = dict(listed[0]["tests"]) if listed else {}
    global TORCH_VERSION
    TORCH_VERSION = listed[0].get("torch", TORCH_VERSION) if listed else TORCH_VERSION
    ungate_reasons.update((n, reasons.get(n) or "") for n, r in results.items() if r.get("ungated"))
    return results, wall


TORCH_VERSION = "?"


def main(argv=None):
    global TORCH_VERSION
    args = parse_args(sys.argv[1:] if argv is None else argv)
    signal.signal(signal.SIGTERM, stop_workers)
    signal.signal(signal.SIGINT, stop_workers)
    if args.compare:
        results, walls = {}, {}
        for b, d in zip(("gloo", "atp"), args.compare):
            results[b], walls[b] = load_run(d)
        status = print_report(args, results, walls)
        write_json(args, results, walls)
        return status
    backends = ["gloo", "atp"] if args.backend == "both" else [args.backend]
    logroot = os.path.abspath(args.log_dir or tempfile.mkdtemp(prefix="atp_torch_suite_"))
    os.makedirs(logroot, exist_ok=True)
    try:
        TORCH_VERSION = subprocess.run([args.python, "-c", "import torch; print(torch.__version__)"],
                                       capture_output=True, text=True, check=True).stdout.strip()
    except subprocess.CalledProcessError as e:
        sys.exit("run_suite: %s cannot import torch: %s" % (args.python, e.stderr[-500:]))
    if args.list:
        for b in backends:
            d = os.path.join(logroot, b)
            shutil.rmtree(d, ignore_errors=True)
            os.makedirs(d)
            for name, reason in list_tests(args, b, d):
                if selected(name, args.patterns):
                    print("%-6s %-62s %s" % (b, name, "skip: " + reason if reason else ""))
        return 0
    print("logs: %s" % logroot, flush=True)
    results, walls = {}, {}

    def run(b):
        d = os.path.join(logroot, b)
        shutil.rmtree(d, ignore_errors=True)
        results[b], walls[b] = run_backend(args, b, d)

    with concurrent.futures.ThreadPoolExecutor(len(backends) if args.concurrent else 1) as pool:
        list(pool.map(run, backends))  # (list: a backend's exception is raised here)
    status = print_report(args, results, walls)
    if args.backend != "both" and any(r["status"] in ("fail", "timeout") for r in results[backends[0]].values()):
        status = 1
    write_json(args, results, walls)
    print("logs: %s" % logroot)
    return status


if __name__ == "__main__":
    sys.exit(main())
