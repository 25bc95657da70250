"""What the netns experiments' run.py scripts share beyond experiments/lib/experiment.py: a run of
one scenario on the testbed, a job's rate over a stretch of its rounds, and the table at the end."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import experiment  # noqa: E402


def run_netns(atp, scenario_path, json_path, what):
    """`atp run --backend netns --json` on scenario_path; its JSON goes to json_path and is returned.
    Exits naming `what` if the run gave no JSON (a job that fails still gives one)."""
    run = experiment.run([atp, "run", "--backend", "netns", "--json", scenario_path], what, ok=range(256))
    experiment.write_text(json_path, run.stdout)
    if run.returncode != 0 and not run.stdout:
        experiment.fail(f"atp run failed ({what}): {run.stderr.strip()[-500:]}")
    return json.loads(run.stdout)


def rounds(job, start, lo, hi):
    """The job's rounds (start, end) that start at lo or later and end by hi; rounds run back to
    back from `start`, each starting when the one before ended."""
    ends = job["round_end_seconds"]
    return [(a, b) for a, b in zip([start] + ends, ends) if a >= lo and b <= hi]


def rate_mbps(job, spans):
    """The tensor bytes of the consecutive rounds `spans` over the time they took, in Mbit/s."""
    return len(spans) * job["tensor_bytes"] * 8 / (spans[-1][1] - spans[0][0]) / 1e6


def finish(out, lines, failed):
    """Writes the table to OUT/table.txt, prints it, and exits 1 if any result was wrong."""
    experiment.write_table(os.path.join(out, "table.txt"), lines)
    sys.exit(1 if failed else 0)
