// `atp testbed FILE.yaml -- COMMAND [ARGS...]`: a user's command (a training script) once on each
// worker host of an emulated cluster: the netns testbed of a scenario file, with its switches and
// PS running and the torch environment set (include/atp/backends/processes.h, run_testbed).
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "atp/backends/processes.h"
#include "atp/io/processes.h"
#include "atp/scenario/scenario.h"
#include "commands.h"

namespace atp::cli {
namespace {

struct TestbedFlags {
  std::string file;
  std::vector<std::string> command;
  double time_limit_s = 0;
  std::string report;
};

int run(const TestbedFlags& f) {
  if (f.command.empty()) {
    std::cerr << "atp testbed: no command: give one after --, e.g. atp testbed " << f.file << " -- python3 train.py\n";
    return kExitBadInput;
  }
  if (f.time_limit_s < 0) {
    std::cerr << "atp testbed: --time-limit must be a number of seconds, 0 for none\n";
    return kExitBadInput;
  }
  const Scenario scenario = load_scenario_file(f.file, ScenarioUse::kTestbed);
  TestbedOptions options;
  options.time_limit = Duration(static_cast<std::int64_t>(f.time_limit_s * 1e9));
  options.report = f.report;
  try {
    return run_testbed(scenario, f.command, options);
  } catch (const ScenarioError& e) {
    std::cerr << "atp testbed: " << with_file(f.file, e.what()) << "\n";
    return kExitBadInput;
  } catch (const processes::Interrupted& e) {
    std::cerr << "atp testbed: " << e.what() << "\n";
    return 130;
  }
}

}  // namespace

Command add_testbed_command(CLI::App& parent) {
  auto f = std::make_shared<TestbedFlags>();
  Command c;
  c.app = parent.add_subcommand(
      "testbed",
      "run COMMAND once on each worker host of an emulated cluster: the network namespaces, links and switches of a "
      "scenario file (as atp run --backend netns builds them; needs root), with its PS running, torch's environment "
      "set and the atp PyTorch backend able to use the switches");
  c.app
      ->add_option("file", f->file,
                   "Scenario file (YAML): topology, links, faults, background flows; jobs name "
                   "the worker hosts in rank order (elements and rounds are not needed)")
      ->required();
  c.app->add_option("command", f->command, "the command to run on every worker host, after --");
  c.app->add_option("--time-limit", f->time_limit_s, "stop the ranks after this many seconds (0: no limit)")
      ->capture_default_str();
  c.app->add_option("--report", f->report,
                    "write the links' counters at the end (packets, queue drops, losses per direction; what hosts' "
                    "sockets dropped) to this file as JSON");
  c.app->footer(
      "Each rank's command runs in its host's network namespace with RANK, WORLD_SIZE, LOCAL_RANK=0, MASTER_ADDR "
      "(rank 0's host address), MASTER_PORT=29500, and for the atp backend ATP_TESTBED, ATP_HOST, ATP_BIND, ATP_RACK, "
      "ATP_JOB and ATP_ALGORITHM (the job's algorithm, unless already set); an unchanged DDP script runs with "
      "backend=\"atp\" or \"gloo\". Every line it prints is prefixed with [HOST]; at the end one line says where the "
      "network dropped packets. Exit status: the first non-zero "
      "one of any rank (the others are then stopped), 0 when all exit 0, 2 for a bad file, 124 after --time-limit, "
      "130 after Ctrl-C. Namespaces, processes and files are removed on every way out (a SIGKILLed run's, at the "
      "next start).\n\nExample: atp testbed examples/netns-two-racks.yaml -- /usr/bin/python3 "
      "experiments/pytorch/train.py --model resnet18");
  c.run = [f] { return run(*f); };
  return c;
}

}  // namespace atp::cli
