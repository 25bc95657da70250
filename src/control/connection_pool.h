// The control server's threads (httplib's task queue): connections served at once and waiting,
// both bounded by ServerLimits, and the refusal of one beyond them. Private to the control layer.
#pragma once

#include <httplib.h>

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "server_connection.h"

namespace atp::control::detail {

// httplib's queue of accepted connections: up to limits.workers threads, started as
// connections come; at most limits.queued_connections waiting for one. A connection beyond
// that, or one accepted while the server stops, is refused (refusing_connection()) on the
// calling thread, which is then the accept loop's: that costs it one non-blocking send.
class ConnectionPool final : public httplib::TaskQueue {
 public:
  explicit ConnectionPool(ConnectionState& state) : state_(state) {}
  ~ConnectionPool() override { shutdown(); }

  void enqueue(std::function<void()> connection) override;

  // Stops taking connections, makes the ones being served give up (state_.stopping), refuses
  // the waiting ones and joins the threads.
  void shutdown() override;

 private:
  void work();
  static void run(const std::function<void()>& connection, bool refuse);

  // Connections that no idle thread is about to take up (under mutex_).
  void update_waiting() { state_.waiting = pending_.size() > idle_ ? pending_.size() - idle_ : 0; }

  ConnectionState& state_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> pending_;
  std::vector<std::thread> threads_;
  std::size_t idle_ = 0;  // threads waiting for a connection
  bool shutting_down_ = false;
};

// True on the thread that runs a connection the pool refuses (too many waiting, or stopping),
// while it runs it: the server then answers it 503 at once instead of serving it.
bool refusing_connection();

}  // namespace atp::control::detail
