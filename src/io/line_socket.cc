// LineSocket and LineListener: Unix-domain stream sockets, a line per message.
#include "atp/io/line_socket.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <utility>

namespace atp {
namespace {

sockaddr_un unix_address(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof address.sun_path) {
    throw std::runtime_error("'" + path + "' cannot name a Unix socket (1 to " +
                             std::to_string(sizeof address.sun_path - 1) + " characters)");
  }
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  return address;
}

}  // namespace

LineSocket LineSocket::connect(const std::string& path) {
  const sockaddr_un address = unix_address(path);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error("cannot create a Unix socket: " + std::string(std::strerror(errno)));
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    throw std::runtime_error("cannot connect to " + path + ": " + why);
  }
  return LineSocket(fd);
}

LineSocket::~LineSocket() {
  if (fd_ >= 0) ::close(fd_);
}

LineSocket::LineSocket(LineSocket&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), buffer_(std::move(other.buffer_)), closed_(other.closed_) {}

LineSocket& LineSocket::operator=(LineSocket&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    buffer_ = std::move(other.buffer_);
    closed_ = other.closed_;
  }
  return *this;
}

bool LineSocket::send_line(const std::string& line) {
  const std::string text = line + "\n";
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::send(fd_, text.data() + done, text.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

std::optional<std::string> LineSocket::take_line() {
  const std::size_t nl = buffer_.find('\n');
  if (nl == std::string::npos) return std::nullopt;
  std::string line = buffer_.substr(0, nl);
  buffer_.erase(0, nl + 1);
  return line;
}

bool LineSocket::read_once() {
  char chunk[4096];
  const ssize_t n = ::recv(fd_, chunk, sizeof chunk, MSG_DONTWAIT);
  if (n > 0) {
    buffer_.append(chunk, static_cast<std::size_t>(n));
    return true;
  }
  if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) closed_ = true;
  return false;
}

std::optional<std::string> LineSocket::read_line(Clock::time_point deadline) {
  for (;;) {
    if (auto line = take_line()) return line;
    if (closed_) return std::nullopt;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return std::nullopt;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000))) > 0) read_once();
  }
}

std::vector<std::string> LineSocket::read_ready() {
  while (!closed_ && read_once()) {
  }
  std::vector<std::string> lines;
  while (auto line = take_line()) lines.push_back(std::move(*line));
  return lines;
}

LineListener::LineListener(std::string path) : path_(std::move(path)) {
  const sockaddr_un address = unix_address(path_);
  fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd_ < 0) throw std::runtime_error("cannot create a Unix socket: " + std::string(std::strerror(errno)));
  ::unlink(path_.c_str());
  if (::bind(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0 || ::listen(fd_, 64) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd_);
    throw std::runtime_error("cannot listen on " + path_ + ": " + why);
  }
}

LineListener::~LineListener() {
  ::close(fd_);
  ::unlink(path_.c_str());
}

std::optional<LineSocket> LineListener::accept() {
  const int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) return std::nullopt;
  return LineSocket(fd);
}

}  // namespace atp
