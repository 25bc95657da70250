// The control server's threads (connection_pool.h): a queue of accepted connections, threads
// started as they come, and the refusal of those beyond the bounds.
#include "connection_pool.h"

#include <utility>

namespace atp::control::detail {
namespace {

// Set on the thread that runs a connection the pool refuses (too many waiting, or stopping):
// the server then answers it 503 at once instead of serving it.
thread_local bool t_refuse_connection = false;

}  // namespace

bool refusing_connection() { return t_refuse_connection; }

void ConnectionPool::enqueue(std::function<void()> connection) {
  {
    std::lock_guard lock(mutex_);
    if (!shutting_down_ && pending_.size() < state_.limits.queued_connections) {
      pending_.push_back(std::move(connection));
      if (idle_ == 0 && threads_.size() < state_.limits.workers) threads_.emplace_back([this] { work(); });
      update_waiting();
      ready_.notify_one();
      return;
    }
  }
  run(connection, true);
}

void ConnectionPool::shutdown() {
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mutex_);
    shutting_down_ = true;
    threads.swap(threads_);
  }
  state_.stopping = true;
  ready_.notify_all();
  for (std::thread& t : threads) t.join();
}

void ConnectionPool::work() {
  std::unique_lock lock(mutex_);
  for (;;) {
    ++idle_;
    update_waiting();
    ready_.wait(lock, [this] { return shutting_down_ || !pending_.empty(); });
    --idle_;
    if (pending_.empty()) return;  // shutting down, nothing left to refuse
    std::function<void()> connection = std::move(pending_.front());
    pending_.pop_front();
    update_waiting();
    const bool refuse = shutting_down_;
    lock.unlock();
    run(connection, refuse);
    lock.lock();
  }
}

void ConnectionPool::run(const std::function<void()>& connection, bool refuse) {
  t_refuse_connection = refuse;
  connection();  // ControlServer::process_and_close_socket: closes the socket, never throws
  t_refuse_connection = false;
}

}  // namespace atp::control::detail
