// An EgressConfig's settings as files and messages name them (a switch config's ports, PUT
// /ports, a scenario's links): one table of keys, units, bounds and the one sentence for a value
// out of them, which every reader of those keys checks with.
#pragma once

#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "atp/io/egress_queue.h"

namespace atp {

// Bounds of the settings: no link is faster, no port delays longer.
inline constexpr double kMaxPortRateGbps = 1e6;
inline constexpr std::int64_t kMaxPortDelayUs = 10'000'000;

// One setting: its key, what a value must be (the sentence "must be <expected>, got <value>"),
// its bounds in the key's unit, and how it is read from and written to an EgressConfig.
struct EgressField {
  std::string_view key;
  std::string_view expected;  // "a probability between 0 and 1"
  double min = 0;
  double max = 0;
  bool whole = false;  // whole numbers only (packets, bytes)
  double (*get)(const EgressConfig&) = nullptr;
  void (*set)(EgressConfig&, double) = nullptr;
};

// delay_us takes fractions (rounded to whole nanoseconds, the core's unit).
inline constexpr std::array<EgressField, 8> kEgressFields{{
    {"rate_gbps", "a number of Gbit/s between 0 (unlimited) and 1000000", 0, kMaxPortRateGbps, false,
     [](const EgressConfig& e) { return e.rate_gbps; }, [](EgressConfig& e, double v) { e.rate_gbps = v; }},
    {"buffer_packets", "a whole number of packets between 0 (unlimited) and 4294967295", 0, 4294967295.0, true,
     [](const EgressConfig& e) { return static_cast<double>(e.buffer_packets); },
     [](EgressConfig& e, double v) { e.buffer_packets = static_cast<std::uint32_t>(v); }},
    {"buffer_bytes", "a whole number of bytes between 0 (unlimited) and 4294967295", 0, 4294967295.0, true,
     [](const EgressConfig& e) { return static_cast<double>(e.buffer_bytes); },
     [](EgressConfig& e, double v) { e.buffer_bytes = static_cast<std::uint32_t>(v); }},
    {"ecn_threshold_packets", "a whole number of packets between 0 (off) and 4294967295", 0, 4294967295.0, true,
     [](const EgressConfig& e) { return static_cast<double>(e.ecn_threshold_packets); },
     [](EgressConfig& e, double v) { e.ecn_threshold_packets = static_cast<std::uint32_t>(v); }},
    {"delay_us", "a number of microseconds between 0 and 10000000", 0, static_cast<double>(kMaxPortDelayUs), false,
     [](const EgressConfig& e) { return static_cast<double>(e.delay.count()) / 1000; },
     [](EgressConfig& e, double v) { e.delay = Duration(static_cast<std::int64_t>(std::llround(v * 1000))); }},
    {"loss", "a probability between 0 and 1", 0, 1, false, [](const EgressConfig& e) { return e.loss; },
     [](EgressConfig& e, double v) { e.loss = v; }},
    {"duplicate", "a probability between 0 and 1", 0, 1, false, [](const EgressConfig& e) { return e.duplicate; },
     [](EgressConfig& e, double v) { e.duplicate = v; }},
    {"reorder", "a probability between 0 and 1", 0, 1, false, [](const EgressConfig& e) { return e.reorder; },
     [](EgressConfig& e, double v) { e.reorder = v; }},
}};

// A buffer given in one unit replaces the buffer in the other (a default's, or an earlier
// setting's): a setting that names buffer_packets and not buffer_bytes means that many packets,
// whatever their size, and the other way round. Both given: both limits apply.
inline void given_buffer_replaces(EgressConfig& e, bool packets_given, bool bytes_given) {
  if (packets_given && !bytes_given) e.buffer_bytes = 0;
  if (bytes_given && !packets_given) e.buffer_packets = 0;
}

// The field named `key`, or nullptr.
inline const EgressField* egress_field(std::string_view key) {
  for (const EgressField& f : kEgressFields) {
    if (f.key == key) return &f;
  }
  return nullptr;
}

// What is wrong with `value` for `field` ("must be a probability between 0 and 1"; the reader
// adds ", got <the value as written>"), or nullopt.
inline std::optional<std::string> egress_value_error(const EgressField& field, double value) {
  if (std::isfinite(value) && value >= field.min && value <= field.max &&
      (!field.whole || value == std::floor(value))) {
    return std::nullopt;
  }
  return "must be " + std::string(field.expected);
}

}  // namespace atp
