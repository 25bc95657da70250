# Shared by the shell tests (sourced, not run): a scratch folder removed on exit, failure
# counting, and the final verdict. Each test script sets its name in TEST_NAME first.
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
FAILURES=0

fail() {
  echo "FAIL: $*" >&2
  FAILURES=$((FAILURES + 1))
}

# wait_for_process PATTERN SECONDS: waits until a process matching PATTERN (pgrep -f) runs, for
# at most SECONDS (whole seconds); returns 1 if none appeared in time.
wait_for_process() {
  tries=$(($2 * 10))
  while [ "$tries" -gt 0 ]; do
    pgrep -f "$1" >/dev/null && return 0
    sleep 0.1
    tries=$((tries - 1))
  done
  return 1
}

# Ends the script: exit 1 if anything failed.
finish() {
  if [ "$FAILURES" -ne 0 ]; then
    echo "$TEST_NAME: $FAILURES failure(s)" >&2
    exit 1
  fi
  echo "$TEST_NAME: all passed"
}
