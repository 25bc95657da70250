#!/bin/sh
# Tests of the `atp` command line: help, --version, mistyped commands and flags, running an example
# as JSON, exit codes and one-line errors for bad scenario files and unknown backends.
# Usage: cli_test.sh PATH-TO-ATP SOURCE-DIR
set -u

ATP=${1:?usage: cli_test.sh PATH-TO-ATP SOURCE-DIR}
SRC=${2:?usage: cli_test.sh PATH-TO-ATP SOURCE-DIR}
TEST_NAME=cli_test
. "$(dirname "$0")/../support/shell_test_lib.sh"

# expect_exit CODE NAME COMMAND...: runs COMMAND with stdout/stderr in $TMP/out, $TMP/err.
expect_exit() {
  want=$1
  name=$2
  shift 2
  "$@" >"$TMP/out" 2>"$TMP/err"
  got=$?
  if [ "$got" -ne "$want" ]; then
    fail "$name: exit code $got, expected $want (stderr: $(head -c 300 "$TMP/err"))"
    return 1
  fi
  return 0
}

# --help works, at the top and for run.
if expect_exit 0 "atp --help" "$ATP" --help; then
  grep -q "run" "$TMP/out" || fail "atp --help does not mention the run subcommand"
  grep -q "demo" "$TMP/out" || fail "atp --help does not mention the demo subcommand"
fi
expect_exit 0 "atp run --help" "$ATP" run --help && { grep -q -- "--json" "$TMP/out" || fail "atp run --help lacks --json"; }
expect_exit 0 "atp bench allreduce --help" "$ATP" bench allreduce --help
expect_exit 0 "atp switch stats --help" "$ATP" switch stats --help

# No subcommand, unknown option: bad usage.
expect_exit 2 "atp (no subcommand)" "$ATP"
expect_exit 2 "atp run --bogus" "$ATP" run --bogus "$SRC/examples/quickstart.yaml"

# --version: one line, the version of project() in CMakeLists.txt.
version=$(sed -n 's/^project(atp VERSION \([0-9.]*\).*/\1/p' "$SRC/CMakeLists.txt")
if expect_exit 0 "atp --version" "$ATP" --version; then
  [ "$(cat "$TMP/out")" = "atp $version" ] || fail "atp --version: expected 'atp $version', got: $(cat "$TMP/out")"
fi

# Typos, at any level: exit 2, one line on stderr naming the token and the closest names.
# expect_usage_error LINE ARGS...: `atp ARGS` exits 2 with LINE, alone, on stderr.
expect_usage_error() {
  line=$1
  shift
  if expect_exit 2 "atp $*" "$ATP" "$@"; then
    [ "$(cat "$TMP/err")" = "$line" ] || fail "atp $*: expected \"$line\" on stderr, got: $(cat "$TMP/err")"
  fi
}
expect_usage_error "atp: 'runn' is not an atp command; did you mean 'run'?" runn "$SRC/examples/quickstart.yaml"
expect_usage_error "atp: 'swtich' is not an atp command; did you mean 'switch'?" swtich stats
expect_usage_error "atp bench: 'allredcue' is not an atp bench command; did you mean 'allreduce'?" bench allredcue
expect_usage_error "atp run: unknown flag '--jsn'; did you mean '--json'?" run --jsn "$SRC/examples/quickstart.yaml"
expect_usage_error "atp bench allreduce: unknown flag '--algoritms'; did you mean '--algorithms'?" \
  bench allreduce --algoritms=atp
# Nothing close: the commands (or flags) of that level, not the internal ones.
if expect_exit 2 "atp frobnicate" "$ATP" frobnicate; then
  grep -q "^atp: 'frobnicate' is not an atp command; the commands are run, .*bench" "$TMP/err" ||
    fail "atp frobnicate: does not list the commands: $(cat "$TMP/err")"
  grep -q "worker" "$TMP/err" && fail "atp frobnicate: lists the internal worker command: $(cat "$TMP/err")"
  [ "$(wc -l <"$TMP/err")" -eq 1 ] || fail "atp frobnicate: expected one line on stderr"
fi
if expect_exit 2 "atp run --seeed" "$ATP" run --seeed 1 "$SRC/examples/quickstart.yaml"; then
  grep -q -E "^atp run: unknown flag '--seeed'; (did you mean '--seed'\?|the flags are .*--json.*)$" "$TMP/err" ||
    fail "atp run --seeed: $(cat "$TMP/err")"
fi
if expect_exit 2 "atp bench (no subcommand)" "$ATP" bench; then
  grep -q "^atp bench: A subcommand is required; the commands are switch, allreduce$" "$TMP/err" ||
    fail "atp bench: does not list its commands: $(cat "$TMP/err")"
fi

# The quickstart example runs, as JSON, correctly; the table form too.
if expect_exit 0 "atp run --json quickstart" "$ATP" run --json "$SRC/examples/quickstart.yaml"; then
  grep -q '"correct": true' "$TMP/out" || fail "quickstart JSON has no \"correct\": true"
  grep -q '"correct": false' "$TMP/out" && fail "quickstart JSON has a \"correct\": false"
  grep -q '"leaked_aggregators": 0' "$TMP/out" || fail "quickstart JSON has no \"leaked_aggregators\": 0"
  head -c 1 "$TMP/out" | grep -q '{' || fail "quickstart JSON does not start with {"
fi
if expect_exit 0 "atp run --backend inproc quickstart" "$ATP" run --backend inproc "$SRC/examples/quickstart.yaml"; then
  grep -q "backend inproc" "$TMP/out" || fail "the summary does not name the backend"
fi

# A job that fails (a crashed worker) exits 1 and still reports.
if expect_exit 1 "atp run crash.yaml" "$ATP" run --json "$SRC/examples/crash.yaml"; then
  grep -q '"correct": false' "$TMP/out" || fail "crash JSON has no \"correct\": false"
fi

# Bad scenario files: exit 2, one line on stderr naming the key, nothing on stdout.
check_bad_file() {
  name=$1
  key=$2
  if expect_exit 2 "$name" "$ATP" run "$TMP/bad.yaml"; then
    lines=$(wc -l <"$TMP/err")
    [ "$lines" -eq 1 ] || fail "$name: expected one line on stderr, got $lines: $(cat "$TMP/err")"
    grep -q -F "$key" "$TMP/err" || fail "$name: stderr does not name '$key': $(cat "$TMP/err")"
    [ -s "$TMP/out" ] && fail "$name: printed something on stdout"
  fi
}
sed 's/elements: 100000/elemnts: 100000/' "$SRC/examples/quickstart.yaml" >"$TMP/bad.yaml"
check_bad_file "unknown key" "jobs[0].elemnts: unknown key"
sed 's/workers: \[w0, w1\]/workers: [w0, w9]/' "$SRC/examples/quickstart.yaml" >"$TMP/bad.yaml"
check_bad_file "unknown host" "jobs[0].workers[1]: unknown host 'w9'"
sed 's/aggregators: 4096/aggregators: -3/' "$SRC/examples/quickstart.yaml" >"$TMP/bad.yaml"
check_bad_file "negative aggregators" "topology.switches[0].aggregators: must be a positive integer, got -3"
printf 'seed: [1\n' >"$TMP/bad.yaml"
check_bad_file "not YAML" "line"
sed -e 's/values_per_packet: 62/values_per_packet: 4096, max_window: 1048576/' \
  "$SRC/examples/quickstart.yaml" >"$TMP/bad.yaml"
check_bad_file "plan error (a PS above its memory budget)" "jobs[0]:"
expect_exit 2 "missing file" "$ATP" run "$TMP/does-not-exist.yaml"

# Backends that do not exist: exit 2 with one clear line.
for backend in ns2 carrier-pigeon; do
  if expect_exit 2 "backend $backend" "$ATP" run --backend "$backend" "$SRC/examples/quickstart.yaml"; then
    grep -q "backend '$backend'" "$TMP/err" || fail "backend $backend: message does not name it: $(cat "$TMP/err")"
    [ "$(wc -l <"$TMP/err")" -eq 1 ] || fail "backend $backend: expected one line on stderr"
  fi
done

# Every example is a valid scenario (it parses and plans: exit 0 or 1, never 2).
for f in "$SRC"/examples/*.yaml; do
  "$ATP" run "$f" >/dev/null 2>"$TMP/err"
  code=$?
  [ "$code" -eq 2 ] && fail "example $f is rejected: $(cat "$TMP/err")"
done

# Generated topologies: the counts of a k = 4 fat-tree (one "atp:" line a switch, one "switch:" line a
# host, one "- [a, b]" line a link), one sentence and exit 2 for a bad parameter, and the output
# with a job added runs: a one-spine leaf-spine (a tree) and the fat-tree (cycles).
expect_exit 0 "atp topology --help" "$ATP" topology --help
if expect_exit 0 "atp topology fat-tree --k 4" "$ATP" topology fat-tree --k 4; then
  switches=$(grep -c 'atp: false' "$TMP/out")
  hosts=$(grep -c 'switch: edge' "$TMP/out")
  links=$(grep -c '^    - \[' "$TMP/out")
  [ "$switches $hosts $links" = "20 16 32" ] ||
    fail "atp topology fat-tree --k 4: expected 20 switches, 16 hosts, 32 links, got $switches, $hosts, $links"
  cp "$TMP/out" "$TMP/fat-tree.yaml"
fi
expect_usage_error "atp topology fat-tree: --k must be an even number of at least 2, got 3" topology fat-tree --k 3
expect_usage_error "atp topology dragonfly: --g must be a*h + 1 = 9 for --a 4 --h 2 (the balanced dragonfly: one global \
link between every pair of groups), got 5" topology dragonfly --a 4 --h 2 --g 5
expect_usage_error "atp topology leaf-spine: --ina must be none, all or tors, got 'edges'" \
  topology leaf-spine --leaves 2 --spines 1 --ina edges
if expect_exit 0 "atp topology leaf-spine" "$ATP" topology leaf-spine --leaves 3 --spines 1 --ina tors --aggregators 64; then
  cp "$TMP/out" "$TMP/leaf-spine.yaml"
  printf 'jobs:\n  - {workers: [h0_0, h1_0], ps: [h2_0], elements: 1000}\n' >>"$TMP/leaf-spine.yaml"
  expect_exit 0 "atp run on a generated leaf-spine" "$ATP" run "$TMP/leaf-spine.yaml"
fi
if [ -f "$TMP/fat-tree.yaml" ]; then
  printf 'jobs:\n  - {workers: [h0_0_0, h1_0_0, h3_1_1], ps: [h2_0_1], elements: 1000}\n' >>"$TMP/fat-tree.yaml"
  expect_exit 0 "atp run on a generated fat-tree" "$ATP" run "$TMP/fat-tree.yaml"
fi

# The bandwidth-occupation model: Fig. 9's six workers share the PS's link without aggregation
# (1/6), every switch of the file aggregating gives each worker the whole link, and the replacement
# order ends there; the ring's host links carry 2(6-1)/6 S (0.6); a job the file lacks is one
# sentence and exit 2.
if expect_exit 0 "atp bom examples/fig9.yaml --incremental" "$ATP" bom "$SRC/examples/fig9.yaml" --incremental; then
  grep -q '^PS, no switch aggregating  *0.1667  sw2 -> ps, 6 S$' "$TMP/out" ||
    fail "atp bom: no PS line of 0.1667 through sw2 -> ps: $(cat "$TMP/out")"
  grep -q '^ring  *0.6000  w0 -> sw0, 1.667 S$' "$TMP/out" || fail "atp bom: no ring line of 0.6000: $(cat "$TMP/out")"
  [ "$(tail -1 "$TMP/out" | awk '{print $2, $3}')" = "sw2 1.0000" ] ||
    fail "atp bom --incremental: the last replacement is not sw2 at 1.0000: $(tail -1 "$TMP/out")"
fi
expect_usage_error "atp bom: $SRC/examples/fig9.yaml has no job named 'nope'" bom "$SRC/examples/fig9.yaml" --job nope

# The daemons: --help works; a bad config names the key and exits 2.
expect_exit 0 "atp switch --help" "$ATP" switch --help
expect_exit 0 "atp ps --help" "$ATP" ps --help
printf 'name: s\nlisten: 127.0.0.1:0\ncontrol: 127.0.0.1:0\nports: [{peer: "127.0.0.1:9", rate_gbs: 1}]\n' >"$TMP/switch.yaml"
if expect_exit 2 "switch config with a typo" "$ATP" switch --config "$TMP/switch.yaml"; then
  grep -q "rate_gbs" "$TMP/err" || fail "switch config error does not name the key: $(cat "$TMP/err")"
fi
expect_exit 2 "atp ps with a bad --listen address" "$ATP" ps --listen 127.0.0.1:99999
grep -q "127.0.0.1:99999" "$TMP/err" || fail "atp ps does not name the bad address: $(cat "$TMP/err")"

# The demo runs real processes, shows progress, checks results and compares (small workload).
if expect_exit 0 "atp demo" "$ATP" demo --elements 20000 --rounds 4; then
  grep -q "real processes" "$TMP/out" || fail "atp demo does not say it runs real processes"
  grep -q "job a: 4/4 rounds" "$TMP/out" || fail "atp demo shows no progress for job a"
  grep -q "PS only" "$TMP/out" || fail "atp demo has no side-by-side table"
  grep -q "fewer packets with ATP" "$TMP/out" || fail "atp demo does not compare the PS's packets"
  grep -q " NO " "$TMP/out" && fail "atp demo reports a wrong result: $(cat "$TMP/out")"
fi

# The benchmark runs briefly and reports positive rates and a positive ratio for both sizes.
if expect_exit 0 "atp bench switch --json" "$ATP" bench switch --seconds 0.2 --json; then
  head -c 1 "$TMP/out" | grep -q '{' || fail "atp bench JSON does not start with {"
  for key in mpps_per_core gbps_per_core wall_mpps ratio; do
    # How many "key": lines there are, or -1 if any value is not positive.
    count=$(awk -v key="\"$key\":" '$1 == key { n++; if ($2 + 0 <= 0) bad++ } END { print (bad ? -1 : n + 0) }' \
      "$TMP/out")
    want=4
    [ "$key" = ratio ] && want=2
    [ "$count" -eq "$want" ] || fail "atp bench JSON: expected $want positive \"$key\" values, got: $(grep "\"$key\"" "$TMP/out")"
  done
fi

# The allreduce benchmark, small, on loopback, with nccl-tests' short flags: every size and
# algorithm correct and checked ("wrong": 0), positive algbw in both units.
if expect_exit 0 "atp bench allreduce --json" "$ATP" bench allreduce --backend udp --workers 3 --racks 1 \
  -b 4K -e 64K -f 16 -n 2 -w 1 --algorithms atp,ring --json; then
  rows=$(grep -c '"algorithm"' "$TMP/out")
  [ "$rows" -eq 4 ] || fail "atp bench allreduce JSON: expected 4 rows (2 sizes x 2 algorithms), got $rows"
  grep -q '"correct": false' "$TMP/out" && fail "atp bench allreduce reports a wrong result: $(cat "$TMP/out")"
  [ "$(grep -c '"wrong": 0' "$TMP/out")" -eq 4 ] || fail "atp bench allreduce JSON: not every row says \"wrong\": 0"
  for key in algbw_gbps algbw_GBps busbw_GBps; do
    bad=$(awk -v key="\"$key\":" '$1 == key && $2 + 0 <= 0' "$TMP/out")
    [ -z "$bad" ] || fail "atp bench allreduce JSON: a $key is not positive: $bad"
  done
fi
# The table reads like nccl-tests': '#' lines say what busbw means and that ring's TCP does not
# cross the switches on udp; a row is size, count, type, redop, then per algorithm time, algbw,
# busbw, #wrong (0: checked), then the ratio.
if expect_exit 0 "atp bench allreduce (table)" "$ATP" bench allreduce --backend udp --workers 3 --racks 1 \
  -b 4K -e 4K -n 1 --algorithms atp,ring; then
  grep -q '^#.*size.*count.*type.*redop.*time.*algbw.*busbw.*#wrong.*time.*algbw.*busbw.*#wrong.*atp/ring' "$TMP/out" ||
    fail "atp bench allreduce: no nccl-tests column header: $(cat "$TMP/out")"
  grep -q '^# ring: direct TCP on loopback, not through the switches or their rate limits' "$TMP/out" ||
    fail "atp bench allreduce on udp does not say that ring bypasses the switches: $(cat "$TMP/out")"
  grep -q '^#.*may exceed the link rate' "$TMP/out" || fail "atp bench allreduce does not say what busbw means for atp"
  row=$(awk '!/^#/ { print $1, $2, $3, $4, $8, $12 }' "$TMP/out")
  [ "$row" = "4096 1024 float sum 0 0" ] || fail "atp bench allreduce: unexpected row (size count type redop #wrong #wrong): $row"
fi
# A size that is not a whole number of float32 values is refused, naming the flag, not rounded.
if expect_exit 2 "atp bench allreduce -b 4097" "$ATP" bench allreduce -b 4097 -e 8K; then
  grep -q -- "--min-bytes (-b) 4097 is not a multiple of 4" "$TMP/err" || fail "odd -b: $(cat "$TMP/err")"
fi
if expect_exit 2 "atp bench allreduce -f 1.5" "$ATP" bench allreduce -b 12 -e 64 -f 1.5; then
  grep -q -- "--factor (-f) 1.5 .* 18 bytes" "$TMP/err" || fail "odd step: $(cat "$TMP/err")"
fi
expect_exit 2 "atp bench allreduce with more racks than workers" "$ATP" bench allreduce --workers 2 --racks 3
# The bench's scenarios are built as data and planned before the first run: a window above
# max_window is refused in the planner's sentence (core's window_error), before anything starts.
if expect_exit 2 "atp bench allreduce --window above --max-window" "$ATP" bench allreduce --backend inproc \
  --algorithms atp --window 300 --max-window 100; then
  grep -q "job 'bench': the window (300) must not exceed max_window (100)" "$TMP/err" ||
    fail "window above max_window: $(cat "$TMP/err")"
fi
# On ns3 (where this build has it: ATP_WITH_NS3) at 100 Gbit/s: atp, ps and the ns-3 TCP ring, all
# correct, ATP faster than the PS.
if "$ATP" run --help | grep -q '^ *ns3: '; then
  if expect_exit 0 "atp bench allreduce --backend ns3" "$ATP" bench allreduce --backend ns3 --workers 4 --racks 2 \
    --rate-mbps 100000 --min-bytes 256K --max-bytes 256K --iters 2 --algorithms atp,ps,ring --json; then
    rows=$(grep -c '"algorithm"' "$TMP/out")
    [ "$rows" -eq 3 ] || fail "atp bench allreduce ns3 JSON: expected 3 rows, got $rows"
    grep -q '"correct": false' "$TMP/out" && fail "atp bench allreduce ns3 reports a wrong result: $(cat "$TMP/out")"
    # The ns-3 ring carries the values (the schedule executor over ns-3 TCP): checked like the others.
    grep -q '"check": "float32_rounding"' "$TMP/out" || fail "bench ns3: the ring row is not checked within float32 rounding"
    [ "$(grep -c '"wrong": 0' "$TMP/out")" -eq 3 ] || fail "bench ns3: expected \"wrong\": 0 for atp, ps and ring"
  fi
  if expect_exit 2 "atp bench allreduce --backend ns3 with gloo" "$ATP" bench allreduce --backend ns3 --algorithms atp,gloo; then
    grep -q "cannot run gloo" "$TMP/err" || fail "bench ns3 gloo: the message does not say why: $(cat "$TMP/err")"
  fi
fi

finish
