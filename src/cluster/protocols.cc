// The protocol table (protocols.h): one entry per protocol, each from its own folder.
#include "atp/cluster/protocols.h"

#include <algorithm>
#include <stdexcept>

#include "atp/rina/plan.h"
#include "atp/rina/protocol.h"

namespace atp {
namespace {

constexpr Protocol kProtocols[] = {
    {.name = "atp", .plan = atp_endpoint_plan, .endpoint = atp_endpoint, .reformed = nullptr},
    {.name = "rina", .plan = rina_endpoint_plan, .endpoint = rina_endpoint, .reformed = rina_reformed_job},
};

}  // namespace

std::span<const Protocol> protocols() { return kProtocols; }

const Protocol* find_protocol(std::string_view name) {
  const auto it =
      std::find_if(std::begin(kProtocols), std::end(kProtocols), [name](const Protocol& p) { return p.name == name; });
  return it == std::end(kProtocols) ? nullptr : &*it;
}

const Protocol& protocol(std::string_view name) {
  if (const Protocol* p = find_protocol(name)) return *p;
  std::string names;
  for (const Protocol& p : kProtocols) names += (names.empty() ? "" : " or ") + std::string(p.name);
  throw std::invalid_argument("no protocol '" + std::string(name) + "' (" + names + ")");
}

}  // namespace atp
