// Reading a configuration file (scenario, switch config, worker spec) whole, with limits: only a
// regular file, and at most a given size, so that `/dev/zero` or a huge file is refused in one
// sentence instead of being read until memory runs out.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

namespace atp {

// Configuration files are small: a 1,000-host scenario is well under 1 MiB.
inline constexpr std::size_t kMaxConfigFileBytes = std::size_t{16} << 20;

// A file that cannot be read as a configuration: what() is one sentence naming the path
// ("x.yaml: not a regular file (a config must be a file, not a device, pipe or directory)").
class ConfigFileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The whole text of the regular file at `path`. Throws ConfigFileError when it does not exist,
// cannot be opened or read, is not a regular file (a directory, device, FIFO or socket, after
// following symbolic links), or is larger than `max_bytes`. The size is checked before anything
// is read, and again while reading (a file that grows meanwhile is refused too).
std::string read_config_file(const std::string& path, std::size_t max_bytes = kMaxConfigFileBytes);

}  // namespace atp
