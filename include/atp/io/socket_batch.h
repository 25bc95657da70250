// What UdpSocket, PacketSocket and the switch's ports share: errno as the end of a sentence,
// large kernel buffers, and the recvmmsg/sendmmsg loops with their truncation and error handling.
#pragma once

#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

namespace atp::detail {

// sendmmsg/recvmmsg take at most this many messages per call here (UIO_MAXIOV is 1024; 64 keeps
// the headers on the stack and is already past the point where the per-call cost stops mattering).
inline constexpr std::size_t kMaxBatch = 64;

// strerror, with a lower-case first letter so that it reads as the end of a sentence.
std::string errno_reason(int error);

// Asks for `recv_bytes` / `send_bytes` kernel buffers (<= 0: leave as is). Without CAP_NET_ADMIN
// the *FORCE variant fails with EPERM and the plain option silently caps at the sysctl maximum:
// both are acceptable. Returns false (errno set) only when even the plain option fails.
bool set_buffer_sizes(int fd, int recv_bytes, int send_bytes);

struct RecvOutcome {
  std::size_t read = 0;  // messages recvmmsg handed out, truncated ones included
  std::size_t kept = 0;  // messages handed out, compacted to slots [0, kept)
  std::uint64_t kept_bytes = 0;
  std::uint64_t truncated = 0;  // larger than a slot: dropped
  bool error = false;           // recvmmsg failed for another reason than "nothing to read"
};

// One recvmmsg of up to n (<= kMaxBatch) messages into n slots of `slot_bytes` at `storage`,
// names into names[i], and (control_bytes > 0) ancillary data into n slots of `control_bytes`
// at `control`. Truncated messages are dropped and the rest compacted to the front;
// kept(k, name, bytes, msghdr) is called for the k-th kept message (its bytes already in slot k;
// the msghdr's control data still where recvmmsg put it).
template <class Name, class Kept>
RecvOutcome recv_batch(int fd, std::uint8_t* storage, std::size_t slot_bytes, std::size_t n,
                       std::array<Name, kMaxBatch>& names, Kept&& kept, std::uint8_t* control = nullptr,
                       std::size_t control_bytes = 0) {
  RecvOutcome out;
  n = std::min(n, kMaxBatch);
  std::array<mmsghdr, kMaxBatch> msgs{};
  std::array<iovec, kMaxBatch> iovs{};
  for (std::size_t i = 0; i < n; ++i) {
    iovs[i].iov_base = storage + i * slot_bytes;
    iovs[i].iov_len = slot_bytes;
    msgs[i].msg_hdr.msg_iov = &iovs[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
    msgs[i].msg_hdr.msg_name = &names[i];
    msgs[i].msg_hdr.msg_namelen = sizeof(Name);
    if (control_bytes != 0) {
      msgs[i].msg_hdr.msg_control = control + i * control_bytes;
      msgs[i].msg_hdr.msg_controllen = control_bytes;
    }
  }
  // MSG_TRUNC: msg_len is the message's real length, so a datagram or frame larger than its slot
  // is recognised (msg_flags has MSG_TRUNC too, but for packet sockets only msg_len tells).
  const int got = ::recvmmsg(fd, msgs.data(), static_cast<unsigned>(n), MSG_DONTWAIT | MSG_TRUNC, nullptr);
  if (got < 0) {
    out.error = errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
    return out;
  }
  out.read = static_cast<std::size_t>(got);
  // The source slot of a kept message is always at or after its destination, so memmove is safe.
  for (std::size_t i = 0; i < static_cast<std::size_t>(got); ++i) {
    if ((msgs[i].msg_hdr.msg_flags & MSG_TRUNC) != 0 || msgs[i].msg_len > slot_bytes) {
      ++out.truncated;
      continue;
    }
    const std::size_t k = out.kept++;
    if (k != i) std::memmove(storage + k * slot_bytes, storage + i * slot_bytes, msgs[i].msg_len);
    out.kept_bytes += msgs[i].msg_len;
    kept(k, names[i], static_cast<std::size_t>(msgs[i].msg_len), msgs[i].msg_hdr);
  }
  return out;
}

struct SendOutcome {
  std::size_t accepted = 0;  // items (datagrams, frames) the kernel accepted, in order
  std::uint64_t accepted_bytes = 0;
  std::uint64_t accepted_runs = 0;  // accepted messages of several items
  std::uint64_t would_block = 0;    // not sent because a buffer was full (all from the first refused)
  bool queue_full = false;          // that buffer was the device's queue (ENOBUFS), not the socket's
  std::uint64_t errors = 0;         // refused for another reason (each skipped)
};

// iovecs one sendmmsg call may use in all: a message of several items (a UDP GSO message) takes
// one per item.
inline constexpr std::size_t kMaxBatchItems = 4 * kMaxBatch;

// Sends `count` items (datagrams or frames) with sendmmsg, up to kMaxBatch messages per call;
// never blocks. fill(first, slot, msghdr&, std::span<iovec> iovs) prepares message number `slot`
// of the call, which starts at item `first` (msghdr zeroed, msg_iov = iovs.data()), and returns
// how many items it carries: 1, or up to min(iovs.size(), count - first) for a UDP GSO message.
// Stops at the first "would block". A message of several items refused for another reason goes
// to split(errno): true when the error is the message's own (the kernel or the path does not take
// such messages), and fill() then carries one item per message, so its items are tried again;
// any other refused message is skipped, all its items counted in errors.
template <class Fill, class Split>
SendOutcome send_batch(int fd, std::size_t count, Fill&& fill, Split&& split) {
  SendOutcome out;
  std::size_t next = 0;
  std::array<mmsghdr, kMaxBatch> msgs;
  std::array<iovec, kMaxBatchItems> iovs;
  std::array<std::size_t, kMaxBatch> items;  // message i's items
  while (next < count) {
    std::size_t n = 0;
    std::size_t used = 0;  // iovs taken
    for (std::size_t first = next; n < kMaxBatch && first < count && used < iovs.size(); ++n) {
      msgs[n] = mmsghdr{};
      msgs[n].msg_hdr.msg_iov = &iovs[used];
      const std::size_t room = std::min(iovs.size() - used, count - first);
      items[n] = fill(first, n, msgs[n].msg_hdr, std::span<iovec>(&iovs[used], room));
      msgs[n].msg_hdr.msg_iovlen = items[n];
      used += items[n];
      first += items[n];
    }
    const int sent = ::sendmmsg(fd, msgs.data(), static_cast<unsigned>(n), MSG_DONTWAIT);
    if (sent > 0) {
      for (std::size_t i = 0; i < static_cast<std::size_t>(sent); ++i) {
        for (std::size_t k = 0; k < items[i]; ++k) out.accepted_bytes += msgs[i].msg_hdr.msg_iov[k].iov_len;
        out.accepted += items[i];
        if (items[i] > 1) ++out.accepted_runs;
        next += items[i];
      }
      continue;  // a short count: the next call reports why the next message failed
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) {
      out.would_block += count - next;
      out.queue_full = errno == ENOBUFS;
      break;
    }
    if (items[0] > 1 && split(errno)) continue;  // fill() now makes single-item messages: try again
    // e.g. EMSGSIZE, EACCES (broadcast), ENETUNREACH, ENXIO (interface down): skip the message
    out.errors += items[0];
    next += items[0];
  }
  return out;
}

// One item per message (frames on a packet socket): nothing to split.
template <class Fill>
SendOutcome send_batch(int fd, std::size_t count, Fill&& fill) {
  return send_batch(
      fd, count,
      [&](std::size_t first, std::size_t slot, msghdr& m, std::span<iovec> iovs) {
        fill(first, slot, m, iovs[0]);
        return std::size_t{1};
      },
      [](int) { return false; });
}

}  // namespace atp::detail
