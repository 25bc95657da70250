// libFuzzer entry point: every input goes through the decoder, two switches, a worker and a
// PS (fuzz/packet_harness.h). Run: build with clang, then ./packet_fuzzer -max_total_time=60.
#include "packet_harness.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static atp::fuzz::Harness harness;
  harness.feed(std::span(data, size));
  return 0;
}
