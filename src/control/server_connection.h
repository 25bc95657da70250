// One control-server connection as httplib's byte stream: the request read and the answer written
// under ServerLimits' deadlines and byte bound, then the linger before the close; and a request
// held in memory, read with the same bound (answer_request). Private to the control layer.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

#include "atp/control/control.h"
#include "server_transport.h"

namespace atp::control::detail {

using Clock = std::chrono::steady_clock;

// The request line and headers may add this much to a request's body: the most a request reads.
inline constexpr std::size_t kMaxRequestBytes = kMaxBodyBytes + (std::size_t{64} << 10);

// What the connections of one server share with its thread pool (connection_pool.h).
struct ConnectionState {
  explicit ConnectionState(const ServerLimits& l) : limits(l) {}
  const ServerLimits limits;
  std::atomic<std::size_t> waiting{0};  // accepted connections no thread has taken up yet
  std::atomic<bool> stopping{false};    // the server is stopping: every connection gives up
};

// One connection's byte stream for httplib, over `transport`, with ServerLimits' bounds: opening
// it (TLS's handshake) and reading the request must finish within request_deadline of the
// connection being taken up, writing the answer within request_deadline of its first byte, and
// either gives up after slow_request when other connections wait. At most kMaxRequestBytes are
// read.
class ConnectionStream final : public httplib::Stream {
 public:
  ConnectionStream(Transport& transport, int sock, const ConnectionState& state)
      : transport_(transport), sock_(sock), state_(state), phase_start_(Clock::now()) {}

  // What comes before the request (TLS's handshake); false when it failed or ran out of time.
  bool open();

  bool is_readable() const override;
  bool is_writable() const override;
  // After an interim "100 Continue" the body is read under the answer's deadline: still bounded.
  ssize_t read(char* ptr, size_t size) override;
  // All of it or -1 (httplib's write_format does not retry a partial write).
  ssize_t write(const char* ptr, size_t size) override;

  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override { return sock_; }

 private:
  // True when this phase (reading the request, or writing the answer) is out of time, or must
  // give its thread up, `in_phase` after it began.
  bool out_of_time(Clock::duration in_phase) const;

  // Repeats a transport's `step` until it moves bytes or fails (its bytes), waiting for the
  // socket in between; -1 when this phase is out of time, checked before every step.
  template <typename Step>
  ssize_t run(Step step) const {
    for (;;) {
      if (out_of_time(Clock::now() - phase_start_)) return -1;
      const Transport::Step s = step();
      if (s.wait_for == 0) return s.bytes;
      if (!wait(s.wait_for)) return -1;
    }
  }

  // Waits until the socket is ready for `events`; false when this phase is out of time.
  bool wait(short events) const;

  Transport& transport_;
  int sock_;
  const ConnectionState& state_;
  Clock::time_point phase_start_;  // when reading the request, then writing the answer, began
  bool writing_ = false;
  std::size_t received_ = 0;  // bytes of the request read from the socket
  char buffer_[4096];         // httplib reads headers a byte at a time: one recv per 4 KiB instead
  std::size_t used_ = 0, filled_ = 0;
};

// A request given as bytes, for answer_request: read with the same bound as a connection's.
class MemoryStream final : public httplib::Stream {
 public:
  MemoryStream(std::string_view request, std::string& answer) : request_(request), answer_(answer) {}
  bool is_readable() const override { return true; }
  bool is_writable() const override { return true; }
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override {
    answer_.append(ptr, size);
    return static_cast<ssize_t>(size);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip.clear();
    port = 0;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip.clear();
    port = 0;
  }
  socket_t socket() const override { return INVALID_SOCKET; }

 private:
  std::string_view request_;
  std::string& answer_;
  std::size_t read_ = 0;
};

// After the answer: sends end of file and drops what the client still sends until it closes, at
// most kLingerTime or kMaxLingerBytes (server_connection.cc), and not while other connections
// wait for a thread or the server stops. The caller closes the socket.
void linger(socket_t sock, const ConnectionState& state);

}  // namespace atp::control::detail
