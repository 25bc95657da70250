"""The PyTorch backend "atp" across real processes on 127.0.0.1: results against gloo's, DDP,
refusals, a dead rank, a running `atp switch` / `atp ps` found through ATP_SWITCH / ATP_PS, and a
job whose ranks hang under two switches linked through a third (ATP_SWITCHES).

Run by ctest (tests/CMakeLists.txt) with PYTHONPATH=<build>/python and ATP_BINARY=<build>/atp:
    /usr/bin/python3 -m pytest tests/torch
"""
import json
import multiprocessing
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import torch

HERE = Path(__file__).resolve().parent
ATP_BINARY = os.environ.get("ATP_BINARY", str(HERE.parents[1] / "build" / "atp"))
# The first call's fixed-point scale: ATP_SCALE's default 1e8 rounded down to a power of two;
# later calls' exponents resolve each fragment's largest value to float32's precision.
SCALE = 2.0 ** 26
HARD_LIMIT_S = 120  # no test may hang: every process is killed after this


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_udp_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Ranks are forked from a server that imported rank_main (torch, numpy, atp_torch) once, as torch's
# own suite forks its ranks (run_suite.py --start-method forkserver): a 2-rank job takes about 1 s
# instead of 2 on 2 cores, where each fresh interpreter spent a second importing torch. The server
# imports and runs nothing else (no CUDA, no thread pool in use), and each rank takes its argv and
# environment as a process of its own would.
sys.path.insert(0, str(HERE))
RANKS = multiprocessing.get_context("forkserver")
RANKS.set_forkserver_preload(["rank_main"])


def rank_process(argv, env, out_path, err_path):
    """A forked rank: its environment, its stdout and stderr in files, then rank_main's main."""
    import rank_main  # preloaded by the server: no import cost here

    os.environ.clear()
    os.environ.update(env)
    for fd, path in ((1, out_path), (2, err_path)):
        with open(path, "w") as f:
            os.dup2(f.fileno(), fd)
    rank_main.main(argv)


def run_ranks(scenario, size, env=None, timeout_s=30, rank_env=lambda rank: {}):
    """Starts `size` rank processes of `scenario`, rank r with `env` and rank_env(r) added; returns
    their JSON lines by rank (None for a rank that printed none) and the wall seconds until the last
    one exited."""
    port = free_port()
    full_env = dict(os.environ, **(env if env is not None else {"ATP_LOCAL": "1"}))
    if env is not None:
        for key in ("ATP_LOCAL", "ATP_SWITCH", "ATP_PS", "ATP_SWITCHES", "ATP_TOPOLOGY"):
            if key not in env:
                full_env.pop(key, None)
    with tempfile.TemporaryDirectory(prefix="atp-ranks-") as logs:
        outputs = [(Path(logs) / f"{r}.out", Path(logs) / f"{r}.err") for r in range(size)]
        for path in (p for pair in outputs for p in pair):
            path.touch()  # there to read even when a rank dies before it opens them
        done = Path(logs) / "done"  # rank_main.wait_for_peers_after_a_failed_start
        done.mkdir()
        full_env["ATP_TEST_DONE_DIR"] = str(done)
        start = time.monotonic()
        procs = []
        for r in range(size):
            argv = [scenario, str(r), str(size), str(port), str(timeout_s)]
            procs.append(RANKS.Process(target=rank_process, args=(argv, dict(full_env, **rank_env(r)), *outputs[r])))
            procs[-1].start()
        lines = []
        try:
            for p, (out_path, err_path) in zip(procs, outputs):
                p.join(timeout=max(1.0, HARD_LIMIT_S - (time.monotonic() - start)))
                if p.exitcode is None:
                    break
                out, err = out_path.read_text(), err_path.read_text()
                found = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
                lines.append(found[-1] if found else {"ok": False, "error": "no result line", "stderr": err[-3000:]})
                if p.exitcode not in (0, 17):  # 17: dead_rank's rank that dies on purpose
                    lines[-1]["exit"] = f"exit status {p.exitcode}; stderr: {err[-3000:]}"
        finally:
            hung = [r for r, p in enumerate(procs) if p.exitcode is None]
            for r in hung:
                procs[r].kill()
                procs[r].join()
            if hung:
                pytest.fail(f"rank {hung[0]} of {scenario} still ran after {HARD_LIMIT_S} s: a hang; "
                            f"stderr: {outputs[hung[0]][1].read_text()[-3000:]}")
        return lines, time.monotonic() - start


def expect_every_rank_refuses(env, sentence, size=2):
    """every_op on `size` ranks with `env`: every rank fails, `sentence` in its error."""
    lines, _ = run_ranks("every_op", size, env=env)
    for line in lines:
        assert not line["ok"] and sentence in line["error"], (env, line)


def expect_gloo_within_the_fixed_point_bound(lines, size, float_sums=False):
    """Every rank's allreduce_vs_gloo results within the bounds; `float_sums`: the group sums in
    float32 too (ATP_ALGORITHM=hierarchical), held to gloo's bound instead of the fixed point's."""
    for r, line in enumerate(lines):
        assert line["ok"] and "exit" not in line, line
        assert line["non_contiguous_ok"], line
        for key, d in line.items():
            if not isinstance(d, dict):
                continue
            divisor = size if key.startswith("avg") else 1
            # ATP: each input rounds to a multiple of 1/SCALE in a first call (error <= 0.5/SCALE each),
            # later to float32's precision of the fragment's largest value (in float_rounding), the sum is
            # rounded once to float32; gloo: float32 additions, each rounding by <= 2^-24 of a partial sum.
            float_rounding = 2.0 ** -24 * d["max_abs_sum"] / divisor
            gloo_bound = size * float_rounding + float_rounding
            atp_bound = gloo_bound if float_sums else size * 0.5 / SCALE / divisor + 2 * float_rounding
            assert d["atp_vs_exact"] <= atp_bound, (r, key, d, atp_bound)
            assert d["gloo_vs_exact"] <= gloo_bound, (r, key, d, gloo_bound)
            assert d["atp_vs_gloo"] <= atp_bound + gloo_bound, (r, key, d)


@pytest.mark.parametrize("size", [2, 4])
def test_allreduce_equals_gloo_within_the_fixed_point_bound(size):
    lines, _ = run_ranks("allreduce_vs_gloo", size)
    expect_gloo_within_the_fixed_point_bound(lines, size)
    # atp_torch.stats(): the one atp group's counters, of this rank, after its 7 calls through ATP
    # (SUM and AVG of 3 sizes, and the non-contiguous one); the gloo group has none.
    for r, line in enumerate(lines):
        [stats] = line["stats"]
        assert (stats["algorithm"], stats["rank"], stats["rounds_completed"]) == ("atp", r, 7), stats
        assert stats["gradient_packets_sent"] >= 7 and stats["job"] > 0, stats


@pytest.mark.parametrize("algorithm", ["hierarchical", "plink", "plink_fa", "ring"])
def test_host_collectives_are_float_sums_within_gloos_rounding_and_ddp_trains_on_them(algorithm):
    """ATP_ALGORITHM=hierarchical (the baseline Rina is measured against: a reduce-scatter in each
    rack ATP_RACK names, an allreduce across, an allgather back), plink (PLink's two-level
    aggregation over those racks) and plink_fa (its flat aggregation): the ranks' own TCP
    allreduce, no switch. Their sums are float32 sums in another order than gloo's: both within the
    float rounding bound of the exact sum; DDP on them trains as on gloo. Without ATP_RACK
    (hierarchical, plink): one sentence on every rank. ring (the flat TCP ring) needs no rack."""
    env = {"ATP_ALGORITHM": algorithm}
    racks = lambda r: {"ATP_RACK": "rack-a" if r < 3 else "rack-b"}  # noqa: E731
    lines, _ = run_ranks("allreduce_vs_gloo", 5, env=env, rank_env=racks)
    expect_gloo_within_the_fixed_point_bound(lines, 5, float_sums=True)
    lines, _ = run_ranks("ddp", 4, env=env, rank_env=racks)
    for line in lines:
        assert line["ok"] and "exit" not in line, line
        assert line["atp_identical_on_every_rank"], line
        assert line["atp_vs_gloo"] < 1e-5, line
    if algorithm in ("plink_fa", "ring"):
        return
    expect_every_rank_refuses(env, f"ATP_ALGORITHM={algorithm} needs ATP_RACK on every rank")


def test_plink_grouped_by_probes_sums_within_gloos_rounding():
    """ATP_GROUPING=probe: the plink ranks probe each other at the group's start and group by the
    probes (docs/plink.md), no ATP_RACK; the sums are float sums within the bound. ATP_GROUPING is
    plink's only, and takes racks or probe: one sentence otherwise."""
    lines, _ = run_ranks("allreduce_vs_gloo", 5, env={"ATP_ALGORITHM": "plink", "ATP_GROUPING": "probe"})
    expect_gloo_within_the_fixed_point_bound(lines, 5, float_sums=True)
    expect_every_rank_refuses({"ATP_ALGORITHM": "hierarchical", "ATP_GROUPING": "probe"},
                              "ATP_GROUPING=probe groups the ranks of ATP_ALGORITHM=plink")
    expect_every_rank_refuses({"ATP_ALGORITHM": "plink", "ATP_GROUPING": "near"},
                              "ATP_GROUPING must be racks or probe, got 'near'")


def test_plink_over_several_connections_per_pair_sums_within_gloos_rounding():
    """ATP_CONNECTIONS=N: PLink's chunks go round N TCP connections per pair of ranks (docs/plink.md);
    the sums stay float sums within the bound. It is PLink's only, from 1 to 16: one sentence
    otherwise."""
    env = {"ATP_ALGORITHM": "plink_fa", "ATP_CONNECTIONS": "3"}
    lines, _ = run_ranks("allreduce_vs_gloo", 4, env=env)
    expect_gloo_within_the_fixed_point_bound(lines, 4, float_sums=True)
    expect_every_rank_refuses({"ATP_ALGORITHM": "hierarchical", "ATP_CONNECTIONS": "2", "ATP_RACK": "a"},
                              "ATP_CONNECTIONS is PLink's")
    expect_every_rank_refuses({"ATP_ALGORITHM": "plink_fa", "ATP_CONNECTIONS": "17"},
                              "ATP_CONNECTIONS='17' must be a whole number")


def test_ddp_steps_leave_identical_parameters_on_every_rank():
    lines, _ = run_ranks("ddp", 3)
    for line in lines:
        assert line["ok"] and "exit" not in line, line
        assert line["atp_identical_on_every_rank"], line
        assert line["gloo_identical_on_every_rank"], line
        # Gradients differ from gloo's by fixed-point rounding only (about 1e-8 per step).
        assert line["atp_vs_gloo"] < 1e-5, line


@pytest.mark.parametrize("size", [1, 2, 3, 4])
def test_every_operation_and_dtype_gives_the_exact_result(size):
    """allreduce of every dtype with every op, broadcast, all_gather (both forms), reduce, gather,
    scatter, reduce_scatter (both forms, FSDP's included), all_to_all (both forms), send/recv,
    the object collectives, barrier and monitored_barrier, a sparse allreduce: what ATP does not
    aggregate goes to Gloo."""
    lines, _ = run_ranks("every_op", size)
    for line in lines:
        assert line["ok"] and "exit" not in line, line
        assert line.get("sparse") is True and line.get("barrier") is True, line
        wrong = {k: v for k, v in line.items() if v is not True and k not in ("rank", "ok", "avg_of_ints", "after",
                                                                              "after_big")}
        assert not wrong, (line["rank"], wrong)
        assert "not supported by atp: allreduce with AVG of Long tensors" in line["avg_of_ints"], line
        assert line["after"] == [float(size)] * 8 and line["after_big"], line


def test_ddp_with_unused_parameters_static_graph_and_fp16_compression_matches_gloo():
    lines, _ = run_ranks("ddp_options", 2)
    for line in lines:
        assert line["ok"] and "exit" not in line, line
        # Fixed-point rounding (about 1e-8 a step); the fp16 hook rounds both groups' gradients to
        # float16 the same way, then atp adds them exactly where gloo adds float16s.
        assert line["find_unused_parameters"] < 1e-5 and line["static_graph"] < 1e-5, line
        assert line["fp16_compress_hook"] < 1e-3, line


TORCH_2 = int(torch.__version__.split(".")[0]) >= 2
CUDA = torch.cuda.is_available()


@pytest.mark.skipif(not TORCH_2, reason="torch 1.13's FSDP needs CUDA (docs/pytorch.md); FSDP on CPU needs torch 2.x")
def test_fsdp_steps_match_unsharded_training():
    lines, _ = run_ranks("fsdp", 2)
    expect_fsdp_matches(lines)


def expect_fsdp_matches(lines):
    for line in lines:
        assert line["ok"] and "exit" not in line, line
        assert line["parameters"] == 20 * 16 + 16 + 16 + 1, line
        # Fixed-point rounding (about 1e-8 a step) and float32's order of additions.
        assert line["atp_vs_reference"] < 1e-5, line


@pytest.mark.skipif(not (TORCH_2 and CUDA), reason="needs torch 2.x with a CUDA device")
@pytest.mark.parametrize("backend", ["atp", "cpu:gloo,cuda:atp"])
def test_cuda_tensors_are_staged_through_the_host(backend):
    """Every operation on CUDA tensors gives the exact result, DDP of a CUDA model matches gloo's
    and FSDP on CUDA matches unsharded training, with the backend for every device and for
    CUDA's alone."""
    env = {"ATP_LOCAL": "1", "ATP_TEST_DEVICE": "cuda", "ATP_TEST_BACKEND": backend}
    lines, _ = run_ranks("every_op", 2, env=env)
    for line in lines:
        assert line["ok"] and "exit" not in line, line
        wrong = {k: v for k, v in line.items() if k not in ("rank", "ok", "avg_of_ints", "after", "after_big")
                 and v is not True}
        assert not wrong, wrong
        assert line["after"] == [2.0] * 8 and line["after_big"], line
    lines, _ = run_ranks("ddp", 2, env=env)
    for line in lines:
        assert line["ok"] and "exit" not in line, line
        assert line["atp_identical_on_every_rank"] and line["gloo_identical_on_every_rank"], line
        assert line["atp_vs_gloo"] < 1e-5, line
    lines, _ = run_ranks("fsdp", 2, env=env)
    expect_fsdp_matches(lines)


def test_a_dead_rank_makes_the_others_fail_within_the_timeout():
    timeout_s = 4
    lines, wall = run_ranks("dead_rank", 3, timeout_s=timeout_s)
    assert lines[2].get("rank") is None, "the dead rank printed a result"
    for line in lines[:2]:
        assert line["ok"] and "exit" not in line, line
        assert line["failed"], line
        assert "allreduce failed" in line["error"] and "no parameter packet" in line["error"], line
        assert timeout_s - 0.5 <= line["seconds"] <= timeout_s + 3, line
    assert wall < 4 * timeout_s + 20


def test_a_late_rank_fails_the_others_within_about_the_timeout():
    timeout_s = 4
    lines, _ = run_ranks("late_rank", 3, timeout_s=timeout_s)
    for line in lines[:2]:
        assert not line["ok"], line
    error = lines[0]["error"]
    if TORCH_2:  # torch 2.x's TCPStore itself waits for every rank before any backend is made
        assert "Timed out after" in error and "2/3 clients joined" in error, lines[0]
    else:
        assert "rank 0 could not set up the ATP job" in error and "endpoint/2" in error, lines[0]
    # torch's own store waits the timeout once (gloo fails after about 2 x timeout too), ATP's rank
    # 0 once more for the missing rank, and not a third time while its half-made job closed.
    assert lines[0]["seconds"] < 2 * timeout_s + 3, lines[0]


@pytest.mark.parametrize("scenario", ["sizes_differ_in_fragments", "sizes_differ_in_the_last_fragment"])
def test_tensors_of_different_sizes_fail_every_rank(scenario):
    lines, _ = run_ranks(scenario, 2)
    for line in lines:
        assert line["ok"] and "exit" not in line, line
        assert line["failed"], line
        assert "different sizes" in line["error"], line


@pytest.mark.parametrize("size", [2, 3])
def test_nan_and_inf_propagate_as_in_a_float_sum(size):
    lines, _ = run_ranks("nan_and_inf", size)
    for line in lines:
        assert line["ok"] and "exit" not in line, line
        assert line["nan"] == "nan" and line["inf_minus_inf"] == "nan" and line["inf"] == "inf", line
        assert line["others_exact"], line


def test_missing_or_bad_cluster_settings_are_one_sentence():
    lines, _ = run_ranks("every_op", 1, env={})
    assert not lines[0]["ok"]
    assert "set ATP_SWITCH and ATP_PS" in lines[0]["error"], lines[0]
    lines, _ = run_ranks("every_op", 1, env={"ATP_SWITCH": "localhost", "ATP_PS": "127.0.0.1:1"})
    assert "ATP_SWITCH='localhost' is not HOST:PORT" in lines[0]["error"], lines[0]
    lines, _ = run_ranks("every_op", 2, env={"ATP_SWITCH": "127.0.0.1:1", "ATP_PS": "127.0.0.1:1"})
    for line in lines:
        assert "rank 0 could not set up the ATP job" in line["error"], line
    # A local cluster is started from ATP_BINARY when it is set: a wrong one is named.
    lines, _ = run_ranks("every_op", 2, env={"ATP_LOCAL": "1", "ATP_BINARY": "/nonexistent/atp"})
    for line in lines:
        assert "ATP_BINARY='/nonexistent/atp' is no executable file" in line["error"], line


def start_daemon(args, pattern):
    """Starts an `atp` daemon; returns (process, the groups of `pattern` in its first line)."""
    p = subprocess.Popen([ATP_BINARY, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    m = re.search(pattern, line)
    if not m:
        p.kill()
        pytest.fail(f"`atp {' '.join(args)}` printed {line!r}; stderr: {p.stderr.read()}")
    return p, m.groups()


def test_jobs_on_a_running_switch_and_ps(tmp_path):
    config = tmp_path / "switch.yaml"
    config.write_text("name: tor\nlisten: 127.0.0.1:0\ncontrol: 127.0.0.1:0\n")
    switch, (switch_data, switch_control) = start_daemon(
        ["switch", "--config", str(config)], r"data (\S+), control http://(\S+),")
    ps = None
    try:
        ps, (ps_control,) = start_daemon(["ps", "--uplink", switch_data], r"control (\S+) ")
        env = {"ATP_SWITCH": switch_control, "ATP_PS": ps_control}
        for _ in range(2):  # a second job after the first: nothing of the first is in the way
            lines, _ = run_ranks("every_op", 2, env=env)
            for line in lines:
                assert line["ok"] and line["after"] == [2.0] * 8 and line["after_big"], line
                assert all(v is True for k, v in line.items() if k.startswith("all_reduce_")), line
        stats = json.loads(subprocess.run([ATP_BINARY, "switch", "stats", "--control", switch_control],
                                          capture_output=True, text=True, timeout=10).stdout)
        assert all(j["installed"] == 0 for j in stats["jobs"]), stats["jobs"]
        # The switch aggregated: the 100,000 values' fragments, at least (a one-fragment call may
        # end at the PS whole, when one rank starts it more than an RTO after the other, as on a
        # loaded machine: the earlier rank's resend flushes the aggregator).
        # Two jobs a run: the ranks' group and every_op's new_group of them.
        assert len(stats["jobs"]) == 4 and all(j["completions"] > 0 for j in stats["jobs"]), stats["jobs"]
        assert all(p["peer"] == "" for p in stats["ports"][1:]), "the ranks' ports are detached after each job"
    finally:
        for p in (ps, switch):
            if p:
                p.terminate()
                p.wait(timeout=10)


def test_a_job_across_two_racks(tmp_path):
    """Ranks 0 and 1 under switch tor0, 2 and 3 under tor1, both linked to core by their configs'
    ports, the PS under core: each rank names its own switch (ATP_SWITCH), every rank names core
    (ATP_SWITCHES); rank 0 finds the links and installs the job on all three."""
    data = {name: f"127.0.0.1:{free_udp_port()}" for name in ("tor0", "tor1", "core")}
    peers = {"tor0": ["core"], "tor1": ["core"], "core": ["tor0", "tor1"]}
    daemons, control = [], {}
    try:
        for i, name in enumerate(("tor0", "tor1", "core")):
            config = tmp_path / f"{name}.yaml"
            ports = "".join(f"  - {{peer: {data[p]}}}\n" for p in peers[name])
            config.write_text(f"name: {name}\nlisten: {data[name]}\ncontrol: 127.0.0.1:0\n"
                              f"host_pool: 10.{i + 1}.0.0/16\nports:\n{ports}")
            switch, (_, control[name]) = start_daemon(["switch", "--config", str(config)],
                                                      r"data (\S+), control http://(\S+),")
            daemons.append(switch)
        ps, (ps_control,) = start_daemon(["ps", "--uplink", data["core"]], r"control (\S+) ")
        daemons.append(ps)
        lines, _ = run_ranks("allreduce_vs_gloo", 4, env={"ATP_PS": ps_control, "ATP_SWITCHES": control["core"]},
                             rank_env=lambda r: {"ATP_SWITCH": control["tor0" if r < 2 else "tor1"]})
        expect_gloo_within_the_fixed_point_bound(lines, 4)
        for name in ("tor0", "tor1", "core"):
            stats = json.loads(subprocess.run([ATP_BINARY, "switch", "stats", "--control", control[name]],
                                              capture_output=True, text=True, timeout=10).stdout)
            assert stats["switch"]["no_route"] == 0 and stats["switch"]["not_admitted"] == 0, (name, stats["switch"])
            assert len(stats["jobs"]) == 1 and stats["jobs"][0]["aggregations"] > 0, (name, stats["jobs"])
            assert stats["jobs"][0]["installed"] == 0, (name, "the job is removed when the group is destroyed")
    finally:
        for p in daemons:
            p.terminate()
            p.wait(timeout=10)




def test_a_topology_file_is_the_network_rank_zero_starts(tmp_path):
    """ATP_TOPOLOGY with ATP_LOCAL=1: rank 0 starts the switches of a scenario file, linked as its
    links say, and hangs rank r under the switch of its first job's r-th worker (the example's: ranks
    0 and 1 under tor0, 2 and 3 under tor1, the PS under core). ClusterJob's test checks that every
    switch aggregates; this one, that the variable reaches it and the results are gloo's."""
    topology = HERE.parents[1] / "examples" / "netns-two-racks.yaml"
    lines, _ = run_ranks("allreduce_vs_gloo", 4, env={"ATP_LOCAL": "1", "ATP_TOPOLOGY": str(topology)})
    expect_gloo_within_the_fixed_point_bound(lines, 4)
    # Rina on the same network: each rack one member of the ring (docs/rina.md); and DDP on it.
    rina = {"ATP_LOCAL": "1", "ATP_TOPOLOGY": str(topology), "ATP_ALGORITHM": "rina"}
    lines, _ = run_ranks("allreduce_vs_gloo", 4, env=rina)
    expect_gloo_within_the_fixed_point_bound(lines, 4)
    lines, _ = run_ranks("every_op", 4, env=rina)
    for line in lines:
        assert line["ok"] and "exit" not in line, line
        wrong = {k: v for k, v in line.items() if v is not True and k not in ("rank", "ok", "avg_of_ints", "after",
                                                                              "after_big")}
        assert not wrong, (line["rank"], wrong)
    # What does not fit is one sentence on every rank.
    for env, size, sentence in [
        ({"ATP_TOPOLOGY": str(topology)}, 1, "ATP_TOPOLOGY is the network that ATP_LOCAL=1 starts on rank 0"),
        ({"ATP_LOCAL": "1", "ATP_TOPOLOGY": str(topology)}, 2, "the local network names the hosts of 4 ranks, the job has 2"),
        ({"ATP_LOCAL": "1", "ATP_TOPOLOGY": str(tmp_path / "none.yaml")}, 1, "ATP_TOPOLOGY: "),
        ({"ATP_LOCAL": "1", "ATP_ALGORITHM": "gloo"}, 1,
         "ATP_ALGORITHM='gloo' must be one of atp, ps, ring, halving_doubling, rina, hierarchical, plink, plink_fa"),
    ]:
        expect_every_rank_refuses(env, sentence, size)
