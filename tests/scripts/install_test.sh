#!/bin/sh
# `cmake --install` of a build into a scratch prefix: the atp command runs from there, and a small
# program builds against the installed library twice, with find_package(atp) and with pkg-config
# and g++, and runs: a header through the core, then two ranks of a ClusterJob on a local switch
# and PS started from the installed atp. Then CPack's .deb (about 5 s): what it holds and depends on.
# Usage: install_test.sh CMAKE BUILD-DIR CXX [GENERATOR]
set -u

CMAKE=${1:?usage: install_test.sh CMAKE BUILD-DIR CXX [GENERATOR]}
BUILD=${2:?usage: install_test.sh CMAKE BUILD-DIR CXX [GENERATOR]}
CXX=${3:?usage: install_test.sh CMAKE BUILD-DIR CXX [GENERATOR]}
GENERATOR=${4:-}
TEST_NAME=install_test
. "$(dirname "$0")/../support/shell_test_lib.sh"
PREFIX=$TMP/prefix

# The default components only: the Python package (component python) goes into Debian's python3
# only when asked for by name, so nothing may land outside the prefix.
if ! "$CMAKE" --install "$BUILD" --prefix "$PREFIX" >"$TMP/install.log" 2>&1; then
  fail "cmake --install failed: $(tail -n 5 "$TMP/install.log")"
  finish
fi
outside=$(sed -n 's/^-- \(Installing\|Up-to-date\): //p' "$TMP/install.log" | grep -v "^$PREFIX/")
[ -z "$outside" ] || fail "cmake --install wrote outside the prefix: $outside"

"$PREFIX/bin/atp" --help >"$TMP/help.out" 2>&1 || fail "installed atp --help exits $? ($(head -c 300 "$TMP/help.out"))"

PC=$(find "$PREFIX" -name atp.pc)
CONFIG=$(find "$PREFIX" -name atpConfig.cmake)
[ -n "$PC" ] || fail "no atp.pc installed"
[ -n "$CONFIG" ] || fail "no atpConfig.cmake installed"
for header in atp/wire.h atp/collectives/communicator.h atp/cluster/cluster_job.h; do
  [ -f "$PREFIX/include/$header" ] || fail "header $header not installed"
done
# What the installed libraries do not cover, the headers do not offer either.
[ ! -e "$PREFIX/include/atp/scenario" ] || fail "scenario headers installed without their library"

mkdir -p "$TMP/consumer"
cat >"$TMP/consumer/main.cc" <<'EOF'
// A program built against an installed atp (tests/scripts/install_test.sh): a header encoded and decoded by
// the core; given the atp binary, two ranks join a ClusterJob on a local switch and PS and allreduce.
#include <atp/cluster/cluster_job.h>
#include <atp/wire.h>

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

// The rendezvous store of both ranks (threads of this process).
class MemoryStore : public atp::Store {
 public:
  void set(const std::string& key, const std::string& value) override {
    std::lock_guard lock(mutex_);
    map_[key] = value;
    changed_.notify_all();
  }
  std::string get(const std::string& key, atp::Duration timeout) override {
    std::unique_lock lock(mutex_);
    if (!changed_.wait_for(lock, timeout, [&] { return map_.contains(key); })) {
      throw atp::CollectiveError("key " + key + " was not set within the timeout");
    }
    return map_.at(key);
  }
  std::int64_t add(const std::string& key, std::int64_t delta) override {
    std::lock_guard lock(mutex_);
    const std::int64_t value = (map_.contains(key) ? std::stoll(map_[key]) : 0) + delta;
    map_[key] = std::to_string(value);
    changed_.notify_all();
    return value;
  }
  void erase(const std::string& key) override {
    std::lock_guard lock(mutex_);
    map_.erase(key);
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::string> map_;
};

int fail(const std::string& what) {
  std::fprintf(stderr, "consumer: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  atp::Header h;
  h.job = 7;
  h.seq = 42;
  h.value_count = 2;
  h.src = 0x0A000001;
  h.dst = atp::multicast_group_address(h.job);
  std::vector<std::uint8_t> packet(atp::packet_size(h.value_count));
  atp::encode_header(h, packet);
  atp::Header back;
  if (const auto e = atp::decode_header(packet, back); e != atp::DecodeError::kOk) {
    return fail("decode_header: " + std::string(atp::to_string(e)));
  }
  if (back.job != 7 || back.seq != 42 || atp::format_address(back.src) != "10.0.0.1") {
    return fail("the decoded header differs from the encoded one");
  }
  std::printf("header: job %u seq %u from %s\n", back.job, back.seq, atp::format_address(back.src).c_str());
  if (argc < 2) return 0;

  MemoryStore store;
  atp::ClusterJobOptions options;
  options.local = true;
  options.atp_binary = argv[1];
  options.timeout = std::chrono::seconds(20);
  std::array<std::vector<float>, 2> data{{{1.5f, -2.0f, 3.0f}, {0.5f, 4.0f, -1.0f}}};
  std::array<std::string, 2> errors;
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    ranks.emplace_back([&, rank] {
      try {
        auto job = atp::ClusterJob::join(store, rank, 2, options);
        job->communicator().allreduce(data[static_cast<std::size_t>(rank)]);
        job->close();
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(rank)] = e.what();
      }
    });
  }
  for (auto& t : ranks) t.join();
  for (std::size_t rank = 0; rank < 2; ++rank) {
    if (!errors[rank].empty()) return fail("rank " + std::to_string(rank) + ": " + errors[rank]);
    if (data[rank] != std::vector<float>{2.0f, 2.0f, 2.0f}) return fail("rank " + std::to_string(rank) + ": wrong sum");
  }
  std::printf("allreduce: 2 ranks, sum exact\n");
  return 0;
}
EOF
cat >"$TMP/consumer/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.22)
project(atp_consumer LANGUAGES CXX)
set(CMAKE_CXX_STANDARD 20)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
find_package(atp 0.1 REQUIRED)
message(STATUS "atp ${atp_VERSION} from ${atp_DIR}")
add_executable(consumer main.cc)
target_link_libraries(consumer PRIVATE atp::cluster)
EOF

# 1. CMake: find_package(atp) from the prefix, and from nowhere else.
set -- -S "$TMP/consumer" -B "$TMP/consumer-build" -DCMAKE_PREFIX_PATH="$PREFIX" -DCMAKE_CXX_COMPILER="$CXX"
[ -z "$GENERATOR" ] || set -- "$@" -G "$GENERATOR"
if "$CMAKE" "$@" >"$TMP/consumer-configure.log" 2>&1 &&
  "$CMAKE" --build "$TMP/consumer-build" >"$TMP/consumer-build.log" 2>&1; then
  grep -q -- "-- atp .* from $PREFIX/" "$TMP/consumer-configure.log" ||
    fail "find_package(atp) did not find the installed one: $(grep -- '-- atp ' "$TMP/consumer-configure.log")"
  timeout 120 "$TMP/consumer-build/consumer" "$PREFIX/bin/atp" >"$TMP/consumer.out" 2>&1 ||
    fail "the find_package consumer failed: $(tail -n 5 "$TMP/consumer.out")"
  grep -q "allreduce: 2 ranks, sum exact" "$TMP/consumer.out" || fail "the find_package consumer ran no allreduce"
else
  fail "the find_package consumer does not build: $(tail -n 15 "$TMP/consumer-configure.log" "$TMP/consumer-build.log")"
fi

# 2. pkg-config and the compiler alone.
if ! FLAGS=$(PKG_CONFIG_PATH=$(dirname "$PC") pkg-config --cflags --libs atp 2>"$TMP/pkg-config.err"); then
  fail "pkg-config --cflags --libs atp: $(cat "$TMP/pkg-config.err")"
else
  # shellcheck disable=SC2086  # FLAGS is a list of flags
  if "$CXX" -std=c++20 -o "$TMP/consumer-pc" "$TMP/consumer/main.cc" $FLAGS >"$TMP/consumer-pc.log" 2>&1; then
    timeout 120 "$TMP/consumer-pc" "$PREFIX/bin/atp" >"$TMP/consumer-pc.out" 2>&1 ||
      fail "the pkg-config consumer failed: $(tail -n 5 "$TMP/consumer-pc.out")"
    grep -q "allreduce: 2 ranks, sum exact" "$TMP/consumer-pc.out" || fail "the pkg-config consumer ran no allreduce"
  else
    fail "the pkg-config consumer does not build with $FLAGS: $(tail -n 15 "$TMP/consumer-pc.log")"
  fi
fi

# 3. The .deb (cpack beside cmake; dpkg-deb): the same files under /usr, nothing of the Python
# package, and dependencies on what the package config finds again.
CPACK=$(dirname "$CMAKE")/cpack
if [ -x "$CPACK" ] && command -v dpkg-deb >/dev/null; then
  if "$CPACK" -G DEB --config "$BUILD/CPackConfig.cmake" -B "$TMP/package" >"$TMP/cpack.log" 2>&1; then
    DEB=$(find "$TMP/package" -maxdepth 1 -name 'atp_*.deb')
    dpkg-deb -c "$DEB" >"$TMP/deb.list" 2>&1 || fail "dpkg-deb -c $DEB failed"
    for f in usr/bin/atp usr/include/atp/wire.h usr/lib/cmake/atp/atpConfig.cmake pkgconfig/atp.pc; do
      grep -q "$f\$" "$TMP/deb.list" || fail "the .deb has no $f"
    done
    ! grep -q "atp_torch" "$TMP/deb.list" || fail "the .deb holds the Python package"
    dpkg-deb -f "$DEB" Depends | grep -q "libyaml-cpp-dev" || fail "the .deb does not depend on libyaml-cpp-dev"
  else
    fail "cpack -G DEB failed: $(tail -n 5 "$TMP/cpack.log")"
  fi
fi

finish
