// Encoding and decoding of ATP packets. Every read is bounds-checked against the span first;
// the layout (byte offsets) is defined once, here.
#include "atp/wire.h"

#include <cstdio>
#include <cstring>

#include "atp/big_endian.h"
#include "atp/fixed_point.h"
#include "atp/values_per_packet.h"

namespace atp {
namespace {

using big_endian::get16;
using big_endian::get32;
using big_endian::put16;
using big_endian::put32;

// Byte offsets of the header fields.
constexpr std::size_t kOffMagic = 0;    // u16
constexpr std::size_t kOffVersion = 2;  // u8
constexpr std::size_t kOffFlags = 3;    // u8
constexpr std::size_t kOffJob = 4;      // u16
constexpr std::size_t kOffCount = 6;    // u16
constexpr std::size_t kOffSeq = 8;      // u32
constexpr std::size_t kOffBitmap = 12;  // u32
constexpr std::size_t kOffNode = 16;    // u16, then u16 offered_aggregator; Rina: u32 round_fragments
constexpr std::size_t kOffFanIn = 20;   // u8
constexpr std::size_t kOffKind = 21;    // u8: Rina: a RinaKind; ATP: 0, or kResendRequestKind
constexpr std::size_t kOffShape = 22;   // u16, round_shape
constexpr std::size_t kOffIndex = kAggregatorIndexOffset;  // u32
constexpr std::size_t kOffSrc = 28;                        // u32
constexpr std::size_t kOffDst = 32;                        // u32
constexpr std::size_t kOffExponent = 36;                   // i16, scale_exponent
constexpr std::size_t kOffMagnitude = 38;                  // i16, magnitude_or_next
static_assert(kOffMagnitude + 2 == kHeaderBytes);

// Flag bits of the flags byte.
constexpr std::uint8_t kFlagAck = 1u << 0;
constexpr std::uint8_t kFlagResend = 1u << 1;
constexpr std::uint8_t kFlagCollision = 1u << 2;
constexpr std::uint8_t kFlagEcn = 1u << 3;
constexpr std::uint8_t kFlagOverflow = 1u << 4;
constexpr std::uint8_t kFlagFloat = 1u << 5;
constexpr std::uint8_t kFlagAllocate = 1u << 6;
constexpr std::uint8_t kFlagRina = 1u << 7;  // byte 21 is a RinaKind
// Byte 21 of an ATP parameter packet without values that asks its receiver for a resend.
constexpr std::uint8_t kResendRequestKind = 1;

}  // namespace

std::string format_address(Address a) {
  char text[16];
  std::snprintf(text, sizeof text, "%u.%u.%u.%u", a >> 24, (a >> 16) & 0xFF, (a >> 8) & 0xFF, a & 0xFF);
  return text;
}

std::string_view to_string(DecodeError e) {
  switch (e) {
    case DecodeError::kOk:
      return "ok";
    case DecodeError::kTruncated:
      return "shorter than the ATP header";
    case DecodeError::kBadMagic:
      return "not an ATP packet (bad magic)";
    case DecodeError::kBadVersion:
      return "unsupported ATP version";
    case DecodeError::kBadRoundShape:
      return "round shape out of range";
    case DecodeError::kTooManyValues:
      return "value count above the maximum";
    case DecodeError::kBadExponent:
      return "scale exponent or magnitude out of range";
    case DecodeError::kBadKind:
      return "unknown packet kind";
    case DecodeError::kLengthMismatch:
      return "length does not match the value count";
  }
  return "unknown decode error";
}

DecodeError decode_header(std::span<const std::uint8_t> packet, Header& out) {
  if (packet.size() < kHeaderBytes) return DecodeError::kTruncated;
  const std::uint8_t* p = packet.data();
  if (get16(p + kOffMagic) != kMagic) return DecodeError::kBadMagic;
  if (p[kOffVersion] != kVersion) return DecodeError::kBadVersion;
  const std::uint8_t flags = p[kOffFlags];
  const std::uint16_t count = get16(p + kOffCount);
  if (count > kMaxValuesPerPacket) return DecodeError::kTooManyValues;
  if (packet.size() != packet_size(count)) return DecodeError::kLengthMismatch;
  const bool rina = (flags & kFlagRina) != 0;
  const std::uint8_t kind = p[kOffKind];
  if (rina && (kind == 0 || kind >= kRinaKinds)) return DecodeError::kBadKind;
  const bool resend_request = !rina && kind == kResendRequestKind;
  if (!rina && kind != 0 && !(resend_request && (flags & kFlagAck) != 0 && count == 0)) return DecodeError::kBadKind;
  const std::uint16_t shape = get16(p + kOffShape);
  // Parameter packets and Rina's acks say "the rounds differ in size" with kRoundShapeMismatch.
  const bool ack = (flags & kFlagAck) != 0 || (rina && kind == static_cast<std::uint8_t>(RinaKind::kAck));
  if (ack ? shape != 0 && shape != kRoundShapeMismatch : shape > count) return DecodeError::kBadRoundShape;
  const auto exponent = static_cast<std::int16_t>(get16(p + kOffExponent));
  const auto magnitude = static_cast<std::int16_t>(get16(p + kOffMagnitude));
  if (exponent != clamp_exponent(exponent) || (magnitude != kNoMagnitude && magnitude != clamp_exponent(magnitude))) {
    return DecodeError::kBadExponent;
  }

  out.is_ack = (flags & kFlagAck) != 0;
  out.resend = (flags & kFlagResend) != 0;
  out.collision = (flags & kFlagCollision) != 0;
  out.ecn = (flags & kFlagEcn) != 0;
  out.overflow = (flags & kFlagOverflow) != 0;
  out.float_payload = (flags & kFlagFloat) != 0;
  out.allocate = (flags & kFlagAllocate) != 0;
  out.job = get16(p + kOffJob);
  out.value_count = count;
  out.seq = get32(p + kOffSeq);
  out.bitmap = get32(p + kOffBitmap);
  out.node = rina ? 0 : get16(p + kOffNode);
  out.round_fragments = rina ? get32(p + kOffNode) : 0;
  out.offered_aggregator = rina ? 0 : get16(p + kOffNode + 2);
  out.fan_in = p[kOffFanIn];
  out.rina = rina ? static_cast<RinaKind>(kind) : RinaKind::kNone;
  out.resend_request = resend_request;
  out.round_shape = shape;
  out.aggregator_index = get32(p + kOffIndex);
  out.src = get32(p + kOffSrc);
  out.dst = get32(p + kOffDst);
  out.scale_exponent = exponent;
  out.magnitude_or_next = magnitude;
  return DecodeError::kOk;
}

void encode_header(const Header& h, std::span<std::uint8_t> out) {
  std::uint8_t* p = out.data();
  std::uint8_t flags = 0;
  if (h.is_ack) flags |= kFlagAck;
  if (h.resend) flags |= kFlagResend;
  if (h.collision) flags |= kFlagCollision;
  if (h.ecn) flags |= kFlagEcn;
  if (h.overflow) flags |= kFlagOverflow;
  if (h.float_payload) flags |= kFlagFloat;
  if (h.allocate) flags |= kFlagAllocate;
  if (h.rina != RinaKind::kNone) flags |= kFlagRina;
  put16(p + kOffMagic, kMagic);
  p[kOffVersion] = kVersion;
  p[kOffFlags] = flags;
  put16(p + kOffJob, h.job);
  put16(p + kOffCount, h.value_count);
  put32(p + kOffSeq, h.seq);
  put32(p + kOffBitmap, h.bitmap);
  put32(p + kOffNode,
        h.rina != RinaKind::kNone ? h.round_fragments : std::uint32_t{h.node} << 16 | h.offered_aggregator);
  p[kOffFanIn] = h.fan_in;
  p[kOffKind] = h.rina != RinaKind::kNone ? static_cast<std::uint8_t>(h.rina)
                : h.resend_request        ? kResendRequestKind
                                          : 0;
  put16(p + kOffShape, h.round_shape);
  put32(p + kOffIndex, h.aggregator_index);
  put32(p + kOffSrc, h.src);
  put32(p + kOffDst, h.dst);
  put16(p + kOffExponent, static_cast<std::uint16_t>(h.scale_exponent));
  put16(p + kOffMagnitude, static_cast<std::uint16_t>(h.magnitude_or_next));
}

std::int32_t load_value(std::span<const std::uint8_t> packet, std::size_t i) {
  return static_cast<std::int32_t>(get32(packet.data() + kHeaderBytes + 4 * i));
}

void store_value(std::span<std::uint8_t> packet, std::size_t i, std::int32_t v) {
  put32(packet.data() + kHeaderBytes + 4 * i, static_cast<std::uint32_t>(v));
}

std::vector<std::uint8_t> build_packet(Header h, std::span<const std::int32_t> values) {
  h.value_count = static_cast<std::uint16_t>(values.size());
  std::vector<std::uint8_t> packet(packet_size(h.value_count));
  encode_header(h, packet);
  store_values(packet, values);
  return packet;
}

bool mark_ecn(std::span<std::uint8_t> packet) {
  Header h;
  if (decode_header(packet, h) != DecodeError::kOk) return false;
  packet[kOffFlags] = static_cast<std::uint8_t>(packet[kOffFlags] | kFlagEcn);
  return true;
}

std::optional<std::string> values_per_packet_error(std::uint64_t values) {
  if (values >= 1 && values <= kMaxValuesPerPacket) return std::nullopt;
  return "must be 1.." + std::to_string(kMaxValuesPerPacket) + ", got " + std::to_string(values);
}

}  // namespace atp
