#!/bin/sh
# tools/check_file_sizes.py passes the tree, and fails a copy of it where a file is past the limit,
# naming the file; one at the limit passes.
# Usage: file_sizes_test.sh SOURCE-DIR
set -u
SRC=${1:?usage: file_sizes_test.sh SOURCE-DIR}
TEST_NAME=file_sizes_test
. "$(dirname "$0")/../support/shell_test_lib.sh"

python3 "$SRC/tools/check_file_sizes.py" "$SRC" 2>"$TMP/err" || fail "the tree itself: $(cat "$TMP/err")"

# expect_refused WHAT TEXT: the check fails on $TMP/tree and its message has TEXT.
expect_refused() {
  if python3 "$SRC/tools/check_file_sizes.py" "$TMP/tree" 2>"$TMP/err"; then
    fail "$1 passed"
  elif ! grep -qF "$2" "$TMP/err"; then
    fail "$1: the message does not say '$2': $(cat "$TMP/err")"
  fi
}
fresh_copy() {
  rm -rf "$TMP/tree" && mkdir -p "$TMP/tree" && cp -r "$SRC/src" "$SRC/apps" "$SRC/tools" "$TMP/tree/"
}

fresh_copy
seq 601 | sed 's|^|// |' >"$TMP/tree/src/core/long.cc"
expect_refused "a new file of 601 lines" "src/core/long.cc: 601 lines, more than 600"

fresh_copy
seq 600 | sed 's|^|// |' >"$TMP/tree/src/core/long.cc"
python3 "$SRC/tools/check_file_sizes.py" "$TMP/tree" 2>"$TMP/err" || fail "a file of 600 lines: $(cat "$TMP/err")"
finish
