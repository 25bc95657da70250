// The rendezvous store ranks meet through (gloo's rendezvous::Store, PyTorch's c10d::Store): a
// key-value map every rank of a job can reach. The PyTorch backend passes torch's own store in.
// Over it, the small exact collectives that ATP's fixed-point allreduce is not meant for.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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

// Broadcast, allgather and barrier of byte strings through a Store: exact (bytes, whatever the
// dtype), and as fast as the store, so meant for control data (DistributedDataParallel's start:
// its initial parameter broadcast and shape check), not for gradients. Every rank makes the same
// calls in the same order; each waits at most `timeout` for the others and then throws
// CollectiveError naming the rank it waited for. Keys are erased by their last reader.
class StoreCollectives {
 public:
  // `prefix` keeps the keys of this group apart from others' in a shared store.
  StoreCollectives(Store& store, std::string prefix, int rank, int size, Duration timeout);

  std::string broadcast(int root, const std::string& data);     // root's data on every rank
  std::vector<std::string> allgather(const std::string& data);  // every rank's data, by rank
  void barrier();                                               // returns once every rank called it
  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  std::string next_key(const char* what);  // a fresh key for this call: prefix/what/<call number>
  // Reads `key` (waiting for `writer`), erasing it once all `readers` have read it.
  std::string read_shared(const std::string& key, int writer, int readers);

  Store& store_;
  std::string prefix_;
  int rank_, size_;
  Duration timeout_;
  std::uint64_t calls_ = 0;
};

}  // namespace atp
