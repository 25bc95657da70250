"""PyTorch ranks on hosts of their own behind `atp switch` processes that forward between network
interfaces, as on real machines (needs root: network namespaces stand in for the machines; skipped
without). Nothing here is `atp testbed`'s: the test cables the network itself, starts the daemons
from config files as an operator would, and runs each rank with torch's variables and the control
addresses of its switch, the PS and the core (ATP_SWITCH, ATP_PS, ATP_SWITCHES), nothing more:
DDP with atp, Rina and hierarchical against gloo, two jobs at once, and the sentence every rank
gets when a switch is left out.

    h0 h1       h2 h3
     tor0        tor1      each host's eth0 on a port of its rack's switch
         \\      /
          core ---- ps     the PS's host under the core

Every node also has a management interface on one bridge (192.168.200.0/24), where the daemons'
control planes listen: the data network carries only what the jobs send.

Run by ctest (torch_real_hosts_test) with PYTHONPATH=<build>/python and ATP_BINARY=<build>/atp.
"""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ddp_params import expect_equal_and_near_gloo

HERE = Path(__file__).resolve().parent
ATP_BINARY = os.environ.get("ATP_BINARY", str(HERE.parents[1] / "build" / "atp"))
HARD_LIMIT_S = 180
CONTROL_PORT = 7000

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the hosts are network namespaces: needs root")

HOSTS = {"h0": ("tor0", 0), "h1": ("tor0", 1), "h2": ("tor1", 0), "h3": ("tor1", 1)}  # host -> (switch, port)
DATA_IP = {"h0": "10.0.0.1", "h1": "10.0.0.2", "h2": "10.0.0.3", "h3": "10.0.0.4", "ps": "10.0.0.9"}
NODES = ["tor0", "tor1", "core", "h0", "h1", "h2", "h3", "ps"]
MANAGEMENT_IP = {node: f"192.168.200.{i + 1}" for i, node in enumerate(NODES)}
# Each switch's config: its ports (interface names in its namespace) and the routes to the hosts
# on its own cables; `switch:` names the switch at a link's other end.
CONFIGS = {
    "tor0": "ports: [{interface: p0}, {interface: p1}, {interface: p2, switch: core}]\n"
            "routes: [{dst: 10.0.0.1, port: 0}, {dst: 10.0.0.2, port: 1}]\n",
    "tor1": "ports: [{interface: p0}, {interface: p1}, {interface: p2, switch: core}]\n"
            "routes: [{dst: 10.0.0.3, port: 0}, {dst: 10.0.0.4, port: 1}]\n",
    "core": "ports: [{interface: p0, switch: tor0}, {interface: p1, switch: tor1}, {interface: p2}]\n"
            "routes: [{dst: 10.0.0.9, port: 2}]\n",
}
# Cables: (namespace, interface) at each end.
CABLES = [(("tor0", "p0"), ("h0", "eth0")), (("tor0", "p1"), ("h1", "eth0")), (("tor1", "p0"), ("h2", "eth0")),
          (("tor1", "p1"), ("h3", "eth0")), (("tor0", "p2"), ("core", "p0")), (("tor1", "p2"), ("core", "p1")),
          (("core", "p2"), ("ps", "eth0"))]


def sh(*command):
    subprocess.run(command, check=True, capture_output=True, text=True)


class Network:
    """The namespaces (atpr<pid>-NODE), cables and management bridge; removed by close()."""

    def __init__(self):
        self.prefix = f"atpr{os.getpid()}-"
        self.remove_stale()
        self.namespaces = []

    def build(self):
        for node in NODES + ["mgmt"]:
            self.add_namespace(node)
        sh("ip", "-n", self.ns("mgmt"), "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", self.ns("mgmt"), "link", "set", "br0", "up")
        for node in NODES:
            self.veth((node, "mg"), ("mgmt", "m-" + node))
            sh("ip", "-n", self.ns("mgmt"), "link", "set", "m-" + node, "master", "br0", "up")
            sh("ip", "-n", self.ns(node), "addr", "add", MANAGEMENT_IP[node] + "/24", "dev", "mg")
            sh("ip", "-n", self.ns(node), "link", "set", "mg", "up")
        for a, b in CABLES:
            self.veth(a, b, mtu=9000)
        for host, ip in DATA_IP.items():
            sh("ip", "-n", self.ns(host), "addr", "add", ip + "/24", "dev", "eth0")
            sh("ip", "-n", self.ns(host), "route", "add", "224.0.0.0/4", "dev", "eth0")

    def ns(self, node):
        return self.prefix + node

    def add_namespace(self, node):
        sh("ip", "netns", "add", self.ns(node))
        self.namespaces.append(self.ns(node))
        sh("ip", "-n", self.ns(node), "link", "set", "lo", "up")
        sh("ip", "netns", "exec", self.ns(node), "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")

    def veth(self, a, b, mtu=1500):
        (na, ia), (nb, ib) = a, b
        sh("ip", "link", "add", ia, "netns", self.ns(na), "mtu", str(mtu), "type", "veth", "peer", "name", ib, "netns",
           self.ns(nb), "mtu", str(mtu))
        for node, name in (a, b):
            # A raw socket must see frames as they are on the wire, not offloaded super-frames.
            sh("ip", "netns", "exec", self.ns(node), "ethtool", "-K", name, "tx", "off", "rx", "off", "tso", "off",
               "gso", "off", "gro", "off")
            sh("ip", "-n", self.ns(node), "link", "set", name, "up")

    def remove_stale(self):
        """Namespaces of earlier runs of this test whose process is gone."""
        listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
        for name in listed:
            if name.startswith("atpr") and "-" in name:
                pid = name[4:name.index("-")]
                if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                    subprocess.run(["ip", "netns", "delete", name], capture_output=True)

    def exec(self, node, command, env=None, **kwargs):
        return subprocess.Popen(["ip", "netns", "exec", self.ns(node), *command], env=env, **kwargs)

    def close(self):
        for name in self.namespaces:
            subprocess.run(["ip", "netns", "delete", name], capture_output=True)

    def left(self):
        listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
        return [n for n in listed if n.startswith(self.prefix)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """The network with its switches and PS running (one of each for every test of the module)."""
    home = tmp_path_factory.mktemp("home")
    env = {**os.environ, "ATP_HOME": str(home)}
    network = Network()
    daemons = []
    try:
        network.build()
        for name, body in CONFIGS.items():
            path = home / f"{name}.yaml"
            path.write_text(f"name: {name}\ncontrol: {MANAGEMENT_IP[name]}:{CONTROL_PORT}\n{body}")
            daemons.append(network.exec(name, [ATP_BINARY, "switch", "--config", str(path), "--log-level", "warn"],
                                        env, stdout=subprocess.PIPE, text=True))
            daemons[-1].stdout.readline()  # ready; the token file exists from the first one on
        daemons.append(network.exec("ps", [ATP_BINARY, "ps", "--listen", f"{DATA_IP['ps']}:9700", "--control",
                                           f"{MANAGEMENT_IP['ps']}:{CONTROL_PORT}", "--log-level", "warn"],
                                    env, stdout=subprocess.PIPE, text=True))
        daemons[-1].stdout.readline()
        for d in daemons:
            assert d.poll() is None, "a daemon did not start"
        yield network, env
    finally:
        for d in daemons:
            d.terminate()
        for d in daemons:
            d.wait(timeout=10)
        network.close()
        assert network.left() == []


def control(node):
    return f"{MANAGEMENT_IP[node]}:{CONTROL_PORT}"


def start_ranks(cluster, backend, out, hosts=tuple(HOSTS), algorithm=None, core=True, master_port=29500):
    """Starts tests/torch/testbed_rank.py on `hosts` (ranks in that order; MASTER_ADDR the first's),
    naming the core switch unless not `core`; returns the processes."""
    network, env = cluster
    ranks = []
    for rank, host in enumerate(hosts):
        rank_env = {**env, "RANK": str(rank), "WORLD_SIZE": str(len(hosts)), "LOCAL_RANK": "0",
                    "MASTER_ADDR": DATA_IP[hosts[0]], "MASTER_PORT": str(master_port), "GLOO_SOCKET_IFNAME": "eth0"}
        if backend == "atp":
            rank_env.update(ATP_SWITCH=control(HOSTS[host][0]), ATP_PS=control("ps"))
            if core:
                rank_env["ATP_SWITCHES"] = control("core")
            if algorithm:
                rank_env["ATP_ALGORITHM"] = algorithm
        ranks.append(network.exec(host, [sys.executable, str(HERE / "testbed_rank.py"), "--backend", backend,
                                          "--out", str(out)], rank_env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True))
    return ranks


def finish(ranks, succeed=True):
    """Waits for the ranks; returns their outputs, having checked that every one ended as `succeed`."""
    outputs = []
    deadline = time.monotonic() + HARD_LIMIT_S
    for r in ranks:
        try:
            outputs.append(r.communicate(timeout=max(1, deadline - time.monotonic()))[0])
        except subprocess.TimeoutExpired:
            for other in ranks:
                other.kill()
            raise
    for r in ranks:
        assert (r.returncode == 0) == succeed, "\n".join(outputs)
    return outputs


def run_ranks(cluster, backend, out, succeed=True, **options):
    return finish(start_ranks(cluster, backend, out, **options), succeed)


def aggregations(cluster):
    """Gradient packets each switch aggregated, over every job it has had."""
    network, env = cluster
    counts = {}
    for name in CONFIGS:
        text = subprocess.run(["ip", "netns", "exec", network.ns(name), ATP_BINARY, "switch", "stats", "--control",
                               control(name)], env=env, capture_output=True, text=True, check=True).stdout
        counts[name] = sum(job["aggregations"] for job in json.loads(text)["jobs"])
    return counts


def test_ddp_on_hosts_behind_switches_on_interfaces_matches_gloo(cluster, tmp_path):
    before = aggregations(cluster)
    run_ranks(cluster, "atp", tmp_path)
    after = aggregations(cluster)
    run_ranks(cluster, "gloo", tmp_path)
    expect_equal_and_near_gloo(tmp_path, range(4))
    # Two levels: each rack's switch adds its two ranks, the core the two racks.
    assert all(after[name] > before[name] for name in CONFIGS), (before, after)


def test_rina_on_hosts_behind_switches_on_interfaces_adds_in_the_racks(cluster, tmp_path):
    before = aggregations(cluster)
    run_ranks(cluster, "atp", tmp_path, algorithm="rina")
    after = aggregations(cluster)
    run_ranks(cluster, "gloo", tmp_path)
    expect_equal_and_near_gloo(tmp_path, range(4))
    # The racks are the ring's members (their switches add); the core only forwards.
    assert {name: after[name] > before[name] for name in CONFIGS} == {"tor0": True, "tor1": True, "core": False}


def test_without_the_cores_address_every_rank_says_what_is_missing(cluster, tmp_path):
    start = time.monotonic()
    outputs = run_ranks(cluster, "atp", tmp_path, succeed=False, core=False)
    for text in outputs:
        assert ("rank 0 could not set up the ATP job: the PS at " + control("ps") + ", whose data address is "
                "10.0.0.9:9700, hangs under none of the job's switches") in text, text
        assert "name the PS's switch too" in text, text
    assert time.monotonic() - start < 60  # said, not timed out


def test_two_jobs_at_once_share_the_switches(cluster, tmp_path):
    before = aggregations(cluster)
    for job in ("a", "b"):
        (tmp_path / job).mkdir()
    a = start_ranks(cluster, "atp", tmp_path / "a", hosts=("h0", "h2"))
    b = start_ranks(cluster, "atp", tmp_path / "b", hosts=("h1", "h3"), master_port=29501)
    finish(a + b)
    after = aggregations(cluster)
    # One rank of each job per rack: the ToRs only forward, the core adds both racks, for each job.
    assert {name: after[name] > before[name] for name in CONFIGS} == {"tor0": False, "tor1": False, "core": True}
    # Both jobs are the same two ranks (model, data): one gloo run of two is either's reference.
    run_ranks(cluster, "gloo", tmp_path, hosts=("h0", "h2"))
    for job in ("a", "b"):
        expect_equal_and_near_gloo(tmp_path / job, range(2), gloo_out=tmp_path)


def test_hierarchical_finds_the_racks_from_the_ranks_switches(cluster, tmp_path):
    outputs = run_ranks(cluster, "atp", tmp_path, algorithm="hierarchical")
    run_ranks(cluster, "gloo", tmp_path)
    expect_equal_and_near_gloo(tmp_path, range(4))
    assert all("done" in text for text in outputs)
