// The ATP packet on the wire: the header of the paper's Fig. 5, its two fixed levels (bitmap0/1,
// fanInDegree0/1, edgeSwitchIdentifier) made a tree of any depth (node, bitmap, fan_in: docs/
// protocol.md "Aggregation tree"), plus magic, version, addresses, a value count, a round shape
// and the fixed-point exponents, followed by value_count 32-bit values, in network byte order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "atp/fixed_point.h"

namespace atp {

using JobId = std::uint16_t;
using Seq = std::uint32_t;      // fragment sequence number; wraps around (compare with seq_before)
using Address = std::uint32_t;  // host address: an IPv4 address on real networks
using PortId = std::uint16_t;   // a switch port

inline constexpr std::uint16_t kMagic = 0xA7B1;
inline constexpr std::uint8_t kVersion = 3;
inline constexpr std::size_t kHeaderBytes = 40;
// Where Header::aggregator_index sits (a big-endian u32): what a dataplane over several threads
// steers packets by, before decoding them (in the kernel, too: a socket filter reads it).
inline constexpr std::size_t kAggregatorIndexOffset = 24;
inline constexpr std::uint16_t kDefaultValuesPerPacket = 62;  // 248 B of values, as in the paper
inline constexpr std::uint16_t kMaxValuesPerPacket = 4096;    // 16 KiB: fits a UDP datagram
// Header::round_shape of a parameter packet that says "the workers' rounds differ in size":
// workers all-reduce tensors of different sizes, so this fragment has no result. No values.
inline constexpr std::uint16_t kRoundShapeMismatch = 0xFFFF;
// The UDP port ATP packets travel on (both ends) where hosts address each other by IP (the
// namespace testbed, real networks); switches classify ATP traffic by it.
inline constexpr std::uint16_t kUdpPort = 9700;
// IPv4 (20) + UDP (8) around an ATP packet: what an MTU counts.
inline constexpr std::size_t kIpUdpBytes = 28;
// Ethernet (14) + IPv4 (20) + UDP (8): what a real network adds around every ATP packet.
inline constexpr std::size_t kEncapsulationBytes = 14 + kIpUdpBytes;
// Parameter packets of a job are multicast to this group address (224.0.0.0/8 | job id).
inline constexpr Address multicast_group_address(JobId job) { return 0xE0000000u | job; }
inline constexpr bool is_multicast(Address a) { return (a & 0xF0000000u) == 0xE0000000u; }

// "10.0.0.3": an address as a dotted quad (overlay addresses are IPv4 addresses).
std::string format_address(Address a);

// Serial-number order on sequence numbers (RFC 1982): a is before b if b is less than 2^31 ahead.
inline constexpr bool seq_before(Seq a, Seq b) { return static_cast<std::int32_t>(a - b) < 0; }

// Rina's packets (docs/rina.md): ATP packets with the Rina flag, of these kinds. kNone: an ATP
// packet. On the wire the kind takes byte 21, which an ATP packet leaves zero.
enum class RinaKind : std::uint8_t {
  kNone = 0,
  kContribution,  // a worker's values for a reduce-scatter hop (a carrier's: plus the last hop's sum)
  kFinal,         // the same for a fragment's last hop, whose sum is complete
  kAck,           // the hop's receiver has every contribution; no values (round_shape kRoundShapeMismatch:
                  // the workers all-reduce tensors of different sizes)
  kGather,        // a complete sum going round the allgather, or a reply to a request
  kGatherAck,     // the gather's receiver has it; no values
  kRequest,       // a worker lacks this fragment's complete sum; no values
  kPull,          // the carrier has the last hop's sum: its rack's workers send theirs; no values
};
inline constexpr std::uint8_t kRinaKinds = 8;  // kinds 0..7 (kNone and the seven above)

// The decoded header. Field names follow the paper (Fig. 5).
struct Header {
  // Direction and status flags.
  bool is_ack = false;         // a parameter packet (result from the PS), else a gradient packet
  bool resend = false;         // a retransmission; switches flush or skip aggregation (Fig. 17)
  bool collision = false;      // gradient: forwarded past a busy aggregator; ack: bitmap has a new index
  bool ecn = false;            // congestion experienced somewhere on the path
  bool overflow = false;       // ack only: the aggregate saturated, resend this fragment as float32
  bool float_payload = false;  // values are float32 bit patterns (overflow path); never aggregated
  // The job's switches find the fragment's aggregator by <job, seq> and give its first packet the
  // one free the longest, wherever it is (IndexPolicy::kAllocated); aggregator_index then only
  // picks a dataplane thread (TableSlice). Gradient and parameter packets.
  bool allocate = false;
  RinaKind rina = RinaKind::kNone;  // a Rina packet's kind
  // Parameter packet only, no values: the PS has the fragment from other workers and still lacks
  // the receiver's, whose retransmission would complete it (docs/protocol.md "Resend requests").
  // On the wire: kind byte 1 of an ATP packet (0 in every other).
  bool resend_request = false;

  JobId job = 0;
  std::uint16_t value_count = 0;  // number of 32-bit values after the header
  Seq seq = 0;
  // Where the values come from in the job's aggregation tree towards its PS (docs/protocol.md
  // "Aggregation tree"): the sum of the children of tree node `node` set in `bitmap` (bit i: the
  // node's i-th child). A worker is a leaf: node = its own, bitmap 1, fan_in 1. A switch sends its
  // node's sum on with every child's bit set (whole: the parent switch adds it), or, flushed
  // early, with those it has (a partial sum, which only the PS merges). fan_in: the node's
  // children. In an ack with collision set, `bitmap` carries the aggregator index workers should
  // use from now on (the paper's "unused bitmap field"). Rina (docs/rina.md): `bitmap` is a rack
  // member's bit, fan_in the rack's members, and round_fragments takes node's bytes; in a Rina
  // ack (kAck, kGatherAck), `bitmap` 1 echoes the acknowledged packet's ECN mark.
  std::uint32_t bitmap = 0;
  std::uint16_t node = 0;
  std::uint8_t fan_in = 0;
  std::uint32_t round_fragments = 0;  // Rina: the fragments of the sender's round
  // A gradient a switch forwarded past a busy aggregator (collision): the free aggregator that
  // switch offers the fragment instead, plus one (0: none offered; indices from 65,535 on are
  // not offered). The PS of a hashed_slots job moves the fragment there (docs/protocol.md
  // "Sharing the table"). Not in Rina packets, whose round_fragments takes these bytes.
  std::uint16_t offered_aggregator = 0;
  // The shape of the round the fragment belongs to, so that fragments of allreduce calls of
  // different sizes never merge (sequence numbers only say a fragment's position). Gradient:
  // 0, except on the last fragment of its round, which carries the number of real (not
  // padding) values in it, 1..value_count; resends and float32 resends carry the same. Two
  // workers' rounds of different sizes always meet at some seq with different values here (a
  // last fragment against a non-last one, or two last ones with different counts), and
  // switches and PSs never add packets whose round_shape differs. Parameter packet: 0, or
  // kRoundShapeMismatch.
  std::uint16_t round_shape = 0;
  std::uint32_t aggregator_index = 0;
  Address src = 0;
  Address dst = 0;  // a host, or multicast_group_address(job) for parameter packets
  // Fixed point per fragment (fixed_point.h, docs/protocol.md "Scale per fragment"): a gradient's
  // int32 values are x * 2^scale_exponent, rounded; an int32 result's are sums at that exponent.
  // Float32 payloads and notices: 0. Within +-kMaxScaleExponent (fixed_point.h) either way.
  std::int16_t scale_exponent = 0;
  // Gradient: floor(log2) of the largest magnitude among the sender's values (of an aggregate:
  // the largest of its members'), kNoMagnitude when they are all zero (or not finite). Parameter
  // packet: the exponent the workers use for this fragment's position in their next round.
  std::int16_t magnitude_or_next = kNoMagnitude;
};

// Header::bitmap of a whole sum of a tree node with `fan_in` children (1..32).
inline constexpr std::uint32_t whole_bitmap(std::uint32_t fan_in) { return fan_in >= 32 ? ~0u : (1u << fan_in) - 1; }

enum class DecodeError : std::uint8_t {
  kOk = 0,
  kTruncated,       // shorter than the header
  kBadMagic,        // not an ATP packet
  kBadVersion,      // an ATP version this code does not speak
  kBadRoundShape,   // gradient: round_shape above value_count; parameter: neither 0 nor kRoundShapeMismatch
  kBadExponent,     // scale_exponent or magnitude_or_next out of range
  kBadKind,         // the kind byte names no kind: a Rina packet's none of RinaKind, an ATP packet's neither
                    // 0 nor a resend request's (a parameter packet without values)
  kTooManyValues,   // value_count above kMaxValuesPerPacket
  kLengthMismatch,  // packet length differs from kHeaderBytes + 4 * value_count
};
std::string_view to_string(DecodeError e);

inline constexpr std::size_t packet_size(std::uint16_t value_count) { return kHeaderBytes + 4u * value_count; }
// Fragments of `values_per_packet` (> 0) values that a tensor of `values` values is cut into; the
// last one is zero-padded.
inline constexpr std::uint64_t fragment_count(std::uint64_t values, std::uint16_t values_per_packet) {
  return (values + values_per_packet - 1) / values_per_packet;
}

// Reads and validates the header of `packet`. Never reads outside `packet`; on success the
// packet is exactly packet_size(out.value_count) bytes long.
DecodeError decode_header(std::span<const std::uint8_t> packet, Header& out);

// Writes `h` into the first kHeaderBytes of `out`. Requires out.size() >= kHeaderBytes.
void encode_header(const Header& h, std::span<std::uint8_t> out);

// Values after the header, in host order. `packet` must have passed decode_header.
std::int32_t load_value(std::span<const std::uint8_t> packet, std::size_t i);
void store_value(std::span<std::uint8_t> packet, std::size_t i, std::int32_t v);

// Whole runs of values, from value 0 on, in one pass each (src/core/wire_values.cc): byte order,
// fixed point (fixed_point.h) and the switch's and the PS's additions fused. Each pass reads or
// writes exactly as many values as its span holds, which `packet` must have room for; nothing
// needs to be aligned. With Simd::kBest a pass runs an AVX2 loop where the CPU has it (x86-64,
// checked once), else the scalar loop; both give the same bits in every case. Simd::kScalar
// forces the scalar loop, so that tests and benchmarks can compare the two.
enum class Simd : std::uint8_t { kBest, kScalar };
// Whether Simd::kBest runs AVX2 code on this CPU.
bool cpu_has_avx2();

void load_values(std::span<const std::uint8_t> packet, std::span<std::int32_t> out, Simd simd = Simd::kBest);
void store_values(std::span<std::uint8_t> packet, std::span<const std::int32_t> values, Simd simd = Simd::kBest);
// Float32 payloads (Header::float_payload): the values are the floats' bit patterns.
void load_floats(std::span<const std::uint8_t> packet, std::span<float> out, Simd simd = Simd::kBest);
void store_floats(std::span<std::uint8_t> packet, std::span<const float> values, Simd simd = Simd::kBest);
// A worker's gradients: value i = quantize_one(in[i], scale).
void store_quantized(std::span<std::uint8_t> packet, std::span<const float> in, double scale, Simd simd = Simd::kBest);
// A worker's results: out[i] = dequantize_one(value i, scale).
void load_dequantized(std::span<const std::uint8_t> packet, double scale, std::span<float> out,
                      Simd simd = Simd::kBest);
// A switch aggregator's row: row[i] = sticky_saturating_add(row[i], value i).
void accumulate_values(std::span<const std::uint8_t> packet, std::span<std::int32_t> row, Simd simd = Simd::kBest);
// A PS's exact sums: sums[i] += value i. Returns whether any of those values was saturated
// (INT32_MAX or INT32_MIN).
bool add_to_sums(std::span<const std::uint8_t> packet, std::span<std::int64_t> sums, Simd simd = Simd::kBest);
// A PS's result: value i = static_cast<std::int32_t>(sums[i]) (the low 32 bits; the PS sends
// only sums in int32 range).
void store_sums(std::span<std::uint8_t> packet, std::span<const std::int64_t> sums, Simd simd = Simd::kBest);

// Builds a whole packet: header (with h.value_count = values.size()) and values.
std::vector<std::uint8_t> build_packet(Header h, std::span<const std::int32_t> values);

// Sets the ECN flag of an ATP packet in place, as an egress queue does. Returns false (and
// leaves the bytes alone) if `packet` is not a valid ATP packet.
bool mark_ecn(std::span<std::uint8_t> packet);

}  // namespace atp
