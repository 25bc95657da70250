// The rendezvous store ranks meet through (gloo's rendezvous::Store, PyTorch's c10d::Store): a
// key-value map every rank of a job can reach, where ClusterJob's ranks meet. The PyTorch backend
// passes torch's own store in.
#pragma once

#include <cstdint>
#include <string>

#include "atp/time.h"

namespace atp {

class Store {
 public:
  virtual ~Store() = default;
  virtual void set(const std::string& key, const std::string& value) = 0;
  // The value of `key`, waiting up to `timeout` until some rank sets it. Throws CollectiveError
  // (allreduce.h) naming the key when it is still missing then, or when the store is unreachable.
  virtual std::string get(const std::string& key, Duration timeout) = 0;
  // Adds `delta` to the integer at `key` (0 if missing) and returns the new value.
  virtual std::int64_t add(const std::string& key, std::int64_t delta) = 0;
  virtual void erase(const std::string& key) = 0;  // no-op if missing
};

}  // namespace atp
