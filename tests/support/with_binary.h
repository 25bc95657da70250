// Shared by the process backends' tests: run options that start the freshly built `atp` (the test
// binary is not it; CMake passes its path as ATP_BINARY).
#pragma once

#include <utility>

#include "atp/backends/backend.h"

namespace atp::test {

inline RunOptions with_binary(RoundCallback on_round = {}) {
  RunOptions options;
  options.on_round = std::move(on_round);
  options.atp_binary = ATP_BINARY;
  return options;
}

}  // namespace atp::test
