// What the switch's config parser (switch_config.cc) shares with the rest of the switch daemon
// (private to the runtime): the limits every config meets, and how a UDP peer is keyed.
#pragma once

#include <cstddef>
#include <cstdint>

#include "atp/daemons/switch_daemon.h"

namespace atp::detail {

// At most this many ports: PortId is 16 bits.
inline constexpr std::size_t kMaxPorts = std::size_t{1} << 16;

// At most this many dataplane threads (SwitchDaemonConfig::threads).
inline constexpr std::uint32_t kMaxDataplaneThreads = 64;

// A UDP peer (address and port) as one number, for sets and maps of peers.
inline std::uint64_t peer_key(const SocketAddress& e) { return (std::uint64_t{e.ip} << 16) | e.port; }

// Throws SwitchConfigError (naming config.name) when `config` asks for what parse_switch_config
// refuses for its size: an aggregator table larger than the machine's memory, or more than
// kMaxPorts ports, or dataplane threads it cannot have. For a config built in C++, not parsed
// (ClusterJob's local switch).
void check_limits(const SwitchDaemonConfig& config);

// The dataplane threads `config` (passed check_limits) runs: config.threads, or when 0 a quarter
// of the machine's cores, from 1 to 4, lowered to a divisor of the aggregators.
std::uint32_t dataplane_threads(const SwitchDaemonConfig& config);

}  // namespace atp::detail
