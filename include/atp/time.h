// Time as the protocol core sees it: nanoseconds injected by the runtime, never read from a clock.
// The core has no notion of "now" except the value passed into each call.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace atp {

// A clock that cannot be read: it only gives the core a distinct time_point type, so that a
// runtime's wall time and the core's time are never mixed up by accident.
struct ProtocolClock {
  using rep = std::int64_t;
  using period = std::nano;
  using duration = std::chrono::duration<rep, period>;
  using time_point = std::chrono::time_point<ProtocolClock>;
  static constexpr bool is_steady = true;
};

using Duration = ProtocolClock::duration;  // nanoseconds
using Time = ProtocolClock::time_point;    // nanoseconds since the runtime's epoch

// "No deadline": the value next_deadline() returns when nothing is pending.
inline constexpr Time kNever = Time::max();

// `d` after `now`, saturating at kNever instead of overflowing.
inline constexpr Time deadline_after(Time now, Duration d) {
  if (now == kNever || d >= kNever - now) return kNever;
  return now + d;
}

// A duration for a sentence: "2.0 s" from a second up, "12.5 ms" below.
inline std::string format_duration(Duration d) {
  char text[32];
  const double seconds = std::chrono::duration<double>(d).count();
  if (seconds >= 1.0) {
    std::snprintf(text, sizeof text, "%.1f s", seconds);
  } else {
    std::snprintf(text, sizeof text, "%.1f ms", seconds * 1e3);
  }
  return text;
}

inline constexpr Time time_from_ns(std::int64_t ns) { return Time(Duration(ns)); }
inline constexpr std::int64_t to_ns(Time t) { return t.time_since_epoch().count(); }
inline constexpr double ns_to_s(std::int64_t ns) { return static_cast<double>(ns) / 1e9; }

}  // namespace atp
