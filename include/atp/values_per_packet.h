// The one check of a values_per_packet, the values one ATP packet carries: a worker's, a PS's
// and a job's configuration each name one, and each is checked here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace atp {

// What is wrong with `values` as the values of one packet ("must be 1..4096, got 0"), or nullopt
// when it is 1 to kMaxValuesPerPacket (wire.h). Each caller says whose values_per_packet it is.
std::optional<std::string> values_per_packet_error(std::uint64_t values);

}  // namespace atp
