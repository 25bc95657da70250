"""PyTorch on an emulated two-rack cluster through `atp testbed` (needs root: network namespaces;
skipped without): DDP with atp across switches on Linux interfaces against gloo, both racks'
switches aggregating, two jobs at once, and the runner's ways out (a rank's exit status, Ctrl-C,
a killed rank), each leaving no namespace, process or file behind.

Run by ctest (torch_testbed_test) with PYTHONPATH=<build>/python and ATP_BINARY=<build>/atp.
"""
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ddp_params import expect_equal_and_near_gloo

HERE = Path(__file__).resolve().parent
ATP_BINARY = os.environ.get("ATP_BINARY", str(HERE.parents[1] / "build" / "atp"))
HARD_LIMIT_S = 240

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="atp testbed needs root (network namespaces)")

# examples/netns-two-racks.yaml: two racks of two hosts under a core, the PS under the core, 1 Gbit/s
# links; its jobs are replaced here (a testbed's jobs name the hosts that run the command).
EXAMPLE = (HERE.parents[1] / "examples" / "netns-two-racks.yaml").read_text()
TWO_RACKS = EXAMPLE[:EXAMPLE.index("jobs:")] + "jobs:\n"
ONE_JOB = TWO_RACKS + "  - {name: a, workers: [w0, w1, w2, w3], ps: [ps]}\n"
# Two jobs, each with a rank in each rack, on the same switches and PS host.
TWO_JOBS = TWO_RACKS + "  - {name: a, workers: [w0, w2], ps: [ps]}\n  - {name: b, workers: [w1, w3], ps: [ps]}\n"


def left_behind(run_pid):
    """What a run with process id `run_pid` left: its namespaces, temporary folders, processes."""
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    mine = [n for n in namespaces.split() if n.startswith(f"atp{run_pid}-")]
    folders = [p.name for p in Path("/tmp").glob(f"atp-netns-{run_pid}-*")]
    children = subprocess.run(["pgrep", "-P", str(run_pid)], capture_output=True, text=True).stdout.split()
    return mine + folders + children


def start_testbed(tmp_path, scenario, command, env=None, options=()):
    """Starts `atp testbed` on `scenario` (text) with `command`; returns the Popen."""
    path = tmp_path / "testbed.yaml"
    path.write_text(scenario)
    return subprocess.Popen([ATP_BINARY, "testbed", str(path), *options, "--", *command], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})


def finish(process):
    out, err = process.communicate(timeout=HARD_LIMIT_S)
    return process.returncode, out, err


def ddp(tmp_path, backend, scenario=ONE_JOB, env=None, options=()):
    out = tmp_path / "params"
    out.mkdir(exist_ok=True)
    process = start_testbed(tmp_path, scenario,
                      [sys.executable, str(HERE / "testbed_rank.py"), "--backend", backend, "--out", str(out)], env,
                      options)
    code, stdout, stderr = finish(process)
    assert code == 0, (stdout, stderr)
    assert left_behind(process.pid) == []
    return out, stdout, stderr


def aggregations(stderr):
    """Each ended job's packets aggregated by switch, from the runner's closing sentences."""
    jobs = re.findall(r"ended; packets aggregated by switch: ([^;\n]*)", stderr)
    return [{name: int(n) for name, n in (part.split() for part in job.split(", "))} for job in jobs]


def test_ddp_with_atp_across_two_racks_matches_gloo(tmp_path):
    params, stdout, stderr = ddp(tmp_path, "atp", options=["--report", str(tmp_path / "report.json")])
    ddp(tmp_path, "gloo")
    for host in ("w0", "w1", "w2", "w3"):
        assert f"[{host}] rank" in stdout  # every line carries its host
    expect_equal_and_near_gloo(params, range(4))
    [job] = aggregations(stderr)
    assert set(job) == {"tor0", "tor1", "core"} and all(n > 0 for n in job.values()), job
    # The network's closing line, and its counters in --report: every link direction, and w0's
    # packets to tor0 counted.
    carried = re.search(r"atp testbed: links carried (\d+) packets; (\d+) queue drops", stderr)
    assert carried and int(carried.group(1)) > 0, stderr
    links = json.loads((tmp_path / "report.json").read_text())["links"]
    assert len(links) == 2 * 7, links  # 4 workers, the PS and 2 switch links, each way
    assert next(l for l in links if (l["from"], l["to"]) == ("w0", "tor0"))["packets"] > 0


# Rina: the racks are ring members (their ToRs add), the core only forwards. ps: the PS baseline,
# no switch adds.
@pytest.mark.parametrize("algorithm, adds", [("rina", {"tor0": True, "tor1": True, "core": False}),
                                             ("ps", {"tor0": False, "tor1": False, "core": False})])
def test_rina_and_the_ps_baseline_match_gloo_and_aggregate_where_they_should(tmp_path, algorithm, adds):
    params, _, stderr = ddp(tmp_path, "atp", env={"ATP_ALGORITHM": algorithm})
    ddp(tmp_path, "gloo")
    expect_equal_and_near_gloo(params, range(4))
    [job] = aggregations(stderr)
    assert {name: n > 0 for name, n in job.items()} == adds, job


def test_two_jobs_at_once_share_the_switches(tmp_path):
    params, stdout, stderr = ddp(tmp_path, "atp", scenario=TWO_JOBS)
    assert "[w0] rank 0 of 2" in stdout and "[w1] rank 0 of 2" in stdout  # ranks count within their job
    jobs = aggregations(stderr)
    # One rank of each job per rack: the ToRs only forward (a switch of one child adds nothing), the
    # core sums both racks' packets, for each job.
    assert len(jobs) == 2 and all(j["core"] > 0 and j["tor0"] == 0 and j["tor1"] == 0 for j in jobs), jobs


def test_a_ranks_exit_status_is_returned_and_the_others_are_stopped(tmp_path):
    start = time.monotonic()
    process = start_testbed(tmp_path, ONE_JOB, ["sh", "-c", 'if [ "$RANK" = 2 ]; then exit 3; fi; exec sleep 60'])
    code, _, stderr = finish(process)
    assert code == 3, stderr
    assert "rank 2 of job a on host w2 exited with status 3" in stderr
    assert time.monotonic() - start < 30  # the others did not run their 60 s
    assert left_behind(process.pid) == []


def wait_for_ranks(process, ranks):
    """Reads the runner's output until `ranks` lines of "ready" came."""
    seen = 0
    while seen < ranks:
        line = process.stdout.readline()
        assert line, "the testbed ended before its ranks were ready"
        seen += "ready" in line


def test_ctrl_c_stops_everything(tmp_path):
    process = start_testbed(tmp_path, ONE_JOB, ["sh", "-c", "echo ready; exec sleep 60"])
    wait_for_ranks(process, 4)
    process.send_signal(signal.SIGINT)
    code, _, stderr = finish(process)
    assert code == 130, stderr
    assert left_behind(process.pid) == []


def test_a_killed_rank_fails_the_run_and_nothing_is_left(tmp_path):
    process = start_testbed(tmp_path, ONE_JOB, ["sh", "-c", 'echo ready $$; exec sleep 60'])
    pids = []
    while len(pids) < 4:
        line = process.stdout.readline()
        assert line
        pids.append(int(line.split()[-1]))
    os.kill(pids[1], signal.SIGKILL)
    code, _, stderr = finish(process)
    assert code == 128 + signal.SIGKILL, stderr
    assert left_behind(process.pid) == []


def test_a_file_it_cannot_run_is_one_sentence(tmp_path):
    process = start_testbed(tmp_path, TWO_RACKS + "  - {name: a, workers: [w0, w1], ps: [ps]}\n"
                      "faults:\n  - {crash: w1, at_round: 1}\n", ["true"])
    code, _, stderr = finish(process)
    assert code == 2 and stderr.count("\n") == 1 and "crash" in stderr, stderr
