// The baselines' one way to write a duration in their error sentences ("2.0 s"), shared by the
// TCP schedules and Gloo.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

#include "atp/time.h"

namespace atp::baselines {

inline std::string seconds_text(Duration d) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s", std::chrono::duration<double>(d).count());
  return text;
}

}  // namespace atp::baselines
