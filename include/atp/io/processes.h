// Child processes (the process backends' `atp switch`, `atp ps`, `atp worker`, and the commands
// that build a testbed): started from a binary, their stdout read line by line, and every one
// stopped and reaped on every way out, including Ctrl-C.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace atp::processes {

using Clock = std::chrono::steady_clock;

// How long a child just started (a daemon, a worker, a flow's end) has to print its first line:
// the deadline its starter gives first_lines.
inline constexpr auto kStartupTimeout = std::chrono::seconds(10);

// SIGINT or SIGTERM arrived while a StopSignals was alive; what() says every process was stopped.
class Interrupted : public std::runtime_error {
 public:
  Interrupted() : std::runtime_error("interrupted by a signal; every process it started was stopped") {}
};

// Catches SIGINT and SIGTERM for its lifetime (restoring the old handlers after): a signal
// makes the next ChildSet::wait_lines throw Interrupted. One at a time per process.
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
};

struct Child {
  std::string name;    // "switch tor0", "ps ps0", "worker w1": how errors name it
  pid_t pid = -1;      // -1 once reaped
  int out = -1;        // read end of its stdout
  int in = -1;         // write end of its stdin (-1: it reads /dev/null)
  std::string buffer;  // stdout read but not yet split into lines
  bool eof = false;
  int status = 0;      // waitpid status once reaped
  bool group = false;  // leads a process group of its own, which signals reach as a whole
};

// A user's command started by ChildSet::start_command: looked up in PATH, run with `environment`
// added to this process's (replacing variables of the same name), its stderr into the same pipe
// as its stdout, as the leader of a process group of its own (so that stopping it stops what it
// started, such as torch's data loader workers).
struct Command {
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> environment;
};

// Every child started through it; the destructor stops (SIGTERM, then SIGKILL after 2 s) and
// reaps them all. Children also get PR_SET_PDEATHSIG(SIGKILL), so even a parent killed with
// SIGKILL leaves no process behind.
class ChildSet {
 public:
  ChildSet() = default;
  ~ChildSet();
  ChildSet(const ChildSet&) = delete;
  ChildSet& operator=(const ChildSet&) = delete;

  // Starts args[0] with args; its stdout is a pipe read by wait_lines, its stderr is ours. With
  // `with_stdin`, Child::in is a pipe to its stdin. With `netns` (a path such as
  // /var/run/netns/NAME), the child runs in that network namespace. The Child stays valid as
  // long as the set. Throws std::runtime_error naming the child if it cannot be started.
  Child& start(const std::string& name, const std::vector<std::string>& args, bool with_stdin = false,
               const std::string& netns = "");
  // The same for a user's command (see Command).
  Child& start_command(const std::string& name, const Command& command, const std::string& netns = "");
  // SIGKILL and reap at once (a crash, not a shutdown). No-op for a child already reaped.
  void kill(Child& child);
  // Sends `signal` to the child (its whole group if it leads one); no-op once it was reaped.
  void signal(Child& child, int signal);
  // Whether the child has exited (reaped, Child::status set), without waiting.
  bool exited(Child& child);
  // Closes the child's stdin (it reads EOF: for children that run until told to stop).
  void close_stdin(Child& child);
  // Writes `text` to the child's stdin; false if it is gone.
  bool write(Child& child, const std::string& text);

  // Reads the children's stdout until one of `children` has a complete line, or `deadline`
  // passes. Returns every complete line read (child, line), possibly none at the deadline; a
  // deadline already passed reads what is ready without waiting. A child whose stdout closed has
  // eof set (and is not waited for). Throws Interrupted on a stop signal.
  std::vector<std::pair<Child*, std::string>> wait_lines(const std::vector<Child*>& children,
                                                         Clock::time_point deadline);
  // wait_lines until every one of `children` has one line (or eof, or the deadline); returns
  // their first lines in order ("" for none). Lines after the first stay buffered.
  std::vector<std::string> first_lines(const std::vector<Child*>& children, Clock::time_point deadline);

 private:
  // `environment`: nullptr for one of atp's own processes, else a Command's whole environment.
  Child& spawn(const std::string& name, const std::vector<std::string>& args, bool with_stdin, const std::string& netns,
               const std::vector<std::string>* environment);

  std::vector<std::unique_ptr<Child>> children_;  // unique_ptr: callers keep Child& across start()
};

// Whether `name` is `<prefix><pid>-...` (what a run names the things it creates) and no process
// <pid> exists any more: something a killed run left behind.
bool left_by_dead_process(const std::string& name, const std::string& prefix);

// A temporary directory (for generated configs), removed with everything in it on every exit
// but SIGKILL. Its name is <prefix>-<pid>-XXXXXX, so that remove_stale_temp_dirs can tell the
// ones of processes that are gone.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix);
  // Removes <prefix>-<pid>-* directories (from TempDir(prefix)) whose process no longer exists.
  static void remove_stale(const std::string& prefix);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

void write_file(const std::filesystem::path& path, const std::string& text);
// A new file that only its owner can read or write (mode 0600): a secret, such as a token.
void write_private_file(const std::filesystem::path& path, const std::string& text);

// Runs args[0] with args to completion (a set-up command such as `ip`), `input` on its stdin.
// Returns its exit code (128 + signal if killed) and, in `output`, its stdout and stderr together.
// Throws std::runtime_error if it cannot be started.
int run_command(const std::vector<std::string>& args, const std::string& input = "", std::string* output = nullptr);

}  // namespace atp::processes
