"""What every reproduction's run.py (experiments/<group>/<name>/run.py) shares: its arguments
([--smoke] [its own flags] [OUT_DIR]), the atp binary, commands run with a clear error, tables,
and the parts of `atp topology` and `atp bom --incremental` that several scripts read.

A run.py imports it with the experiments/lib folder on sys.path:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))
    import experiment  # noqa: E402
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

# The Python of every run.py (#!/usr/bin/python3): Debian's, with its python3-* packages.
PYTHON = "/usr/bin/python3"
# The repository's root (experiments/lib/ is two folders below it).
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Rina's workloads (its Figs. 10 and 12; PLink's end-to-end runs reuse them): each model's
# parameter count (torchvision's models; BERT-base uncased).
MODELS = [("resnet50", 25557032), ("vgg16", 138357544), ("inceptionv3", 27161264), ("resnet101", 44549160),
          ("bert-base", 109482240)]
# A host's line in `atp topology`'s YAML, and a step of `atp bom --incremental`'s table.
HOST = re.compile(r"^    - \{name: ([^,]+), switch: ")
REPLACED = re.compile(r"^\+ (\S+) ")


def script_name():
    """The running run.py as the user would type it (experiments/.../run.py): the prefix of errors."""
    path = os.path.abspath(sys.argv[0])
    return os.path.relpath(path, REPO) if path.startswith(REPO + os.sep) else os.path.basename(path)


def fail(message, code=1):
    """Exits with `code`, saying `message` as one sentence prefixed by the script's name."""
    print(f"{script_name()}: {message}", file=sys.stderr)
    sys.exit(code)


def arguments(doc, here, add=None, smoke=True):
    """Parses `run.py [--smoke] [own flags] [OUT_DIR]` (usage text: doc; `add(parser)` adds the
    script's own flags; smoke=False: a script without --smoke). Returns the namespace with
    .smoke, .out (absolute, created) and .out_given (whether OUT_DIR was on the command line).
    OUT_DIR defaults to `here`/results (the committed runs) for a full run, and to a new temporary
    folder for --smoke, so a smoke run never overwrites the committed results."""
    parser = argparse.ArgumentParser(prog=script_name(), description=doc,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    if smoke:
        parser.add_argument("--smoke", action="store_true", help="a tiny run of the same steps")
    if add:
        add(parser)
    parser.add_argument("out", nargs="?", metavar="OUT_DIR",
                        help="where the results go (default: this folder's results/"
                        + ("; --smoke: a new temp dir)" if smoke else ")"))
    args = parser.parse_args()
    if not smoke:
        args.smoke = False
    args.out_given = args.out is not None
    if args.out is None:
        args.out = tempfile.mkdtemp() if args.smoke else os.path.join(here, "results")
    args.out = os.path.abspath(args.out)
    os.makedirs(args.out, exist_ok=True)
    return args


def atp_binary():
    """$ATP (absolute), else the build tree's atp; exits 2 with one sentence if it is not built."""
    atp = os.path.abspath(os.environ.get("ATP", os.path.join(REPO, "build", "atp")))
    if not os.access(atp, os.X_OK):
        fail(f"{atp} is not built; build the atp target (or set ATP=path/to/atp)", 2)
    return atp


def require_modules(modules, packages):
    """Exits 2, naming the Debian packages to install, if a Python module in `modules` is missing."""
    for module in modules:
        try:
            __import__(module)
        except ImportError:
            fail(f"it needs Debian's {packages} (apt-get install {packages})", 2)


def require_root(why="network namespaces"):
    """Exits 1 with one sentence unless running as root."""
    if os.geteuid() != 0:
        fail(f"needs root ({why})")


def run(command, what, ok=(0,), stdout=None, capture=True, **kwargs):
    """Runs `command` (a list); exits naming `what` and the exit status if it is not in `ok`.
    stdout: a path to write its standard output to (its stderr then goes to ours, as a shell
    script's would); else with capture both are kept (text) in the result and the error quotes
    the end of its stderr; capture=False: both go to ours. Returns the subprocess.CompletedProcess."""
    command = [str(c) for c in command]
    if stdout is not None:
        with open(stdout, "w") as f:
            done = subprocess.run(command, stdout=f, text=True, **kwargs)
    else:
        done = subprocess.run(command, capture_output=capture, text=True, **kwargs)
    if done.returncode not in ok:
        tail = ((done.stderr or "").strip() or (done.stdout or "").strip())[-500:]
        fail(f"{what} failed (exit {done.returncode}: {' '.join(command)})" + (f": {tail}" if tail else ""))
    return done


def run_tee(command, what, path, ok=(0,)):
    """Runs `command`, its standard output both printed as it comes and written to path (a shell
    script's `| tee path`); exits as run() does. Returns the exit status."""
    with open(path, "w") as f, subprocess.Popen([str(c) for c in command], stdout=subprocess.PIPE, text=True) as p:
        for line in p.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            f.write(line)
    if p.returncode not in ok:
        fail(f"{what} failed (exit {p.returncode}; its output is in {path})")
    return p.returncode


def topology(atp, *args):
    """`atp topology ARGS`: (its YAML, the hosts' names in order)."""
    text = run([atp, "topology", *args], "atp topology " + " ".join(args)).stdout
    hosts = [m.group(1) for m in map(HOST.match, text.splitlines()) if m]
    return text, hosts


def replacement_order(bom_incremental):
    """The switches in the order `atp bom --incremental` replaces them (its "+ SWITCH" rows)."""
    return [m.group(1) for m in map(REPLACED.match, bom_incremental.splitlines()) if m]


def write_text(path, text):
    with open(path, "w") as f:
        f.write(text)


def write_table(path, lines, echo=True):
    """Writes the lines to path (one each, a newline after the last) and prints them if echo."""
    write_text(path, "\n".join(lines) + "\n")
    if echo:
        print("\n".join(lines))


def temp_dir():
    """A temporary folder for generated scenarios, removed on leaving the `with` block."""
    return tempfile.TemporaryDirectory()
