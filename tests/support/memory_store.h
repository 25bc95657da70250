// An in-memory atp::Store for the tests whose ranks are threads of one process.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "atp/collectives/allreduce.h"
#include "atp/collectives/store.h"

namespace atp::test {

// torch's TCPStore in miniature: a map every thread shares.
class MemoryStore : public Store {
 public:
  void set(const std::string& key, const std::string& value) override {
    std::lock_guard lock(mutex_);
    map_[key] = value;
    changed_.notify_all();
  }
  std::string get(const std::string& key, Duration timeout) override {
    std::unique_lock lock(mutex_);
    if (!changed_.wait_for(lock, timeout, [&] { return map_.contains(key); })) {
      throw CollectiveError("key " + key + " was not set within the timeout");
    }
    return map_.at(key);
  }
  std::int64_t add(const std::string& key, std::int64_t delta) override {
    std::lock_guard lock(mutex_);
    const std::int64_t value = (map_.contains(key) ? std::stoll(map_[key]) : 0) + delta;
    map_[key] = std::to_string(value);
    changed_.notify_all();
    return value;
  }
  void erase(const std::string& key) override {
    std::lock_guard lock(mutex_);
    map_.erase(key);
  }
  std::size_t size() {
    std::lock_guard lock(mutex_);
    return map_.size();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::string> map_;
};

}  // namespace atp::test
