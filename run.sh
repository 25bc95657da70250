#!/usr/bin/env bash
# One entry point for a fresh Debian 12 machine: installs the apt packages that are missing,
# configures and builds, then runs the main job (`./run.sh demo`) or every test (`./run.sh test`).
set -euo pipefail
cd "$(dirname "$0")"

PACKAGES=(cmake ninja-build g++ pkg-config libgtest-dev libgmock-dev libbenchmark-dev
          libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libcpp-httplib-dev libspdlog-dev prometheus-cpp-dev libeigen3-dev liblemon-dev ethtool iproute2
          libgloo-dev libns3-dev ns3 libgsl-dev python3-yaml python3-matplotlib python3-numpy
          python3-torch libtorch-dev python3-pybind11 python3-dev python3-pytest python3-pytest-xdist python3-sklearn python3-torchvision)
# (ns3 and libgsl-dev: CMake's find_package(ns3) fails without them. python3-yaml, matplotlib and
# numpy: the experiments' scripts, which the tests smoke-run. torch, pybind11, python3-dev: the
# PyTorch backend atp_torch; pytest, pytest-xdist and sklearn: its tests and training example;
# torchvision: the models of experiments/pytorch.)
FUZZ_PACKAGES=(clang libclang-rt-14-dev)  # the libFuzzer run in `test`

install_missing() {
  local missing=()
  for p in "$@"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p"); done
  ((${#missing[@]} == 0)) && return 0
  echo "run.sh: installing ${missing[*]}" >&2
  local sudo=()
  ((EUID == 0)) || sudo=(sudo)
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

build() {
  install_missing "${PACKAGES[@]}"
  # CI builds with warnings as errors; a local build only reports them.
  local werror=OFF
  [[ "${CI:-}" == "true" ]] && werror=ON
  cmake -S . -B build -G Ninja -DATP_WERROR="$werror" >/dev/null
  cmake --build build
  # The PyTorch backend into Debian python3's site-packages: `/usr/bin/python3 -c "import atp_torch"`.
  local sudo=()
  ((EUID == 0)) || sudo=(sudo)
  "${sudo[@]}" cmake --install build --component python >/dev/null
}

# The fuzz and ThreadSanitizer builds: only the layers their targets need (no benchmarks, PyTorch
# or ns-3), with line tables (-g1), all a crash's or a race report's stacks need.
CHECK_BUILD=(-DATP_BUILD_BENCHMARKS=OFF -DATP_BUILD_TORCH=OFF -DATP_WITH_NS3=OFF
             -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG")

fuzz() {
  # libFuzzer needs clang; the seeded random-bytes tests in ctest cover the same code with g++.
  # packet_fuzzer: packets into the core (30 s); control_fuzzer: the daemons' control input,
  # JSON, switch configs and HTTP requests (20 s).
  install_missing "${FUZZ_PACKAGES[@]}"
  # The two run side by side, one a core.
  CXX=clang++ cmake -S . -B build-fuzz -G Ninja "${CHECK_BUILD[@]}" >/dev/null
  cmake --build build-fuzz --target packet_fuzzer control_fuzzer
  ctest --test-dir build-fuzz -R '^(packet|control)_fuzzer$' --output-on-failure -j 2
}

core_alone() {
  # The protocol core and the schedules build with the standard library alone (each its own CMake
  # project, no package).
  local layer
  for layer in core schedule; do
    cmake -S "src/$layer" -B "build-$layer" -G Ninja -DATP_WERROR=ON >/dev/null
    cmake --build "build-$layer"
  done
}

tsan() {
  # The code that runs on several threads (the switch's dataplane threads on UDP and interface
  # ports and the queues they share, the worker library's loop, the task hand-over) under
  # ThreadSanitizer: only the tests of those layers, built without the layers above them where
  # they can be (the netns tests are skipped without root).
  local flags=-fsanitize=thread
  cmake -S . -B build-tsan -G Ninja "${CHECK_BUILD[@]}" -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" \
    >/dev/null
  cmake --build build-tsan --target switch_test switch_daemon_test switch_l2_test egress_queue_test loop_tasks_test \
    worker_test communicator_test
  TSAN_OPTIONS=halt_on_error=1 ctest --test-dir build-tsan --output-on-failure -j "$(nproc)" \
    -R '^(DataplaneThreads/|Switch|EgressQueue\.|LoopTasks\.|Worker|Communicator)'
}

# stage NAME COMMAND...: runs one stage of the test run and notes its wall time; the table of
# them is printed when the run ends, passed or failed (then the stage that failed is named).
STAGE_TIMES=()
CURRENT_STAGE=
stage() {
  local start=$SECONDS
  CURRENT_STAGE=$1
  shift
  "$@"
  STAGE_TIMES+=("$(printf '  %-12s %5d' "$CURRENT_STAGE" $((SECONDS - start)))")
  CURRENT_STAGE=
}
print_stages() {
  echo "run.sh: time per stage (s):" >&2
  printf '%s\n' "${STAGE_TIMES[@]}" >&2
  [[ -z "$CURRENT_STAGE" ]] || printf '  %-12s failed\n' "$CURRENT_STAGE" >&2
  printf '  %-12s %5d\n' total "$SECONDS" >&2
}

case "${1:-}" in
  demo)
    build
    shift
    exec ./build/atp demo "$@"
    ;;
  test)
    trap print_stages EXIT
    stage build build
    stage ctest ctest --test-dir build --output-on-failure -j "$(nproc)"
    stage core-alone core_alone
    stage fuzz fuzz
    stage tsan tsan
    ;;
  *)
    echo "usage: ./run.sh demo [ARGS...]   build, then run the demo (atp demo)" >&2
    echo "       ./run.sh test             build, then run every test" >&2
    exit 2
    ;;
esac
