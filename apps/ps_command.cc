// placeholder: `atp ps` is being written.
#include "commands.h"

namespace atp::cli {

Command add_ps_command(CLI::App& parent) {
  Command c;
  c.app = parent.add_subcommand("ps", "(not yet available)");
  c.run = [] { return kExitBadInput; };
  return c;
}

}  // namespace atp::cli
