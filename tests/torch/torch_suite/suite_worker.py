"""torch's distributed test suite on one backend; run_suite.py starts this, it is not run by hand.

Importing this module does what torch's test/distributed/test_distributed_spawn.py does: it makes
the class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase), whose setUp
spawns WORLD_SIZE rank processes (multiprocessing's spawn start method) that each run one test.
The spawned ranks import this module again to find the class (pickled by its qualified name),
so everything below runs in every rank too, before the suite module is imported:

- BACKEND, WORLD_SIZE, TEMP_DIR and INIT_METHOD come from the environment, as in torch.
- For BACKEND=atp: `import atp_torch` registers the backend, and "atp" is added to the sets of
  DistTestCases.backend_feature named in ATP_FEATURES ("plugin", "ddp", "subgroup", "gpu"), which the
  suite reads when its test class is defined (the decorators). Nothing else is changed.

main() is the worker loop: it runs the tests named in its configuration one at a time, each with
its own unittest result, its output (and its ranks', which inherit the descriptors) in a log file
of its own, and writes one JSON line per event to the results file.
"""

import json
import os
import re
import sys
import time
import traceback
import unittest

import torch

torch.backends.cuda.matmul.allow_tf32 = False  # as test_distributed_spawn.py

BACKEND = os.environ["BACKEND"]

# The gates DistTestCases.backend_feature holds by name, those gloo is in: "plugin" (a backend
# registered through Backend.register_backend), "ddp" (DistributedDataParallel), "subgroup"
# (dist.new_group), "gpu" (tests that also run on CUDA tensors where a GPU is: atp stages them
# through the host; without a GPU they skip for both backends alike).
# run_suite.py's --atp-features can name others (ATP_SUITE_FEATURES, which the ranks inherit).
ATP_FEATURES = tuple(f for f in os.environ.get("ATP_SUITE_FEATURES", "plugin,ddp,subgroup,gpu").split(",") if f)

from torch.testing._internal import common_distributed  # noqa: E402

if BACKEND == "atp":
    import atp_torch  # noqa: F401,E402  (registers the backend "atp")

    for _feature in ATP_FEATURES:
        common_distributed.DistTestCases.backend_feature[_feature].add("atp")

# TestDistBackend._run turns on DDP's experimental ReplicatedTensor path
# (_set_ddp_with_replicated_tensor(True)) in every rank. With it, DistributedDataParallel imports
# torch.distributed._shard, which Debian's torch 1.13 cannot import under Python 3.11 ("mutable
# default ... for field tensor_properties is not allowed", a dataclass rule 3.11 added): every
# DDP test then fails on gloo and atp alike, in DDP's constructor. Unless run_suite.py's
# --replicated-tensor asks for torch's behaviour (ATP_SUITE_REPLICATED_TENSOR=1), the call is made
# to set False, so DDP runs as users run it (the default, without ReplicatedTensor).
# torch 2.x has no such path: nothing to turn off.
try:
    import torch.nn.parallel._replicated_tensor_ddp_utils as _replicated  # noqa: E402
except ImportError:
    _replicated = None
if _replicated is not None and os.environ.get("ATP_SUITE_REPLICATED_TENSOR", "0") != "1":
    _set_replicated = _replicated._set_ddp_with_replicated_tensor
    _replicated._set_ddp_with_replicated_tensor = lambda value: _set_replicated(False)

from torch.testing._internal.distributed import distributed_test  # noqa: E402
from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest,
    TestDistBackend,
)


# How the ranks start (run_suite.py --start-method): "spawn" is torch's (test_distributed_spawn.py);
# "forkserver" forks each rank from a server process that has imported this module (torch, the
# suite, atp_torch) once and run nothing else, which saves each rank that import.
START_METHOD = os.environ.get("ATP_SUITE_START_METHOD", "spawn")


def _environment_file():
    return os.path.join(json.loads(os.environ["ATP_SUITE_CONFIG"])["logdir"], "rank_environment.json")


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        if START_METHOD == "spawn":
            self._spawn_processes()
        else:
            context = torch.multiprocessing.get_context(START_METHOD)
            if START_METHOD == "forkserver":
                context.set_forkserver_preload([__name__])
                # The server's environment is the one it started with: the ranks read this test's.
                with open(_environment_file(), "w") as f:
                    json.dump({k: os.environ[k] for k in ("TEMP_DIR", "INIT_METHOD")}, f)
            self._start_processes(context.Process)
        torch.backends.cudnn.flags(enabled=True, allow_tf32=False).__enter__()

    @classmethod
    def _run(cls, rank, test_name, file_name, pipe, **kwargs):  # torch 2.x passes keywords (fake_pg)
        if START_METHOD == "forkserver":
            # Forked from the server, the rank has the server's stdout and stderr, not the test's
            # log: it writes a log of its own beside it.
            logdir = json.loads(os.environ["ATP_SUITE_CONFIG"])["logdir"]
            log = os.open(os.path.join(logdir, "%s.rank%d.log" % (test_name, rank)),
                          os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(log, 1)
            os.dup2(log, 2)
            os.close(log)
            with open(_environment_file()) as f:
                os.environ.update(json.load(f))
            distributed_test.INIT_METHOD = os.environ["INIT_METHOD"]  # as a spawned rank's import reads it
        super()._run(rank, test_name, file_name, pipe, **kwargs)


def test_names():
    return unittest.TestLoader().getTestCaseNames(TestDistBackendWithSpawn)


def static_skip(name):
    """The reason a decorator of the suite skips `name` before any rank starts, or None."""
    fn = getattr(TestDistBackendWithSpawn, name)
    if getattr(fn, "__unittest_skip__", False):
        return getattr(fn, "__unittest_skip_why__", "") or "skipped"
    return None


_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Warning|Failure)\b")


def exception_line(text):
    """The first line of the last exception a Python traceback in `text` ends with."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")]
    if starts:
        for line in lines[starts[-1] + 1:]:
            if line.strip() and not line.startswith((" ", "\t")):
                return line.strip()
    for line in reversed(lines):
        if _EXCEPTION_LINE.match(line.strip()):
            return line.strip()
    return lines[-1].strip() if lines else ""


def summarize_error(text, log_text=""):
    """One line for a failed test: the exception of the first rank that raised one, else the
    exit code the suite saw, with the last exception in the ranks' output (e.g. one that
    init_process_group raised, outside the test, which the suite does not pass back)."""
    marker = re.search(r"Process (\d+) exited with error code \d+ and exception:\n", text)
    if marker:
        rest = text[marker.end():]
        nxt = re.search(r"\nProcess \d+ exited with error code \d+ and exception:\n", rest)
        return "rank %s: %s" % (marker.group(1), exception_line(rest[:nxt.start()] if nxt else rest))
    exit_code = re.search(r"Expected zero exit code but got (-?\d+)|Expect process \d+ exit code to match.*", text)
    if exit_code:
        code = exit_code.group(1) if exit_code.group(1) else exit_code.group(0)
        in_log = exception_line(log_text) if "Traceback (most recent call last)" in log_text else "no traceback"
        return "a rank exited with %s: %s" % (code, in_log)
    return exception_line(text)


def _skip_reason_in_log(log_text, name):
    found = re.findall(r"skipping test %s for following reason: (.*)" % re.escape(name), log_text)
    return found[0].strip() if found else None


def run_one(name, log_path):
    """Runs one test; returns (status, detail, traceback or None, whether a decorator skipped it)."""
    reason = static_skip(name)
    if reason is not None:
        return "skip", reason, None, True
    saved = os.dup(1), os.dup(2)
    with open(log_path, "w") as log:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        result = unittest.TestResult()
        try:
            TestDistBackendWithSpawn(name).run(result)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
    log_text = ""
    for path in [log_path] + [log_path[:-len(".log")] + ".rank%d.log" % r for r in range(int(os.environ["WORLD_SIZE"]))]:
        if os.path.exists(path):
            with open(path, errors="replace") as log:
                log_text += log.read()
    if result.skipped:
        reason = result.skipped[0][1]
        if reason == common_distributed.TEST_SKIPS["generic"].message:
            reason = _skip_reason_in_log(log_text, name) or reason
        return "skip", reason, None, False
    problems = result.errors + result.failures
    if problems:
        text = problems[0][1]
        if "Timing out after" in log_text or re.search(r"timed out after [\d.]+ seconds", text):
            return "timeout", summarize_error(text), text, False
        return "fail", summarize_error(text, log_text), text, False
    if result.unexpectedSuccesses:
        return "fail", "unexpected success", None, False
    if result.testsRun == 1:
        return "pass", "", None, False
    return "fail", "the test did not run", None, False


def main():
    config = json.loads(os.environ["ATP_SUITE_CONFIG"])
    # The suite's own per-test limit (MultiProcessTestCase._join_processes, which terminates the
    # ranks and fails the test): run_suite.py's --timeout for every test.
    common_distributed.TIMEOUT_DEFAULT = config["timeout"]
    common_distributed.TIMEOUT_OVERRIDE.clear()
    with open(config["results"], "a", buffering=1) as out:
        def emit(**event):
            out.write(json.dumps(event) + "\n")

        if config.get("list"):
            emit(event="list", torch=torch.__version__, tests=[[name, static_skip(name)] for name in test_names()])
            return
        # run_suite.py --ungate: tests the suite keeps from this backend by name, run anyway
        # (reported apart, never counted). unittest reads the skip flag in this process only.
        for name in config.get("ungate", []):
            getattr(TestDistBackendWithSpawn, name).__unittest_skip__ = False
        for name in config["tests"]:
            emit(event="start", test=name, time=time.time())
            start = time.monotonic()
            try:
                status, detail, text, static = run_one(name, os.path.join(config["logdir"], name + ".log"))
            except Exception:  # the harness itself: reported, never hidden
                text = traceback.format_exc()
                status, detail, static = "fail", "harness: " + exception_line(text), False
            emit(event="result", test=name, status=status, detail=detail, static=static,
                 ungated=name in config.get("ungate", []),
                 seconds=round(time.monotonic() - start, 2), traceback=(text or "")[-6000:])


if __name__ == "__main__":
    main()
