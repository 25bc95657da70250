// An allreduce whose algorithm is a schedule (atp/schedule/builders.h) and whose transport is
// plain TCP between processes: the driver that runs one rank's ScheduleExecutor over non-blocking
// sockets under poll(). The ring (ring_allreduce.h) and halving-doubling are this class with a
// builder each, so an algorithm is written once, as a schedule, and runs here, in memory and on ns-3.
//
// Connections: rank i listens on addresses[i]; with each peer its schedule names (the same for
// every element count) it keeps one TCP connection per lane (schedule.h; one but for PLink),
// opened by the lower rank (retrying until the timeout, so ranks may start in any order) and
// introduced by a hello (magic, rank, size, lane) so that a stray connection is refused and each
// connection carries its lane's stream; one that says nothing is dropped after a second, and the
// peers' hellos are read beside it meanwhile. One connection per pair and lane rather than per
// direction: TCP is full duplex, and algorithms that exchange with a partner (halving-doubling)
// need half the sockets; in the ring each connection still carries one direction (two ranks: both).
//
// Each allreduce is one stream per direction that carries data: an 8-byte header (the element
// count, so ranks that disagree on the size fail with a clear error) then the schedule's bytes,
// at most `segment_bytes` per send()/recv() call, so a chunk is forwarded piece by piece as it
// arrives and all peers' streams move at once. The hello and the header are in host byte order:
// the ranks run on one machine or on machines of one endianness.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "atp/collectives/allreduce.h"
#include "atp/collectives/store.h"
#include "atp/io/socket_address.h"
#include "atp/schedule/schedule.h"
#include "atp/time.h"

namespace atp {

class ScheduleExecutor;

struct TcpAllreduceOptions {
  // Largest send()/recv() per call (bytes): the pipeline's unit, rounded down to whole floats (at
  // least one). 256 KiB keeps syscalls few and the pieces small next to a chunk.
  std::size_t segment_bytes = 256 << 10;
  // SO_SNDBUF / SO_RCVBUF of every connection (bytes); SO_*BUFFORCE first (root), else capped by
  // net.core.wmem_max / rmem_max. 0 (default): the kernel's autotuning, which grows the buffers to
  // net.ipv4.tcp_rmem / tcp_wmem's maximum (32 MiB / 4 MiB on the Debian 12 test machine), larger
  // than a fixed size; a fixed 4 MiB measured 15-20% slower on loopback (4 ranks, 64 MiB).
  int socket_buffer_bytes = 0;
};

// One rank's schedule for `count` elements; its peers must not depend on `count`.
using ScheduleBuilder = std::function<Schedule(int rank, int size, std::size_t count)>;

class TcpScheduleAllreduce : public Allreduce {
 public:
  // Connects to the peers of build(rank, size, 0). `name` names the algorithm in algorithm() and
  // in errors ("ring allreduce on rank 1 of 4: ..."). `timeout` bounds the setup and, later, any
  // stretch without progress inside allreduce(). Throws std::invalid_argument for a bad rank, size
  // or address list, and CollectiveError (naming the peer) if it cannot listen, connect or accept
  // within the timeout, or if accepting fails for another reason than a connection that went away
  // (std::system_error if no socket can be opened at all); std::invalid_argument too for a segment
  // above kMaxSegmentBytes (executor.h). A schedule without peers (size 1) opens no socket.
  TcpScheduleAllreduce(std::string name, ScheduleBuilder build, int rank, int size, std::vector<std::string> addresses,
                       Duration timeout, TcpAllreduceOptions options = {});
  // The same where no port is known ahead (a PyTorch group's ranks): every rank listens on
  // `bind_ip` at a port the kernel picks, says where in `store` (key "tcp/<name>/<rank>"), reads
  // the others' there, and connects. Throws what the constructor throws, CollectiveError when a
  // rank has not said within `timeout` (the store's) or the listener cannot be opened.
  static std::unique_ptr<TcpScheduleAllreduce> join(std::string name, ScheduleBuilder build, Store& store, int rank,
                                                    int size, std::uint32_t bind_ip, Duration timeout,
                                                    TcpAllreduceOptions options = {});
  ~TcpScheduleAllreduce() override;  // closes every connection at once
  TcpScheduleAllreduce(const TcpScheduleAllreduce&) = delete;
  TcpScheduleAllreduce& operator=(const TcpScheduleAllreduce&) = delete;

  // Throws CollectiveError naming the peer when a peer closes its connection or sends a different
  // element count, refuses data, or when nothing moves for `timeout`; any other exception inside
  // (the builder's, the executor's) becomes a CollectiveError with its message. After an error
  // every connection is closed (so the peers fail at once too) and every later call throws the
  // same error.
  void allreduce(std::span<float> data) override;
  // Runs `schedule` (this rank's, over data.size() elements) instead of the builder's, with the
  // same framing and failures: a measurement's calls (PLink's probes), whose peers must be among
  // those of the builder's schedule without elements (else CollectiveError, as for a builder
  // whose peers grow).
  void run(const Schedule& schedule, std::span<float> data);
  std::string_view algorithm() const override { return name_; }

  int rank() const { return rank_; }
  int size() const { return size_; }

  // What TCP measured of each connection that carried bytes out in the last call (Linux's
  // TCP_INFO, read before and after it): the bytes acknowledged, the time it had data to send
  // (in flight, or held back by the receiver's window or the send buffer), and its smoothed round
  // trip at the end. PLink's Autotune reads the rate the path allowed as bytes / active_s, as the
  // paper reads its per-connection statistics from the OS. Empty before the first call.
  struct LinkSample {
    int peer = 0;
    int lane = 0;
    std::uint64_t bytes = 0;
    double active_s = 0;
    double round_trip_s = 0;
  };
  const std::vector<LinkSample>& last_call_links() const { return link_samples_; }

 private:
  struct Link {
    int channel;  // the peer and lane it carries (schedule.h)
    int fd;
  };

  // "rank 2 (127.0.0.1:7002)": how errors name a peer; with " on lane 1" after it, a channel
  // (only where the builder's schedule has several lanes).
  std::string peer_name(int peer) const;
  std::string channel_name(int channel) const;
  std::string prefix() const;
  // Records `what` as the failure, closes every connection and throws it as CollectiveError.
  [[noreturn]] void fail(const std::string& what);
  // Runs `body` (which runs a schedule) with the failure handling: an earlier failure is thrown
  // again, and any exception inside fails the collective (fail()).
  template <typename F>
  void guarded(F&& body);
  // The builder's schedule for `count` elements (the last one, if the count is the same).
  const Schedule& schedule_for(std::size_t count);
  // fail()s when `schedule` names a peer that has no connection.
  void check_connected(const Schedule& schedule);
  // A schedule's run over the links, without the failure handling.
  void run_schedule(const Schedule& schedule, std::span<float> data);
  // What a run that cannot move says: each link's next unfinished step, of a schedule that is wrong.
  std::string stuck_steps(const ScheduleExecutor& executor) const;
  // What a run that stalled for the timeout says: the links it waited to receive from or send to.
  std::string stalled_links(const std::vector<char>& wants_receive, const std::vector<char>& wants_send) const;
  // `listener` (join's): a socket already listening on this rank's address, owned from then on.
  TcpScheduleAllreduce(std::string name, ScheduleBuilder build, int rank, int size, std::vector<std::string> addresses,
                       Duration timeout, TcpAllreduceOptions options, int listener);
  // `listener`: join's, or -1 (then it binds one on this rank's address).
  void connect_channels(const std::vector<int>& channels, int listener);
  void close_sockets();

  std::string name_;
  ScheduleBuilder build_;
  int rank_;
  int size_;
  std::vector<SocketAddress> addresses_;
  Duration timeout_;
  TcpAllreduceOptions options_;
  int lanes_ = 1;                         // the builder's schedules' connections per peer
  std::vector<Link> links_;               // one per channel, ascending
  std::optional<Schedule> schedule_;      // the last call's: calls with the same count reuse it
  std::string failure_;                   // set once an allreduce failed: later calls throw it again
  std::vector<LinkSample> link_samples_;  // the last call's (last_call_links)
};

}  // namespace atp
