#!/usr/bin/python3
"""An ATP job beside a TCP flow on the netns testbed, every setting at its default (issue 19, the
paper's Fig. 16): 4 workers and their PS under one switch, 200 Mbit/s links, 1 MiB allreduces
back to back; from 1 s to 7 s a TCP flow from another host of the rack to worker w0, so the flow
and the job's results share the switch's queue towards w0. Once per sender TCP: CUBIC asking for
ECN (the default), CUBIC without ECN, BBR and Reno.

Reported (table.txt): the job's rate alone (the median round's tensor bytes over its time, before
the flow) and beside the flow (the tensor bytes of the rounds that start from 1 s after the flow
starts and end before it stops, over the time they took), the flow's mean goodput over the same
stretch (100 ms samples), both as shares of the link, the flow's first second, each one's share in
every half second from the flow's first byte, and when that settled (both at 0.4 of the link or
more in every half second from then on). The baseline is the same measure for two TCP flows into
w0 (CUBIC with and without ECN): how evenly TCP shares the link with itself. Every result is
checked.
Usage: experiments/netns/tcp-share/run.py [--smoke] [OUT_DIR]   (root; --smoke: CUBIC with ECN only, 1.5 s)
"""
import os
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from common import experiment, finish, rate_mbps, rounds, run_netns  # noqa: E402

LINK_MBPS = 200
VARIANTS = [("cubic", True), ("cubic", False), ("bbr", False), ("reno", False)]
BASELINES = [("cubic", True), ("cubic", False)]
# Settled: from some window on, ATP and TCP each have at least this share of the link in every
# WINDOW_S of the overlap (the goal: within 2 s of the flow's start).
WINDOW_S = 0.5
SETTLED_SHARE = 0.4


def scenario(congestion, ecn, start_us, until_us, rounds, baseline=False):
    """The job on w0-w3 and a flow x -> w0; baseline: flows x -> w0 and y -> w0, the job on w1-w3 only
    (its results stay off w0's port; the machine runs about as many processes)."""
    names = ["w0", "w1", "w2", "w3", "ps", "x"] + (["y"] if baseline else [])
    hosts = "\n".join(f"    - {{name: {h}, switch: tor}}" for h in names)
    flow = (f"to: w0, from_us: {start_us}, until_us: {until_us}, congestion: {congestion}, "
            f"ecn: {'true' if ecn else 'false'}")
    flows = ", ".join(f"{{from: {h}, {flow}}}" for h in (["x", "y"] if baseline else ["x"]))
    workers = "w1, w2, w3" if baseline else "w0, w1, w2, w3"
    return (f"seed: 16\nlink: {{rate_mbps: {LINK_MBPS}}}\ntopology:\n  switches: [{{name: tor}}]\n  hosts:\n{hosts}\n"
            f"background: [{flows}]\n"
            f"jobs:\n  - {{name: a, workers: [{workers}], ps: [ps], elements: 262144, rounds: {rounds}}}\n")


def flow_mbps(flow, lo, hi):
    """The flow's mean goodput over its 100 ms samples that lie within [lo, hi) of the run's clock
    (its samples begin at its first byte, flows[].start_seconds, tens of milliseconds or more after
    the scenario's from_us); 0 if none do."""
    per, origin = flow["interval_s"], flow["start_seconds"]
    samples = flow["goodput_mbps"][max(0, round((lo - origin) / per)):max(0, round((hi - origin) / per))]
    return statistics.mean(samples) if samples else 0


def windows(lo, until_s):
    """The whole windows of WINDOW_S from lo to until_s, as (start, end)."""
    while lo + WINDOW_S <= until_s + 1e-9:
        yield lo, lo + WINDOW_S
        lo += WINDOW_S


def shares(result, start_s, until_s):
    job, flow = result["jobs"][0], result["flows"][0]
    ends = job["round_end_seconds"]
    alone = [job["tensor_bytes"] * 8 / (b - a) / 1e6 for a, b in zip([0] + ends, ends) if b < start_s]
    inside = rounds(job, 0, start_s + 1, until_s)
    beside = rate_mbps(job, inside) if inside else 0
    return (job["correct"], statistics.median(alone) if alone else 0, beside, flow_mbps(flow, start_s + 1, until_s),
            flow["goodput_mbps"][:round(1 / flow["interval_s"])])


def window_rates(result, until_s):
    """ATP's and TCP's Mbit/s in each window from the flow's first byte to until_s: ATP's tensor
    bytes spread evenly over each round's time (rounds run back to back from 0), TCP's 100 ms
    samples."""
    job, flow = result["jobs"][0], result["flows"][0]
    ends = job["round_end_seconds"]

    def atp_mbps(lo, hi):
        bits = sum(job["tensor_bytes"] * 8 * max(0.0, min(b, hi) - max(a, lo)) / (b - a)
                   for a, b in zip([0] + ends, ends))
        return bits / WINDOW_S / 1e6

    return [(atp_mbps(lo, hi), flow_mbps(flow, lo, hi)) for lo, hi in windows(flow["start_seconds"], until_s)]


def flow_window_rates(result, until_s):
    """The baseline's two flows' Mbit/s in each window from the later first byte to until_s."""
    a, b = result["flows"]
    return [(flow_mbps(a, lo, hi), flow_mbps(b, lo, hi))
            for lo, hi in windows(max(a["start_seconds"], b["start_seconds"]), until_s)]


def settled_s(rates):
    """Seconds from the flow's start to the first window from which on both have at least
    SETTLED_SHARE of the link in every window; None if the last window misses."""
    at = None
    for i, (atp, tcp) in enumerate(rates):
        if min(atp, tcp) >= SETTLED_SHARE * LINK_MBPS:
            at = i * WINDOW_S if at is None else at
        else:
            at = None
    return at


def settled_and_windows(rates):
    """The table's end of a row: when the shares settled, and each window's two shares."""
    settled = settled_s(rates)
    return (f"{'never' if settled is None else f'{settled:.1f} s':>8}  ",
            " ".join(f"{a / LINK_MBPS:.2f}/{t / LINK_MBPS:.2f}" for a, t in rates))


def main():
    args = experiment.arguments(__doc__, HERE)
    atp = experiment.atp_binary()
    start_us, until_us, rounds = (500000, 2000000, 40) if args.smoke else (1000000, 7000000, 100)
    variants = VARIANTS[:1] if args.smoke else VARIANTS
    lines = [f"# netns, 4 workers + PS + x under one switch, {LINK_MBPS} Mbit/s links, defaults; 1 MiB allreduces; "
             f"TCP x -> w0 from {start_us / 1e6} s to {until_us / 1e6} s. Mbit/s; share = of the link",
             f"{'sender TCP':<14}{'correct':>8}{'ATP alone':>10}{'ATP beside':>11}{'TCP':>7}{'ATP share':>10}"
             f"{'TCP share':>10}{'together':>9}{'settled':>8}  TCP's first second (100 ms); "
             f"ATP / TCP share per {WINDOW_S} s from the flow's first byte"]
    failed = False
    with tempfile.TemporaryDirectory() as gen:
        for congestion, ecn in variants:
            name = f"{congestion}{'-ecn' if ecn else ''}"
            path = os.path.join(gen, "run.yaml")
            with open(path, "w") as f:
                f.write(scenario(congestion, ecn, start_us, until_us, rounds))
            result = run_netns(atp, path, os.path.join(args.out, f"{name}.json"), name)
            correct, alone, beside, tcp, first = shares(result, start_us / 1e6, until_us / 1e6)
            failed = failed or not correct
            settled, shares_per_window = settled_and_windows(window_rates(result, until_us / 1e6))
            lines.append(f"{name:<14}{str(correct):>8}{alone:>10.0f}{beside:>11.0f}{tcp:>7.0f}"
                         f"{beside / LINK_MBPS:>10.2f}{tcp / LINK_MBPS:>10.2f}{(beside + tcp) / LINK_MBPS:>9.2f}"
                         + settled + " ".join(f"{x:.0f}" for x in first) + "; " + shares_per_window)
        # The baseline: the same measure for two TCP flows of one kind into w0, without ATP there.
        lines += ["", f"# baseline: two TCP flows, x -> w0 and y -> w0, from {start_us / 1e6} s to {until_us / 1e6} s; "
                  "the job on w1-w3, off w0's port",
                  f"{'sender TCP':<14}{'x share':>8}{'y share':>8}{'together':>9}{'settled':>8}  "
                  f"x / y share per {WINDOW_S} s from the later first byte"]
        for congestion, ecn in BASELINES[:1] if args.smoke else BASELINES:
            name = f"{congestion}{'-ecn' if ecn else ''}"
            path = os.path.join(gen, "baseline.yaml")
            with open(path, "w") as f:
                # A quarter more rounds: the job alone is faster, and should run until the flows stop.
                f.write(scenario(congestion, ecn, start_us, until_us, rounds + rounds // 4, baseline=True))
            result = run_netns(atp, path, os.path.join(args.out, f"baseline-{name}.json"), f"baseline {name}")
            failed = failed or not result["jobs"][0]["correct"]
            x, y = (flow_mbps(f, start_us / 1e6 + 1, until_us / 1e6) for f in result["flows"])
            settled, shares_per_window = settled_and_windows(flow_window_rates(result, until_us / 1e6))
            lines.append(f"{name:<14}{x / LINK_MBPS:>8.2f}{y / LINK_MBPS:>8.2f}{(x + y) / LINK_MBPS:>9.2f}"
                         + settled + shares_per_window)
    finish(args.out, lines, failed)


if __name__ == "__main__":
    main()
