// atp::TcpScheduleAllreduce: connections to a schedule's peers (listen, connect with retries,
// accept with a hello) and the poll() loop that runs the schedule's executor over them.
#include "atp/baselines/tcp_schedule_allreduce.h"

#include <arpa/inet.h>
#include <linux/tcp.h>  // TCP_NODELAY, and struct tcp_info with the busy times (glibc's lacks them)
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <utility>

#include "atp/schedule/executor.h"
#include "atp/time.h"

namespace atp {
namespace {

using Clock = std::chrono::steady_clock;

// The first bytes on every connection: the connecting rank introduces itself, so the
// acceptor knows which of its peers it is and can refuse a stray connection. In host byte order,
// as the count header of each allreduce: the ranks run on one machine or on machines of one
// endianness (x86-64 and AArch64 Linux are both little-endian).
constexpr std::uint32_t kHelloMagic = 0x41545052;  // "ATPR"
struct Hello {
  std::uint32_t magic = kHelloMagic;
  std::uint32_t rank = 0;
  std::uint32_t size = 0;
  std::uint32_t lane = 0;  // which of the schedule's connections to this peer (schedule.h)
};

// How long an accepted connection has to say hello: a peer sends it right after its connect
// completes, so 1 s is ample on any network; a silent stray connection (a port scan, a health
// check) is dropped after it, and meanwhile the real peers' hellos are read beside it.
constexpr Duration kHelloTimeout = std::chrono::seconds(1);

std::string reason(int error) { return std::generic_category().message(error); }

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

// A socket listening on `at` (port 0: one the kernel picks); the sockets it accepts inherit its
// buffer sizes. Throws CollectiveError beginning with `who`.
Fd listen_on(const SocketAddress& at, int buffer_bytes, const std::string& who) {
  Fd listener = tcp_socket(buffer_bytes);
  const int one = 1;
  ::setsockopt(listener.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  const sockaddr_in local = to_sockaddr(at);
  if (::bind(listener.get(), reinterpret_cast<const sockaddr*>(&local), sizeof local) != 0 ||
      ::listen(listener.get(), 128) != 0) {
    const int error = errno;  // before anything else can overwrite it
    throw CollectiveError(who + "cannot listen on " + at.to_string() + ": " + reason(error));
  }
  return listener;
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

// A connection's counters for LinkSample: bytes acknowledged, microseconds with data to send,
// smoothed round trip (microseconds). Zero where the kernel does not say.
struct TcpCounters {
  std::uint64_t acked = 0, active_us = 0;
  std::uint32_t rtt_us = 0;
};

TcpCounters tcp_counters(int fd) {
  tcp_info info{};
  socklen_t length = sizeof info;
  TcpCounters c;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &length) != 0) return c;
  // Older kernels fill less of the struct (length says how much): the fields past it stay 0.
  c.acked = info.tcpi_bytes_acked;
  c.active_us = info.tcpi_busy_time + info.tcpi_rwnd_limited + info.tcpi_sndbuf_limited;
  c.rtt_us = info.tcpi_rtt;
  return c;
}

}  // namespace

TcpScheduleAllreduce::TcpScheduleAllreduce(std::string name, ScheduleBuilder build, int rank, int size,
                                           std::vector<std::string> addresses, Duration timeout,
                                           TcpAllreduceOptions options)
    : TcpScheduleAllreduce(std::move(name), std::move(build), rank, size, std::move(addresses), timeout, options, -1) {}

std::unique_ptr<TcpScheduleAllreduce> TcpScheduleAllreduce::join(std::string name, ScheduleBuilder build, Store& store,
                                                                 int rank, int size, std::uint32_t bind_ip,
                                                                 Duration timeout, TcpAllreduceOptions options) {
  const std::string who = name + " allreduce on rank " + std::to_string(rank) + " of " + std::to_string(size) + ": ";
  Fd listener = listen_on(SocketAddress{bind_ip, 0}, options.socket_buffer_bytes, who);
  sockaddr_in local{};
  socklen_t length = sizeof local;
  if (::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&local), &length) != 0) {
    throw CollectiveError(who + "cannot read the port it listens on: " + reason(errno));
  }
  const std::string key = "tcp/" + name + "/";
  store.set(key + std::to_string(rank), from_sockaddr(local).to_string());
  std::vector<std::string> addresses;
  for (int r = 0; r < size; ++r) addresses.push_back(store.get(key + std::to_string(r), timeout));
  return std::unique_ptr<TcpScheduleAllreduce>(new TcpScheduleAllreduce(
      std::move(name), std::move(build), rank, size, std::move(addresses), timeout, options, listener.release()));
}

TcpScheduleAllreduce::TcpScheduleAllreduce(std::string name, ScheduleBuilder build, int rank, int size,
                                           std::vector<std::string> addresses, Duration timeout,
                                           TcpAllreduceOptions options, int listener)
    : name_(std::move(name)), build_(std::move(build)), rank_(rank), size_(size), timeout_(timeout), options_(options) {
  Fd owned(listener);  // closed if the checks below throw
  if (size < 1 || rank < 0 || rank >= size)
    throw std::invalid_argument(name_ + " allreduce: rank " + std::to_string(rank) + " is not in [0, " +
                                std::to_string(size) + "); size must be at least 1");
  if (addresses.size() != static_cast<std::size_t>(size))
    throw std::invalid_argument(name_ + " allreduce: " + std::to_string(addresses.size()) + " addresses for " +
                                std::to_string(size) + " ranks; give one IPv4:port per rank");
  if (timeout <= Duration::zero()) throw std::invalid_argument(name_ + " allreduce: the timeout must be positive");
  for (std::size_t i = 0; i < addresses.size(); ++i) {
    try {
      addresses_.push_back(SocketAddress::parse(addresses[i]));
    } catch (const std::invalid_argument&) {
      throw std::invalid_argument(name_ + " allreduce: the address of rank " + std::to_string(i) + ", '" +
                                  addresses[i] + "', is not an IPv4 address and TCP port like 127.0.0.1:7000");
    }
  }
  if (options_.segment_bytes > kMaxSegmentBytes)
    throw std::invalid_argument(name_ + " allreduce: a segment of " + std::to_string(options_.segment_bytes) +
                                " bytes is larger than any buffer can be (" + std::to_string(kMaxSegmentBytes) +
                                " bytes)");
  // Whole floats per call; at least one.
  options_.segment_bytes = std::max(sizeof(float), options_.segment_bytes / sizeof(float) * sizeof(float));
  const Schedule empty = build_(rank, size, 0);
  lanes_ = empty.lanes;
  const std::vector<int> channels = schedule_channels(empty);
  if (!channels.empty()) connect_channels(channels, owned.release());
}

TcpScheduleAllreduce::~TcpScheduleAllreduce() { close_sockets(); }

std::string TcpScheduleAllreduce::peer_name(int peer) const {
  return "rank " + std::to_string(peer) + " (" + addresses_[static_cast<std::size_t>(peer)].to_string() + ")";
}

std::string TcpScheduleAllreduce::channel_name(int channel) const {
  const int lane = channel / size_;
  return peer_name(channel % size_) + (lanes_ > 1 ? " on lane " + std::to_string(lane) : "");
}

std::string TcpScheduleAllreduce::prefix() const {
  return name_ + " allreduce on rank " + std::to_string(rank_) + " of " + std::to_string(size_) + ": ";
}

void TcpScheduleAllreduce::close_sockets() {
  for (Link& link : links_) {
    if (link.fd >= 0) ::close(link.fd);
    link.fd = -1;
  }
}

void TcpScheduleAllreduce::fail(const std::string& what) {
  failure_ = prefix() + what;
  // Closing at once makes the peers fail now too, instead of after their own timeout.
  close_sockets();
  throw CollectiveError(failure_);
}

// Long: one rendezvous under one deadline: the connects to the higher peers and the accepts of
// the lower ones fill one list of sockets, and the error at the deadline names those still missing.
void TcpScheduleAllreduce::connect_channels(const std::vector<int>& channels, int listening) {
  const std::string who = prefix();
  const auto deadline = Clock::now() + timeout_;

  // Listen first: lower ranks may already be retrying their connects; the kernel completes the
  // handshakes into the backlog while this rank is still connecting to the higher ones.
  Fd listener(listening);
  if (listener.get() < 0) {
    listener = listen_on(addresses_[static_cast<std::size_t>(rank_)], options_.socket_buffer_bytes, who);
  }

  // Connect to the higher peers, retrying while one is not listening yet (it may start later).
  std::vector<Fd> fds(channels.size());
  std::size_t awaited = 0;  // lower peers' channels that have not connected yet
  for (std::size_t i = 0; i < channels.size(); ++i) {
    const int peer = channels[i] % size_;
    if (peer < rank_) {
      ++awaited;
      continue;
    }
    auto backoff = std::chrono::milliseconds(5);
    for (;;) {
      fds[i] = tcp_socket(options_.socket_buffer_bytes);
      const int error = try_connect(fds[i], addresses_[static_cast<std::size_t>(peer)], deadline);
      if (error == 0) break;
      if (Clock::now() >= deadline)
        throw CollectiveError(who + "cannot connect to " + channel_name(channels[i]) + " within " +
                              format_duration(timeout_) + ": " + reason(error) + "; is that rank running?");
      std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - Clock::now()));
      backoff = std::min(backoff * 2, std::chrono::milliseconds(100));
    }
    const Hello hello{kHelloMagic, static_cast<std::uint32_t>(rank_), static_cast<std::uint32_t>(size_),
                      static_cast<std::uint32_t>(channels[i] / size_)};
    if (::send(fds[i].get(), &hello, sizeof hello, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof hello)) {
      const int error = errno;
      throw CollectiveError(who + "cannot send the hello to " + channel_name(channels[i]) + ": " + reason(error));
    }
  }

  // Accept the lower peers. The listener and the accepted connections that have not said hello
  // yet are polled together, so that a silent stray connection holds up no one: it is dropped
  // after kHelloTimeout, one that closes or says something else at once.
  struct Candidate {
    Fd fd;
    Hello hello;
    std::size_t received = 0;  // bytes of `hello` so far
    Clock::time_point deadline;
  };
  std::vector<Candidate> candidates;
  std::vector<pollfd> polled;
  while (awaited > 0) {
    const auto now = Clock::now();
    if (now >= deadline) {
      std::string missing;
      for (std::size_t i = 0; i < channels.size(); ++i)
        if (channels[i] % size_ < rank_ && fds[i].get() < 0)
          missing += (missing.empty() ? "" : ", ") + channel_name(channels[i]);
      throw CollectiveError(who + "no connection from " + missing + " within " + format_duration(timeout_) +
                            "; is that rank running?");
    }
    std::erase_if(candidates, [now](const Candidate& c) { return now >= c.deadline; });
    auto wake = deadline;
    polled.assign(1, pollfd{listener.get(), POLLIN, 0});
    for (const Candidate& c : candidates) {
      polled.push_back({c.fd.get(), POLLIN, 0});
      wake = std::min(wake, c.deadline);
    }
    if (::poll(polled.data(), polled.size(), ms_until(wake)) < 0) {
      const int error = errno;
      if (error == EINTR) continue;
      throw CollectiveError(who + "cannot wait for connections: poll failed: " + reason(error));
    }

    // The hellos first (polled[k + 1] is candidates[k]), backwards so that erasing keeps the pairing.
    for (std::size_t k = candidates.size(); k-- > 0;) {
      if (polled[k + 1].revents == 0) continue;
      Candidate& c = candidates[k];
      const ssize_t n = ::recv(c.fd.get(), reinterpret_cast<std::byte*>(&c.hello) + c.received,
                               sizeof c.hello - c.received, MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
      if (n > 0) c.received += static_cast<std::size_t>(n);
      if (n > 0 && c.received < sizeof c.hello) continue;
      Candidate done = std::move(c);
      candidates.erase(candidates.begin() + static_cast<std::ptrdiff_t>(k));
      if (n <= 0 || done.hello.magic != kHelloMagic) continue;  // closed, broken or not ours: a stray
      const Hello& theirs = done.hello;
      // rank and lane are below size and kMaxLanes where they are a channel of this rank's, which
      // the search checks: a larger one names no channel here.
      const bool fits = theirs.size == static_cast<std::uint32_t>(size_) && theirs.rank < theirs.size &&
                        theirs.lane < static_cast<std::uint32_t>(lanes_);
      const int theirs_channel = fits ? static_cast<int>(theirs.lane) * size_ + static_cast<int>(theirs.rank) : -1;
      const auto it = std::find(channels.begin(), channels.end(), theirs_channel);
      const std::size_t i = static_cast<std::size_t>(it - channels.begin());
      if (it == channels.end() || static_cast<int>(theirs.rank) >= rank_ || fds[i].get() >= 0)
        throw CollectiveError(who + "rank " + std::to_string(theirs.rank) + " of " + std::to_string(theirs.size) +
                              " connected on lane " + std::to_string(theirs.lane) +
                              ", which is not a lower peer's connection to this rank of " + std::to_string(size_) +
                              " ranks that has yet to be made; do all ranks have the same address list?");
      const int one = 1;
      ::setsockopt(done.fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      fds[i] = std::move(done.fd);
      --awaited;
    }

    if (awaited == 0 || polled[0].revents == 0) continue;
    Fd candidate(::accept4(listener.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (candidate.get() >= 0) {
      candidates.push_back({std::move(candidate), Hello{}, 0, std::min(deadline, Clock::now() + kHelloTimeout)});
      continue;
    }
    // Gone before it was accepted, or a signal: the next pass tries again. Anything else (out of
    // file descriptors, say) leaves the connection queued and the listener ready at once, so
    // retrying would only spin until the deadline.
    if (const int error = errno; error != EAGAIN && error != EWOULDBLOCK && error != EINTR && error != ECONNABORTED)
      throw CollectiveError(who + "cannot accept a connection on " +
                            addresses_[static_cast<std::size_t>(rank_)].to_string() + ": " + reason(error));
  }
  for (std::size_t i = 0; i < channels.size(); ++i) links_.push_back({channels[i], fds[i].release()});
}

template <typename F>
void TcpScheduleAllreduce::guarded(F&& body) {
  if (!failure_.empty()) throw CollectiveError(failure_);
  try {
    body();
  } catch (const std::exception& e) {
    if (!failure_.empty()) throw;  // from fail(): the sockets are closed already
    // Anything else (the executor's std::logic_error, the builder's error, std::bad_alloc) leaves
    // the streams half way as well: fail the same way, so the peers stop and later calls throw.
    fail(e.what());
  } catch (...) {
    if (!failure_.empty()) throw;
    fail("an exception that is not a std::exception");
  }
}

void TcpScheduleAllreduce::allreduce(std::span<float> data) {
  guarded([&] { run_schedule(schedule_for(data.size()), data); });
}

void TcpScheduleAllreduce::run(const Schedule& schedule, std::span<float> data) {
  guarded([&] {
    if (schedule.rank != rank_ || schedule.size != size_ || schedule.count != data.size()) {
      fail("a schedule for rank " + std::to_string(schedule.rank) + " of " + std::to_string(schedule.size) + " over " +
           std::to_string(schedule.count) + " elements cannot run on rank " + std::to_string(rank_) + " of " +
           std::to_string(size_) + " over " + std::to_string(data.size()));
    }
    check_connected(schedule);
    run_schedule(schedule, data);
  });
}

const Schedule& TcpScheduleAllreduce::schedule_for(std::size_t count) {
  if (!schedule_ || schedule_->count != count) {
    schedule_ = build_(rank_, size_, count);
    check_connected(*schedule_);  // once per schedule built, not on every call
  }
  return *schedule_;
}

void TcpScheduleAllreduce::check_connected(const Schedule& schedule) {
  // The connections were made to the peers of the schedule without elements; one that this
  // schedule names besides would get another peer's bytes (a builder whose peers depend on the
  // count). Refused, as loudly as a lost connection (later calls throw the same).
  for (const int channel : schedule_channels(schedule)) {
    if (std::none_of(links_.begin(), links_.end(), [channel](const Link& l) { return l.channel == channel; })) {
      fail("the schedule for " + std::to_string(schedule.count) + " elements exchanges with " + channel_name(channel) +
           ", which the schedule without elements did not name, so no connection to it was made");
    }
  }
}

// Long: one poll loop over the call's links; its steps (count headers, the executor's bytes, the
// wait) share the call's state (headers, executor, link index) through the lambdas above it.
void TcpScheduleAllreduce::run_schedule(const Schedule& schedule, std::span<float> data) {
  const std::size_t count = data.size();
  link_samples_.clear();
  if (links_.empty()) return;
  ScheduleExecutor executor(schedule, data, options_.segment_bytes);
  std::vector<TcpCounters> before(links_.size());
  for (std::size_t i = 0; i < links_.size(); ++i) before[i] = tcp_counters(links_[i].fd);
  const auto sample_links = [&] {
    for (std::size_t i = 0; i < links_.size(); ++i) {
      const TcpCounters after = tcp_counters(links_[i].fd);
      if (after.acked <= before[i].acked) continue;
      link_samples_.push_back({links_[i].channel % size_, links_[i].channel / size_, after.acked - before[i].acked,
                               static_cast<double>(after.active_us - before[i].active_us) * 1e-6, after.rtt_us * 1e-6});
    }
  };

  // Per link: the count header this call sends and the one it receives, each 8 bytes long (host
  // byte order, as the hello), ahead of the schedule's bytes, in each direction that carries data.
  struct Header {
    std::uint64_t out = 0, in = 0;
    std::size_t sent = sizeof(std::uint64_t), received = sizeof(std::uint64_t);  // bytes; 8: none (left)
  };
  constexpr std::size_t kHeader = sizeof(std::uint64_t);
  std::vector<Header> headers(links_.size());
  std::vector<int> channels(links_.size());  // ascending, as links_
  for (std::size_t i = 0; i < links_.size(); ++i) {
    channels[i] = links_[i].channel;
    headers[i].out = count;
    if (executor.sends_to(links_[i].channel)) headers[i].sent = 0;
    if (executor.receives_from(links_[i].channel)) headers[i].received = 0;
  }
  const auto link_of = [&channels](int channel) {
    return static_cast<std::size_t>(std::lower_bound(channels.begin(), channels.end(), channel) - channels.begin());
  };

  // One send() / recv() on link i: the bytes that moved, 0 when the socket has no room or no data.
  const auto send_some = [&](std::size_t i, std::span<const std::byte> out) -> std::size_t {
    const ssize_t k = ::send(links_[i].fd, out.data(), out.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (k > 0) return static_cast<std::size_t>(k);
    if (const int error = errno; error != EAGAIN && error != EWOULDBLOCK && error != EINTR)
      fail("cannot send to " + channel_name(links_[i].channel) + ": " + reason(error));
    return 0;
  };
  const auto receive_some = [&](std::size_t i, std::span<std::byte> into) -> std::size_t {
    const ssize_t k = ::recv(links_[i].fd, into.data(), into.size(), MSG_DONTWAIT);
    if (k > 0) return static_cast<std::size_t>(k);
    const int error = errno;
    if (k == 0)
      fail(channel_name(links_[i].channel) + " closed the connection in the middle of an allreduce of " +
           std::to_string(count) + " floats");
    if (error != EAGAIN && error != EWOULDBLOCK && error != EINTR)
      fail("cannot receive from " + channel_name(links_[i].channel) + ": " + reason(error));
    return 0;
  };
  // The schedule's bytes on a link wait for its count header in that direction.
  const auto try_send = [&](int channel, std::span<const std::byte> out) -> std::size_t {
    const std::size_t i = link_of(channel);
    return headers[i].sent < kHeader ? 0 : send_some(i, out);
  };
  const auto try_receive = [&](int channel, std::span<std::byte> into) -> std::size_t {
    const std::size_t i = link_of(channel);
    return headers[i].received < kHeader ? 0 : receive_some(i, into);
  };

  std::vector<pollfd> fds(links_.size());
  std::vector<char> wants_send(links_.size()), wants_receive(links_.size());
  auto last_progress = Clock::now();
  for (;;) {
    bool progress = false;
    for (std::size_t i = 0; i < links_.size(); ++i) {
      Header& h = headers[i];
      if (h.sent < kHeader) {
        const std::size_t k = send_some(i, std::as_bytes(std::span(&h.out, 1)).subspan(h.sent));
        h.sent += k;
        progress = progress || k > 0;
      }
      if (h.received < kHeader) {
        const std::size_t k = receive_some(i, std::as_writable_bytes(std::span(&h.in, 1)).subspan(h.received));
        h.received += k;
        progress = progress || k > 0;
        if (k > 0 && h.received == kHeader && h.in != count)
          fail(channel_name(links_[i].channel) + " called allreduce with " + std::to_string(h.in) +
               " floats and this rank with " + std::to_string(count) + "; every rank must pass the same size");
      }
    }
    if (move_bytes(executor, channels, try_send, try_receive)) progress = true;
    bool headers_done = true;
    for (const Header& h : headers) headers_done = headers_done && h.sent == kHeader && h.received == kHeader;
    if (headers_done && executor.done()) {
      sample_links();
      return;
    }
    if (progress) {
      last_progress = Clock::now();
      continue;
    }

    // Nothing moved: sleep until a socket is ready, at most until the stall deadline.
    nfds_t nfds = 0;
    for (std::size_t i = 0; i < links_.size(); ++i) {
      const int channel = links_[i].channel;
      wants_send[i] = headers[i].sent < kHeader || !executor.next_send(channel).empty();
      wants_receive[i] = headers[i].received < kHeader || !executor.next_receive(channel).empty();
      const short events = static_cast<short>((wants_send[i] ? POLLOUT : 0) | (wants_receive[i] ? POLLIN : 0));
      if (events != 0) fds[nfds++] = {links_[i].fd, events, 0};
    }
    if (nfds == 0) {
      // Cannot happen for a valid schedule: its first unfinished step waits for no other step.
      fail("the schedule is not done but none of its steps can move (" + stuck_steps(executor) +
           "); the schedule is wrong");
    }
    const auto deadline = last_progress + timeout_;
    const int ready = ::poll(fds.data(), nfds, ms_until(deadline));
    if (const int error = errno; ready < 0 && error != EINTR) fail(std::string("poll failed: ") + reason(error));
    if (ready == 0 && Clock::now() >= deadline) {
      fail("no progress for " + format_duration(timeout_) + ": " + stalled_links(wants_receive, wants_send) +
           "; is that rank stuck or gone?");
    }
  }
}

std::string TcpScheduleAllreduce::stuck_steps(const ScheduleExecutor& executor) const {
  std::string stuck;
  for (const Link& link : links_) {
    if (const long step = executor.next_send_step(link.channel); step >= 0)
      stuck += (stuck.empty() ? "" : ", ") + ("step " + std::to_string(step) + " waits to send to ") +
               channel_name(link.channel);
    if (const long step = executor.next_receive_step(link.channel); step >= 0)
      stuck += (stuck.empty() ? "" : ", ") + ("step " + std::to_string(step) + " waits to receive from ") +
               channel_name(link.channel);
  }
  return stuck;
}

std::string TcpScheduleAllreduce::stalled_links(const std::vector<char>& wants_receive,
                                                const std::vector<char>& wants_send) const {
  std::string silent, full;
  for (std::size_t i = 0; i < links_.size(); ++i) {
    if (wants_receive[i]) silent += (silent.empty() ? "" : ", ") + channel_name(links_[i].channel);
    if (wants_send[i]) full += (full.empty() ? "" : ", ") + channel_name(links_[i].channel);
  }
  std::string what;
  if (!silent.empty()) what += "no data from " + silent;
  if (!full.empty()) what += (silent.empty() ? "" : ", and ") + full + " accepts none";
  return what;
}

}  // namespace atp
