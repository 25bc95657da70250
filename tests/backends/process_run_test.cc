// The process runner itself (process_run.h: process_run.cc, process_barrier.cc,
// process_results.cc, run_processes.cc), with scripted workers: `atp worker` is replaced by a
// shell script per host that prints the worker's lines (worker_process.h) in the order a test
// wants, while the switch and PS daemons are the freshly built atp's (ATP_BINARY). So each rule of
// the runner is met head-on: the barrier of a round, a laggard, a failed job stopped, a worker that
// exits without a word, the time limit, and how a job's result is added up from its workers'.
// What real workers do under loss, restarts and Rina's re-forming is
// tests/integration/loopback_integration_test.cc's.
//
// Nothing depends on timing luck: an order between two workers is made by one waiting for a file
// the other writes, and timeouts are checked as "happened", not "took so long".
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "../../src/backends/processes/worker_process.h"
#include "atp/backends/processes.h"
#include "atp/io/processes.h"
#include "atp/scenario/scenario.h"

namespace atp {
namespace {

namespace fs = std::filesystem;

// Job a on w0 and w1, job b on w2 and w3, one PS each, one ATP switch. The scripted workers never
// send a packet: the daemons are there because the runner plans, installs and collects from them.
constexpr const char* kTopology = R"(
seed: 3
topology:
  switches: [{name: tor, atp: true}]
  hosts:
    - {name: w0, switch: tor}
    - {name: w1, switch: tor}
    - {name: w2, switch: tor}
    - {name: w3, switch: tor}
    - {name: psa, switch: tor}
    - {name: psb, switch: tor}
)";

// A folder of scripted workers: the `atp` the runner starts is a wrapper that runs HOST.sh for
// `atp worker` (the runner names the spec worker-HOST.json) and the real atp for everything else.
// Each script starts after the first "go" (the start-up handshake is written for it). In a
// script, $D is the folder, for the files workers leave each other.
class ScriptedWorkers {
 public:
  ScriptedWorkers() : dir_(fs::temp_directory_path() / ("process_run_test-" + std::to_string(::getpid()))) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    processes::write_file(dir_ / "atp",
                          "#!/bin/sh\n"
                          "if [ \"$1\" = worker ]; then\n"
                          "  host=$(basename \"$3\" .json); host=${host#worker-}\n"
                          "  D='" +
                              dir_.string() +
                              "'; export D\n"
                              "  echo '{\"event\": \"ready\"}'\n"
                              "  read go || exit 1\n"
                              "  exec sh \"$D/$host.sh\"\n"
                              "fi\n"
                              "exec '" ATP_BINARY "' \"$@\"\n");
    fs::permissions(dir_ / "atp", fs::perms::owner_all);
  }
  ~ScriptedWorkers() { fs::remove_all(dir_); }
  ScriptedWorkers(const ScriptedWorkers&) = delete;
  ScriptedWorkers& operator=(const ScriptedWorkers&) = delete;

  void script(const std::string& host, const std::string& body) { processes::write_file(dir_ / (host + ".sh"), body); }
  bool exists(const std::string& file) const { return fs::exists(dir_ / file); }
  std::string read(const std::string& file) const {
    std::ifstream in(dir_ / file);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return text;
  }

  ScenarioResult run(const std::string& jobs_and_more, RoundCallback on_round = {}) const {
    RunOptions options;
    options.atp_binary = (dir_ / "atp").string();
    options.on_round = std::move(on_round);
    return run_loopback(parse_scenario_yaml(std::string(kTopology) + jobs_and_more, "test"), options);
  }

 private:
  fs::path dir_;
};

// The lines of a script.
std::string wait_line(std::uint32_t round) {
  return "echo '{\"event\": \"wait\", \"round\": " + std::to_string(round) + "}'\n";
}
std::string round_line(std::uint32_t round) {
  return "echo '{\"event\": \"round\", \"round\": " + std::to_string(round) + "}'\n";
}
std::string result(const worker_process::WorkerResult& r) { return "echo '" + worker_process::result_line(r) + "'\n"; }
worker_process::WorkerResult correct(std::uint32_t rounds) {
  worker_process::WorkerResult r;
  r.correct = true;
  r.completed_rounds = rounds;
  return r;
}
// Waits for the runner's answer and keeps it in $D/FILE.
std::string answer_into(const std::string& file) {
  return "read answer || exit 1\necho \"$answer\" > \"$D/" + file + "\"\n";
}
// Until the file exists (another worker's sign), at most 20 s.
std::string until_file(const std::string& file) {
  return "n=0; while [ ! -e \"$D/" + file + "\" ] && [ $n -lt 2000 ]; do sleep 0.01; n=$((n+1)); done\n";
}
// Says nothing ever again (the runner kills its process group).
const std::string kHang = "exec sleep 60\n";

constexpr const char* kJobA = R"(
jobs:
  - {name: a, workers: [w0, w1], ps: [psa], elements: 1000, rounds: 1, progress_timeout_us: 200000}
)";

// A round starts once every worker of its job waits for it, and not before: w0 waits at once, w1
// only after w0 has had time to be answered early; w0 finds w1's mark when its "go" comes. Job b's
// barrier is its own: w1 comes to job a's only once job b's has let w2 go, which a barrier across
// jobs would hold up for ever (the progress timeout, and a failed job, would say so).
TEST(ProcessRun, ARoundStartsOnceEveryWorkerOfItsJobWaitsForIt) {
  ScriptedWorkers workers;
  const std::string late = until_file("w2-go") + "sleep 0.3\ntouch \"$D/w1-waits\"\n";
  workers.script("w0", wait_line(0) + answer_into("w0-go") + "[ -e \"$D/w1-waits\" ] && touch \"$D/w0-after-w1\"\n" +
                           round_line(0) + result(correct(1)));
  workers.script("w1", late + wait_line(0) + answer_into("w1-go") + round_line(0) + result(correct(1)));
  workers.script("w2", wait_line(0) + answer_into("w2-go") + round_line(0) + result(correct(1)));
  workers.script("w3", wait_line(0) + answer_into("w3-go") + round_line(0) + result(correct(1)));
  const ScenarioResult r = workers.run(R"(
time_limit_s: 10
jobs:
  - {name: a, workers: [w0, w1], ps: [psa], elements: 1000, rounds: 1, progress_timeout_us: 2000000}
  - {name: b, workers: [w2, w3], ps: [psb], elements: 1000, rounds: 1, progress_timeout_us: 2000000}
)");
  for (const JobResult& j : r.jobs) EXPECT_TRUE(j.correct) << j.name << ": " << j.error;
  EXPECT_FALSE(r.time_limit_reached);
  EXPECT_TRUE(workers.exists("w0-after-w1")) << "w0 was let go before w1 waited";
  for (const std::string host : {"w0", "w1", "w2", "w3"}) EXPECT_EQ(workers.read(host + "-go"), "go\n") << host;
}

// A worker that never comes to the barrier, and says nothing, is failed once the others have
// waited the job's progress timeout for it; the others are then stopped, not waited for until the
// time limit, and the job's error is the laggard's.
TEST(ProcessRun, ASilentLaggardFailsItsJobAfterTheProgressTimeout) {
  ScriptedWorkers workers;
  workers.script("w0", wait_line(0) + answer_into("w0-go") + kHang);
  workers.script("w1", kHang);
  const ScenarioResult r = workers.run(std::string("time_limit_s: 20\n") + kJobA);
  const JobResult& a = r.jobs.at(0);
  EXPECT_FALSE(a.correct);
  EXPECT_EQ(a.error,
            "worker 'w1' did not come to start round 0 within the progress timeout of 0.200000 s while the job's other "
            "workers waited for it");
  EXPECT_FALSE(r.time_limit_reached);
  EXPECT_FALSE(workers.exists("w0-go")) << "w0 was let go without w1";
  EXPECT_EQ(a.completed_rounds, 0u);
}

// A worker that says it is alive ("alive" lines, while it prepares a round) is waited for past the
// progress timeout: here for 1.5 s, three timeouts of 0.5 s, with a line every 0.05 s (a loaded
// machine may hold the script back a while: not ten times as long).
TEST(ProcessRun, ALaggardThatSaysItIsAliveIsWaitedFor) {
  ScriptedWorkers workers;
  workers.script("w0", wait_line(0) + answer_into("w0-go") + round_line(0) + result(correct(1)));
  workers.script("w1", "i=0; while [ $i -lt 30 ]; do echo '{\"event\": \"alive\"}'; sleep 0.05; i=$((i+1)); done\n" +
                           wait_line(0) + answer_into("w1-go") + round_line(0) + result(correct(1)));
  const ScenarioResult r = workers.run(R"(
time_limit_s: 20
jobs:
  - {name: a, workers: [w0, w1], ps: [psa], elements: 1000, rounds: 1, progress_timeout_us: 500000}
)");
  EXPECT_TRUE(r.jobs.at(0).correct) << r.jobs.at(0).error;
  EXPECT_EQ(r.jobs.at(0).completed_rounds, 1u);
}

// Once one worker has failed (a wrong sum, say), the job has failed: the others are stopped at
// once, even one that hangs, and the failure comes first in the job's error.
TEST(ProcessRun, AFailedWorkerStopsTheOthersAndItsErrorComesFirst) {
  ScriptedWorkers workers;
  worker_process::WorkerResult wrong;
  wrong.error = "round 0: 3 wrong values";
  wrong.wrong_values = 3;
  workers.script("w0", "sleep 0.1\n" + result(wrong));
  workers.script("w1", kHang);
  const ScenarioResult r = workers.run(std::string("time_limit_s: 20\n") + kJobA);
  const JobResult& a = r.jobs.at(0);
  EXPECT_FALSE(a.correct);
  EXPECT_EQ(a.error, "round 0: 3 wrong values");
  EXPECT_EQ(a.wrong_values, 3u);
  EXPECT_FALSE(r.time_limit_reached) << "the hanging w1 held the report back";
}

// A worker that exits without its result line (killed from outside, or crashed) is named.
TEST(ProcessRun, AWorkerThatExitsWithoutAResultIsNamed) {
  ScriptedWorkers workers;
  workers.script("w0", wait_line(0) + answer_into("w0-go") + kHang);
  workers.script("w1", "exit 0\n");
  const ScenarioResult r = workers.run(std::string("time_limit_s: 20\n") + kJobA);
  EXPECT_FALSE(r.jobs.at(0).correct);
  EXPECT_EQ(r.jobs.at(0).error, "worker 'w1' exited without reporting");
  EXPECT_FALSE(r.time_limit_reached);
}

// Workers that neither finish nor wait run into the scenario's time limit, a wall-clock bound
// for processes, which the result and the job's error say.
TEST(ProcessRun, TheTimeLimitIsReportedAndNamesAWorkerStillRunning) {
  ScriptedWorkers workers;
  workers.script("w0", kHang);
  workers.script("w1", kHang);
  const ScenarioResult r = workers.run(std::string("time_limit_s: 0.5\n") + kJobA);
  EXPECT_TRUE(r.time_limit_reached);
  EXPECT_FALSE(r.jobs.at(0).correct);
  EXPECT_EQ(r.jobs.at(0).error, "worker 'w0' did not finish within the time limit of 0.500000 s (wall clock)");
}

// The scenario's crash of a host kills its worker; that crash comes first in the job's error,
// before the failure it causes in the others (here w0's, which it reports once w1 is gone).
TEST(ProcessRun, AHostsCrashComesFirstInItsJobsError) {
  ScriptedWorkers workers;
  worker_process::WorkerResult stuck;
  stuck.error = "round 0 made no progress";
  workers.script("w0", until_file("w1-pid") +
                           "n=0; while kill -0 $(cat \"$D/w1-pid\") 2>/dev/null && [ $n -lt 2000 ]; do sleep 0.01; "
                           "n=$((n+1)); done\n" +
                           result(stuck));
  workers.script("w1", "echo $$ > \"$D/w1-pid.tmp\" && mv \"$D/w1-pid.tmp\" \"$D/w1-pid\"\n" + kHang);
  const ScenarioResult r = workers.run(std::string("time_limit_s: 20\n") + kJobA + R"(
faults:
  - {crash: w1, at_us: 100000}
)");
  EXPECT_FALSE(r.jobs.at(0).correct);
  EXPECT_EQ(r.jobs.at(0).error, "worker 1 of job a: host crashed (at_us 100000) after 0 of 1 rounds");
}

// A job's result from its workers': counts added, float fragments (every worker sees the same)
// and the allreduce time (the slowest worker's) taken once, each round's end when its last worker
// ends it, and each round of each worker passed to the caller.
TEST(ProcessRun, AJobsResultAddsItsWorkersCountsAndTakesTheSlowestTime) {
  ScriptedWorkers workers;
  worker_process::WorkerResult r0 = correct(2), r1 = correct(2);
  r0.retransmissions = 3;
  r1.retransmissions = 4;
  r0.timeouts = 1;
  r0.float_fragments = r1.float_fragments = 5;
  r0.allreduce_ns = 2'000'000'000;
  r1.allreduce_ns = 1'000'000'000;
  const std::string two_rounds =
      wait_line(0) + "read go\n" + round_line(0) + wait_line(1) + "read go\n" + round_line(1);
  workers.script("w0", two_rounds + result(r0));
  workers.script("w1", two_rounds + result(r1));
  std::map<std::size_t, std::vector<std::uint32_t>> rounds;  // worker -> its rounds, in order
  const ScenarioResult r = workers.run(R"(
time_limit_s: 20
jobs:
  - {name: a, workers: [w0, w1], ps: [psa], elements: 1000, rounds: 2}
)",
                                       [&](const RoundDone& d) { rounds[d.worker].push_back(d.round); });
  const JobResult& a = r.jobs.at(0);
  EXPECT_TRUE(a.correct) << a.error;
  EXPECT_EQ(a.completed_rounds, 2u);
  EXPECT_EQ(a.retransmissions, 7u);
  EXPECT_EQ(a.timeouts, 1u);
  EXPECT_EQ(a.float_fragments, 5u);
  EXPECT_DOUBLE_EQ(a.seconds, 2.0);
  ASSERT_EQ(a.round_end_seconds.size(), 2u);
  EXPECT_LE(a.round_end_seconds[0], a.round_end_seconds[1]);
  EXPECT_EQ(rounds[0], (std::vector<std::uint32_t>{0, 1}));
  EXPECT_EQ(rounds[1], (std::vector<std::uint32_t>{0, 1}));
  EXPECT_EQ(a.switch_aggregations.count("tor"), 1u) << "the switch's count of the job is in its result";
  EXPECT_EQ(a.ps_packets_received, 0u) << "the scripted workers sent nothing";
}

// One worker's result line that says fewer rounds than the job has: the job is not correct, and
// says how many it did.
TEST(ProcessRun, FewerRoundsThanTheJobsIsAnError) {
  ScriptedWorkers workers;
  workers.script("w0", wait_line(0) + "read go\n" + round_line(0) + result(correct(1)));
  workers.script("w1", wait_line(0) + "read go\n" + round_line(0) + result(correct(1)));
  const ScenarioResult r = workers.run(R"(
time_limit_s: 20
jobs:
  - {name: a, workers: [w0, w1], ps: [psa], elements: 1000, rounds: 3}
)");
  EXPECT_FALSE(r.jobs.at(0).correct);
  EXPECT_EQ(r.jobs.at(0).error, "only 1 of 3 rounds completed");
}

}  // namespace
}  // namespace atp
