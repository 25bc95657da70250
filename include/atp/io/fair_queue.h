// A host NIC's fair queue: deficit round robin (Shreedhar and Varghese, SIGCOMM'95) over flows
// named by a key, as Linux's default qdisc (fq_codel) serves a host's sockets, without its AQM.
// Each backlogged flow in turn sends up to a quantum of bytes, so a flow with a few packets waits
// behind about one quantum of each other flow, not behind their whole backlog. No I/O and no
// clock: the owner decides when the transmitter takes the next item.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <unordered_map>
#include <utility>

#include "atp/wire.h"

namespace atp {

// One Ethernet frame (1,514 bytes), as fq_codel's default quantum.
inline constexpr std::size_t kFairQueueQuantumBytes = 1514;

// A packet's flow at a host's fair queue: its ATP job, or one flow of its own for whatever is not
// an ATP packet (a noise source's garbage), kNonAtpFlow.
inline constexpr std::uint64_t kNonAtpFlow = std::uint64_t{1} << 32;
inline std::uint64_t job_flow(std::span<const std::uint8_t> packet) {
  Header h;
  return decode_header(packet, h) == DecodeError::kOk ? h.job : kNonAtpFlow;
}

template <class Item>
class FairQueue {
 public:
  explicit FairQueue(std::size_t quantum_bytes = kFairQueueQuantumBytes)
      : quantum_(static_cast<std::int64_t>(quantum_bytes)) {}

  bool empty() const { return size_ == 0; }
  std::size_t size() const { return size_; }
  // Bytes waiting, all flows together.
  std::uint64_t bytes() const { return bytes_; }

  // Appends `item` (of `bytes` on the wire) to its flow's queue.
  void push(std::uint64_t flow, Item item, std::size_t bytes) {
    Flow& f = flows_[flow];
    if (f.items.empty()) active_.push_back(flow);
    f.items.emplace_back(std::move(item), static_cast<std::int64_t>(bytes));
    f.backlog += static_cast<std::int64_t>(bytes);
    bytes_ += bytes;
    ++size_;
  }

  // Bytes waiting in `flow`'s queue.
  std::size_t backlog(std::uint64_t flow) const {
    const auto it = flows_.find(flow);
    return it == flows_.end() ? 0 : static_cast<std::size_t>(it->second.backlog);
  }

  // Where the queue is full: makes room for a packet of `flow` by dropping the oldest packet of
  // the flow with the longest backlog, if that is another flow with more bytes waiting than
  // `flow` (fq_codel's overflow rule: the flow that fills the queue loses, not the one arriving).
  // Returns whether it dropped one; if not, the arriving packet is the one to refuse.
  bool drop_for(std::uint64_t flow) {
    const std::uint64_t* fattest = nullptr;
    std::int64_t most = static_cast<std::int64_t>(backlog(flow));
    for (const std::uint64_t& key : active_) {
      const std::int64_t b = flows_.find(key)->second.backlog;
      if (b > most) {
        most = b;
        fattest = &key;
      }
    }
    if (fattest == nullptr) return false;
    const std::uint64_t key = *fattest;
    Flow& f = flows_.find(key)->second;
    f.backlog -= f.items.front().second;
    bytes_ -= static_cast<std::uint64_t>(f.items.front().second);
    f.items.pop_front();
    --size_;
    if (f.items.empty()) {
      f.deficit = 0;
      if (active_.front() == key) visit_started_ = false;
      active_.erase(std::find(active_.begin(), active_.end(), key));
    }
    return true;
  }

  // The next item to send. The queue must not be empty.
  Item pop() {
    for (;;) {
      const std::uint64_t key = active_.front();
      Flow& f = flows_.find(key)->second;
      if (!visit_started_) {
        f.deficit += quantum_;
        visit_started_ = true;
      }
      const std::int64_t bytes = f.items.front().second;
      if (bytes <= f.deficit) {
        f.deficit -= bytes;
        f.backlog -= bytes;
        bytes_ -= static_cast<std::uint64_t>(bytes);
        Item item = std::move(f.items.front().first);
        f.items.pop_front();
        --size_;
        if (f.items.empty()) {  // an idle flow keeps no credit
          f.deficit = 0;
          active_.pop_front();
          visit_started_ = false;
        }
        return item;
      }
      active_.pop_front();  // its turn is over: the next flow's
      active_.push_back(key);
      visit_started_ = false;
    }
  }

 private:
  struct Flow {
    std::deque<std::pair<Item, std::int64_t>> items;
    std::int64_t deficit = 0;
    std::int64_t backlog = 0;  // bytes of `items`
  };

  std::int64_t quantum_;
  std::unordered_map<std::uint64_t, Flow> flows_;  // kept when idle: a host has few flows
  std::deque<std::uint64_t> active_;               // flows with items, in turn order
  bool visit_started_ = false;                     // the front flow has had this turn's quantum
  std::size_t size_ = 0;
  std::uint64_t bytes_ = 0;
};

}  // namespace atp
