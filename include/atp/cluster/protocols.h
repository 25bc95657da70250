// The in-network allreduce protocols, as data: the one list the orchestrator's callers, the
// runners, the worker process, ClusterJob and the PyTorch backend look a job's protocol up in
// (atp/control/protocol.h says what an entry brings). Adding a protocol: its code in its own
// folder, one entry in protocols.cc.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "atp/control/protocol.h"

namespace atp {

std::span<const Protocol> protocols();
const Protocol* find_protocol(std::string_view name);  // nullptr if there is none of that name
// By name; throws std::invalid_argument naming it and the protocols there are.
const Protocol& protocol(std::string_view name);

}  // namespace atp
