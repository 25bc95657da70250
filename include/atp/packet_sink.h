// Where the protocol core puts the packets it wants sent. Runtimes implement these; the core
// calls them synchronously and never keeps the span after send() returns. Implementations
// are meant to be `final` classes (the destructor here is protected and not virtual).
#pragma once

#include <cstdint>
#include <span>

#include "atp/wire.h"

namespace atp {

// An end host's single uplink: endpoints send here, the header's dst says where to.
class PacketSink {
 public:
  virtual void send(std::span<const std::uint8_t> packet) = 0;

 protected:
  ~PacketSink() = default;
};

// A switch's ports. A multicast calls send() once per port with the same bytes.
class PortSink {
 public:
  virtual void send(PortId port, std::span<const std::uint8_t> packet) = 0;

 protected:
  ~PortSink() = default;
};

}  // namespace atp
