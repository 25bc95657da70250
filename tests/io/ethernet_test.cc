// Tests of the Ethernet/IPv4/UDP/ARP codec of interface ports: parsing, ATP classification,
// frame building (checked against an independent checksum), garbage safety, ECN marking, tables.
#include "atp/io/ethernet.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "atp/wire.h"

namespace atp {
namespace {

constexpr MacAddress kMacA{0x02, 0, 0, 0, 0, 0x0A};
constexpr MacAddress kMacB{0x02, 0, 0, 0, 0, 0x0B};
constexpr Address kIp1 = 0x0A000001;  // 10.0.0.1
constexpr Address kIp2 = 0x0A000002;

std::vector<std::uint8_t> atp_packet(Address src, Address dst, std::uint16_t values = 4) {
  Header h;
  h.job = 7;
  h.seq = 3;
  h.src = src;
  h.dst = dst;
  std::vector<std::int32_t> v(values);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::int32_t>(i * 3) - 5;
  return build_packet(h, v);
}

std::vector<std::uint8_t> atp_frame(Address src = kIp1, Address dst = kIp2) {
  std::vector<std::uint8_t> f;
  build_atp_frame(kMacB, kMacA, atp_packet(src, dst), f);
  return f;
}

// An independent check of an IPv4 header checksum: the 16-bit ones' complement sum of the whole
// header, checksum included, is 0xFFFF (RFC 1071 §1), computed here with end-around carries per
// word rather than by folding a 32-bit sum.
bool ipv4_header_checksum_valid(const std::vector<std::uint8_t>& frame, std::size_t offset = kEthernetHeaderBytes) {
  const std::size_t ihl = std::size_t{frame[offset] & 0x0Fu} * 4;
  std::uint16_t sum = 0;
  for (std::size_t i = 0; i < ihl; i += 2) {
    const std::uint32_t word = (std::uint32_t{frame[offset + i]} << 8) | frame[offset + i + 1];
    const std::uint32_t s = std::uint32_t{sum} + word;
    sum = static_cast<std::uint16_t>((s & 0xFFFF) + (s >> 16));
  }
  return sum == 0xFFFF;
}

// A TCP/IPv4 frame (20-byte TCP header, `payload` bytes of data) with the given IP TOS byte and
// a correct header checksum.
std::vector<std::uint8_t> tcp_frame(std::uint8_t tos, std::size_t payload = 100) {
  std::vector<std::uint8_t> f(kEthernetHeaderBytes + 20 + 20 + payload, 0x5A);
  std::copy(kMacB.begin(), kMacB.end(), f.begin());
  std::copy(kMacA.begin(), kMacA.end(), f.begin() + 6);
  f[12] = 0x08;
  f[13] = 0x00;
  std::uint8_t* ip = f.data() + kEthernetHeaderBytes;
  const std::size_t total = 40 + payload;
  const std::uint8_t header[20] = {0x45,
                                   tos,
                                   static_cast<std::uint8_t>(total >> 8),
                                   static_cast<std::uint8_t>(total),
                                   0x12,
                                   0x34,
                                   0x40,
                                   0x00,
                                   64,
                                   6,
                                   0,
                                   0,
                                   10,
                                   0,
                                   0,
                                   1,
                                   10,
                                   0,
                                   0,
                                   2};
  std::copy(std::begin(header), std::end(header), ip);
  const std::uint16_t sum = internet_checksum({ip, 20});
  ip[10] = static_cast<std::uint8_t>(sum >> 8);
  ip[11] = static_cast<std::uint8_t>(sum);
  return f;
}

// Re-fixes the IPv4 header checksum after a test edited the header.
void fix_checksum(std::vector<std::uint8_t>& f) {
  std::uint8_t* ip = f.data() + kEthernetHeaderBytes;
  const std::size_t ihl = std::size_t{ip[0] & 0x0Fu} * 4;
  ip[10] = ip[11] = 0;
  const std::uint16_t sum = internet_checksum({ip, ihl});
  ip[10] = static_cast<std::uint8_t>(sum >> 8);
  ip[11] = static_cast<std::uint8_t>(sum);
}

FrameKind kind_of(const std::vector<std::uint8_t>& f) {
  const auto parsed = parse_frame(f);
  return parsed ? classify(*parsed, f).kind : FrameKind::kOther;
}

TEST(Ethernet, InternetChecksumMatchesRfc1071Example) {
  // RFC 1071 §3: the words 0001 f203 f4f5 f6f7 sum to ddf2 (with carries); the checksum is ~ddf2.
  const std::vector<std::uint8_t> bytes{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7};
  EXPECT_EQ(internet_checksum(bytes), 0x220D);
  // An odd length pads the last byte with zero on the right.
  const std::vector<std::uint8_t> odd{0x12, 0x34, 0x56};
  EXPECT_EQ(internet_checksum(odd), static_cast<std::uint16_t>(~(0x1234 + 0x5600)));
}

TEST(Ethernet, MulticastMacKeepsTheLow23Bits) {
  EXPECT_EQ(multicast_mac(multicast_group_address(1)), (MacAddress{0x01, 0x00, 0x5E, 0x00, 0x00, 0x01}));
  EXPECT_EQ(multicast_mac(0xEFFF0102), (MacAddress{0x01, 0x00, 0x5E, 0x7F, 0x01, 0x02}));  // 239.255.1.2
  EXPECT_EQ(multicast_mac(0xE0800102), (MacAddress{0x01, 0x00, 0x5E, 0x00, 0x01, 0x02}));  // bit 23 dropped
  EXPECT_TRUE(is_group_mac(multicast_mac(0xE0000001)));
  EXPECT_TRUE(is_group_mac(kBroadcastMac));
  EXPECT_FALSE(is_group_mac(kMacA));
  EXPECT_EQ(format_mac(multicast_mac(0xEFFF0102)), "01:00:5e:7f:01:02");
}

TEST(Ethernet, BuildsAValidIpv4UdpFrameAroundAnAtpPacket) {
  const std::vector<std::uint8_t> packet = atp_packet(kIp1, kIp2);
  std::vector<std::uint8_t> f;
  build_atp_frame(kMacB, kMacA, packet, f);
  ASSERT_EQ(f.size(), kEncapsulationBytes + packet.size());
  EXPECT_EQ((std::vector<std::uint8_t>(f.begin(), f.begin() + 14)),
            (std::vector<std::uint8_t>{0x02, 0, 0, 0, 0, 0x0B, 0x02, 0, 0, 0, 0, 0x0A, 0x08, 0x00}));
  const std::uint8_t* ip = f.data() + 14;
  EXPECT_EQ(ip[0], 0x45);
  EXPECT_EQ(ip[1], 0);                                      // not-ECT
  EXPECT_EQ((ip[2] << 8) | ip[3], 20 + 8 + packet.size());  // total length
  EXPECT_EQ(ip[6], 0x40);                                   // don't fragment, offset 0
  EXPECT_EQ(ip[8], 64);                                     // TTL
  EXPECT_EQ(ip[9], 17);                                     // UDP
  EXPECT_EQ((std::vector<std::uint8_t>(ip + 12, ip + 20)), (std::vector<std::uint8_t>{10, 0, 0, 1, 10, 0, 0, 2}));
  EXPECT_TRUE(ipv4_header_checksum_valid(f));
  const std::uint8_t* udp = ip + 20;
  EXPECT_EQ((udp[0] << 8) | udp[1], kUdpPort);
  EXPECT_EQ((udp[2] << 8) | udp[3], kUdpPort);
  EXPECT_EQ((udp[4] << 8) | udp[5], 8 + packet.size());
  EXPECT_EQ((udp[6] << 8) | udp[7], 0);  // no UDP checksum
  EXPECT_EQ((std::vector<std::uint8_t>(udp + 8, udp + 8 + packet.size())), packet);

  // Building into a reused, larger buffer gives the same bytes.
  std::vector<std::uint8_t> reused(5000, 0xEE);
  build_atp_frame(kMacB, kMacA, packet, reused);
  EXPECT_EQ(reused, f);
}

TEST(Ethernet, ParsesAndClassifiesTheBuiltFrame) {
  const std::vector<std::uint8_t> f = atp_frame();
  const auto parsed = parse_frame(f);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->dst, kMacB);
  EXPECT_EQ(parsed->src, kMacA);
  EXPECT_EQ(parsed->ether_type, kEtherTypeIpv4);
  ASSERT_TRUE(parsed->ipv4);
  EXPECT_EQ(parsed->ipv4->src, kIp1);
  EXPECT_EQ(parsed->ipv4->dst, kIp2);
  EXPECT_TRUE(parsed->ipv4->checksum_ok);
  EXPECT_TRUE(parsed->ipv4->length_ok);
  EXPECT_FALSE(parsed->ipv4->fragment);
  ASSERT_TRUE(parsed->udp);
  EXPECT_EQ(parsed->udp->dst_port, kUdpPort);
  EXPECT_FALSE(parsed->arp);
  const FrameClass c = classify(*parsed, f);
  EXPECT_EQ(c.kind, FrameKind::kAtp);
  EXPECT_EQ(c.atp_offset, kEncapsulationBytes);
  EXPECT_EQ(c.atp_bytes, f.size() - kEncapsulationBytes);
}

TEST(Ethernet, Ipv4OptionsMoveTheUdpHeader) {
  // Insert 4 bytes of options (NOP x4): IHL 6, total length + 4.
  std::vector<std::uint8_t> f = atp_frame();
  f.insert(f.begin() + 34, {1, 1, 1, 1});
  f[14] = 0x46;
  const std::size_t total = ((f[16] << 8) | f[17]) + 4;
  f[16] = static_cast<std::uint8_t>(total >> 8);
  f[17] = static_cast<std::uint8_t>(total);
  fix_checksum(f);
  const auto parsed = parse_frame(f);
  ASSERT_TRUE(parsed && parsed->ipv4 && parsed->udp);
  EXPECT_EQ(parsed->ipv4->header_bytes, 24u);
  const FrameClass c = classify(*parsed, f);
  EXPECT_EQ(c.kind, FrameKind::kAtp);
  EXPECT_EQ(c.atp_offset, kEncapsulationBytes + 4);
}

TEST(Ethernet, EthernetPaddingAfterTheIpPacketIsIgnored) {
  std::vector<std::uint8_t> f = atp_frame();
  f.resize(f.size() + 20, 0);
  const auto parsed = parse_frame(f);
  ASSERT_TRUE(parsed);
  const FrameClass c = classify(*parsed, f);
  EXPECT_EQ(c.kind, FrameKind::kAtp);
  EXPECT_EQ(c.atp_bytes, f.size() - 20 - kEncapsulationBytes);
}

TEST(Ethernet, BrokenAtpFramesAreMalformedNotOther) {
  const std::vector<std::uint8_t> good = atp_frame();
  ASSERT_EQ(kind_of(good), FrameKind::kAtp);

  auto edited = [&](auto edit, bool fix = true) {
    std::vector<std::uint8_t> f = good;
    edit(f);
    if (fix) fix_checksum(f);
    return kind_of(f);
  };
  EXPECT_EQ(edited([](auto& f) { f[30] ^= 1; }, false), FrameKind::kMalformedAtp);  // bad IP checksum
  EXPECT_EQ(edited([](auto& f) { f[20] |= 0x20; }), FrameKind::kMalformedAtp);      // more fragments
  EXPECT_EQ(edited([](auto& f) { f[17] += 1; }), FrameKind::kMalformedAtp);         // total length > frame
  EXPECT_EQ(edited([](auto& f) {
              f[17] = 19;
              f[16] = 0;
            }),
            FrameKind::kMalformedAtp);                                       // total < header
  EXPECT_EQ(edited([](auto& f) { f[39] -= 1; }), FrameKind::kMalformedAtp);  // UDP length: payload short
  EXPECT_EQ(edited([](auto& f) { f[39] += 1; }), FrameKind::kMalformedAtp);  // UDP length past the IP packet
  EXPECT_EQ(edited([](auto& f) {
              f[38] = 0;
              f[39] = 7;
            }),
            FrameKind::kMalformedAtp);                                          // UDP length < 8
  EXPECT_EQ(edited([](auto& f) { f[42] ^= 0xFF; }), FrameKind::kMalformedAtp);  // bad ATP magic
  // Not ATP's port, not IPv4, not UDP: plain Ethernet traffic.
  EXPECT_EQ(edited([](auto& f) { f[37] ^= 1; }), FrameKind::kOther);  // dst port 9701
  EXPECT_EQ(edited([](auto& f) { f[23] = 6; }), FrameKind::kOther);   // TCP
  EXPECT_EQ(edited(
                [](auto& f) {
                  f[12] = 0x86;
                  f[13] = 0xDD;
                },
                false),
            FrameKind::kOther);                                         // IPv6
  EXPECT_EQ(edited([](auto& f) { f[14] = 0x44; }), FrameKind::kOther);  // IHL 4: no IPv4 header
  // A later fragment has no UDP header even if its bytes look like one.
  EXPECT_EQ(edited([](auto& f) { f[21] = 1; }), FrameKind::kOther);
}

TEST(Ethernet, EveryTruncationIsSafeAndNeverAtp) {
  const std::vector<std::uint8_t> good = atp_frame();
  for (std::size_t n = 0; n < good.size(); ++n) {
    // An exact-size copy, so that reading past the end would leave the vector's allocation.
    const std::vector<std::uint8_t> f(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n));
    const auto parsed = parse_frame(f);
    EXPECT_EQ(parsed.has_value(), n >= kEthernetHeaderBytes) << n;
    if (!parsed) continue;
    EXPECT_NE(classify(*parsed, f).kind, FrameKind::kAtp) << n;
    std::vector<std::uint8_t> copy = f;
    EXPECT_FALSE(mark_ecn_frame(copy)) << n;
    EXPECT_EQ(copy, f) << n;
  }
}

TEST(Ethernet, RandomAndMutatedFramesNeverCrash) {
  std::mt19937_64 rng(42);
  const std::vector<std::uint8_t> good = atp_frame();
  const std::vector<std::uint8_t> tcp = tcp_frame(0x02);
  std::size_t atp = 0;
  for (int i = 0; i < 20000; ++i) {
    std::vector<std::uint8_t> f;
    switch (i % 3) {
      case 0:  // pure noise of any length
        f.resize(rng() % 200);
        for (auto& b : f) b = static_cast<std::uint8_t>(rng());
        break;
      default:  // a valid frame with a few bytes flipped and maybe cut
        f = (i % 3 == 1) ? good : tcp;
        for (int k = 0; k < 3; ++k) f[rng() % f.size()] ^= static_cast<std::uint8_t>(1u << (rng() % 8));
        if (rng() % 2 == 0) f.resize(rng() % (f.size() + 1));
        break;
    }
    const auto parsed = parse_frame(f);
    if (parsed && classify(*parsed, f).kind == FrameKind::kAtp) {
      ++atp;
      Header h;  // whatever classify calls ATP really decodes
      const FrameClass c = classify(*parsed, f);
      EXPECT_EQ(decode_header(std::span(f).subspan(c.atp_offset, c.atp_bytes), h), DecodeError::kOk);
    }
    mark_ecn_frame(f);
  }
  EXPECT_GT(atp, 0u);  // flips in the values leave some frames valid ATP
}

TEST(Ethernet, ParsesArpSenderFields) {
  std::vector<std::uint8_t> f(60, 0);  // padded to the Ethernet minimum
  std::copy(kBroadcastMac.begin(), kBroadcastMac.end(), f.begin());
  std::copy(kMacA.begin(), kMacA.end(), f.begin() + 6);
  f[12] = 0x08;
  f[13] = 0x06;
  const std::uint8_t arp[28] = {0,  1, 8, 0, 6, 4, 0, 1, 0x02, 0, 0,  0, 0, 0x0A,
                                10, 0, 0, 1, 0, 0, 0, 0, 0,    0, 10, 0, 0, 2};
  std::copy(std::begin(arp), std::end(arp), f.begin() + 14);
  auto parsed = parse_frame(f);
  ASSERT_TRUE(parsed && parsed->arp);
  EXPECT_EQ(parsed->arp->operation, 1);
  EXPECT_EQ(parsed->arp->sender_mac, kMacA);
  EXPECT_EQ(parsed->arp->sender_ip, kIp1);
  EXPECT_EQ(parsed->arp->target_ip, kIp2);
  EXPECT_FALSE(parsed->ipv4);
  EXPECT_EQ(classify(*parsed, f).kind, FrameKind::kOther);
  // Not Ethernet/IPv4 ARP (hlen 8), or cut short: no ARP fields.
  f[18] = 8;
  EXPECT_FALSE(parse_frame(f)->arp);
  f[18] = 6;
  f.resize(14 + 27);
  EXPECT_FALSE(parse_frame(f)->arp);
}

TEST(Ethernet, EcnMarksTheAtpHeaderOfAnAtpFrame) {
  std::vector<std::uint8_t> f = atp_frame();
  const std::vector<std::uint8_t> before = f;
  ASSERT_TRUE(mark_ecn_frame(f));
  Header h;
  ASSERT_EQ(decode_header(std::span(f).subspan(kEncapsulationBytes), h), DecodeError::kOk);
  EXPECT_TRUE(h.ecn);
  // Only the ATP flags byte changed; the IP header (not-ECT) is untouched.
  std::size_t changed = 0;
  for (std::size_t i = 0; i < f.size(); ++i) changed += f[i] != before[i];
  EXPECT_EQ(changed, 1u);
  EXPECT_EQ(f[15], 0);
  EXPECT_EQ(kind_of(f), FrameKind::kAtp);
}

TEST(Ethernet, EcnSetsCeOnEctIpv4AndKeepsTheChecksumValid) {
  for (std::uint8_t ect : {std::uint8_t{0x01}, std::uint8_t{0x02}}) {
    std::vector<std::uint8_t> f = tcp_frame(static_cast<std::uint8_t>(0xB8 | ect));  // DSCP EF + ECT
    ASSERT_TRUE(ipv4_header_checksum_valid(f));
    ASSERT_TRUE(mark_ecn_frame(f));
    EXPECT_EQ(f[15], 0xBB);  // DSCP kept, ECN = CE (11)
    EXPECT_TRUE(ipv4_header_checksum_valid(f));
    EXPECT_FALSE(mark_ecn_frame(f));  // already CE
  }
  // Not-ECT, a corrupt header, ARP and runts are left alone.
  std::vector<std::uint8_t> not_ect = tcp_frame(0xB8);
  const auto copy = not_ect;
  EXPECT_FALSE(mark_ecn_frame(not_ect));
  EXPECT_EQ(not_ect, copy);
  std::vector<std::uint8_t> corrupt = tcp_frame(0x02);
  corrupt[22] ^= 1;  // TTL changed without fixing the checksum
  EXPECT_FALSE(mark_ecn_frame(corrupt));
  std::vector<std::uint8_t> arp(60, 0);
  arp[12] = 0x08;
  arp[13] = 0x06;
  EXPECT_FALSE(mark_ecn_frame(arp));
}

TEST(Ethernet, MacTableLearnsMovesAndIsBounded) {
  MacTable t(2);
  EXPECT_FALSE(t.lookup(kMacA));
  t.learn(kMacA, 3);
  EXPECT_EQ(t.lookup(kMacA), PortId{3});
  t.learn(kMacA, 1);  // the host moved
  EXPECT_EQ(t.lookup(kMacA), PortId{1});
  t.learn(kBroadcastMac, 0);  // never a source: ignored
  t.learn(multicast_mac(0xE0000001), 0);
  EXPECT_FALSE(t.lookup(kBroadcastMac));
  EXPECT_EQ(t.size(), 1u);
  t.learn(kMacB, 2);
  t.learn({0x02, 0, 0, 0, 0, 0x0C}, 2);  // full: not learned, counted
  EXPECT_EQ(t.size(), 2u);
  EXPECT_EQ(t.full_drops(), 1u);
  EXPECT_FALSE(t.lookup({0x02, 0, 0, 0, 0, 0x0C}));
  t.learn(kMacB, 0);  // known addresses still move when full
  EXPECT_EQ(t.lookup(kMacB), PortId{0});
}

TEST(Ethernet, NeighborTableLearnsUnicastOnly) {
  NeighborTable t(2);
  t.learn(kIp1, kMacA);
  EXPECT_EQ(t.lookup(kIp1), kMacA);
  t.learn(kIp1, kMacB);
  EXPECT_EQ(t.lookup(kIp1), kMacB);
  t.learn(0, kMacA);                           // an ARP probe's sender
  t.learn(0xFFFFFFFF, kMacA);                  // broadcast
  t.learn(multicast_group_address(1), kMacA);  // a group
  t.learn(kIp2, kBroadcastMac);                // a group MAC
  EXPECT_EQ(t.size(), 1u);
  t.learn(kIp2, kMacA);
  t.learn(0x0A000003, kMacA);  // full
  EXPECT_EQ(t.size(), 2u);
  EXPECT_EQ(t.full_drops(), 1u);
  EXPECT_FALSE(t.lookup(0x0A000003));
}

}  // namespace
}  // namespace atp
