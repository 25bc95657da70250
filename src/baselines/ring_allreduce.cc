// atp::RingAllreduce: ring setup (listen, connect with retries, accept with a hello) and the
// pipelined reduce-scatter + allgather over two non-blocking TCP sockets under poll().
#include "atp/baselines/ring_allreduce.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <utility>

namespace atp {
namespace {

using Clock = std::chrono::steady_clock;

// The first bytes on every ring connection: the connecting rank introduces itself, so the
// acceptor knows it is its ring neighbour and not a stray connection.
constexpr std::uint32_t kHelloMagic = 0x41545052;  // "ATPR"
struct Hello {
  std::uint32_t magic = kHelloMagic;
  std::uint32_t rank = 0;
  std::uint32_t size = 0;
};

std::string reason(int error) { return std::generic_category().message(error); }

std::string seconds(Duration d) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s", std::chrono::duration<double>(d).count());
  return text;
}

// Milliseconds until `deadline` for poll(), rounded up so that a wait never ends early; >= 0.
int ms_until(Clock::time_point deadline) {
  const auto left = deadline - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  return static_cast<int>(std::min<std::int64_t>(std::chrono::ceil<std::chrono::milliseconds>(left).count(), 1 << 30));
}

// An owned file descriptor, for the sockets of a setup that may throw half-way.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

Fd tcp_socket(int buffer_bytes) {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) throw std::system_error(errno, std::generic_category(), "cannot open a TCP socket");
  const int one = 1;
  // Small messages (the header, a chunk's tail) must leave at once, not wait for Nagle.
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (buffer_bytes > 0) {
    // FORCE lifts the net.core.*mem_max cap (root only); otherwise the capped size is still fine.
    if (::setsockopt(fd.get(), SOL_SOCKET, SO_SNDBUFFORCE, &buffer_bytes, sizeof buffer_bytes) != 0)
      ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDBUF, &buffer_bytes, sizeof buffer_bytes);
    if (::setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUFFORCE, &buffer_bytes, sizeof buffer_bytes) != 0)
      ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &buffer_bytes, sizeof buffer_bytes);
  }
  return fd;
}

// Linux "simultaneous open": connecting to a port in the ephemeral range that nobody listens on
// can pick that same port as the source and connect the socket to itself.
bool connected_to_itself(int fd) {
  sockaddr_in self{}, peer{};
  socklen_t self_len = sizeof self, peer_len = sizeof peer;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&self), &self_len) != 0) return false;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) return false;
  return self.sin_addr.s_addr == peer.sin_addr.s_addr && self.sin_port == peer.sin_port;
}

// Connects a fresh socket to `to`; returns 0 or the errno of the failure (the wait ends at `deadline`).
int try_connect(Fd& fd, const SocketAddress& to, Clock::time_point deadline) {
  const sockaddr_in addr = to_sockaddr(to);
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0) return 0;
  if (errno != EINPROGRESS) return errno;
  pollfd p{fd.get(), POLLOUT, 0};
  const int ready = ::poll(&p, 1, ms_until(deadline));
  if (ready == 0) return ETIMEDOUT;
  if (ready < 0) return errno;
  int error = 0;
  socklen_t len = sizeof error;
  if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &len) != 0) return errno;
  if (error == 0 && connected_to_itself(fd.get())) return ECONNREFUSED;
  return error;
}

// Reads exactly `size` bytes from a non-blocking socket before `deadline`; false on EOF, error or timeout.
bool read_exactly(int fd, void* out, std::size_t size, Clock::time_point deadline) {
  auto* bytes = static_cast<std::byte*>(out);
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::recv(fd, bytes + done, size - done, MSG_DONTWAIT);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
      continue;
    }
    if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) return false;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, ms_until(deadline)) <= 0) return false;
  }
  return true;
}

// sum[i] += add[i]. In blocks of 8 with restrict pointers so that -O2 (whose cheap cost model
// does not vectorize a loop that needs a scalar tail) still emits SIMD adds: on loopback the add
// was a fifth of the ring's CPU time as a scalar loop.
void add_floats(float* __restrict sum, const float* __restrict add, std::size_t count) {
  std::size_t i = 0;
  for (; i + 8 <= count; i += 8)
    for (std::size_t k = 0; k < 8; ++k) sum[i + k] += add[i + k];
  for (; i < count; ++i) sum[i] += add[i];
}

// One contiguous region of a send or receive stream: `add` means received floats are added to
// it (reduce-scatter), otherwise received bytes are written into it (header, allgather).
struct Piece {
  std::byte* bytes;
  std::size_t size;  // bytes
  bool add;
};

}  // namespace

RingAllreduce::RingAllreduce(int rank, int size, std::vector<std::string> addresses, Duration timeout,
                             RingAllreduceOptions options)
    : rank_(rank), size_(size), timeout_(timeout), options_(options) {
  if (size < 1 || rank < 0 || rank >= size)
    throw std::invalid_argument("ring allreduce: rank " + std::to_string(rank) + " is not in [0, " +
                                std::to_string(size) + "); size must be at least 1");
  if (addresses.size() != static_cast<std::size_t>(size))
    throw std::invalid_argument("ring allreduce: " + std::to_string(addresses.size()) + " addresses for " +
                                std::to_string(size) + " ranks; give one IPv4:port per rank");
  if (timeout <= Duration::zero()) throw std::invalid_argument("ring allreduce: the timeout must be positive");
  for (std::size_t i = 0; i < addresses.size(); ++i) {
    try {
      addresses_.push_back(SocketAddress::parse(addresses[i]));
    } catch (const std::invalid_argument&) {
      throw std::invalid_argument("ring allreduce: the address of rank " + std::to_string(i) + ", '" + addresses[i] +
                                  "', is not an IPv4 address and TCP port like 127.0.0.1:7000");
    }
  }
  // Whole floats per recv() in the reduce-scatter; at least one.
  options_.segment_bytes = std::max<std::size_t>(sizeof(float), options_.segment_bytes / sizeof(float) * sizeof(float));
  staging_.resize(options_.segment_bytes / sizeof(float));
  if (size_ > 1) connect_ring();
}

RingAllreduce::~RingAllreduce() { close_sockets(); }

std::string RingAllreduce::peer_name(int peer) const {
  return "rank " + std::to_string(peer) + " (" + addresses_[static_cast<std::size_t>(peer)].to_string() + ")";
}

void RingAllreduce::close_sockets() {
  if (send_fd_ >= 0) ::close(send_fd_);
  if (recv_fd_ >= 0) ::close(recv_fd_);
  send_fd_ = recv_fd_ = -1;
}

void RingAllreduce::fail(const std::string& what) {
  failure_ = "ring allreduce on rank " + std::to_string(rank_) + " of " + std::to_string(size_) + ": " + what;
  // Closing at once makes the neighbours fail now too, instead of after their own timeout.
  close_sockets();
  throw CollectiveError(failure_);
}

void RingAllreduce::connect_ring() {
  const int next = (rank_ + 1) % size_;
  const int prev = (rank_ + size_ - 1) % size_;
  const std::string who = "ring allreduce on rank " + std::to_string(rank_) + " of " + std::to_string(size_) + ": ";
  const auto deadline = Clock::now() + timeout_;

  // Listen first: the previous rank may already be retrying its connect; the kernel completes the
  // handshake into the backlog while this rank is still connecting to the next one.
  Fd listener = tcp_socket(options_.socket_buffer_bytes);  // accepted sockets inherit its buffer sizes
  const int one = 1;
  ::setsockopt(listener.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  const sockaddr_in local = to_sockaddr(addresses_[static_cast<std::size_t>(rank_)]);
  if (::bind(listener.get(), reinterpret_cast<const sockaddr*>(&local), sizeof local) != 0 ||
      ::listen(listener.get(), 16) != 0) {
    const int error = errno;  // before anything else can overwrite it
    throw CollectiveError(who + "cannot listen on " + addresses_[static_cast<std::size_t>(rank_)].to_string() + ": " +
                          reason(error));
  }

  // Connect to the next rank, retrying while it is not listening yet (it may start later).
  Fd out;
  auto backoff = std::chrono::milliseconds(5);
  for (;;) {
    out = tcp_socket(options_.socket_buffer_bytes);
    const int error = try_connect(out, addresses_[static_cast<std::size_t>(next)], deadline);
    if (error == 0) break;
    if (Clock::now() >= deadline)
      throw CollectiveError(who + "cannot connect to " + peer_name(next) + " within " + seconds(timeout_) + ": " +
                            reason(error) + "; is that rank running?");
    std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - Clock::now()));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(100));
  }
  const Hello hello{kHelloMagic, static_cast<std::uint32_t>(rank_), static_cast<std::uint32_t>(size_)};
  if (::send(out.get(), &hello, sizeof hello, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof hello)) {
    const int error = errno;
    throw CollectiveError(who + "cannot send the hello to " + peer_name(next) + ": " + reason(error));
  }

  // Accept the previous rank; anything that does not say hello as that rank is closed and skipped.
  Fd in;
  while (in.get() < 0) {
    pollfd p{listener.get(), POLLIN, 0};
    if (::poll(&p, 1, ms_until(deadline)) <= 0)
      throw CollectiveError(who + "no connection from " + peer_name(prev) + " within " + seconds(timeout_) +
                            "; is that rank running?");
    Fd candidate(::accept4(listener.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (candidate.get() < 0) continue;
    Hello theirs;
    if (!read_exactly(candidate.get(), &theirs, sizeof theirs, deadline) || theirs.magic != kHelloMagic) continue;
    if (theirs.size != static_cast<std::uint32_t>(size_) || theirs.rank != static_cast<std::uint32_t>(prev))
      throw CollectiveError(who + "expected " + peer_name(prev) + " of " + std::to_string(size_) +
                            " ranks to connect, but rank " + std::to_string(theirs.rank) + " of " +
                            std::to_string(theirs.size) + " did; do all ranks have the same address list?");
    ::setsockopt(candidate.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    in = std::move(candidate);
  }
  send_fd_ = out.release();
  recv_fd_ = in.release();
}

void RingAllreduce::allreduce(std::span<float> data) {
  if (!failure_.empty()) throw CollectiveError(failure_);
  if (size_ == 1) return;
  const std::size_t n = static_cast<std::size_t>(size_);
  const std::size_t r = static_cast<std::size_t>(rank_);
  const int next = (rank_ + 1) % size_;
  const int prev = (rank_ + size_ - 1) % size_;
  const std::size_t count = data.size();
  const std::size_t segment = options_.segment_bytes;

  // Chunk c holds elements [count*c/n, count*(c+1)/n): sizes differ by at most one element, and
  // some are empty when count < n.
  const auto chunk = [&](std::size_t c) { return reinterpret_cast<std::byte*>(data.data() + count * c / n); };
  const auto chunk_bytes = [&](std::size_t c) { return (count * (c + 1) / n - count * c / n) * sizeof(float); };

  // The two streams of this call. Step t (0 <= t < 2(n-1)) sends chunk (r - t) mod n and receives
  // chunk (r - t - 1) mod n: added during the reduce-scatter (t < n-1), copied during the
  // allgather. After the reduce-scatter this rank holds the full sum of chunk (r + 1) mod n.
  // What step t+1 sends is exactly what step t received, so the send stream may run ahead of the
  // processed part of the receive stream by the header and step 0's chunk only.
  std::uint64_t my_count = count, peer_count = 0;
  std::vector<Piece> sends{{reinterpret_cast<std::byte*>(&my_count), sizeof my_count, false}};
  std::vector<Piece> recvs{{reinterpret_cast<std::byte*>(&peer_count), sizeof peer_count, false}};
  for (std::size_t t = 0; t < 2 * (n - 1); ++t) {
    const std::size_t send_chunk = (r + 2 * n - t) % n, recv_chunk = (r + 2 * n - t - 1) % n;
    sends.push_back({chunk(send_chunk), chunk_bytes(send_chunk), false});
    recvs.push_back({chunk(recv_chunk), chunk_bytes(recv_chunk), t < n - 1});
  }
  const std::size_t send_ahead = sends[0].size + sends[1].size;  // bytes sendable before anything arrives

  std::size_t si = 0, sent_in_piece = 0, sent_total = 0;             // send stream position
  std::size_t ri = 0, done_in_piece = 0, staged = 0, processed = 0;  // receive stream; processed: payload bytes
  auto* staging = reinterpret_cast<std::byte*>(staging_.data());
  auto last_progress = Clock::now();
  for (;;) {
    while (si < sends.size() && sent_in_piece == sends[si].size) ++si, sent_in_piece = 0;
    while (ri < recvs.size() && done_in_piece == recvs[ri].size) ++ri, done_in_piece = 0;
    const bool send_done = si == sends.size(), recv_done = ri == recvs.size();
    if (send_done && recv_done) return;
    bool progress = false;

    std::size_t sendable = 0;
    if (!send_done) {
      sendable = std::min({sends[si].size - sent_in_piece, send_ahead + processed - sent_total, segment});
      if (sendable > 0) {
        const ssize_t k = ::send(send_fd_, sends[si].bytes + sent_in_piece, sendable, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (k > 0) {
          sent_in_piece += static_cast<std::size_t>(k);
          sent_total += static_cast<std::size_t>(k);
          progress = true;
        } else if (const int error = errno; error != EAGAIN && error != EWOULDBLOCK && error != EINTR) {
          fail("cannot send to " + peer_name(next) + ": " + reason(error));
        }
      }
    }

    if (!recv_done) {
      const Piece& piece = recvs[ri];
      // Added pieces go through the staging buffer (whole floats are added, a partial float waits);
      // copied pieces are received in place.
      std::byte* into = piece.add ? staging + staged : piece.bytes + done_in_piece;
      const std::size_t want = piece.add ? std::min(piece.size - done_in_piece - staged, segment - staged)
                                         : std::min(piece.size - done_in_piece, segment);
      const ssize_t k = ::recv(recv_fd_, into, want, MSG_DONTWAIT);
      const int error = errno;
      if (k == 0) {
        fail(peer_name(prev) + " closed the connection in the middle of an allreduce of " + std::to_string(count) +
             " floats");
      } else if (k < 0 && error != EAGAIN && error != EWOULDBLOCK && error != EINTR) {
        fail("cannot receive from " + peer_name(prev) + ": " + reason(error));
      } else if (k > 0) {
        progress = true;
        std::size_t got = static_cast<std::size_t>(k);
        if (piece.add) {
          staged += got;
          const std::size_t floats = staged / sizeof(float);
          add_floats(reinterpret_cast<float*>(piece.bytes + done_in_piece), staging_.data(), floats);
          got = floats * sizeof(float);
          staged -= got;
          std::memmove(staging, staging + got, staged);  // a partial float's 0-3 bytes
        }
        done_in_piece += got;
        if (ri > 0) processed += got;
        if (ri == 0 && done_in_piece == sizeof peer_count && peer_count != count)
          fail(peer_name(prev) + " called allreduce with " + std::to_string(peer_count) +
               " floats and this rank with " + std::to_string(count) + "; every rank must pass the same size");
      }
    }
    if (progress) {
      last_progress = Clock::now();
      continue;
    }

    // Nothing moved: sleep until a socket is ready, at most until the stall deadline.
    pollfd fds[2];
    nfds_t nfds = 0;
    if (sendable > 0) fds[nfds++] = {send_fd_, POLLOUT, 0};
    if (!recv_done) fds[nfds++] = {recv_fd_, POLLIN, 0};
    const auto deadline = last_progress + timeout_;
    const int ready = ::poll(fds, nfds, ms_until(deadline));
    if (const int error = errno; ready < 0 && error != EINTR) fail(std::string("poll failed: ") + reason(error));
    if (ready == 0 && Clock::now() >= deadline) {
      std::string what = "no progress for " + seconds(timeout_) + ": ";
      what += recv_done ? peer_name(next) + " accepts no data" : "no data from " + peer_name(prev);
      if (!recv_done && sendable > 0) what += ", and " + peer_name(next) + " accepts none";
      fail(what + "; is that rank stuck or gone?");
    }
  }
}

}  // namespace atp
