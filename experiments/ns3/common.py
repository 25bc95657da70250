"""What the ns-3 reproductions (experiments/ns3/NAME/run.py and plot.py) share: the run of an
experiment's scenario variants on ns-3 (Reproduction, on experiments/lib/experiment.py), YAML and
JSON, the sweeps' pick of a peak, and the plots' pyplot.

They import it with the parent folder on sys.path:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import common  # noqa: E402
"""
import glob
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import experiment  # noqa: E402

# What a fragment of the paper's 62 values takes on an ns-3 link: 248 value bytes + the 40-byte
# ATP header + 42 bytes of Ethernet/IPv4/UDP (ns-3's 2-byte PPP header and a 12-byte gap, paced as
# an Ethernet frame; docs/ns3.md). ATP's algbw is at most the link x ATP_EFFICIENCY.
ATP_WIRE_BYTES = 248 + 40 + 42
ATP_EFFICIENCY = 248 / ATP_WIRE_BYTES
# A full TCP segment of ns-3's TCP: 1448 payload + TCP 20 + timestamps 12 + IPv4 20 + 14 (PPP + gap).
TCP_SEGMENT_WIRE_BYTES = 1448 + 20 + 12 + 20 + 14
TCP_EFFICIENCY = 1448 / TCP_SEGMENT_WIRE_BYTES


# What Reproduction.run says of a scenario whose job failed (exit 1); a run.py may say it differently.
INCOMPLETE = "a job did not complete correctly (see its JSON)"


class Reproduction:
    """One run of an ns-3 reproduction: `run.py [--smoke] [OUT_DIR]` parsed, the binary and the
    plots' Python modules checked (exit 2 if one is missing), and where everything goes: .results
    (JSON) and .images (PNG) are OUT_DIR if given; else a new temp dir for --smoke; else the
    folder's results/ and docs/img/. .gen: a temp folder for the generated scenarios, removed at exit."""

    def __init__(self, here, doc):
        args = experiment.arguments(doc, here)
        self.smoke = args.smoke
        self.atp = experiment.atp_binary()
        experiment.require_modules(["matplotlib", "yaml"], "python3-matplotlib python3-yaml")
        self.results = args.out
        self.images = args.out if args.out_given or args.smoke else os.path.join(experiment.REPO, "docs", "img")
        os.makedirs(self.images, exist_ok=True)
        self._gen = experiment.temp_dir()
        self.gen = self._gen.name

    def write(self, docs, stage="", **dump_options):
        """Writes {name: scenario} to GEN/stage/name.yaml; returns the paths, sorted by name."""
        folder = os.path.join(self.gen, stage)
        for name, doc in docs.items():
            write_yaml(doc, folder, name, **dump_options)
        return sorted(os.path.join(folder, name + ".yaml") for name in docs)

    def run(self, scenario, *options, incomplete=INCOMPLETE):
        """Runs one scenario on ns-3 (options go to atp run): RESULTS/<its name>.json. A job that
        fails (exit 1) is recorded, not fatal: its JSON says why. Anything else (a bad file, a
        crash) stops the experiment."""
        base = os.path.basename(scenario)[: -len(".yaml")]
        done = experiment.run([self.atp, "run", "--backend", "ns3", "--json", *options, scenario],
                              f"atp run on {base}.yaml", ok=(0, 1), stdout=os.path.join(self.results, base + ".json"))
        if done.returncode == 1:
            print(f"{experiment.script_name()}: {base}.yaml: {incomplete}", file=sys.stderr)

    def run_all(self, docs, *options, stage="", incomplete=INCOMPLETE, **dump_options):
        """write(docs), then run() each, in the order of their names."""
        for path in self.write(docs, stage, **dump_options):
            self.run(path, *options, incomplete=incomplete)

    def plot_and_report(self, plot_main):
        """Plots RESULTS into IMAGES (the experiment's plot.main) and says where both are."""
        plot_main([self.results, self.images])
        print(f"{experiment.script_name()}: results in {self.results}, plots in {self.images}")


def load_yaml(path):
    import yaml  # Debian's python3-yaml: imported here, so Reproduction can say it is missing

    with open(path) as f:
        return yaml.safe_load(f)


def write_yaml(doc, out, name, **dump_options):
    """Writes doc to OUT/name.yaml (OUT created if needed), its keys in their order."""
    import yaml

    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, name + ".yaml"), "w") as f:
        yaml.safe_dump(doc, f, sort_keys=False, **dump_options)


def load_json(path):
    with open(path) as f:
        return json.load(f)


def load_result(results, name):
    """RESULTS/name.json, or None if the run is not there."""
    path = os.path.join(results, name + ".json")
    if not os.path.exists(path):
        return None
    return load_json(path)


def sweep_points(results, prefix, value):
    """[(N, value(doc))] sorted by N for every RESULTS/<prefix>N.json; exits if there is none (a
    run.py whose sweep has not run)."""
    points = []
    for path in glob.glob(os.path.join(results, prefix + "*.json")):
        points.append((int(os.path.basename(path)[len(prefix) : -len(".json")]), value(load_json(path))))
    if not points:
        sys.exit(f"{experiment.script_name()}: no {prefix}*.json in {results}; run the sweep first")
    return sorted(points)


def smallest_at_peak(points, tolerance):
    """(best y, the smallest x whose y is within tolerance of it) of [(x, y)], sorted by x."""
    best = max(y for _, y in points)
    return best, next(x for x, y in points if y >= (1 - tolerance) * best)


def iterations_per_second(jobs):
    """Mean over the jobs of timed iterations per simulated second (the paper's training throughput)."""
    # Timed rounds over timed seconds (0 for a job that never finished a timed round).
    rates = [(j["completed_rounds"] - j["warmup_rounds"]) / j["seconds"] if j["seconds"] else 0.0 for j in jobs]
    return sum(rates) / len(rates)


def plot_dirs(argv, usage):
    """The arguments `RESULTS_DIR IMAGE_DIR` of a plot.py, or exits with usage."""
    if len(argv) != 2:
        sys.exit(usage)
    return argv[0], argv[1]


def pyplot():
    """matplotlib.pyplot drawing to files only (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
