"""What the netns experiments' run.py scripts share: the `atp` binary, a run of one scenario on the
testbed, a job's rate over a stretch of its rounds, and the table at the end."""
import json
import os
import subprocess
import sys


def atp_binary():
    """$ATP, else the build tree's atp; exits with one sentence if it is not built."""
    atp = os.environ.get("ATP", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "atp"))
    if not os.access(atp, os.X_OK):
        sys.exit(f"run.py: {atp} is not built; build the atp target (or set ATP=path/to/atp)")
    return atp


def run_netns(atp, scenario_path, json_path, what):
    """`atp run --backend netns --json` on scenario_path; its JSON goes to json_path and is returned.
    Exits naming `what` if the run gave no JSON (a job that fails still gives one)."""
    run = subprocess.run([atp, "run", "--backend", "netns", "--json", scenario_path], capture_output=True, text=True)
    with open(json_path, "w") as f:
        f.write(run.stdout)
    if run.returncode != 0 and not run.stdout:
        sys.exit(f"run.py: atp run failed ({what}): {run.stderr.strip()[-500:]}")
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
    with open(os.path.join(out, "table.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    sys.exit(1 if failed else 0)
