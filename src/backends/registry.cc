// The backends this build has: the one list the `atp` command and the benchmark dispatch through.
#include <string>

#include "atp/backends/backend.h"
#include "atp/backends/processes.h"
#include "atp/backends/simulated.h"
#if ATP_WITH_NS3
#include "atp/backends/ns3.h"
#endif

namespace atp {

std::span<const Backend* const> backends() {
  static const Backend* const kAll[] = {
    &inproc_backend(),
#if ATP_WITH_NS3
    &ns3_backend(),
#endif
    &loopback_backend(),
    &netns_backend(),
  };
  return kAll;
}

const Backend* find_backend(std::string_view name) {
  if (name == "udp") name = "loopback";  // its name until the netns backend made "udp" ambiguous (both use UDP)
  for (const Backend* b : backends()) {
    if (b->name() == name) return b;
  }
  return nullptr;
}

std::string no_backend_reason(std::string_view name) {
  if (name == "ns3" && !ATP_WITH_NS3) {
    return "this atp was built without ns-3 (configured with -DATP_WITH_NS3=OFF); use --backend " + backend_names();
  }
  return "unknown backend '" + std::string(name) + "'; use --backend " + backend_names();
}

std::string backend_names() {
  const auto all = backends();
  std::string out;
  for (std::size_t i = 0; i < all.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == all.size() ? " or " : ", ") + std::string(all[i]->name());
  }
  return out;
}

}  // namespace atp
