// atp::Communicator: moves an Endpoint's packets between a UDP socket and the endpoint on an
// event-loop thread, and turns queued allreduce calls into rounds, one at a time.
#include "atp/collectives/communicator.h"

#include <algorithm>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "atp/io/event_loop.h"
#include "atp/io/loop_tasks.h"
#include "atp/io/udp_sink.h"

namespace atp {
namespace {

struct Round {
  std::span<float> buffer;
  std::promise<void> done;
};

}  // namespace

struct Communicator::Impl {
  std::unique_ptr<Endpoint> endpoint;  // loop thread only (its const getters: any thread)
  UdpSocket socket;
  // Addressed by IP (no uplink to connect to): the only senders whose datagrams reach the
  // endpoint. Empty with an uplink (the connected socket filters).
  std::vector<SocketAddress> accepted_sources;
  std::uint64_t foreign_datagrams = 0;  // loop thread only: datagrams from anyone else, dropped
  Time last_heard{};                    // loop thread only: when the endpoint last got a datagram
  UdpBatchSink sink;                    // what one event sends leaves in one sendmmsg at its end
  EventLoop loop;
  UdpRecvBatch batch{64};

  mutable std::mutex mutex;
  std::deque<Round> queued;    // under mutex
  bool running_round = false;  // loop thread only
  Round current;               // loop thread only, valid while running_round
  std::string failure;         // under mutex; set once the endpoint failed or the loop stopped

  // Work for the loop thread (stats), and the wake-up for a queued round: after any task, the
  // loop thread starts what was queued and sends what that produced.
  LoopTasks tasks{loop, [this] {
                    const Time now = EventLoop::now();
                    after_event(now);
                    flush(now);
                  }};
  std::thread thread;

  Impl(std::unique_ptr<Endpoint> e, UdpSocket bound, std::optional<SocketAddress> uplink)
      : endpoint(std::move(e)), socket(std::move(bound)), sink(socket, uplink) {
    // A window larger than the device's queue waits in the sink instead of being dropped there.
    socket.report_full_queues();
    if (uplink) {
      // Every packet comes through the uplink: the kernel drops anyone else's datagrams, so
      // another process on the host cannot forge results.
      socket.connect(*uplink);
    } else {
      socket.join_multicast(multicast_group_address(endpoint->job()), endpoint->self());
      for (const Address a : endpoint->sources()) accepted_sources.push_back({a, kUdpPort});
    }
    loop.add_readable(socket.fd(), [this] { on_readable(); });
    loop.set_timer([this] { return endpoint->next_deadline(); },
                   [this](Time now) {
                     endpoint->on_timeout(now, sink);
                     after_event(now);
                     flush(now);
                   });
  }
  void on_readable() {
    for (int round = 0; round < 8; ++round) {  // bounded, so timers are not starved
      const std::size_t n = socket.recv_batch(batch);
      if (n == 0) break;
      const Time now = EventLoop::now();
      last_heard = now;
      for (std::size_t i = 0; i < n; ++i) {
        if (!accepted_sources.empty() &&
            std::find(accepted_sources.begin(), accepted_sources.end(), batch.from(i)) == accepted_sources.end()) {
          ++foreign_datagrams;
          continue;
        }
        endpoint->on_packet(batch.bytes(i), now, sink);
        after_event(now);
      }
      flush(now);
      if (!batch.full()) break;
    }
  }

  // Sends what the endpoint put in the sink. What the host's queue (the socket's buffer, the
  // device's qdisc) refused waits in the sink: the path's bottleneck is this host's own link, and
  // the window hears of it as of a switch's ECN mark.
  void flush(Time now) {
    sink.flush(loop);
    if (sink.backlog() > 0) endpoint->on_host_queue_full(now);
  }

  // After anything the endpoint saw: finish the running round, fail everything if the endpoint
  // failed, or start the next queued round.
  void after_event(Time now) {
    for (;;) {
      const WorkerState state = endpoint->state();
      if (state == WorkerState::kFailed) {
        fail_all("allreduce failed: " + endpoint->error());
        return;
      }
      if (running_round) {
        if (state != WorkerState::kIdle) return;  // the sums are in the buffer
        running_round = false;
        current.done.set_value();
      }
      {
        std::lock_guard lock(mutex);
        if (queued.empty()) return;
        current = std::move(queued.front());
        queued.pop_front();
      }
      running_round = true;
      // In place: no copy of the tensor, no pass over it but quantizing (ATP's sums replace each
      // fragment's values as they arrive, Rina's all at the end of the round).
      const bool started = endpoint->start_in_place(current.buffer, now, sink);
      if (!started) {
        running_round = false;
        current.done.set_exception(std::make_exception_ptr(CommunicatorError(
            "allreduce failed: a buffer of " + std::to_string(current.buffer.size()) + " floats is too large")));
      }
      // Loop: an empty buffer completes at once.
    }
  }

  void fail_all(const std::string& message) {
    std::deque<Round> failed;
    {
      std::lock_guard lock(mutex);
      if (failure.empty()) failure = message;
      failed.swap(queued);
    }
    const auto error = std::make_exception_ptr(CommunicatorError(message));
    if (running_round) {
      running_round = false;
      current.done.set_exception(error);
    }
    for (Round& r : failed) r.done.set_exception(error);
  }
};

Communicator::Communicator(std::unique_ptr<Endpoint> endpoint, const SocketAddress& local,
                           std::optional<SocketAddress> uplink)
    : Communicator(std::move(endpoint), UdpSocket(local, host_socket_options(uplink)), uplink) {}

Communicator::Communicator(std::unique_ptr<Endpoint> endpoint, UdpSocket socket, std::optional<SocketAddress> uplink)
    : impl_(std::make_unique<Impl>(std::move(endpoint), std::move(socket), uplink)) {
  start_loop();
}

void Communicator::start_loop() {
  impl_->tasks.loop_started();
  impl_->thread = std::thread([impl = impl_.get()] {
    try {
      impl->loop.run();
    } catch (const std::exception& e) {
      impl->fail_all(std::string("allreduce failed: the communicator's loop stopped: ") + e.what());
    }
    impl->tasks.loop_ended();
  });
}

Communicator::~Communicator() {
  impl_->loop.stop();
  impl_->thread.join();
  impl_->fail_all("allreduce failed: the communicator was destroyed");  // the loop thread is gone: safe here
}

std::future<void> Communicator::allreduce_async(std::span<float> inout) {
  Round round{inout, {}};
  std::future<void> result = round.done.get_future();
  {
    std::lock_guard lock(impl_->mutex);
    if (!impl_->failure.empty()) {
      round.done.set_exception(std::make_exception_ptr(CommunicatorError(impl_->failure)));
      return result;
    }
    impl_->queued.push_back(std::move(round));
  }
  impl_->tasks.post({});  // the loop thread starts it
  return result;
}

void Communicator::allreduce(std::span<float> inout) { allreduce_async(inout).get(); }

SocketAddress Communicator::local_endpoint() const { return impl_->socket.local_endpoint(); }

// Runs `read` on the loop thread (which owns the endpoint and its counters) and returns its value.
template <class F>
auto Communicator::on_loop(F read) const {
  return impl_->tasks.run(std::move(read));
}

// What never changes after construction: no need to go through the loop.
std::uint16_t Communicator::values_per_packet() const { return impl_->endpoint->values_per_packet(); }
std::string_view Communicator::algorithm() const { return impl_->endpoint->protocol(); }
bool Communicator::picks_exponents() const { return impl_->endpoint->picks_exponents(); }
Linger Communicator::linger() const { return impl_->endpoint->linger(); }

EndpointCounts Communicator::counts() const {
  return on_loop([impl = impl_.get()] { return impl->endpoint->counts(); });
}

std::vector<EndpointCounter> Communicator::counters() const {
  return on_loop([impl = impl_.get()] { return impl->endpoint->counters(); });
}

std::vector<std::int16_t> Communicator::result_exponents() const {
  return on_loop([impl = impl_.get()] { return impl->endpoint->result_exponents(); });
}

std::vector<std::int16_t> Communicator::next_exponents(std::uint32_t fragments) const {
  return on_loop([impl = impl_.get(), fragments] { return impl->endpoint->next_exponents(fragments); });
}

Seq Communicator::resume_seq() const {
  return on_loop([impl = impl_.get()] { return impl->endpoint->resume_seq(); });
}

std::uint64_t Communicator::foreign_datagrams() const {
  return on_loop([impl = impl_.get()] { return impl->foreign_datagrams; });
}

void Communicator::close() {
  const Linger linger = this->linger();
  const Time start = EventLoop::now();
  for (;;) {
    const Time heard = std::max(start, on_loop([impl = impl_.get()] { return impl->last_heard; }));
    const Time now = EventLoop::now();
    if (now - heard >= linger.quiet || now - start >= linger.at_most) return;
    std::this_thread::sleep_for(std::min<Duration>(linger.quiet - (now - heard), linger.at_most - (now - start)));
  }
}

}  // namespace atp
