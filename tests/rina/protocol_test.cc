// Rina's entry in the protocol table (src/rina/protocol.cc): its worker config's codec, whose
// every failure is one control::ControlError naming the field, and the endpoint made from a
// config. (Rina's plan and worker are rina_test's.)
#include "atp/rina/protocol.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "atp/control/json_fields.h"

namespace atp {
namespace {

using nlohmann::json;

RinaConfig sample() {
  RinaConfig c;
  c.job = 7;
  c.rank = 1;
  c.workers = {0x0A000001, 0x0A000002, 0x0A000003};
  c.members = {{0, 1}, {2}};
  return c;
}

// What rina_config_from throws for `doc`: the ControlError's sentence ("" and a failure for any
// other exception, "no error" if it took it).
std::string error_of(const json& doc) {
  try {
    rina_config_from(doc);
  } catch (const control::ControlError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a ControlError: " << e.what();
    return "";
  }
  return "no error";
}

TEST(RinaProtocol, TheConfigRoundTripsEveryField) {
  RinaConfig c;
  c.job = 300;
  c.rank = 2;
  c.workers = {0x0A000001, 0x0A000002, 0x0A000003, 0x0A000004};
  c.members = {{0, 2}, {1}, {3}};
  c.values_per_packet = 512;
  c.scale = 1e5;
  c.aggregator_slots = 77;
  c.congestion = {true, 8, 2, 256, 100, 9000};
  c.retransmit_timeout = std::chrono::milliseconds(3);
  c.min_retransmit_timeout = std::chrono::microseconds(500);
  c.max_retransmit_timeout = std::chrono::milliseconds(700);
  c.progress_timeout = std::chrono::seconds(9);
  c.initial_seq = 1234;
  const RinaConfig back = rina_config_from(rina_config_json(c));
  EXPECT_EQ(back.job, c.job);
  EXPECT_EQ(back.rank, c.rank);
  EXPECT_EQ(back.workers, c.workers);
  EXPECT_EQ(back.members, c.members);
  EXPECT_EQ(back.values_per_packet, c.values_per_packet);
  EXPECT_EQ(back.scale, c.scale);
  EXPECT_EQ(back.aggregator_slots, c.aggregator_slots);
  EXPECT_TRUE(back.congestion == c.congestion);
  EXPECT_EQ(back.retransmit_timeout, c.retransmit_timeout);
  EXPECT_EQ(back.min_retransmit_timeout, c.min_retransmit_timeout);
  EXPECT_EQ(back.max_retransmit_timeout, c.max_retransmit_timeout);
  EXPECT_EQ(back.progress_timeout, c.progress_timeout);
  EXPECT_EQ(back.initial_seq, c.initial_seq);
}

// Every key is required, none other is taken, and each has its type: each failure names the key.
TEST(RinaProtocol, ABadConfigIsOneSentenceNamingTheField) {
  const json good = rina_config_json(sample());
  EXPECT_EQ(error_of(good), "no error");
  EXPECT_EQ(error_of(json::array()), "Rina worker config: expected an object, got []");
  json missing = good;
  missing.erase("initial_seq");
  EXPECT_NE(error_of(missing).find("initial_seq"), std::string::npos) << error_of(missing);
  json unknown = good;
  unknown["colour"] = 1;
  EXPECT_NE(error_of(unknown).find("colour"), std::string::npos) << error_of(unknown);
  json members = good;
  members["members"] = json::parse("[[0, 1], 2]");
  EXPECT_EQ(error_of(members), "members[1]: expected a list of ranks, got 2");
  members["members"] = 3;
  EXPECT_EQ(error_of(members), "members: expected a list, got 3");
  json workers = good;
  workers["workers"] = json::parse(R"(["10.0.0.1", "not an address", "10.0.0.3"])");
  EXPECT_NE(error_of(workers).find("workers"), std::string::npos) << error_of(workers);
  json rank = good;
  rank["rank"] = "one";
  EXPECT_NE(error_of(rank).find("rank"), std::string::npos) << error_of(rank);
}

// The table's endpoint of a config is a Rina worker of it; a config whose fields read but do not
// agree (a rank beyond the workers) is refused in the worker's one sentence, not built.
TEST(RinaProtocol, TheEndpointOfAConfigIsItsWorkerAndABadOneIsRefused) {
  const std::unique_ptr<Endpoint> endpoint = rina_endpoint(rina_config_json(sample()));
  ASSERT_NE(endpoint, nullptr);
  EXPECT_NE(dynamic_cast<RinaWorker*>(endpoint.get()), nullptr);
  RinaConfig bad = sample();
  bad.rank = 5;
  try {
    rina_endpoint(rina_config_json(bad));
    ADD_FAILURE() << "a rank beyond the workers was taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("rank"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace atp
