#!/usr/bin/env bash
# The PyTorch backend built and tested against another machine's torch: torch 2.x with CUDA on
# the device machine, which has none of the Debian packages the CMake build needs.
#   tools/torch-kit.sh pack [BUILD=build]  here, after a build with the torch extension: .torch-kit/
#       (git-ignored): the project's static libraries the backend links, without debug
#       information; the atp binary its local cluster runs; the shared libraries both need beyond
#       glibc and libstdc++ (atp's, as ldd finds them).
#   tools/torch-kit.sh test [PYTEST-ARGS]  there (or here, to check the kit): compiles
#       src/torch/*.cc against the torch of $PYTHON (python3 by default) and the kit
#       (tools/build_torch_extension.py) into the kit's python/atp_torch, then runs
#       tests/torch/test_atp_backend.py on that package.
#   tools/torch-kit.sh suite [RUN_SUITE-ARGS]  there: torch's own distributed test suite on gloo
#       and on that package (tests/torch/torch_suite/run_suite.py; docs/pytorch-suite.md),
#       compiling the package first unless `test` did.
#   tools/torch-kit.sh suites DIR N [N ...]  there: the suite at each world size N, gloo and atp,
#       every run at once (on the device's 16 cores; CUDA hidden, as one GPU would skip every
#       test), logs in DIR/logs-N-BACKEND, then each size's comparison (run_suite.py --compare)
#       in DIR/compare-N.txt. The runs stop after ATP_SUITE_BUDGET_S seconds (default 500).
# ATP_TORCH_KIT names another folder for the kit. On the device: `run` with carry [".torch-kit"]
# and the command `tools/torch-kit.sh test`.
set -euo pipefail
cd "$(dirname "$0")/.."
kit=${ATP_TORCH_KIT:-.torch-kit}
python=${PYTHON:-python3}
need_kit() {
  [[ -d $kit ]] || { echo "torch-kit: no $kit: run 'tools/torch-kit.sh pack' where the project builds, and carry it" >&2; exit 2; }
}
# The extension compiled against $python's torch into the kit's python/atp_torch.
compile_kit() { "$python" tools/build_torch_extension.py "$kit" "$kit/python"; }
case "${1:-}" in
  pack)
    build=${2:-build}
    for f in "$build/atp" "$build/src/cluster/libatp_cluster.a" "$build/python/atp_torch/__init__.py"; do
      [[ -e $f ]] || { echo "torch-kit: no $f: build $build with the torch extension first" >&2; exit 2; }
    done
    if [[ $kit == .torch-kit ]] && ! grep -qxF "/$kit/" .git/info/exclude 2>/dev/null; then
      mkdir -p .git/info && echo "/$kit/" >>.git/info/exclude
    fi
    rm -rf "$kit"; mkdir -p "$kit/lib" "$kit/bin"
    # What atp_torch_ext links (CMakeLists.txt: atp_cluster, atp_scenario, atp_baselines and what
    # they build on; the baselines' Gloo part is never pulled in).
    for layer in cluster scenario baselines collectives control plan plink sim io rina core schedule; do
      for a in "$build/src/$layer"/libatp_*.a; do strip --strip-debug -o "$kit/lib/${a##*/}" "$a"; done
    done
    strip -o "$kit/bin/atp" "$build/atp"
    cp "$build/python/atp_torch/__init__.py" "$kit/"
    # Eigen, header-only, which the extension's PLink headers include (the device has no apt).
    mkdir -p "$kit/include" && cp -r /usr/include/eigen3/Eigen "$kit/include/"
    ldd "$build/atp" | awk '$3 ~ /^\// {print $3}' | sort -u |
      grep -vE '/(libc|libm|libpthread|libdl|librt|libstdc\+\+|libgcc_s)\.so|ld-linux' | xargs -r -I{} cp -L {} "$kit/lib/"
    du -sh "$kit"
    ;;
  suites)
    dir=${2:?usage: tools/torch-kit.sh suites DIR N [N ...]}
    shift 2
    need_kit
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    compile_kit >"$dir/compile.log" 2>&1 || { tail -30 "$dir/compile.log"; exit 1; }
    end=$(($(date +%s) + ${ATP_SUITE_BUDGET_S:-500}))
    for n in "$@"; do
      for b in atp gloo; do
        left=$((end - $(date +%s)))
        ((left > 0)) || { echo "torch-kit: no time left for $n ranks on $b (ATP_SUITE_BUDGET_S)" >&2; continue; }
        CUDA_VISIBLE_DEVICES= timeout "$left" "$0" suite --backend $b --world-size "$n" \
          --start-method forkserver --ungate --timeout 30 --log-dir "$dir/logs-$n-$b" >"$dir/suite-$n-$b.out" 2>&1 &
      done
    done
    wait
    status=0
    for n in "$@"; do
      "$python" tests/torch/torch_suite/run_suite.py --compare "$dir/logs-$n-gloo/gloo" \
        "$dir/logs-$n-atp/atp" --world-size "$n" --timeout 30 >"$dir/compare-$n.txt" || status=1
      echo "$n ranks: $(grep RESULT "$dir/compare-$n.txt")"
    done
    exit $status
    ;;
  test|suite)
    what=$1
    shift
    out=$kit/python
    need_kit
    "$python" -c 'import torch; print("torch", torch.__version__, "cuda", torch.cuda.is_available())'
    [[ $what == suite && -e $out/atp_torch/atp ]] || compile_kit
    # The kit's shared libraries for atp alone (the extension finds them by its rpath): on the
    # Python's LD_LIBRARY_PATH they would stand in for the system's own under torch and Python.
    # Written whole, then renamed: `suites` starts several of these at once.
    lib=$(cd "$kit/lib" && pwd) out=$(cd "$out" && pwd)
    printf '#!/bin/sh\nLD_LIBRARY_PATH=%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} exec %s "$@"\n' \
      "$lib" "$out/atp_torch/atp" >"$out/atp.$$"
    chmod +x "$out/atp.$$"
    mv -f "$out/atp.$$" "$out/atp"
    export PYTHONPATH=$out ATP_BINARY=$out/atp
    if [[ $what == test ]]; then
      "$python" -m pytest -q -rs tests/torch/test_atp_backend.py "$@"
    else
      "$python" tests/torch/torch_suite/run_suite.py --python "$python" --atp-path "$out" "$@"
    fi
    ;;
  *)
    sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
