# Shared by the ns-3 reproductions' run.sh scripts (experiments/ns3/NAME/run.sh), which source it
# with `. "$(dirname "$0")/../lib.sh"` under `set -eu` and then call `setup NAME "$@"`.
# Usage of every run.sh: run.sh [--smoke] [OUT_DIR]

# setup NAME [--smoke] [OUT_DIR]: parses the arguments, moves to the repository root, checks the
# binary and the Python modules (exit 2 if one is missing) and sets SMOKE (--smoke or empty),
# ATP, HERE (experiments/ns3/NAME), RESULTS (JSON), IMAGES (PNG) and GEN (a temp folder for the
# generated scenarios, removed on exit).
setup() {
  HERE=experiments/ns3/$1
  shift
  SMOKE=
  if [ "${1:-}" = "--smoke" ]; then SMOKE=--smoke; shift; fi
  OUT=${1:-}
  # OUT_DIR is relative to where run.sh was started: made absolute before the cd below.
  if [ -n "$OUT" ]; then
    mkdir -p "$OUT"
    OUT=$(cd "$OUT" && pwd)
  fi
  cd "$(dirname "$0")/../../.."
  ATP=${ATP:-./build/atp}
  [ -x "$ATP" ] || { echo "run.sh: $ATP is not built; build the atp target (or set ATP=path/to/atp)" >&2; exit 2; }
  /usr/bin/python3 -c "import matplotlib, yaml" 2>/dev/null ||
    { echo "run.sh: the plots need Debian's python3-matplotlib and python3-yaml (apt-get install python3-matplotlib python3-yaml)" >&2; exit 2; }
  if [ -n "$OUT" ]; then
    RESULTS=$OUT IMAGES=$OUT
  elif [ -n "$SMOKE" ]; then
    RESULTS=$(mktemp -d) IMAGES=$RESULTS
  else
    RESULTS=$HERE/results IMAGES=docs/img
  fi
  mkdir -p "$RESULTS" "$IMAGES"
  GEN=$(mktemp -d)
  trap 'rm -rf "$GEN"' EXIT
}

# What run_one says of a scenario whose job failed (exit 1); a run.sh may say it differently.
INCOMPLETE="a job did not complete correctly (see its JSON)"

# Runs one scenario on ns-3 (further arguments go to atp run): its JSON next to the others. A job
# that fails (exit 1) is recorded, not fatal: its JSON says why. Anything else (a bad file, a
# crash) stops the experiment.
run_one() {
  rc=0
  scenario=$1
  shift
  "$ATP" run --backend ns3 --json "$@" "$scenario" >"$RESULTS/$(basename "$scenario" .yaml).json" || rc=$?
  case $rc in
    0) ;;
    1) echo "run.sh: $(basename "$scenario"): $INCOMPLETE" >&2 ;;
    *) echo "run.sh: $ATP failed on $scenario (exit $rc)" >&2; exit 1 ;;
  esac
}

# variants [ARG...]: the experiment's variants.py with these arguments.
variants() {
  /usr/bin/python3 "$HERE/variants.py" "$@"
}

# Plots RESULTS into IMAGES (the experiment's plot.py) and says where both are.
plot_and_report() {
  /usr/bin/python3 "$HERE/plot.py" "$RESULTS" "$IMAGES"
  echo "run.sh: results in $RESULTS, plots in $IMAGES"
}
