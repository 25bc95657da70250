// libFuzzer entry point for the daemons' control input (fuzz/control_harness.h): the JSON codecs,
// the switch config, and HTTP requests to a switch and a PS. Run: build with clang, then
// ./control_fuzzer -max_total_time=60 corpus_dir fuzz/control_corpus.
#include "control_harness.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static atp::fuzz::Daemons daemons;
  atp::fuzz::feed(daemons, std::span(data, size));
  return 0;
}
