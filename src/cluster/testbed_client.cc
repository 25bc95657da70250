// The testbed's job requests: their codecs and rank 0's client.
#include "atp/cluster/testbed_client.h"

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "atp/control/control.h"

namespace atp {
namespace {

using nlohmann::json;

std::int64_t micros(Duration d) { return std::chrono::duration_cast<std::chrono::microseconds>(d).count(); }
Duration from_micros(std::int64_t us) { return std::chrono::microseconds(us); }

json parse_line(const std::string& line) {
  json doc = json::parse(line, nullptr, false);
  if (!doc.is_object()) throw std::runtime_error("a testbed message is not a JSON object: '" + line + "'");
  return doc;
}

}  // namespace

std::string to_json(const TestbedRequest& request) {
  if (request.kind == TestbedRequest::Kind::kAggregations) return json{{"aggregations", request.job}}.dump();
  const TestbedJobRequest& r = request.install;
  return json{{"install",
               {{"hosts", r.hosts},
                {"protocol", r.protocol},
                {"in_network_aggregation", r.in_network_aggregation},
                {"values_per_packet", r.values_per_packet},
                {"scale", r.scale},
                {"retransmit_timeout_us", micros(r.retransmit_timeout)},
                {"progress_timeout_us", micros(r.progress_timeout)}}}}
      .dump();
}

TestbedRequest testbed_request_from_json(const std::string& line) {
  const json doc = parse_line(line);
  TestbedRequest request;
  try {
    if (doc.contains("aggregations")) {
      request.kind = TestbedRequest::Kind::kAggregations;
      request.job = doc["aggregations"].get<JobId>();
      return request;
    }
    const json& r = doc.at("install");
    request.install.hosts = r.at("hosts").get<std::vector<std::string>>();
    request.install.protocol = r.at("protocol").get<std::string>();
    request.install.in_network_aggregation = r.at("in_network_aggregation").get<bool>();
    request.install.values_per_packet = r.at("values_per_packet").get<std::uint16_t>();
    request.install.scale = r.at("scale").get<double>();
    request.install.retransmit_timeout = from_micros(r.at("retransmit_timeout_us").get<std::int64_t>());
    request.install.progress_timeout = from_micros(r.at("progress_timeout_us").get<std::int64_t>());
  } catch (const json::exception& e) {
    throw std::runtime_error("a testbed request does not read (" + std::string(e.what()) + "): '" + line + "'");
  }
  return request;
}

std::string to_json(const TestbedJob& job) { return json{{"job", job.job}, {"configs", job.configs}}.dump(); }

std::string aggregations_to_json(const std::map<std::string, std::uint64_t>& aggregations) {
  return json{{"aggregations", aggregations}}.dump();
}

std::string testbed_error_to_json(const std::string& sentence) { return json{{"error", sentence}}.dump(); }

TestbedClient::TestbedClient(const std::string& socket_path) : path_(socket_path), socket_(-1) {
  try {
    socket_ = LineSocket::connect(socket_path);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string(e.what()) + ": is `atp testbed` that set ATP_TESTBED still running?");
  }
}

std::string TestbedClient::call(const TestbedRequest& request) {
  if (!socket_.send_line(to_json(request))) {
    throw std::runtime_error("the testbed at " + path_ + " closed the connection: did `atp testbed` stop?");
  }
  const auto answer = socket_.read_line(LineSocket::Clock::now() + kAnswerTimeout);
  if (!answer) {
    throw std::runtime_error(
        "the testbed at " + path_ +
        (socket_.closed() ? " closed the connection: did `atp testbed` stop?" : " did not answer within 30 s"));
  }
  const json doc = parse_line(*answer);
  if (doc.contains("error")) throw std::runtime_error(doc["error"].get<std::string>());
  return *answer;
}

TestbedJob TestbedClient::install(const TestbedJobRequest& request) {
  const json doc = parse_line(call({TestbedRequest::Kind::kInstall, request, 0}));
  TestbedJob job;
  try {
    job.job = doc.at("job").get<JobId>();
    job.configs = doc.at("configs").get<std::vector<json>>();
  } catch (const std::exception& e) {
    throw std::runtime_error("the testbed's answer does not read (" + std::string(e.what()) + ")");
  }
  return job;
}

std::map<std::string, std::uint64_t> TestbedClient::aggregations(JobId job) {
  TestbedRequest request;
  request.kind = TestbedRequest::Kind::kAggregations;
  request.job = job;
  const json doc = parse_line(call(request));
  return doc.at("aggregations").get<std::map<std::string, std::uint64_t>>();
}

}  // namespace atp
