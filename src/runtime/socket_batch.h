// What UdpSocket and PacketSocket share (private to the runtime): errno as the end of a sentence,
// large kernel buffers, and the recvmmsg/sendmmsg loops with their truncation and error handling.
#pragma once

#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
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
  std::size_t kept = 0;  // messages handed out, compacted to slots [0, kept)
  std::uint64_t kept_bytes = 0;
  std::uint64_t truncated = 0;  // larger than a slot: dropped
  bool error = false;           // recvmmsg failed for another reason than "nothing to read"
};

// One recvmmsg of up to n (<= kMaxBatch) messages into n slots of `slot_bytes` at `storage`,
// names into names[i]. Truncated messages are dropped and the rest compacted to the front;
// kept(k, name, bytes) is called for the k-th kept message (its bytes already in slot k).
template <class Name, class Kept>
RecvOutcome recv_batch(int fd, std::uint8_t* storage, std::size_t slot_bytes, std::size_t n,
                       std::array<Name, kMaxBatch>& names, Kept&& kept) {
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
  }
  // MSG_TRUNC: msg_len is the message's real length, so a datagram or frame larger than its slot
  // is recognised (msg_flags has MSG_TRUNC too, but for packet sockets only msg_len tells).
  const int got = ::recvmmsg(fd, msgs.data(), static_cast<unsigned>(n), MSG_DONTWAIT | MSG_TRUNC, nullptr);
  if (got < 0) {
    out.error = errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
    return out;
  }
  // The source slot of a kept message is always at or after its destination, so memmove is safe.
  for (std::size_t i = 0; i < static_cast<std::size_t>(got); ++i) {
    if ((msgs[i].msg_hdr.msg_flags & MSG_TRUNC) != 0 || msgs[i].msg_len > slot_bytes) {
      ++out.truncated;
      continue;
    }
    const std::size_t k = out.kept++;
    if (k != i) std::memmove(storage + k * slot_bytes, storage + i * slot_bytes, msgs[i].msg_len);
    out.kept_bytes += msgs[i].msg_len;
    kept(k, names[i], static_cast<std::size_t>(msgs[i].msg_len));
  }
  return out;
}

struct SendOutcome {
  std::size_t accepted = 0;  // messages the kernel accepted, in order
  std::uint64_t accepted_bytes = 0;
  std::uint64_t would_block = 0;  // not sent because a buffer was full (all from the first refused)
  bool queue_full = false;        // that buffer was the device's queue (ENOBUFS), not the socket's
  std::uint64_t errors = 0;       // refused for another reason (each skipped)
};

// Sends `count` messages with sendmmsg in chunks of up to kMaxBatch; never blocks. fill(i, slot,
// msghdr&, iovec&) prepares message i in chunk position `slot` (msghdr zeroed, iov already linked).
// Stops at the first "would block"; any other error skips that one message.
template <class Fill>
SendOutcome send_batch(int fd, std::size_t count, Fill&& fill) {
  SendOutcome out;
  std::size_t next = 0;
  std::array<mmsghdr, kMaxBatch> msgs;
  std::array<iovec, kMaxBatch> iovs;
  while (next < count) {
    const std::size_t n = std::min(count - next, kMaxBatch);
    for (std::size_t i = 0; i < n; ++i) {
      msgs[i] = mmsghdr{};
      msgs[i].msg_hdr.msg_iov = &iovs[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
      fill(next + i, i, msgs[i].msg_hdr, iovs[i]);
    }
    const int sent = ::sendmmsg(fd, msgs.data(), static_cast<unsigned>(n), MSG_DONTWAIT);
    if (sent > 0) {
      for (int i = 0; i < sent; ++i) out.accepted_bytes += iovs[static_cast<std::size_t>(i)].iov_len;
      out.accepted += static_cast<std::size_t>(sent);
      next += static_cast<std::size_t>(sent);
      continue;  // a short count: the next call reports why the next message failed
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) {
      out.would_block += count - next;
      out.queue_full = errno == ENOBUFS;
      break;
    }
    ++out.errors;  // e.g. EMSGSIZE, EACCES (broadcast), ENETUNREACH, ENXIO (interface down): skip it
    ++next;
  }
  return out;
}

}  // namespace atp::detail
