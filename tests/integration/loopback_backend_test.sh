#!/bin/sh
# `atp run --backend loopback` as a command: exit codes, JSON, and no process left behind, also
# after Ctrl-C. What the runs compute is tested in loopback_integration_test.cc. Usage: loopback_backend_test.sh PATH-TO-ATP SOURCE-DIR
set -u

ATP=${1:?usage: loopback_backend_test.sh PATH-TO-ATP SOURCE-DIR}
SRC=${2:?usage: loopback_backend_test.sh PATH-TO-ATP SOURCE-DIR}
TEST_NAME=loopback_backend_test
. "$(dirname "$0")/../support/shell_test_lib.sh"

# The children run from this binary's absolute path with these subcommands.
ATP_ABS=$(cd "$(dirname "$ATP")" && pwd)/$(basename "$ATP")
leftovers() {
  pgrep -f "$ATP_ABS (switch|ps|worker) " || true
}

# run_example FILE EXIT-CODE: runs it (bounded by `timeout`), checks the exit code and cleanup.
run_example() {
  file=$1
  want=$2
  timeout 120 "$ATP" run --backend loopback --json "$SRC/examples/$file" >"$TMP/out" 2>"$TMP/err"
  got=$?
  [ "$got" -eq "$want" ] || fail "$file: exit code $got, expected $want (stderr: $(head -c 300 "$TMP/err"))"
  grep -q '"backend": "loopback"' "$TMP/out" || fail "$file: JSON does not name the loopback backend"
  grep -q '"algbw_gbps"' "$TMP/out" || fail "$file: JSON has no algbw_gbps"
  left=$(leftovers)
  [ -z "$left" ] || fail "$file: processes left behind: $left"
}

# A worker process that stops before round 1: its job fails, the other job completes.
run_example crash.yaml 1
grep -q '"correct": false' "$TMP/out" || fail "crash: no \"correct\": false"
grep -q 'crashed' "$TMP/out" || fail "crash: the error does not say the host crashed"

# Ctrl-C (SIGINT to the parent alone) stops every child and exits 1 with one line: for
# `atp run` and for `atp demo`, which runs the same way.
sed 's/elements: 100000, rounds: 2/elements: 2000000, rounds: 200/' "$SRC/examples/quickstart.yaml" >"$TMP/long.yaml"
interrupt() {
  what=$1
  shift
  "$@" >"$TMP/out" 2>"$TMP/err" &
  parent=$!
  # Wait (up to 10 s) until the workers run, then interrupt.
  wait_for_process "$ATP_ABS worker " 10
  kill -INT $parent
  wait $parent
  code=$?
  [ "$code" -eq 1 ] || fail "$what, SIGINT: exit code $code, expected 1"
  grep -q "interrupted" "$TMP/err" || fail "$what, SIGINT: stderr does not say it was interrupted: $(cat "$TMP/err")"
  left=$(leftovers)
  [ -z "$left" ] || fail "$what, SIGINT: processes left behind: $left"
}
# udp: the backend's name before, still accepted
interrupt "atp run" "$ATP" run --backend udp "$TMP/long.yaml"
interrupt "atp demo" "$ATP" demo --rounds 10000

finish
