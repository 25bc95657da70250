// Unix-domain stream sockets carrying one text line per message: how ranks in a testbed's network
// namespaces reach the runner that built them (a socket on a file path is reachable from every
// network namespace of the machine; an address inside one is not).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace atp {

class LineSocket {
 public:
  using Clock = std::chrono::steady_clock;
  // Connects to the socket at `path`. Throws std::runtime_error naming the path and why.
  static LineSocket connect(const std::string& path);
  explicit LineSocket(int fd) : fd_(fd) {}
  ~LineSocket();
  LineSocket(LineSocket&& other) noexcept;
  LineSocket& operator=(LineSocket&& other) noexcept;
  LineSocket(const LineSocket&) = delete;
  LineSocket& operator=(const LineSocket&) = delete;

  int fd() const { return fd_; }
  // Sends `line` and a newline; false when the peer is gone.
  bool send_line(const std::string& line);
  // The next line (without its newline), waiting until `deadline`; nullopt at the deadline or
  // once the peer closed the connection (closed() says which).
  std::optional<std::string> read_line(Clock::time_point deadline);
  // Reads what has arrived without waiting and returns its complete lines; closed() once the peer
  // closed the connection.
  std::vector<std::string> read_ready();
  bool closed() const { return closed_; }

 private:
  std::optional<std::string> take_line();
  bool read_once();  // one read(); false when nothing was there

  int fd_ = -1;
  std::string buffer_;
  bool closed_ = false;
};

// A listening Unix-domain socket at a path (removed again by the destructor).
class LineListener {
 public:
  // Throws std::runtime_error naming the path and why.
  explicit LineListener(std::string path);
  ~LineListener();
  LineListener(const LineListener&) = delete;
  LineListener& operator=(const LineListener&) = delete;

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  // A connection waiting to be accepted, or nullopt when none is.
  std::optional<LineSocket> accept();

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace atp
