"""Runs a command, keeps its stdout, and records its wall-clock and CPU time.

Usage: timed.py STDOUT_FILE TIME_FILE COMMAND [ARG...]
  writes the command's stdout to STDOUT_FILE and {"wall_seconds", "cpu_seconds"} (CPU: user +
  system of the command) as JSON to TIME_FILE; exits with the command's exit code.
"""
import json
import resource
import subprocess
import sys
import time


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    out_path, time_path, command = argv[0], argv[1], argv[2:]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    with open(out_path, "w") as out:
        rc = subprocess.call(command, stdout=out)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    with open(time_path, "w") as f:
        json.dump({"wall_seconds": wall, "cpu_seconds": cpu, "exit_code": rc}, f)
        f.write("\n")
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
