#!/bin/bash
# `pip wheel .` makes a wheel of the PyTorch backend that installs and works elsewhere: built with
# Debian's pip, setuptools and wheel (no PyPI: --no-build-isolation) in BUILD-DIR (already built, so
# only packed), installed into a scratch folder, imported from there with its __version__, and one
# rank of a job run on the switch and PS it starts from the `atp` the wheel carries.
# Usage: pip_wheel_test.sh SOURCE-DIR BUILD-DIR
set -euo pipefail
src=$1 build=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
version=$(sed -n 's/^project(atp VERSION \([^ ]*\).*/\1/p' "$src/CMakeLists.txt")

ATP_BUILD_DIR=$build /usr/bin/python3 -m pip wheel --no-build-isolation --no-deps -q -w "$tmp/wheels" "$src"
wheel=$(ls "$tmp"/wheels/atp_torch-"$version"-*.whl)
# The listing first: `unzip | grep -q` under pipefail fails when grep stops reading early.
listing=$(unzip -l "$wheel")
grep -q "atp_torch/atp$" <<<"$listing" || { echo "the wheel carries no atp binary"; exit 1; }
/usr/bin/python3 -m pip install --no-index --no-deps -q --root-user-action=ignore --target "$tmp/site" "$wheel"

cd /  # nothing of the source or build tree on the path
out=$(env -u PYTHONPATH -u ATP_BINARY PYTHONPATH="$tmp/site" ATP_LOCAL=1 MASTER_ADDR=127.0.0.1 \
      MASTER_PORT=$((20000 + RANDOM % 20000)) /usr/bin/python3 -c '
import atp_torch, torch, torch.distributed as dist
print(atp_torch.__version__, atp_torch.__file__)
dist.init_process_group("atp", rank=0, world_size=1)
t = torch.full((5000,), 0.25)
dist.all_reduce(t)
print("allreduce", bool(torch.equal(t, torch.full((5000,), 0.25))))
dist.destroy_process_group()')
echo "$out"
grep -qx "$version $tmp/site/atp_torch/__init__.py" <<<"$out" || { echo "not the wheel's atp_torch $version"; exit 1; }
grep -qx "allreduce True" <<<"$out" || { echo "the installed wheel's allreduce failed"; exit 1; }
echo "pip_wheel_test: atp_torch $version builds as a wheel, installs and runs"
