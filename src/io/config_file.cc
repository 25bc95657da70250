// Bounded reading of configuration files: regular files only, size checked before reading.
#include "atp/io/config_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

namespace atp {
namespace {

std::string errno_text() { return std::strerror(errno); }

// Closes the descriptor on every path out.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::string read_config_file(const std::string& path, std::size_t max_bytes) {
  // O_NONBLOCK: opening a FIFO with no writer must not block; it is refused below anyway.
  Fd file{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  if (file.fd < 0) throw ConfigFileError(path + ": cannot open the file (" + errno_text() + ")");
  struct stat st {};
  if (::fstat(file.fd, &st) != 0) throw ConfigFileError(path + ": cannot read the file (" + errno_text() + ")");
  if (!S_ISREG(st.st_mode)) {
    throw ConfigFileError(path + ": not a regular file (a config must be a file, not a device, pipe or directory)");
  }
  const auto too_large = [&] {
    return ConfigFileError(path + ": larger than " + std::to_string(max_bytes) + " bytes, too large for a config file");
  };
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes) throw too_large();
  std::string text;
  text.resize(static_cast<std::size_t>(st.st_size));
  std::size_t used = 0;
  for (;;) {
    if (used == text.size()) {
      if (text.size() >= max_bytes + 1) break;  // read one byte past the limit: too large
      text.resize(std::min(max_bytes + 1, std::max<std::size_t>(text.size() * 2, 4096)));
    }
    const ssize_t n = ::read(file.fd, text.data() + used, text.size() - used);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw ConfigFileError(path + ": cannot read the file (" + errno_text() + ")");
    }
    if (n == 0) break;
    used += static_cast<std::size_t>(n);
  }
  if (used > max_bytes) throw too_large();
  text.resize(used);
  return text;
}

}  // namespace atp
