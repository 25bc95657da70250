// How a rank on an emulated cluster (`atp testbed`) gets its job installed: rank 0 asks the
// runner that built the testbed, over a Unix socket whose path every rank finds in ATP_TESTBED,
// to plan the job over the testbed's network and install it on its switches and PS. The job
// lives as long as that connection: when rank 0 closes it (or dies), the runner removes the job.
// One JSON object per line each way (testbed_request_to_json and the rest below); an answer
// {"error": SENTENCE} is a refusal.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "atp/io/line_socket.h"
#include "atp/plan/plan.h"
#include "atp/time.h"
#include "atp/wire.h"

namespace atp {

// What rank 0 asks for: a job of these testbed hosts, in rank order, with these settings.
struct TestbedJobRequest {
  std::vector<std::string> hosts;
  std::string protocol = "atp";         // the protocol table's name (atp/cluster/protocols.h): atp, rina
  bool in_network_aggregation = true;   // false: the PS baseline (switches forward, the PS adds)
  std::uint16_t values_per_packet = 0;  // 0: the widest the switches and the path MTU take
  double scale = 1e8;
  Duration retransmit_timeout{0};  // 0: the file's job's (from its link rate)
  Duration progress_timeout{0};    // 0: the file's job's
};
// What the runner installed: each rank's part of the plan, its endpoint config as a JSON value (the
// request's protocol's: Protocol::endpoint makes its endpoint).
struct TestbedJob {
  JobId job = 0;
  std::vector<nlohmann::json> configs;
};

// A request: install a job, or report one's aggregations.
struct TestbedRequest {
  enum class Kind : std::uint8_t { kInstall, kAggregations };
  Kind kind = Kind::kInstall;
  TestbedJobRequest install;  // kInstall
  JobId job = 0;              // kAggregations
};

// The codecs, a line each (std::runtime_error for one that does not read). An answer is a
// TestbedJob, {"aggregations": {SWITCH: N}}, or {"error": SENTENCE}.
std::string to_json(const TestbedRequest& request);
TestbedRequest testbed_request_from_json(const std::string& line);
std::string to_json(const TestbedJob& job);
std::string aggregations_to_json(const std::map<std::string, std::uint64_t>& aggregations);
std::string testbed_error_to_json(const std::string& sentence);

// Rank 0's side: one connection for the job's life. Every call is bounded (kAnswerTimeout) and
// throws std::runtime_error with the runner's sentence, or naming the socket when the runner does
// not answer.
class TestbedClient {
 public:
  static constexpr auto kAnswerTimeout = std::chrono::seconds(30);
  explicit TestbedClient(const std::string& socket_path);
  TestbedJob install(const TestbedJobRequest& request);
  // The gradient packets each switch of the testbed has aggregated for `job` so far, by name.
  std::map<std::string, std::uint64_t> aggregations(JobId job);

 private:
  std::string call(const TestbedRequest& request);  // the answer's line, not an error

  std::string path_;
  LineSocket socket_;
};

}  // namespace atp
