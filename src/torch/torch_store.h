// torch's c10d store (the PrefixStore of a process group) as ATP's rendezvous Store
// (atp/collectives/store.h), so that ClusterJob and the host collectives meet through it.
#pragma once

#include <cstdint>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "atp/collectives/store.h"
#include "atp/time.h"

namespace atp::torch_backend {

// Every key of ours is under "atp/" in torch's store.
class TorchStore : public Store {
 public:
  explicit TorchStore(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {}

  void set(const std::string& key, const std::string& value) override;
  // Throws CollectiveError naming the key on a timeout, or when the store's server (rank 0) is gone.
  std::string get(const std::string& key, Duration timeout) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  void erase(const std::string& key) override;

 private:
  c10::intrusive_ptr<c10d::Store> store_;
};

}  // namespace atp::torch_backend
