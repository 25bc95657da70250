#!/usr/bin/env python3
"""run_suite.py --compare, as the device runs use it (each backend run on its own): from a
side-by-side run's two log folders it must give that run's own comparison, test for test; and
an atp run cut short must not pass: a test that gloo passes and atp never ran fails the comparison.

    compare_test.py LOG_DIR RUN_JSON    (run_suite.py's --log-dir and --json of that run)
"""
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_suite  # noqa: E402


def main():
    logdir, run_json = sys.argv[1:]
    with open(run_json) as f:
        run = json.load(f)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "compared.json")
        run_suite.main(["--compare", os.path.join(logdir, "gloo"), os.path.join(logdir, "atp"),
                        "--world-size", str(run["world_size"]), "--json", out])
        with open(out) as f:
            compared = json.load(f)
        # The same atp run, killed during its last test that gloo passes: the log ends with that
        # test's start.
        with open(os.path.join(logdir, "atp", "results.jsonl")) as f:
            lines = f.readlines()
        events = [json.loads(line) for line in lines]
        gloo_passes = {name for name, _ in run["comparison"]["gloo_passes"]}
        last = [ev["test"] for ev in events if ev["event"] == "result" and ev["test"] in gloo_passes][-1]
        killed = max(n for n, ev in enumerate(events) if ev["event"] == "start" and ev["test"] == last)
        short = os.path.join(tmp, "atp")
        os.makedirs(short)
        shutil.copy(os.path.join(logdir, "atp", "list.jsonl"), short)
        with open(os.path.join(short, "results.jsonl"), "w") as g:
            g.writelines(lines[:killed + 1])
        status = run_suite.main(["--compare", os.path.join(logdir, "gloo"), short,
                                 "--world-size", str(run["world_size"]), "--json", out])
        with open(out) as f:
            not_run = json.load(f)["comparison"]["atp_not_run"]
        if status != 1 or [name for name, _ in not_run] != [last]:
            sys.exit("compare_test: an atp run without %s compared with status %s, not run: %s"
                     % (last, status, not_run))
    if not run["comparison"]["gloo_passes"]:
        sys.exit("compare_test: the run compared nothing (no test passed on gloo)")
    for key in run["comparison"]:
        if run["comparison"][key] != compared["comparison"][key]:
            sys.exit("compare_test: %s differs: the run says %s, --compare says %s"
                     % (key, run["comparison"][key], compared["comparison"][key]))
    if compared["results"] != run["results"]:
        sys.exit("compare_test: the results --compare read differ from the run's")
    print("compare_test: --compare gives the run's comparison (%d tests gloo passes)"
          % len(run["comparison"]["gloo_passes"]))


if __name__ == "__main__":
    main()
