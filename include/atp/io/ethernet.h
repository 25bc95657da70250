// Ethernet frames for the switch on Linux interfaces: parsing (Ethernet II, IPv4, UDP, ARP),
// classifying ATP traffic, building frames around ATP packets, ECN marking, MAC/neighbour tables.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "atp/wire.h"

namespace atp {

// Pure functions and plain tables: no I/O, no clock. Every parser reads only inside the span it
// is given, so any bytes (runts, garbage, lying length fields) are safe to pass in.

using MacAddress = std::array<std::uint8_t, 6>;

inline constexpr MacAddress kBroadcastMac{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
inline constexpr std::uint16_t kEtherTypeIpv4 = 0x0800;
inline constexpr std::uint16_t kEtherTypeArp = 0x0806;
inline constexpr std::uint8_t kIpProtocolUdp = 17;
inline constexpr std::size_t kEthernetHeaderBytes = 14;  // dst, src, EtherType (no VLAN tag)
inline constexpr std::size_t kIpv4HeaderBytes = 20;      // without options
inline constexpr std::size_t kUdpHeaderBytes = 8;
inline constexpr std::uint8_t kIpv4Ttl = 64;  // TTL of the frames the switch builds

// The group bit: set in broadcast and multicast destination MACs (never in a valid source).
inline constexpr bool is_group_mac(const MacAddress& m) { return (m[0] & 0x01) != 0; }
// "02:fc:00:00:00:01".
std::string format_mac(const MacAddress& m);
// 01:00:5e followed by the low 23 bits of the IPv4 multicast group `group` (RFC 1112 6.4).
MacAddress multicast_mac(Address group);

// What parse_frame read from an IPv4 header. Offsets count from the frame's first byte.
struct Ipv4Fields {
  Address src = 0, dst = 0;
  std::uint8_t protocol = 0;
  std::uint8_t tos = 0;          // DSCP (6 bits) and ECN (low 2 bits)
  std::size_t offset = 0;        // where the IPv4 header starts (kEthernetHeaderBytes)
  std::size_t header_bytes = 0;  // IHL * 4: 20..60
  std::size_t total_bytes = 0;   // the total length field (header and payload, no Ethernet padding)
  bool length_ok = false;        // header_bytes <= total_bytes <= the bytes the frame has
  bool checksum_ok = false;      // the header checksum verifies
  bool fragment = false;         // more fragments set or fragment offset nonzero
};

struct UdpFields {
  std::uint16_t src_port = 0, dst_port = 0;
  std::size_t payload_offset = 0;  // from the frame's first byte
  std::size_t payload_bytes = 0;   // UDP length - 8
  bool length_ok = false;          // 8 <= UDP length <= the IPv4 payload's length
};

struct ArpFields {
  std::uint16_t operation = 0;  // 1 request, 2 reply
  MacAddress sender_mac{};
  Address sender_ip = 0;  // 0 in an address probe (RFC 5227)
  Address target_ip = 0;
};

struct ParsedFrame {
  MacAddress dst{}, src{};
  std::uint16_t ether_type = 0;
  // Set when the EtherType is IPv4 and the frame holds a version-4 header of IHL >= 5 whole.
  std::optional<Ipv4Fields> ipv4;
  // Set when ipv4 is, its protocol is UDP, it is not a non-first fragment and the frame holds
  // the 8-byte UDP header.
  std::optional<UdpFields> udp;
  // Set for an Ethernet/IPv4 ARP packet (htype 1, ptype 0x0800, hlen 6, plen 4) held whole.
  std::optional<ArpFields> arp;
};

// nullopt only when the frame is shorter than an Ethernet header.
std::optional<ParsedFrame> parse_frame(std::span<const std::uint8_t> frame);

enum class FrameKind : std::uint8_t {
  kOther,         // not addressed to ATP's UDP port: a switch forwards it as plain Ethernet
  kAtp,           // IPv4 (checksum, lengths ok, not fragmented) UDP to kUdpPort whose payload decodes
  kMalformedAtp,  // IPv4 UDP to kUdpPort but a bad IPv4/UDP header, a fragment, or a payload that does not decode
};

struct FrameClass {
  FrameKind kind = FrameKind::kOther;
  // kAtp: the ATP packet inside the frame (the UDP payload).
  std::size_t atp_offset = 0;
  std::size_t atp_bytes = 0;
};

// ATP traffic is everything to UDP port kUdpPort: the port is ATP's, so a switch drops what is
// sent to it and is not an ATP packet (kMalformedAtp) rather than forwarding it blindly.
FrameClass classify(const ParsedFrame& parsed, std::span<const std::uint8_t> frame);

// The Internet checksum (RFC 1071) of `bytes`: the ones' complement of the ones' complement sum
// of 16-bit big-endian words (an odd last byte padded with zero).
std::uint16_t internet_checksum(std::span<const std::uint8_t> bytes);

// Writes the frame carrying ATP packet `packet` into `out` (resized; its capacity is reused):
// Ethernet dst/src as given, EtherType IPv4; IPv4 without options, src/dst from the ATP header's
// src/dst, TTL 64, don't-fragment, identification 0, ECN not-ECT, header checksum; UDP from and
// to kUdpPort, checksum 0 (none: RFC 768). `packet` must have passed decode_header.
void build_atp_frame(const MacAddress& dst, const MacAddress& src, std::span<const std::uint8_t> packet,
                     std::vector<std::uint8_t>& out);

// Marks a frame "congestion experienced" in place, as a queue over its threshold does:
// an ATP frame (kAtp) gets the ATP header's ECN flag; any other IPv4 frame whose ECN field is
// ECT(0) or ECT(1) (an ECN-capable transport, e.g. TCP) gets CE, and its header checksum is
// updated. Returns false, leaving the bytes alone, for anything else (not-ECT, already CE,
// ARP, IPv6, malformed).
bool mark_ecn_frame(std::span<std::uint8_t> frame);
// Whether a queue over its ECN threshold drops `frame` where it would mark an ECN-capable one
// (RFC 3168 §7): IPv4 of at least kEcnDropMinBytes whose ECN field is not-ECT (the data of a TCP
// that does not ask for ECN), or a frame for ATP's port that is no ATP packet. Not an ATP frame,
// nor ECT or CE IPv4, nor what is not IPv4 (ARP: lost under load, a neighbour would go unresolved
// for a second), nor smaller IPv4: TCP's handshakes and pure ACKs are never ECN-capable, even in a
// connection that asked for ECN (RFC 3168 §6.1.1), they barely load a queue, and a lost SYN costs
// a whole second.
inline constexpr std::size_t kEcnDropMinBytes = 256;
bool ecn_drops_frame(std::span<const std::uint8_t> frame);

// Where each MAC address was last seen as a source: a learning switch's forwarding table. Holds
// at most `capacity` addresses; when full, new addresses are not learned (counted) and frames to
// them are flooded, so a flood of forged sources cannot grow memory.
class MacTable {
 public:
  explicit MacTable(std::size_t capacity = 16384) : capacity_(capacity) {}
  // Records that `mac` is behind `port` (a host that moved is moved). Group MACs are ignored.
  void learn(const MacAddress& mac, PortId port);
  std::optional<PortId> lookup(const MacAddress& mac) const;
  std::size_t size() const { return ports_.size(); }
  std::uint64_t full_drops() const { return full_drops_; }  // addresses not learned: table full

 private:
  static std::uint64_t key(const MacAddress& m);
  std::size_t capacity_;
  std::unordered_map<std::uint64_t, PortId> ports_;
  std::uint64_t full_drops_ = 0;
};

// IPv4 address -> MAC of the host that has it, as learned from ARP senders and frames' IPv4
// sources: how the switch addresses the frames it builds. Bounded like MacTable.
class NeighborTable {
 public:
  explicit NeighborTable(std::size_t capacity = 16384) : capacity_(capacity) {}
  // Ignores the unspecified address 0, multicast and broadcast IPs, and group MACs.
  void learn(Address ip, const MacAddress& mac);
  std::optional<MacAddress> lookup(Address ip) const;
  std::size_t size() const { return macs_.size(); }
  std::uint64_t full_drops() const { return full_drops_; }

 private:
  std::size_t capacity_;
  std::unordered_map<Address, MacAddress> macs_;
  std::uint64_t full_drops_ = 0;
};

}  // namespace atp
