#!/bin/sh
# Behaviour kept across refactors: every example (and tests/golden/*.yaml) run on the simulated
# backends gives the same JSON, byte for byte after the wall-clock fields are removed, as the
# files in tests/golden/ (same seed, same trace). A change that alters a trace on purpose
# regenerates them with --update and says why in its commit.
# --without-ns3: a build without the ns3 backend (ATP_WITH_NS3=OFF) checks inproc only.
# Usage: golden_test.sh PATH-TO-ATP SOURCE-DIR [--update] [--without-ns3]
set -u

ATP=${1:?usage: golden_test.sh PATH-TO-ATP SOURCE-DIR [--update] [--without-ns3]}
SRC=${2:?usage: golden_test.sh PATH-TO-ATP SOURCE-DIR [--update] [--without-ns3]}
shift 2
UPDATE= NS3=yes
for flag in "$@"; do
  case $flag in
    --update) UPDATE=--update ;;
    --without-ns3) NS3= ;;
    *) echo "golden_test.sh: unknown flag $flag" >&2 && exit 2 ;;
  esac
done
TEST_NAME=golden_test
. "$(dirname "$0")/../support/shell_test_lib.sh"
GOLDEN=$SRC/tests/golden

# The JSON without what depends on the machine (ns3's wall-clock time and the rate derived from it).
stable_json() {
  /usr/bin/python3 -c '
import json, sys
def strip(v):
    if isinstance(v, dict):
        return {k: strip(x) for k, x in v.items() if k not in ("wall_seconds", "packets_per_wall_second")}
    if isinstance(v, list):
        return [strip(x) for x in v]
    return v
print(json.dumps(strip(json.load(sys.stdin)), indent=1, sort_keys=True))'
}

# check NAME FILE BACKEND [FLAGS...]: runs FILE, compares exit code and JSON with $GOLDEN/NAME.json.
check() {
  name=$1 file=$2 backend=$3
  shift 3
  [ "$backend" = ns3 ] && [ -z "$NS3" ] && return
  timeout 300 "$ATP" run --backend "$backend" --json "$@" "$file" >"$TMP/raw" 2>"$TMP/err"
  code=$?
  { echo "exit code $code"; stable_json <"$TMP/raw"; } >"$TMP/got" || {
    fail "$name: no JSON (exit code $code, stderr: $(head -c 300 "$TMP/err"))"
    return
  }
  if [ "$UPDATE" = --update ]; then
    cp "$TMP/got" "$GOLDEN/$name.json"
  elif ! cmp -s "$TMP/got" "$GOLDEN/$name.json"; then
    fail "$name: differs from tests/golden/$name.json:
$(diff "$GOLDEN/$name.json" "$TMP/got" | head -20)"
  fi
}

for file in "$SRC"/examples/*.yaml "$GOLDEN"/algorithms.yaml; do
  stem=$(basename "$file" .yaml)
  check "$stem.inproc" "$file" inproc
  check "$stem.ns3" "$file" ns3
done
check ns3-ring-flow.ns3 "$GOLDEN/ns3-ring-flow.yaml" ns3
check quickstart.inproc.series "$SRC/examples/quickstart.yaml" inproc --series 0.05
check quickstart.ns3.series "$SRC/examples/quickstart.yaml" ns3 --series 0.05
finish
