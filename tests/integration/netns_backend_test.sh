#!/bin/sh
# `atp run --backend netns` as a command: JSON, and nothing left behind (namespace, veth,
# process) after a normal run, after Ctrl-C, and, via the next run, after SIGKILL. What the
# runs compute is tested in netns_integration_test.cc. Exits 77 (skipped) without root.
# Usage: netns_backend_test.sh PATH-TO-ATP SOURCE-DIR
set -u

ATP=${1:?usage: netns_backend_test.sh PATH-TO-ATP SOURCE-DIR}
SRC=${2:?usage: netns_backend_test.sh PATH-TO-ATP SOURCE-DIR}
TEST_NAME=netns_backend_test
if [ "$(id -u)" -ne 0 ]; then
  echo "$TEST_NAME: skipped: network namespaces need root"
  exit 77
fi
# Root is not always enough (a container without CAP_SYS_ADMIN): try one namespace.
if ! ip netns add "atp$$-probe" 2>/dev/null; then
  echo "$TEST_NAME: skipped: cannot create a network namespace here"
  exit 77
fi
ip netns del "atp$$-probe"
. "$(dirname "$0")/../support/shell_test_lib.sh"

ATP_ABS=$(cd "$(dirname "$ATP")" && pwd)/$(basename "$ATP")
processes_left() { pgrep -f "$ATP_ABS (switch|ps|worker|flow) " || true; }
namespaces_of() { ip netns list | grep "^atp$1-" || true; }
links_before=$(ip -o link show | cut -d: -f2 | sort)

# A normal run: exit 0, JSON naming the backend, nothing left.
timeout 120 "$ATP" run --backend netns --json "$SRC/examples/netns-two-racks.yaml" >"$TMP/out" 2>"$TMP/err" &
parent=$!
wait $parent
code=$?
[ "$code" -eq 0 ] || fail "netns-two-racks: exit code $code, expected 0 (stderr: $(head -c 300 "$TMP/err"))"
grep -q '"backend": "netns"' "$TMP/out" || fail "netns-two-racks: JSON does not name the netns backend"
[ -z "$(namespaces_of $parent)" ] || fail "netns-two-racks: namespaces left: $(namespaces_of $parent)"
[ -z "$(processes_left)" ] || fail "netns-two-racks: processes left: $(processes_left)"

# A long run, interrupted once its workers run: exit 1 saying so, nothing left.
sed 's/elements: 200000, rounds: 3/elements: 2000000, rounds: 1000/' "$SRC/examples/netns-two-racks.yaml" >"$TMP/long.yaml"
"$ATP" run --backend netns "$TMP/long.yaml" >"$TMP/out" 2>"$TMP/err" &
parent=$!
wait_for_process "$ATP_ABS worker " 20
kill -INT $parent
wait $parent
code=$?
[ "$code" -eq 1 ] || fail "SIGINT: exit code $code, expected 1"
grep -q "interrupted" "$TMP/err" || fail "SIGINT: stderr does not say it was interrupted: $(cat "$TMP/err")"
[ -z "$(namespaces_of $parent)" ] || fail "SIGINT: namespaces left: $(namespaces_of $parent)"
[ -z "$(processes_left)" ] || fail "SIGINT: processes left: $(processes_left)"

# SIGKILL: the children die with the parent (PR_SET_PDEATHSIG); its namespaces outlive it and
# the next run removes them.
"$ATP" run --backend netns "$TMP/long.yaml" >"$TMP/out" 2>"$TMP/err" &
parent=$!
wait_for_process "$ATP_ABS worker " 20
kill -KILL $parent
wait $parent 2>/dev/null
sleep 0.5
[ -z "$(processes_left)" ] || fail "SIGKILL: processes left: $(processes_left)"
[ -n "$(namespaces_of $parent)" ] || fail "SIGKILL: expected the killed run's namespaces to remain until the next run"
ls -d "${TMPDIR:-/tmp}"/atp-netns-$parent-* >/dev/null 2>&1 || fail "SIGKILL: expected the killed run's config directory to remain until the next run"
timeout 120 "$ATP" run --backend netns "$SRC/examples/netns-two-racks.yaml" >"$TMP/out" 2>"$TMP/err"
[ -z "$(namespaces_of $parent)" ] || fail "SIGKILL: the next run did not remove $(namespaces_of $parent)"
! ls -d "${TMPDIR:-/tmp}"/atp-netns-$parent-* >/dev/null 2>&1 || fail "SIGKILL: the next run did not remove "${TMPDIR:-/tmp}"/atp-netns-$parent-*"

links_after=$(ip -o link show | cut -d: -f2 | sort)
[ "$links_before" = "$links_after" ] || fail "interfaces of the root namespace changed: before '$links_before', after '$links_after'"

finish
