// Child processes of the udp backend: fork/exec with pipes, line-wise stdout, cleanup.
#include "atp/io/processes.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

namespace atp::processes {
namespace {

// The handler writes a byte here; wait_lines polls the read end.
int g_signal_pipe[2] = {-1, -1};
extern "C" void on_stop_signal(int) {
  const char byte = 1;
  [[maybe_unused]] const ssize_t n = ::write(g_signal_pipe[1], &byte, 1);
}
struct sigaction g_old_int {};
struct sigaction g_old_term {};
struct sigaction g_old_pipe {};

void reap(Child& c, bool block) {
  while (c.pid > 0) {
    const pid_t r = ::waitpid(c.pid, &c.status, block ? 0 : WNOHANG);
    if (r == c.pid || (r < 0 && errno != EINTR)) {
      c.pid = -1;
    } else if (r == 0) {
      return;  // still running
    }
  }
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// The end of a forked child: the signal state exec does not reset, then exec (`search_path`: look
// argv[0] up in PATH). Only async-signal-safe calls. Exits 127 if exec fails.
[[noreturn]] void exec_child(char* const* argv, bool search_path) {
  // Handlers are reset by exec, but ignored signals and the signal mask are inherited.
  ::signal(SIGPIPE, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  if (search_path) {
    ::execvp(argv[0], argv);
  } else {
    ::execv(argv[0], argv);
  }
  ::_exit(127);
}

// Moves complete lines of `c` into `out`.
void take_lines(Child& c, std::vector<std::pair<Child*, std::string>>& out) {
  for (std::size_t nl = c.buffer.find('\n'); nl != std::string::npos; nl = c.buffer.find('\n')) {
    out.emplace_back(&c, c.buffer.substr(0, nl));
    c.buffer.erase(0, nl + 1);
  }
}

}  // namespace

StopSignals::StopSignals() {
  if (g_signal_pipe[0] >= 0) throw std::logic_error("StopSignals: only one at a time");
  if (::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) throw std::runtime_error("cannot create a pipe");
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, &g_old_int);
  ::sigaction(SIGTERM, &sa, &g_old_term);
  // A child that dies while we write its stdin must not kill us: write() then fails with EPIPE.
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  ::sigaction(SIGPIPE, &ignore, &g_old_pipe);
}

StopSignals::~StopSignals() {
  ::sigaction(SIGINT, &g_old_int, nullptr);
  ::sigaction(SIGTERM, &g_old_term, nullptr);
  ::sigaction(SIGPIPE, &g_old_pipe, nullptr);
  close_fd(g_signal_pipe[0]);
  close_fd(g_signal_pipe[1]);
}

ChildSet::~ChildSet() {
  for (auto& c : children_) {
    close_fd(c->in);  // a worker waiting for "go" sees EOF and exits
    signal(*c, SIGTERM);
  }
  const auto deadline = Clock::now() + std::chrono::seconds(2);
  for (auto& child : children_) {
    Child& c = *child;
    for (reap(c, false); c.pid > 0; reap(c, false)) {
      if (Clock::now() > deadline) {
        signal(c, SIGKILL);
        reap(c, true);
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
    close_fd(c.out);
  }
}

Child& ChildSet::start(const std::string& name, const std::vector<std::string>& args, bool with_stdin,
                       const std::string& netns) {
  return spawn(name, args, with_stdin, netns, nullptr);
}

Child& ChildSet::start_command(const std::string& name, const Command& command, const std::string& netns) {
  // The environment is built before fork, as argv is: between fork and exec only
  // async-signal-safe calls.
  std::vector<std::string> environment;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string key = entry.substr(0, entry.find('='));
    const bool replaced = std::any_of(command.environment.begin(), command.environment.end(),
                                      [&](const auto& kv) { return kv.first == key; });
    if (!replaced) environment.push_back(entry);
  }
  for (const auto& [key, value] : command.environment) environment.push_back(key + "=" + value);
  return spawn(name, command.args, false, netns, &environment);
}

Child& ChildSet::spawn(const std::string& name, const std::vector<std::string>& args, bool with_stdin,
                       const std::string& netns, const std::vector<std::string>* environment) {
  if (args.empty()) throw std::runtime_error("no command to start for " + name);
  int ns = -1;
  if (!netns.empty()) {
    ns = ::open(netns.c_str(), O_RDONLY | O_CLOEXEC);
    if (ns < 0)
      throw std::runtime_error("cannot open the network namespace " + netns + " for " + name + ": " +
                               std::strerror(errno));
  }
  int out[2] = {-1, -1};
  int in[2] = {-1, -1};
  if (::pipe2(out, O_CLOEXEC) != 0 || (with_stdin && ::pipe2(in, O_CLOEXEC) != 0)) {
    const std::string why = std::strerror(errno);
    for (int* fd : {&out[0], &out[1], &in[0], &in[1], &ns}) close_fd(*fd);
    throw std::runtime_error("cannot create a pipe for " + name + ": " + why);
  }
  // argv is built before fork: between fork and exec only async-signal-safe calls.
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  if (environment != nullptr) {
    for (const std::string& e : *environment) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const std::string why = std::strerror(errno);
    for (int* fd : {&out[0], &out[1], &in[0], &in[1], &ns}) close_fd(*fd);
    throw std::runtime_error("cannot fork for " + name + ": " + why);
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the parent died before prctl
    if (ns >= 0 && ::setns(ns, CLONE_NEWNET) != 0) {
      static const char kMessage[] = "cannot enter the network namespace\n";
      [[maybe_unused]] const ssize_t w = ::write(STDERR_FILENO, kMessage, sizeof kMessage - 1);
      ::_exit(127);
    }
    ::dup2(out[1], STDOUT_FILENO);
    if (environment != nullptr) {
      ::dup2(out[1], STDERR_FILENO);
      ::setpgid(0, 0);
    }
    if (in[0] >= 0) {
      ::dup2(in[0], STDIN_FILENO);
    } else {
      const int null = ::open("/dev/null", O_RDONLY);
      if (null >= 0) ::dup2(null, STDIN_FILENO);
    }
    if (environment != nullptr) {
      ::signal(SIGPIPE, SIG_DFL);
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      ::execvpe(argv[0], argv.data(), envp.data());
      ::_exit(127);
    }
    exec_child(argv.data(), false);
  }
  close_fd(out[1]);
  close_fd(in[0]);
  close_fd(ns);
  children_.push_back(std::make_unique<Child>());
  Child& c = *children_.back();
  c.name = name;
  c.pid = pid;
  c.out = out[0];
  c.in = in[1];
  c.group = environment != nullptr;
  if (c.group) ::setpgid(pid, pid);  // also here: a signal sent before the child's own call reaches the group
  return c;
}

void ChildSet::kill(Child& child) {
  signal(child, SIGKILL);
  reap(child, true);
  close_fd(child.in);
}

void ChildSet::signal(Child& child, int signal) {
  if (child.pid > 0) ::kill(child.group ? -child.pid : child.pid, signal);
}

bool ChildSet::exited(Child& child) {
  reap(child, false);
  return child.pid < 0;
}

void ChildSet::close_stdin(Child& child) { close_fd(child.in); }

bool ChildSet::write(Child& child, const std::string& text) {
  if (child.in < 0) return false;
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(child.in, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

std::vector<std::pair<Child*, std::string>> ChildSet::wait_lines(const std::vector<Child*>& children,
                                                                 Clock::time_point deadline) {
  std::vector<std::pair<Child*, std::string>> lines;
  for (Child* c : children) take_lines(*c, lines);
  while (lines.empty()) {
    std::vector<pollfd> fds;
    std::vector<Child*> polled;
    for (Child* c : children) {
      if (c->eof || c->out < 0) continue;
      fds.push_back({c->out, POLLIN, 0});
      polled.push_back(c);
    }
    fds.push_back({g_signal_pipe[0], POLLIN, 0});
    // Rounded up: a deadline under a millisecond away must still wait, not spin. One that has
    // passed still reads what is ready (a poll that does not wait), then returns.
    const auto left =
        std::max<long long>(0, std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count());
    if (polled.empty()) break;
    const int r = ::poll(fds.data(), fds.size(), static_cast<int>(std::min<long long>(left, 1000)));
    if (r < 0 && errno != EINTR) throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
    if (g_signal_pipe[0] >= 0 && (fds.back().revents & POLLIN)) throw Interrupted();
    for (std::size_t k = 0; k < polled.size(); ++k) {
      if (!(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      Child& c = *polled[k];
      char buf[4096];
      const ssize_t n = ::read(c.out, buf, sizeof buf);
      if (n > 0) {
        c.buffer.append(buf, static_cast<std::size_t>(n));
        take_lines(c, lines);
      } else if (n == 0 || errno != EINTR) {
        c.eof = true;
      }
    }
    if (left == 0) break;
  }
  return lines;
}

std::vector<std::string> ChildSet::first_lines(const std::vector<Child*>& children, Clock::time_point deadline) {
  std::vector<std::string> first(children.size());
  std::vector<bool> done(children.size(), false);
  auto index_of = [&](const Child* c) {
    return static_cast<std::size_t>(std::find(children.begin(), children.end(), c) - children.begin());
  };
  for (;;) {
    std::vector<Child*> waiting;
    for (std::size_t i = 0; i < children.size(); ++i) {
      if (!done[i] && !children[i]->eof) waiting.push_back(children[i]);
    }
    if (waiting.empty() || Clock::now() >= deadline) return first;
    std::vector<std::string> later(children.size());  // lines after the first: kept for later readers
    for (auto& [child, line] : wait_lines(waiting, deadline)) {
      const std::size_t i = index_of(child);
      if (done[i]) {
        later[i] += line + "\n";
      } else {
        first[i] = std::move(line);
        done[i] = true;
      }
    }
    for (std::size_t i = 0; i < children.size(); ++i) children[i]->buffer.insert(0, later[i]);
  }
}

TempDir::TempDir(const std::string& prefix) {
  std::string tmpl =
      (std::filesystem::temp_directory_path() / (prefix + "-" + std::to_string(::getpid()) + "-XXXXXX")).string();
  if (!::mkdtemp(tmpl.data())) throw std::runtime_error("cannot create a temporary directory in " + tmpl);
  path_ = tmpl;
}

bool left_by_dead_process(const std::string& name, const std::string& prefix) {
  if (name.rfind(prefix, 0) != 0) return false;
  const std::size_t dash = name.find('-', prefix.size());
  if (dash == std::string::npos || dash == prefix.size() || dash - prefix.size() > 9) return false;
  if (!std::all_of(name.begin() + static_cast<std::ptrdiff_t>(prefix.size()),
                   name.begin() + static_cast<std::ptrdiff_t>(dash), [](char c) { return c >= '0' && c <= '9'; })) {
    return false;
  }
  const auto pid = static_cast<pid_t>(std::stol(name.substr(prefix.size(), dash - prefix.size())));
  return ::kill(pid, 0) != 0 && errno != EPERM;  // EPERM: it exists, under another user
}

void TempDir::remove_stale(const std::string& prefix) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::temp_directory_path(), ec)) {
    if (!left_by_dead_process(entry.path().filename().string(), prefix + "-")) continue;
    std::error_code ignored;
    std::filesystem::remove_all(entry.path(), ignored);
  }
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  if (!f) throw std::runtime_error("cannot write " + path.string());
}

void write_private_file(const std::filesystem::path& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  const bool written = fd >= 0 && ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  if (fd >= 0) ::close(fd);
  if (!written) throw std::runtime_error("cannot write " + path.string());
}

int run_command(const std::vector<std::string>& args, const std::string& input, std::string* output) {
  int out[2] = {-1, -1};
  int in[2] = {-1, -1};
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(in, O_CLOEXEC) != 0) {
    for (int* fd : {&out[0], &out[1], &in[0], &in[1]}) close_fd(*fd);
    throw std::runtime_error("cannot create a pipe for `" + args.at(0) + "`");
  }
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    for (int* fd : {&out[0], &out[1], &in[0], &in[1]}) close_fd(*fd);
    throw std::runtime_error("cannot fork for `" + args.at(0) + "`");
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::dup2(in[0], STDIN_FILENO);
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(out[1], STDERR_FILENO);
    exec_child(argv.data(), true);
  }
  close_fd(out[1]);
  close_fd(in[0]);
  // Set-up commands read little input: write it all, then read everything they print. A command
  // that exits without reading must not kill us with SIGPIPE: the write then fails with EPIPE.
  struct sigaction ignore {};
  struct sigaction old {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  ::sigaction(SIGPIPE, &ignore, &old);
  std::size_t done = 0;
  while (done < input.size()) {
    const ssize_t n = ::write(in[1], input.data() + done, input.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  close_fd(in[1]);
  ::sigaction(SIGPIPE, &old, nullptr);
  std::string text;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  close_fd(out[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (output) *output = std::move(text);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

}  // namespace atp::processes
