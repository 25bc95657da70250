// StoreCollectives: broadcast, allgather and barrier as keys in the rendezvous store.
#include "atp/collectives/store.h"

#include <utility>

#include "atp/collectives/allreduce.h"

namespace atp {

StoreCollectives::StoreCollectives(Store& store, std::string prefix, int rank, int size, Duration timeout)
    : store_(store), prefix_(std::move(prefix)), rank_(rank), size_(size), timeout_(timeout) {}

std::string StoreCollectives::next_key(const char* what) {
  return prefix_ + "/" + what + "/" + std::to_string(calls_++);
}

std::string StoreCollectives::read_shared(const std::string& key, int writer, int readers) {
  std::string value;
  try {
    value = store_.get(key, timeout_);
  } catch (const CollectiveError& e) {
    throw CollectiveError("rank " + std::to_string(rank_) + " of " + std::to_string(size_) + " waited for rank " +
                          std::to_string(writer) + ": " + e.what());
  }
  if (store_.add(key + "/reads", 1) == readers) {
    store_.erase(key);
    store_.erase(key + "/reads");
  }
  return value;
}

std::string StoreCollectives::broadcast(int root, const std::string& data) {
  const std::string key = next_key("broadcast");
  if (size_ == 1) return data;
  if (rank_ == root) {
    store_.set(key, data);
    return data;
  }
  return read_shared(key, root, size_ - 1);
}

std::vector<std::string> StoreCollectives::allgather(const std::string& data) {
  const std::string key = next_key("allgather");
  std::vector<std::string> all(static_cast<std::size_t>(size_));
  all[static_cast<std::size_t>(rank_)] = data;
  if (size_ == 1) return all;
  store_.set(key + "/" + std::to_string(rank_), data);
  for (int r = 0; r < size_; ++r) {
    if (r != rank_) all[static_cast<std::size_t>(r)] = read_shared(key + "/" + std::to_string(r), r, size_ - 1);
  }
  return all;
}

void StoreCollectives::barrier() {
  // Everyone adds itself; the last to arrive opens the door for the others.
  const std::string key = next_key("barrier");
  if (size_ == 1) return;
  const std::int64_t arrived = store_.add(key + "/arrived", 1);
  if (arrived == size_) {
    store_.erase(key + "/arrived");
    store_.set(key, "open");
    read_shared(key, rank_, size_);
    return;
  }
  try {
    read_shared(key, -1, size_);
  } catch (const CollectiveError&) {
    throw CollectiveError("barrier on rank " + std::to_string(rank_) + " of " + std::to_string(size_) + ": only " +
                          std::to_string(store_.add(key + "/arrived", 0)) + " ranks arrived within the timeout");
  }
}

}  // namespace atp
