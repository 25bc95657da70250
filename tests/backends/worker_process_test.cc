// Tests of the process backends' worker process (src/backends/processes/worker_process.h): its
// spec, and the lines it and the runner exchange, read back as written.
#include "../../src/backends/processes/worker_process.h"

#include <gtest/gtest.h>

#include <string>

#include "atp/control/worker_config_json.h"
#include "atp/rina/protocol.h"

namespace atp {
namespace {

// The worker process's spec carries an ATP worker config only for ATP's protocol; the job's id and
// scale, which every algorithm's inputs and checks use, stand on their own.
TEST(WorkerProcessSpec, CarriesAnAtpConfigOnlyForAtpsProtocol) {
  worker_process::WorkerSpec ring;
  ring.algorithm = "ring";
  ring.job = 7;
  ring.scale = 1e6;
  ring.ranks = {SocketAddress::parse("127.0.0.1:4000"), SocketAddress::parse("127.0.0.1:4001")};
  const worker_process::WorkerSpec ring_back = worker_process::spec_from_json(worker_process::to_json(ring));
  EXPECT_EQ(ring_back.job, 7);
  EXPECT_EQ(ring_back.scale, 1e6);
  EXPECT_TRUE(ring_back.config.is_null());
  EXPECT_EQ(ring_back.ranks.size(), 2u);

  worker_process::WorkerSpec atp;
  atp.job = 3;
  WorkerConfig config;
  config.job = 3;
  config.values_per_packet = 1024;
  atp.config = control::worker_config_json(config);
  const worker_process::WorkerSpec atp_back = worker_process::spec_from_json(worker_process::to_json(atp));
  EXPECT_EQ(control::worker_config_from(atp_back.config).values_per_packet, 1024);
  EXPECT_EQ(atp_back.job, 3);
}

// What a re-formed Rina ring tells each worker left (docs/rina.md "Failures"), and the lines it
// answers with, read back as written.
TEST(WorkerProcessSpec, ReformAndFailedLinesReadBack) {
  RinaConfig rina;
  rina.job = 9;
  rina.rank = 1;
  rina.workers = {0x0A000001, 0x0A000002, 0x0A000003};
  rina.members = {{0, 1}, {2}};
  rina.initial_seq = 4000000000u;
  worker_process::Reform reform;
  reform.config = rina_config_json(rina);
  reform.excluded = {3, 5};
  reform.round = 2;
  const worker_process::Reform back = worker_process::reform_from_json(worker_process::reform_json(reform));
  const RinaConfig back_rina = rina_config_from(back.config);
  EXPECT_EQ(back_rina.rank, 1u);
  EXPECT_EQ(back_rina.members, rina.members);
  EXPECT_EQ(back_rina.initial_seq, 4000000000u);
  EXPECT_EQ(back.excluded, reform.excluded);
  EXPECT_EQ(back.round, 2u);
  EXPECT_THROW(worker_process::reform_from_json(R"({"excluded": [], "round": 1})"), std::exception);

  const worker_process::WorkerLine failed =
      worker_process::parse_line(R"({"event": "failed", "round": 3, "next_seq": 77, "error": "no progress"})");
  EXPECT_EQ(failed.event, "failed");
  EXPECT_EQ(failed.round, 3u);
  EXPECT_EQ(failed.next_seq, 77u);
  EXPECT_EQ(failed.error, "no progress");
  EXPECT_EQ(worker_process::parse_line(R"({"event": "failed", "round": 3})").event, "")
      << "a failed line names its error";
}

}  // namespace
}  // namespace atp
