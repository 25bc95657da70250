// Ethernet/IPv4/UDP/ARP parsing and building for the switch on Linux interfaces. Every read is
// bounds-checked against the frame's span; nothing here does I/O.
#include "atp/io/ethernet.h"

#include <algorithm>
#include <cstdio>

#include "atp/big_endian.h"

namespace atp {
namespace {

using big_endian::get16;
using big_endian::get32;
using big_endian::put16;
using big_endian::put32;

MacAddress get_mac(const std::uint8_t* p) { return {p[0], p[1], p[2], p[3], p[4], p[5]}; }

// IPv4 header fields (offsets within the header).
constexpr std::size_t kIpTos = 1, kIpTotalLength = 2, kIpFlagsFragment = 6, kIpTtl = 8, kIpProtocol = 9,
                      kIpChecksum = 10, kIpSrc = 12, kIpDst = 16;
constexpr std::uint16_t kIpMoreFragments = 0x2000, kIpDontFragment = 0x4000, kIpFragmentOffset = 0x1FFF;
constexpr std::uint8_t kEcnMask = 0x03, kEcnCe = 0x03;  // ECN field: 00 not-ECT, 01/10 ECT, 11 CE
constexpr std::size_t kArpBytes = 28;                   // Ethernet/IPv4 ARP

}  // namespace

std::string format_mac(const MacAddress& m) {
  char text[18];
  std::snprintf(text, sizeof text, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
  return text;
}

MacAddress multicast_mac(Address group) {
  return {0x01,
          0x00,
          0x5E,
          static_cast<std::uint8_t>((group >> 16) & 0x7F),
          static_cast<std::uint8_t>(group >> 8),
          static_cast<std::uint8_t>(group)};
}

std::uint16_t internet_checksum(std::span<const std::uint8_t> bytes) {
  std::uint32_t sum = 0;
  std::size_t i = 0;
  for (; i + 1 < bytes.size(); i += 2) sum += get16(bytes.data() + i);
  if (i < bytes.size()) sum += std::uint32_t{bytes[i]} << 8;
  while ((sum >> 16) != 0) sum = (sum & 0xFFFF) + (sum >> 16);
  return static_cast<std::uint16_t>(~sum);
}

std::optional<ParsedFrame> parse_frame(std::span<const std::uint8_t> frame) {
  if (frame.size() < kEthernetHeaderBytes) return std::nullopt;
  const std::uint8_t* f = frame.data();
  ParsedFrame out;
  out.dst = get_mac(f);
  out.src = get_mac(f + 6);
  out.ether_type = get16(f + 12);
  const std::size_t l3 = kEthernetHeaderBytes;
  const std::size_t l3_bytes = frame.size() - l3;

  if (out.ether_type == kEtherTypeArp) {
    const std::uint8_t* a = f + l3;
    // htype Ethernet (1), ptype IPv4, hlen 6, plen 4: the only ARP a switch of IPv4 hosts learns from.
    if (l3_bytes >= kArpBytes && get16(a) == 1 && get16(a + 2) == kEtherTypeIpv4 && a[4] == 6 && a[5] == 4) {
      ArpFields arp;
      arp.operation = get16(a + 6);
      arp.sender_mac = get_mac(a + 8);
      arp.sender_ip = get32(a + 14);
      arp.target_ip = get32(a + 24);
      out.arp = arp;
    }
    return out;
  }
  if (out.ether_type != kEtherTypeIpv4 || l3_bytes < kIpv4HeaderBytes) return out;
  const std::uint8_t* ip = f + l3;
  const std::size_t header_bytes = std::size_t{ip[0] & 0x0Fu} * 4;
  if ((ip[0] >> 4) != 4 || header_bytes < kIpv4HeaderBytes || header_bytes > l3_bytes) return out;
  Ipv4Fields v4;
  v4.offset = l3;
  v4.header_bytes = header_bytes;
  v4.total_bytes = get16(ip + kIpTotalLength);
  v4.tos = ip[kIpTos];
  v4.protocol = ip[kIpProtocol];
  v4.src = get32(ip + kIpSrc);
  v4.dst = get32(ip + kIpDst);
  v4.length_ok = v4.total_bytes >= header_bytes && v4.total_bytes <= l3_bytes;
  v4.checksum_ok = internet_checksum(frame.subspan(l3, header_bytes)) == 0;
  const std::uint16_t fragment = get16(ip + kIpFlagsFragment);
  v4.fragment = (fragment & (kIpMoreFragments | kIpFragmentOffset)) != 0;
  out.ipv4 = v4;

  // UDP: only where its header is really there (not in a later fragment), and inside the frame.
  // The IPv4 payload ends at the total length when that is sane, else at the frame's end.
  const std::size_t l4 = l3 + header_bytes;
  const std::size_t ip_end = v4.length_ok ? l3 + v4.total_bytes : frame.size();
  if (v4.protocol != kIpProtocolUdp || (fragment & kIpFragmentOffset) != 0 || l4 + kUdpHeaderBytes > frame.size()) {
    return out;
  }
  UdpFields udp;
  udp.src_port = get16(f + l4);
  udp.dst_port = get16(f + l4 + 2);
  const std::size_t udp_length = get16(f + l4 + 4);
  udp.length_ok = udp_length >= kUdpHeaderBytes && l4 + udp_length <= ip_end;
  udp.payload_offset = l4 + kUdpHeaderBytes;
  udp.payload_bytes = udp.length_ok ? udp_length - kUdpHeaderBytes : 0;
  out.udp = udp;
  return out;
}

FrameClass classify(const ParsedFrame& parsed, std::span<const std::uint8_t> frame) {
  FrameClass c;
  if (!parsed.ipv4 || !parsed.udp || parsed.udp->dst_port != kUdpPort) return c;
  const Ipv4Fields& ip = *parsed.ipv4;
  const UdpFields& udp = *parsed.udp;
  c.kind = FrameKind::kMalformedAtp;
  if (!ip.length_ok || !ip.checksum_ok || ip.fragment || !udp.length_ok) return c;
  if (udp.payload_offset + udp.payload_bytes > frame.size()) return c;  // implied by length_ok; kept for safety
  Header h;
  if (decode_header(frame.subspan(udp.payload_offset, udp.payload_bytes), h) != DecodeError::kOk) return c;
  c.kind = FrameKind::kAtp;
  c.atp_offset = udp.payload_offset;
  c.atp_bytes = udp.payload_bytes;
  return c;
}

void build_atp_frame(const MacAddress& dst, const MacAddress& src, std::span<const std::uint8_t> packet,
                     std::vector<std::uint8_t>& out) {
  Header h;
  decode_header(packet, h);  // the caller guarantees a valid packet: only src and dst are read
  const std::size_t ip_bytes = kIpv4HeaderBytes + kUdpHeaderBytes + packet.size();
  out.resize(kEthernetHeaderBytes + ip_bytes);
  std::uint8_t* f = out.data();
  std::copy(dst.begin(), dst.end(), f);
  std::copy(src.begin(), src.end(), f + 6);
  put16(f + 12, kEtherTypeIpv4);

  std::uint8_t* ip = f + kEthernetHeaderBytes;
  ip[0] = 0x45;  // version 4, IHL 5 (no options)
  ip[kIpTos] = 0;
  put16(ip + kIpTotalLength, static_cast<std::uint16_t>(ip_bytes));
  put16(ip + 4, 0);  // identification: unused with don't-fragment (RFC 6864)
  put16(ip + kIpFlagsFragment, kIpDontFragment);
  ip[kIpTtl] = kIpv4Ttl;
  ip[kIpProtocol] = kIpProtocolUdp;
  put16(ip + kIpChecksum, 0);
  put32(ip + kIpSrc, h.src);
  put32(ip + kIpDst, h.dst);
  put16(ip + kIpChecksum, internet_checksum({ip, kIpv4HeaderBytes}));

  std::uint8_t* udp = ip + kIpv4HeaderBytes;
  put16(udp, kUdpPort);
  put16(udp + 2, kUdpPort);
  put16(udp + 4, static_cast<std::uint16_t>(kUdpHeaderBytes + packet.size()));
  put16(udp + 6, 0);  // no checksum: the ATP payload changes at every switch that aggregates
  std::copy(packet.begin(), packet.end(), udp + kUdpHeaderBytes);
}

bool mark_ecn_frame(std::span<std::uint8_t> frame) {
  const std::optional<ParsedFrame> parsed = parse_frame(frame);
  if (!parsed || !parsed->ipv4) return false;
  const FrameClass c = classify(*parsed, frame);
  if (c.kind == FrameKind::kAtp) return mark_ecn(frame.subspan(c.atp_offset, c.atp_bytes));
  if (c.kind == FrameKind::kMalformedAtp) return false;
  const Ipv4Fields& ip = *parsed->ipv4;
  const std::uint8_t ecn = ip.tos & kEcnMask;
  if (ecn == 0 || ecn == kEcnCe || !ip.checksum_ok) return false;  // not-ECT, already CE, or corrupt
  std::uint8_t* header = frame.data() + ip.offset;
  header[kIpTos] = static_cast<std::uint8_t>(header[kIpTos] | kEcnCe);
  // Recomputed over the whole header (at most 60 bytes) rather than updated incrementally: simpler
  // to check, and the header was verified above, so this changes nothing but the ECN bits' share.
  put16(header + kIpChecksum, 0);
  put16(header + kIpChecksum, internet_checksum({header, ip.header_bytes}));
  return true;
}

bool ecn_drops_frame(std::span<const std::uint8_t> frame) {
  const std::optional<ParsedFrame> parsed = parse_frame(frame);
  if (!parsed || !parsed->ipv4) return false;  // ARP and the like: not a transport's to slow down
  const FrameClass c = classify(*parsed, frame);
  if (c.kind == FrameKind::kAtp) return false;
  if (c.kind == FrameKind::kMalformedAtp) return true;
  return (parsed->ipv4->tos & kEcnMask) == 0 && frame.size() >= kEcnDropMinBytes;
}

std::uint64_t MacTable::key(const MacAddress& m) {
  std::uint64_t k = 0;
  for (std::uint8_t b : m) k = (k << 8) | b;
  return k;
}

void MacTable::learn(const MacAddress& mac, PortId port) {
  if (is_group_mac(mac)) return;
  const std::uint64_t k = key(mac);
  if (auto it = ports_.find(k); it != ports_.end()) {
    it->second = port;
    return;
  }
  if (ports_.size() >= capacity_) {
    ++full_drops_;
    return;
  }
  ports_.emplace(k, port);
}

std::optional<PortId> MacTable::lookup(const MacAddress& mac) const {
  auto it = ports_.find(key(mac));
  if (it == ports_.end()) return std::nullopt;
  return it->second;
}

void NeighborTable::learn(Address ip, const MacAddress& mac) {
  if (ip == 0 || ip == 0xFFFFFFFFu || is_multicast(ip) || is_group_mac(mac)) return;
  if (auto it = macs_.find(ip); it != macs_.end()) {
    it->second = mac;
    return;
  }
  if (macs_.size() >= capacity_) {
    ++full_drops_;
    return;
  }
  macs_.emplace(ip, mac);
}

std::optional<MacAddress> NeighborTable::lookup(Address ip) const {
  auto it = macs_.find(ip);
  if (it == macs_.end()) return std::nullopt;
  return it->second;
}

}  // namespace atp
