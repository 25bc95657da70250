// What this machine offers, read from the system: its memory, against which the daemons and the
// scenario runners check what a config, a request or a scenario would make them hold.
#pragma once

#include <cstdint>

namespace atp {

// The machine's memory in bytes (sysconf: physical pages x page size). The largest uint64 if unknown.
std::uint64_t physical_memory_bytes();

}  // namespace atp
