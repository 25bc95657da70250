// placeholder: `atp switch` is being written.
#include "commands.h"

namespace atp::cli {

Command add_switch_command(CLI::App& parent) {
  Command c;
  c.app = parent.add_subcommand("switch", "(not yet available)");
  c.run = [] { return kExitBadInput; };
  return c;
}

}  // namespace atp::cli
