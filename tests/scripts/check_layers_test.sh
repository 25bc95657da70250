#!/bin/sh
# tools/check_layers.py passes the tree and fails a copy of it where the core includes a header of
# the io layer, naming the file and the include. Usage: check_layers_test.sh SOURCE-DIR
set -u
SRC=${1:?usage: check_layers_test.sh SOURCE-DIR}
TEST_NAME=check_layers_test
. "$(dirname "$0")/../support/shell_test_lib.sh"

python3 "$SRC/tools/check_layers.py" "$SRC" 2>"$TMP/err" || fail "the tree itself: $(cat "$TMP/err")"

cp -r "$SRC/include" "$SRC/src" "$TMP/"
sed -i '0,/#include "atp\/wire.h"/s//#include "atp\/wire.h"\n#include "atp\/io\/udp_socket.h"/' "$TMP/src/core/wire.cc"
if python3 "$SRC/tools/check_layers.py" "$TMP" 2>"$TMP/err"; then
  fail "an include of io from the core passed"
fi
grep -q 'src/core/wire.cc: the core layer includes "atp/io/udp_socket.h" of the io layer' "$TMP/err" ||
  fail "the message does not name the file and the include: $(cat "$TMP/err")"
finish
