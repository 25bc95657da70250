#!/bin/sh
# tools/check_function_sizes.py passes the tree, and fails a copy of it where a function is past the
# limit without a reason; a "Long:" reason lets one through.
# Usage: function_sizes_test.sh SOURCE-DIR
set -u
SRC=${1:?usage: function_sizes_test.sh SOURCE-DIR}
TEST_NAME=function_sizes_test
. "$(dirname "$0")/../support/shell_test_lib.sh"

python3 "$SRC/tools/check_function_sizes.py" "$SRC" 2>"$TMP/err" || fail "the tree itself: $(cat "$TMP/err")"

fresh_copy() {
  rm -rf "$TMP/tree" && mkdir -p "$TMP/tree" && cp -r "$SRC/src" "$SRC/apps" "$SRC/tools" "$TMP/tree/"
}
# long_function NAME REASON: a file with a function of 81 lines (braces in strings and comments
# inside, which must not count), with REASON as the comment line above it.
long_function() {
  {
    echo "$2"
    echo "int $1(int x) {"
    echo '  const char* s = "{{{";  // }'
    seq 77 | sed 's|.*|  x += 1;|'
    echo "  return x;"
    echo "}"
  } >"$TMP/tree/src/core/long.cc"
}

fresh_copy
long_function too_long "// Adds up."
if python3 "$SRC/tools/check_function_sizes.py" "$TMP/tree" 2>"$TMP/err"; then
  fail "a new function of 81 lines passed"
elif ! grep -qF "src/core/long.cc:2: too_long is 81 lines, more than 80" "$TMP/err"; then
  fail "the message does not name the function and its length: $(cat "$TMP/err")"
fi

long_function with_reason "// Long: one case per line, read top to bottom."
python3 "$SRC/tools/check_function_sizes.py" "$TMP/tree" 2>"$TMP/err" || fail "a reasoned long function: $(cat "$TMP/err")"

finish
