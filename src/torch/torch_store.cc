// torch's c10d store as ATP's rendezvous Store (torch_store.h): keys under "atp/", c10d's errors
// as CollectiveError.
#include "torch_store.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <vector>

#include "atp/collectives/allreduce.h"

namespace atp::torch_backend {
namespace {

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

}  // namespace

void TorchStore::set(const std::string& key, const std::string& value) {
  store_->set("atp/" + key, std::vector<std::uint8_t>(value.begin(), value.end()));
}

std::string TorchStore::get(const std::string& key, Duration timeout) {
  try {
    // c10d reads a wait of 0 ms as "no timeout" (the store's own, as long as init_process_group's):
    // a deadline that has passed, or is under a millisecond away, waits 1 ms instead.
    store_->wait({"atp/" + key},
                 std::max(std::chrono::ceil<std::chrono::milliseconds>(timeout), std::chrono::milliseconds(1)));
    const std::vector<std::uint8_t> value = store_->get("atp/" + key);
    return std::string(value.begin(), value.end());
  } catch (const std::exception& e) {  // a timeout, or the store's server (rank 0) is gone
    throw CollectiveError("the rendezvous store has no key " + key + " (" + first_line(e.what()) + ")");
  }
}

std::int64_t TorchStore::add(const std::string& key, std::int64_t delta) { return store_->add("atp/" + key, delta); }

void TorchStore::erase(const std::string& key) { store_->deleteKey("atp/" + key); }

}  // namespace atp::torch_backend
