// `atp bom FILE.yaml`: the bandwidth-occupation model's prediction for a scenario's job
// (include/atp/plan/bom.h): the PS baseline, PS-based in-network aggregation with the file's
// aggregating switches, and with --incremental Rina's order of replacing switches.
#include <iomanip>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>
#include <string>

#include "atp/plan/bom.h"
#include "atp/scenario/scenario.h"
#include "commands.h"

namespace atp::cli {
namespace {

struct BomOptions {
  std::string file;
  std::string job;
  bool incremental = false;
};

std::string row(const std::string& what, const BomPrediction& p) {
  std::ostringstream line;
  line << std::left << std::setw(28) << what << " " << std::right << std::fixed << std::setprecision(4) << std::setw(10)
       << p.throughput << "  " << p.bottleneck.from << " -> " << p.bottleneck.to << ", " << p.bottleneck.streams
       << (p.bottleneck.streams == 1 ? " stream\n" : " streams\n");
  return line.str();
}

int run_bom(const BomOptions& o) {
  const Scenario scenario = load_scenario_file(o.file);  // ScenarioError: main() prints it, exit 2
  const ScenarioJob* job = &scenario.jobs.front();
  if (!o.job.empty()) {
    job = nullptr;
    for (const ScenarioJob& j : scenario.jobs) {
      if (j.spec.name == o.job) job = &j;
    }
    if (job == nullptr) {
      std::cerr << "atp bom: " << o.file << " has no job named '" << o.job << "'\n";
      return kExitBadInput;
    }
  }
  try {
    const NetworkPlan network = plan_network(scenario.topology);
    std::set<std::string> aggregating;
    for (const SwitchSpec& s : scenario.topology.switches) {
      if (s.config.atp_capable) aggregating.insert(s.name);
    }
    const JobSpec& spec = job->spec;
    const BomModel model(network, spec);
    std::cout << "job '" << spec.name << "' of " << o.file << ": " << spec.workers.size() << " workers, PS '"
              << spec.ps.front() << "'; every link of bandwidth B0 (the model: include/atp/plan/bom.h)\n"
              << "                             throughput  bottleneck (B0 per worker)\n"
              << row("PS, no switch aggregating", model.predict({}))
              << row("ATP, the atp: true switches", model.predict(aggregating));
    if (o.incremental) {
      std::cout << "\nswitches made aggregating one at a time in Rina's order (its §IV-D), ATP's throughput after "
                   "each:\n";
      std::set<std::string> replaced;
      std::cout << row("(none)", model.predict(replaced));
      for (const std::string& s : model.deployment_order()) {
        replaced.insert(s);
        std::cout << row("+ " + s, model.predict(replaced));
      }
    }
  } catch (const PlanError& e) {
    std::cerr << "atp bom: " << o.file << ": " << e.what() << "\n";
    return kExitBadInput;
  }
  return kExitOk;
}

}  // namespace

Command add_bom_command(CLI::App& parent) {
  auto o = std::make_shared<BomOptions>();
  Command c;
  c.app = parent.add_subcommand("bom",
                                "predict a job's per-worker throughput with Rina's bandwidth-occupation model (PS and "
                                "PS-based in-network aggregation)");
  c.app->add_option("file", o->file, "Scenario file (YAML): its topology, which switches are atp: true, a job")
      ->required();
  c.app->add_option("--job", o->job, "the job to model (default: the first)");
  c.app->add_flag("--incremental", o->incremental,
                  "also make the switches aggregating one at a time, in Rina's replacement order, and print the "
                  "throughput after each");
  c.app->footer(
      "Every link has the same bandwidth B0; a link carries one stream per worker below it, an aggregating switch "
      "one for all of them; each worker gets B0 over the most streams any link of its tree to the PS carries. "
      "Ring and Rina predictions come with Rina (issue 16).");
  c.run = [o] { return run_bom(*o); };
  return c;
}

}  // namespace atp::cli
