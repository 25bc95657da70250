// `atp bom FILE.yaml`: the bandwidth-occupation model's prediction for a scenario's job
// (include/atp/plan/bom.h): the PS baseline, PS-based in-network aggregation with the file's
// aggregating switches, ring allreduce and Rina, and with --incremental Rina's order of replacing
// switches with ATP's and Rina's throughput after each.
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

std::string load(double gradients) {
  std::ostringstream text;
  text << std::setprecision(4) << gradients << " S";
  return text.str();
}

std::string row(const std::string& what, const BomPrediction& p) {
  std::ostringstream line;
  line << std::left << std::setw(28) << what << " " << std::right << std::fixed << std::setprecision(4) << std::setw(10)
       << p.throughput << "  " << p.bottleneck.from << " -> " << p.bottleneck.to << ", " << load(p.bottleneck.load)
       << "\n";
  return line.str();
}

// One replacement step: ATP's and Rina's throughput side by side.
std::string step_row(const std::string& what, const BomPrediction& atp, const BomPrediction& rina) {
  std::ostringstream line;
  line << std::left << std::setw(28) << what << " " << std::right << std::fixed << std::setprecision(4) << std::setw(10)
       << atp.throughput << " " << std::setw(10) << rina.throughput << "\n";
  return line.str();
}

int run_bom(const BomOptions& o) {
  const Scenario scenario = load_scenario_file(o.file);  // ScenarioError: main() prints it, exit 2
  if (scenario.jobs.empty()) {
    std::cerr << "atp bom: " << o.file << " has no jobs; the model needs one (its workers and PS)\n";
    return kExitBadInput;
  }
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
    const bool has_ps = !spec.ps.empty();
    if (o.incremental && !has_ps) {
      std::cerr << "atp bom: --incremental follows the job's tree towards its PS, and job '" << spec.name
                << "' has none; give it one ps host\n";
      return kExitBadInput;
    }
    std::cout << "job '" << spec.name << "' of " << o.file << ": " << spec.workers.size() << " workers, "
              << (has_ps ? "PS '" + spec.ps.front() + "'" : std::string("no PS")) << "; every link of bandwidth B0; "
              << "S: one worker's gradient (the model: include/atp/plan/bom.h)\n"
              << "                             throughput  bottleneck (B0 per worker; the most any link carries)\n";
    if (has_ps) {
      std::cout << row("PS, no switch aggregating", model.predict({}))
                << row("ATP, the atp: true switches", model.predict(aggregating));
    }
    if (spec.workers.size() >= 2) {
      std::cout << row("ring", model.predict_ring())
                << row("Rina, the atp: true ToRs", model.predict_rina(aggregating));
    }
    if (o.incremental) {
      std::cout << "\nswitches made aggregating one at a time in Rina's order (its §IV-D), throughput after each:\n"
                << "                                    ATP       Rina\n";
      std::set<std::string> replaced;
      const auto rina = [&] {
        return spec.workers.size() >= 2 ? model.predict_rina(replaced) : model.predict(replaced);
      };
      std::cout << step_row("(none)", model.predict(replaced), rina());
      for (const std::string& s : model.deployment_order()) {
        replaced.insert(s);
        std::cout << step_row("+ " + s, model.predict(replaced), rina());
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
                                "predict a job's per-worker throughput with Rina's bandwidth-occupation model (PS, "
                                "PS-based in-network aggregation, ring, Rina)");
  c.app->add_option("file", o->file, "Scenario file (YAML): its topology, which switches are atp: true, a job")
      ->required();
  c.app->add_option("--job", o->job, "the job to model (default: the first)");
  c.app->add_flag("--incremental", o->incremental,
                  "also make the switches aggregating one at a time, in Rina's replacement order, and print ATP's and "
                  "Rina's throughput after each");
  c.app->footer(
      "Every link has the same bandwidth B0; each worker gets B0 over the most gradients' worth any link carries in "
      "one allreduce. PS-based: a link carries one stream per worker below it, an aggregating switch one for all of "
      "them. Ring: each ring edge carries 2(n-1)/n. Rina: a rack whose ToR aggregates and holds two or more workers "
      "is one ring member; each edge carries 2(G-1)/G for G members, and the rack's agent also gets the partial "
      "sums. include/atp/plan/bom.h says more.");
  c.run = [o] { return run_bom(*o); };
  return c;
}

}  // namespace atp::cli
