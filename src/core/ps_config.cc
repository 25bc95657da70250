// What a PS's job config may be (ps.h): its aggregation tree, its fragment width, its window and
// the memory they let it hold.
#include <cstdio>
#include <string>

#include "atp/ps.h"
#include "atp/values_per_packet.h"

namespace atp {
namespace {

std::string mebibytes(std::uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1u << 20));
  return text;
}

}  // namespace

std::optional<std::string> tree_error(const std::vector<std::uint16_t>& tree) {
  if (tree.size() < 2 || tree.size() > std::size_t{kMaxTreeNodes}) {
    return "tree has " + std::to_string(tree.size()) + " nodes; it needs the PS and 1 to " +
           std::to_string(kMaxTreeNodes - 1) + " more";
  }
  std::vector<std::uint32_t> children(tree.size(), 0);
  for (std::size_t i = 1; i < tree.size(); ++i) {
    if (tree[i] >= i) {
      return "tree[" + std::to_string(i) + "] is " + std::to_string(tree[i]) + "; a node's parent must come before it";
    }
    if (tree[i] != 0 && ++children[tree[i]] > 32) {
      return "tree node " + std::to_string(tree[i]) + " has more than 32 children; a bitmap holds 32";
    }
  }
  return std::nullopt;
}

std::optional<std::string> ps_config_error(const PsConfig& c) {
  const std::string job = "job " + std::to_string(c.job) + ": ";
  // Its packets' buffer is sized by it: one wider than a packet holds would be written past.
  if (const std::optional<std::string> bad = values_per_packet_error(c.values_per_packet)) {
    return job + "values_per_packet " + *bad;
  }
  if (const std::optional<std::string> bad = tree_error(c.tree)) return job + *bad;
  if (c.max_window_seqs > kMaxWindowSeqs) {
    return job + "max_window_seqs " + std::to_string(c.max_window_seqs) + " is above " +
           std::to_string(kMaxWindowSeqs) + ", the most a PS takes; lower it (it is the job's max_window x PS shards)";
  }
  const std::uint64_t bound = ps_job_memory_bound(c);
  if (bound > kPsJobMemoryBudget) {
    return job + "max_window_seqs " + std::to_string(c.max_window_seqs) + " with values_per_packet " +
           std::to_string(c.values_per_packet) + " lets a PS hold up to " + mebibytes(bound) + ", above the " +
           mebibytes(kPsJobMemoryBudget) +
           " a PS job may use; lower max_window_seqs (the job's max_window x PS shards) or "
           "values_per_packet";
  }
  return std::nullopt;
}

}  // namespace atp
