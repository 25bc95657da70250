#!/usr/bin/python3
"""Paper Fig. 13b and 13c on ns-3 (issue 19: the mechanisms behind Fig. 13a, not only its totals),
every transport key at its default. Fig. 13a's setting (experiments/ns3/fig13a/three-jobs.yaml:
three jobs of 4 workers on the same hosts, their PSes on one host, 100 Gbit/s) with the table at
its PTA (480 aggregators, experiments/ns3/fig13a/results/pta.json), `--series` every 50 us:
- 13b: the three jobs, 9 rounds each. The paper: collisions die out after warm-up.
- 13c: job1 stops after 3 rounds (goes idle), the others run 9. The paper: the others' in-switch
  aggregations rise once job1's aggregators are free.

Per 50 us bin and job, the share of its workers' gradient packets that a switch aggregated:
sw / (sw + ps - sw / n), n workers (a PS packet is either a switch's sum of n packets or a worker's
own, collided packet). Reported (table.txt): 13b each job's share in its first round and after
it; 13c jobs 2-3's share while job1 runs and once it is idle; PNGs of the series beside.

Usage: experiments/ns3/fig13bc/run.py [--smoke] [OUT_DIR]
  full (15 s): JSON and table.txt to experiments/ns3/fig13bc/results/, PNGs to docs/img/
  --smoke (2 s): a tenth of the tensor; everything into OUT_DIR (default: a new temp dir)
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import common  # noqa: E402
import experiment  # noqa: E402  (common put experiments/lib on the path)

SERIES_MS = 0.05
WORKERS = 4


def scenario(elements, rounds):
    hosts = "\n".join(f"    - {{name: {h}, switch: tor}}" for h in ["w0", "w1", "w2", "w3", "ps"])
    jobs = "\n".join(
        f"  - {{name: job{k + 1}, workers: [w0, w1, w2, w3], ps: [ps], values_per_packet: 62, elements: {elements}, "
        f"rounds: {rounds[k]}, warmup_rounds: 1, compute_us: 200, start_us: {[0, 67, 133][k]}}}" for k in range(3))
    return ("seed: 13\nlink: {delay_us: 1, rate_gbps: 100, buffer_packets: 1000, ecn_threshold_packets: 200}\n"
            f"topology:\n  switches: [{{name: tor, atp: true, aggregators: 480}}]\n  hosts:\n{hosts}\n"
            f"jobs:\n{jobs}\n")


def share(sw, ps):
    """In-switch share of the workers' packets in bins with these counts (None: no packets)."""
    sw, ps = sum(sw), sum(ps)
    workers = sw + ps - sw / WORKERS
    return sw / workers if workers > 0 else None


def bins_between(series, interval, start, end):
    """The bin indices whose middle lies in [start, end)."""
    return [i for i in range(len(series)) if start <= (i + 0.5) * interval < end]


def run(atp, path, out, name):
    result = experiment.run([atp, "run", "--backend", "ns3", "--json", "--series", str(SERIES_MS), path],
                            f"atp run ({name})")
    experiment.write_text(os.path.join(out, name + ".json"), result.stdout)
    return json.loads(result.stdout)


def mean_window(s, bins):
    """A job's mean window (packets) over these bins of its series (None: no bins)."""
    return sum(s["window_packets"][i] for i in bins) / len(bins) if bins else None


def fmt(x):
    return "-" if x is None else f"{x:.2f}"


def plot(doc, title, path):
    plt = common.pyplot()
    interval = doc["series"]["interval_s"]
    fig, ax = plt.subplots(figsize=(8, 3.5))
    for s in doc["series"]["jobs"]:
        xs, ys = [], []
        for i, (sw, ps) in enumerate(zip(s["switch_aggregations"], s["ps_packets"])):
            v = share([sw], [ps])
            if v is not None:
                xs.append((i + 0.5) * interval * 1e3)
                ys.append(v)
        ax.plot(xs, ys, marker=".", linewidth=0.8, label=s["name"])
    ax.set_xlabel("simulated time (ms)")
    ax.set_ylabel("in-switch share of workers' packets")
    ax.set_ylim(0, 1.05)
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    r = common.Reproduction(HERE, __doc__)
    atp, out, images = r.atp, r.results, r.images
    elements = 50000 if r.smoke else 500000
    lines = [f"# ns-3, Fig. 13a's three jobs at the PTA (480 aggregators), {elements * 4} B each, defaults; "
             "in-switch share of each job's workers' packets"]
    docs = {}
    for name, rounds in (("13b", [9, 9, 9]), ("13c", [3, 9, 9])):
        path = os.path.join(r.gen, name + ".yaml")
        experiment.write_text(path, scenario(elements, rounds))
        docs[name] = run(atp, path, out, "fig" + name)
    b, c = docs["13b"], docs["13c"]
    interval = b["series"]["interval_s"]
    lines.append("13b   job   correct  collisions  first round  after it")
    for job, s in zip(b["jobs"], b["series"]["jobs"]):
        first_end = job["round_end_seconds"][0]
        early = bins_between(s["switch_aggregations"], interval, 0, first_end)
        late = bins_between(s["switch_aggregations"], interval, first_end, 1e9)
        lines.append(f"      {job['name']:<6}{str(job['correct']):>7}{job['collisions']:>12}"
                     f"{fmt(share([s['switch_aggregations'][i] for i in early], [s['ps_packets'][i] for i in early])):>13}"
                     f"{fmt(share([s['switch_aggregations'][i] for i in late], [s['ps_packets'][i] for i in late])):>10}")
    idle = c["jobs"][0]["round_end_seconds"][-1]
    lines.append(f"13c   job   correct  collisions  while job1 runs  once job1 is idle (from {idle * 1e3:.2f} ms)"
                 "  window while job1 runs  once idle (packets)")
    for job, s in list(zip(c["jobs"], c["series"]["jobs"]))[1:]:
        before = bins_between(s["switch_aggregations"], interval, 0, idle)
        after = bins_between(s["switch_aggregations"], interval, idle, job["round_end_seconds"][-1])
        lines.append(f"      {job['name']:<6}{str(job['correct']):>7}{job['collisions']:>12}"
                     f"{fmt(share([s['switch_aggregations'][i] for i in before], [s['ps_packets'][i] for i in before])):>17}"
                     f"{fmt(share([s['switch_aggregations'][i] for i in after], [s['ps_packets'][i] for i in after])):>19}"
                     f"{fmt(mean_window(s, before)):>24}{fmt(mean_window(s, after)):>11}")
    experiment.write_table(os.path.join(out, "table.txt"), lines)
    plot(b, "Fig. 13b: three jobs at the PTA", os.path.join(images, "ns3-fig13b.png"))
    plot(c, "Fig. 13c: job1 idle after 3 rounds", os.path.join(images, "ns3-fig13c.png"))
    if not all(j["correct"] for d in docs.values() for j in d["jobs"]):
        experiment.fail("a job was not correct")
    print(f"{experiment.script_name()}: JSON and table.txt in {out}, PNGs in {images}")


if __name__ == "__main__":
    main()
