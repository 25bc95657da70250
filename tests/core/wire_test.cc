// Tests of the ATP wire format: every field round-trips, byte order is network order, and
// truncated, oversized or garbled packets are rejected without reading out of bounds.
#include "atp/wire.h"

#include <gtest/gtest.h>

#include <array>
#include <vector>

#include "atp/fixed_point.h"
#include "atp/values_per_packet.h"

namespace atp {
namespace {

Header full_header() {
  Header h;
  h.is_ack = true;
  h.resend = true;
  h.collision = true;
  h.ecn = true;
  h.overflow = true;
  h.float_payload = true;
  h.job = 0xBEEF;
  h.seq = 0xFFFFFFFE;
  h.bitmap = 0x80000001;
  h.node = 0xFEDC;
  h.offered_aggregator = 0xFFFF;
  h.fan_in = 32;
  h.round_shape = kRoundShapeMismatch;
  h.aggregator_index = 19999;
  h.src = 0x0A000001;
  h.dst = multicast_group_address(0xBEEF);
  return h;
}

TEST(Wire, EveryFieldRoundTrips) {
  const std::vector<std::int32_t> values = {1, -1, 0x7FFFFFFF, static_cast<std::int32_t>(0x80000000), 0};
  const auto packet = build_packet(full_header(), values);
  ASSERT_EQ(packet.size(), kHeaderBytes + 4 * values.size());
  Header h;
  ASSERT_EQ(decode_header(packet, h), DecodeError::kOk);
  const Header want = full_header();
  EXPECT_TRUE(h.is_ack && h.resend && h.collision && h.ecn && h.overflow && h.float_payload);
  EXPECT_EQ(h.job, want.job);
  EXPECT_EQ(h.seq, want.seq);
  EXPECT_EQ(h.bitmap, want.bitmap);
  EXPECT_EQ(h.node, want.node);
  EXPECT_EQ(h.offered_aggregator, want.offered_aggregator);
  EXPECT_EQ(h.fan_in, want.fan_in);
  EXPECT_EQ(h.round_fragments, 0u);
  EXPECT_EQ(h.round_shape, want.round_shape);
  EXPECT_EQ(h.aggregator_index, want.aggregator_index);
  EXPECT_EQ(h.src, want.src);
  EXPECT_EQ(h.dst, want.dst);
  EXPECT_EQ(h.value_count, values.size());
  std::vector<std::int32_t> back(values.size());
  load_values(packet, back);
  EXPECT_EQ(back, values);
  for (std::size_t i = 0; i < values.size(); ++i) EXPECT_EQ(load_value(packet, i), values[i]);
}

TEST(Wire, FlagsClearByDefault) {
  const auto packet = build_packet(Header{}, std::vector<std::int32_t>(62));
  Header h;
  ASSERT_EQ(decode_header(packet, h), DecodeError::kOk);
  EXPECT_FALSE(h.is_ack || h.resend || h.collision || h.ecn || h.overflow || h.float_payload);
  EXPECT_EQ(h.node, 0);
  EXPECT_EQ(h.value_count, 62);
  EXPECT_EQ(packet.size(), 40u + 248u);  // the paper's 248 B of values
  EXPECT_EQ(h.scale_exponent, 0);
  EXPECT_EQ(h.magnitude_or_next, kNoMagnitude);
}

TEST(Wire, NetworkByteOrder) {
  Header h;
  h.job = 0x0102;
  h.seq = 0x03040506;
  h.node = 0xABCD;
  h.scale_exponent = -2;
  h.magnitude_or_next = 0x0123;
  const std::vector<std::int32_t> values = {0x0708090A};
  const auto p = build_packet(h, values);
  EXPECT_EQ(p[0], 0xA7);
  EXPECT_EQ(p[1], 0xB1);
  EXPECT_EQ(p[2], kVersion);
  EXPECT_EQ(p[4], 0x01);
  EXPECT_EQ(p[5], 0x02);
  EXPECT_EQ(p[6], 0x00);  // value_count = 1
  EXPECT_EQ(p[7], 0x01);
  EXPECT_EQ(p[8], 0x03);
  EXPECT_EQ(p[11], 0x06);
  EXPECT_EQ(p[16], 0xAB);  // node 0xABCD, then two zero bytes
  EXPECT_EQ(p[17], 0xCD);
  EXPECT_EQ(p[18], 0x00);
  EXPECT_EQ(p[19], 0x00);
  EXPECT_EQ(p[36], 0xFF);  // scale_exponent -2, two's complement
  EXPECT_EQ(p[37], 0xFE);
  EXPECT_EQ(p[38], 0x01);
  EXPECT_EQ(p[39], 0x23);
  EXPECT_EQ(p[40], 0x07);
  EXPECT_EQ(p[43], 0x0A);
}

TEST(Wire, LargestPacketRoundTrips) {
  std::vector<std::int32_t> values(kMaxValuesPerPacket);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<std::int32_t>(i * 2654435761u);
  const auto packet = build_packet(Header{}, values);
  Header h;
  ASSERT_EQ(decode_header(packet, h), DecodeError::kOk);
  std::vector<std::int32_t> back(values.size());
  load_values(packet, back);
  EXPECT_EQ(back, values);
}

TEST(Wire, TruncatedPacketsAreRejectedAtEveryLength) {
  const auto packet = build_packet(full_header(), std::vector<std::int32_t>(62, 5));
  Header h;
  for (std::size_t len = 0; len < kHeaderBytes; ++len) {
    EXPECT_EQ(decode_header(std::span(packet.data(), len), h), DecodeError::kTruncated) << len;
  }
  for (std::size_t len = kHeaderBytes; len < packet.size(); ++len) {
    EXPECT_EQ(decode_header(std::span(packet.data(), len), h), DecodeError::kLengthMismatch) << len;
  }
}

TEST(Wire, OversizedPacketIsRejected) {
  auto packet = build_packet(Header{}, std::vector<std::int32_t>(4, 1));
  packet.push_back(0);
  Header h;
  EXPECT_EQ(decode_header(packet, h), DecodeError::kLengthMismatch);
}

TEST(Wire, ValueCountAboveMaximumIsRejected) {
  auto packet = build_packet(Header{}, {});
  packet[6] = 0xFF;  // value_count = 0xFFxx
  Header h;
  EXPECT_EQ(decode_header(packet, h), DecodeError::kTooManyValues);
}

TEST(Wire, GarbledHeadersAreRejected) {
  const auto good = build_packet(Header{}, std::vector<std::int32_t>(2));
  Header h;
  auto bad_magic = good;
  bad_magic[0] ^= 0x01;
  EXPECT_EQ(decode_header(bad_magic, h), DecodeError::kBadMagic);
  auto bad_version = good;
  bad_version[2] = 1;  // the 36-byte header of version 1
  EXPECT_EQ(decode_header(bad_version, h), DecodeError::kBadVersion);
  auto bad_kind = good;
  bad_kind[3] = 0x80;  // the Rina flag, with kind byte 0 (no kind)
  EXPECT_EQ(decode_header(bad_kind, h), DecodeError::kBadKind);
  bad_kind[21] = kRinaKinds;  // past the last kind
  EXPECT_EQ(decode_header(bad_kind, h), DecodeError::kBadKind);
  // Exponents and magnitudes within +-kMaxScaleExponent; kNoMagnitude only as a magnitude.
  for (const std::int16_t bad :
       {std::int16_t{kMaxScaleExponent + 1}, std::int16_t{-kMaxScaleExponent - 1}, kNoMagnitude}) {
    Header e;
    e.scale_exponent = bad;
    EXPECT_EQ(decode_header(build_packet(e, std::vector<std::int32_t>(2)), h), DecodeError::kBadExponent) << bad;
    if (bad == kNoMagnitude) continue;
    Header m;
    m.magnitude_or_next = bad;
    EXPECT_EQ(decode_header(build_packet(m, std::vector<std::int32_t>(2)), h), DecodeError::kBadExponent) << bad;
  }
}

// round_shape: a gradient's last fragment carries its real value count (1..value_count), every
// other packet 0; a parameter packet 0 or kRoundShapeMismatch. Both round-trip at offset 22.
TEST(Wire, RoundShapeRoundTrips) {
  Header gradient;
  gradient.round_shape = 62;
  auto packet = build_packet(gradient, std::vector<std::int32_t>(62));
  EXPECT_EQ(packet[22], 0);
  EXPECT_EQ(packet[23], 62);
  Header h;
  ASSERT_EQ(decode_header(packet, h), DecodeError::kOk);
  EXPECT_EQ(h.round_shape, 62);
  gradient.round_shape = 1;
  gradient.float_payload = true;
  gradient.resend = true;
  ASSERT_EQ(decode_header(build_packet(gradient, std::vector<std::int32_t>(kMaxValuesPerPacket)), h), DecodeError::kOk);
  EXPECT_EQ(h.round_shape, 1);
  gradient.round_shape = kMaxValuesPerPacket;
  ASSERT_EQ(decode_header(build_packet(gradient, std::vector<std::int32_t>(kMaxValuesPerPacket)), h), DecodeError::kOk);
  EXPECT_EQ(h.round_shape, kMaxValuesPerPacket);

  Header mismatch;
  mismatch.is_ack = true;
  mismatch.round_shape = kRoundShapeMismatch;
  packet = build_packet(mismatch, {});
  EXPECT_EQ(packet[22], 0xFF);
  EXPECT_EQ(packet[23], 0xFF);
  ASSERT_EQ(decode_header(packet, h), DecodeError::kOk);
  EXPECT_TRUE(h.is_ack);
  EXPECT_EQ(h.round_shape, kRoundShapeMismatch);
  EXPECT_EQ(h.value_count, 0);
  ASSERT_EQ(decode_header(build_packet(Header{}, {}), h), DecodeError::kOk);
  EXPECT_EQ(h.round_shape, 0);
}

TEST(Wire, RoundShapeOutOfRangeIsRejected) {
  Header h;
  auto with_shape = [](bool ack, std::uint16_t shape, std::size_t values) {
    Header header;
    header.is_ack = ack;
    auto packet = build_packet(header, std::vector<std::int32_t>(values));
    packet[22] = static_cast<std::uint8_t>(shape >> 8);
    packet[23] = static_cast<std::uint8_t>(shape & 0xFF);
    return packet;
  };
  // Gradients: more real values than the packet has, or above any packet's maximum.
  EXPECT_EQ(decode_header(with_shape(false, 3, 2), h), DecodeError::kBadRoundShape);
  EXPECT_EQ(decode_header(with_shape(false, 63, 62), h), DecodeError::kBadRoundShape);
  EXPECT_EQ(decode_header(with_shape(false, kMaxValuesPerPacket + 1, kMaxValuesPerPacket), h),
            DecodeError::kBadRoundShape);
  EXPECT_EQ(decode_header(with_shape(false, kRoundShapeMismatch, 62), h), DecodeError::kBadRoundShape);
  EXPECT_EQ(decode_header(with_shape(false, 1, 0), h), DecodeError::kBadRoundShape);
  EXPECT_EQ(decode_header(with_shape(false, 62, 62), h), DecodeError::kOk);
  // Parameter packets: anything but 0 and the mismatch notice.
  for (const std::uint16_t shape : {1, 62, 4096, 4097, 0xFFFE, 0x8000}) {
    EXPECT_EQ(decode_header(with_shape(true, shape, 62), h), DecodeError::kBadRoundShape) << shape;
    EXPECT_EQ(decode_header(with_shape(true, shape, 0), h), DecodeError::kBadRoundShape) << shape;
  }
  EXPECT_EQ(decode_header(with_shape(true, kRoundShapeMismatch, 0), h), DecodeError::kOk);
  auto bad = with_shape(true, 7, 0);
  EXPECT_FALSE(mark_ecn(bad));
}

TEST(Wire, MarkEcnSetsOnlyTheEcnFlag) {
  auto packet = build_packet(Header{}, std::vector<std::int32_t>(3, 9));
  const auto before = packet;
  ASSERT_TRUE(mark_ecn(packet));
  Header h;
  ASSERT_EQ(decode_header(packet, h), DecodeError::kOk);
  EXPECT_TRUE(h.ecn);
  EXPECT_FALSE(h.is_ack || h.resend || h.collision || h.overflow || h.float_payload);
  for (std::size_t i = 0; i < packet.size(); ++i) {
    if (i != 3) {
      EXPECT_EQ(packet[i], before[i]) << i;
    }
  }
}

TEST(Wire, MarkEcnLeavesNonAtpBytesAlone) {
  std::vector<std::uint8_t> junk = {1, 2, 3, 4};
  const auto before = junk;
  EXPECT_FALSE(mark_ecn(junk));
  EXPECT_EQ(junk, before);
}

TEST(Wire, SequenceOrderSurvivesWrapAround) {
  EXPECT_TRUE(seq_before(1, 2));
  EXPECT_FALSE(seq_before(2, 1));
  EXPECT_FALSE(seq_before(5, 5));
  EXPECT_TRUE(seq_before(0xFFFFFFFF, 0));
  EXPECT_TRUE(seq_before(0xFFFFFF00, 0x10));
  EXPECT_FALSE(seq_before(0x10, 0xFFFFFF00));
}

// A Rina packet: the flag and its kind in byte 21, its round's fragment count in the bytes of
// ATP's node; an ATP packet's node is its own.
TEST(Wire, RinaKindsRoundTripAndLeaveAtpPacketsAlone) {
  for (std::uint8_t k = 1; k < kRinaKinds; ++k) {
    Header in;
    in.rina = static_cast<RinaKind>(k);
    in.bitmap = 4;
    in.fan_in = 3;
    in.round_fragments = 0x01020304;
    const auto packet = build_packet(in, std::vector<std::int32_t>(3, 7));
    EXPECT_EQ(packet[21], k);
    Header out;
    ASSERT_EQ(decode_header(packet, out), DecodeError::kOk);
    EXPECT_EQ(out.rina, in.rina);
    EXPECT_EQ(out.node, 0);
    EXPECT_EQ(out.offered_aggregator, 0);  // its bytes are round_fragments'
    EXPECT_EQ(out.round_fragments, 0x01020304u);
    EXPECT_EQ(out.bitmap, 4u);
    EXPECT_EQ(out.fan_in, 3);
  }
  Header atp;
  atp.node = 5;
  atp.round_fragments = 9;  // not an ATP field: not written
  Header out;
  const auto packet = build_packet(atp, std::vector<std::int32_t>(1));
  EXPECT_EQ(packet[21], 0);
  ASSERT_EQ(decode_header(packet, out), DecodeError::kOk);
  EXPECT_EQ(out.rina, RinaKind::kNone);
  EXPECT_EQ(out.node, 5);
  EXPECT_EQ(out.round_fragments, 0u);
}

// A PS's resend request: kind byte 1 of an ATP parameter packet without values. The byte on any
// other ATP packet (a gradient, a result with values) or another kind is refused.
TEST(Wire, AResendRequestIsAParameterPacketWithoutValuesAndKindOne) {
  Header in;
  in.is_ack = true;
  in.resend_request = true;
  in.seq = 77;
  const auto packet = build_packet(in, {});
  EXPECT_EQ(packet[21], 1);
  Header out;
  ASSERT_EQ(decode_header(packet, out), DecodeError::kOk);
  EXPECT_TRUE(out.resend_request);
  EXPECT_TRUE(out.is_ack);
  EXPECT_EQ(out.rina, RinaKind::kNone);
  EXPECT_EQ(out.seq, 77u);
  Header result = in;
  result.resend_request = false;
  auto with_values = build_packet(result, std::vector<std::int32_t>(2));
  ASSERT_EQ(decode_header(with_values, out), DecodeError::kOk);
  EXPECT_FALSE(out.resend_request);
  with_values[21] = 1;
  EXPECT_EQ(decode_header(with_values, out), DecodeError::kBadKind);
  auto gradient = packet;
  gradient[3] &= 0xFE;  // the ack flag off
  EXPECT_EQ(decode_header(gradient, out), DecodeError::kBadKind);
  auto unknown = packet;
  unknown[21] = 2;
  EXPECT_EQ(decode_header(unknown, out), DecodeError::kBadKind);
}

TEST(Wire, MulticastGroups) {
  EXPECT_TRUE(is_multicast(multicast_group_address(7)));
  EXPECT_FALSE(is_multicast(0x0A000001));
  EXPECT_NE(multicast_group_address(1), multicast_group_address(2));
}

TEST(Wire, DecodeErrorsHaveText) {
  for (auto e : {DecodeError::kOk, DecodeError::kTruncated, DecodeError::kBadMagic, DecodeError::kBadVersion,
                 DecodeError::kBadRoundShape, DecodeError::kTooManyValues, DecodeError::kBadExponent,
                 DecodeError::kBadKind, DecodeError::kLengthMismatch}) {
    EXPECT_FALSE(to_string(e).empty());
  }
}

// The one check every config's values_per_packet goes through (worker, PS job, plan).
TEST(Wire, ValuesPerPacketIsOneUpToWhatAPacketCarries) {
  EXPECT_EQ(values_per_packet_error(0), "must be 1..4096, got 0");
  EXPECT_EQ(values_per_packet_error(1), std::nullopt);
  EXPECT_EQ(values_per_packet_error(kMaxValuesPerPacket), std::nullopt);
  EXPECT_EQ(values_per_packet_error(kMaxValuesPerPacket + 1), "must be 1..4096, got 4097");
}

}  // namespace
}  // namespace atp
