// Control-plane tokens: lookup (environment, file, default file), generation at a daemon's first
// start, the tenants file, and constant-time matching of Authorization headers.
#include "atp/control/control_auth.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>

#include "atp/io/config_file.h"

namespace atp::control {
namespace {

constexpr std::size_t kMinTokenChars = 16;
constexpr std::size_t kMaxTokenChars = 256;
constexpr std::size_t kMaxTokenFileBytes = 1 << 20;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

bool token_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("-._~+/=").find(c) != std::string_view::npos;
}

// Empty when `token` is acceptable, else what is wrong with it.
std::string token_problem(std::string_view token) {
  if (token.size() < kMinTokenChars || token.size() > kMaxTokenChars) {
    return "must be " + std::to_string(kMinTokenChars) + " to " + std::to_string(kMaxTokenChars) + " characters, has " +
           std::to_string(token.size());
  }
  for (char c : token) {
    if (!token_char(c)) return "may hold only letters, digits and -._~+/=";
  }
  return "";
}

std::string trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return std::string(s);
}

// A secret file: a regular file of the calling user that nobody else can read or write.
std::string read_secret_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    throw AuthError(path + ": cannot read the token file (" + std::strerror(errno) + ")");
  }
  if (S_ISREG(st.st_mode) && (st.st_mode & 077) != 0) {
    throw AuthError(path + ": others can read or write this token file; make it private with `chmod 600 " + path + "`");
  }
  try {
    return read_config_file(path, kMaxTokenFileBytes);
  } catch (const ConfigFileError& e) {
    throw AuthError(e.what());
  }
}

// Writes `token` to `path` unless the file exists, atomically: a private temporary file is
// hard-linked into place, so a concurrent daemon either wins (and this one reads its token) or
// loses. Returns false when the file already existed.
bool create_token_file(const std::string& path, const std::string& token) {
  const std::string dir = path.substr(0, path.rfind('/'));
  if (!dir.empty() && ::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    throw AuthError(dir + ": cannot create the folder for the control token (" + std::strerror(errno) + ")");
  }
  std::string temp = path + ".XXXXXX";
  const int fd = ::mkstemp(temp.data());  // mode 0600
  if (fd < 0) throw AuthError(path + ": cannot write the control token (" + std::strerror(errno) + ")");
  const std::string line = token + "\n";
  const bool written = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  ::close(fd);
  if (!written) {
    ::unlink(temp.c_str());
    throw AuthError(path + ": cannot write the control token");
  }
  const int linked = ::link(temp.c_str(), path.c_str());
  const int error = errno;
  ::unlink(temp.c_str());
  if (linked == 0) return true;
  if (error == EEXIST) return false;
  throw AuthError(path + ": cannot write the control token (" + std::strerror(error) + ")");
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

std::string random_token() {
  unsigned char bytes[32];
  std::size_t got = 0;
  while (got < sizeof bytes) {
    const ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw AuthError(std::string("cannot generate a control token: getrandom failed (") + std::strerror(errno) + ")");
    }
    got += static_cast<std::size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string token;
  for (unsigned char b : bytes) {
    token += kHex[b >> 4];
    token += kHex[b & 15];
  }
  return token;
}

std::string default_token_file() {
  std::string home = env("ATP_HOME");
  if (home.empty()) {
    const std::string user_home = env("HOME");
    if (user_home.empty()) throw AuthError("cannot find the control token: neither ATP_HOME nor HOME is set");
    home = user_home + "/.atp";
  }
  return home + "/token";
}

std::string read_token_file(const std::string& path) {
  const std::string text = read_secret_file(path);
  const std::string token = trim(std::string_view(text).substr(0, text.find('\n')));
  if (const std::string problem = token_problem(token); !problem.empty()) {
    throw AuthError(path + ": the token on its first line " + problem);
  }
  return token;
}

std::string client_token() {
  if (const std::string token = env("ATP_TOKEN"); !token.empty()) {
    if (const std::string problem = token_problem(token); !problem.empty()) {
      throw AuthError("ATP_TOKEN: the token " + problem);
    }
    return token;
  }
  if (const std::string file = env("ATP_TOKEN_FILE"); !file.empty()) return read_token_file(file);
  const std::string file = default_token_file();
  if (::access(file.c_str(), F_OK) != 0) {
    throw AuthError("no control token: set ATP_TOKEN or ATP_TOKEN_FILE, or run as the user whose daemon wrote " + file);
  }
  return read_token_file(file);
}

DaemonToken daemon_token(const std::string& file) {
  if (!file.empty()) return {read_token_file(file), file, false};
  if (const std::string token = env("ATP_TOKEN"); !token.empty()) return {client_token(), "ATP_TOKEN", false};
  if (const std::string path = env("ATP_TOKEN_FILE"); !path.empty()) return {read_token_file(path), path, false};
  const std::string path = default_token_file();
  if (::access(path.c_str(), F_OK) == 0) return {read_token_file(path), path, false};
  const std::string token = random_token();
  if (create_token_file(path, token)) return {token, path, true};
  return {read_token_file(path), path, false};  // another daemon wrote it first
}

std::vector<Tenant> read_tenants_file(const std::string& path) {
  const std::string text = read_secret_file(path);
  std::vector<Tenant> tenants;
  std::set<std::string> names, tokens;
  std::size_t line_number = 0;
  for (std::size_t start = 0; start < text.size();) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    std::string line = trim(std::string_view(text).substr(start, end - start));
    start = end + 1;
    ++line_number;
    if (const std::size_t hash = line.find('#'); hash != std::string::npos) line = trim(line.substr(0, hash));
    if (line.empty()) continue;
    const std::string where = path + ":" + std::to_string(line_number) + ": ";
    const std::size_t space = line.find_first_of(" \t");
    if (space == std::string::npos) throw AuthError(where + "expected NAME TOKEN");
    Tenant t{line.substr(0, space), trim(line.substr(space))};
    const bool good_name = !t.name.empty() && t.name.size() <= 64 &&
                           t.name.find_first_not_of(
                               "abcdefghijklmnopqrstuvwxyz"
                               "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                               "0123456789-._") == std::string::npos;
    if (!good_name) throw AuthError(where + "a tenant name is 1 to 64 letters, digits and -._");
    if (t.name == Authenticator::kOperator) throw AuthError(where + "\"operator\" is the daemon's own token's name");
    if (const std::string problem = token_problem(t.token); !problem.empty()) {
      throw AuthError(where + "the token " + problem);
    }
    if (!names.insert(t.name).second) throw AuthError(where + "tenant " + t.name + " is listed twice");
    if (!tokens.insert(t.token).second) throw AuthError(where + "this token is already another tenant's");
    tenants.push_back(std::move(t));
  }
  return tenants;
}

Authenticator::Authenticator(std::string operator_token, std::vector<Tenant> tenants) {
  if (const std::string problem = token_problem(operator_token); !problem.empty()) {
    throw AuthError("the operator token " + problem);
  }
  for (const Tenant& t : tenants) {
    if (constant_time_equal(t.token, operator_token)) {
      throw AuthError("tenant " + t.name + " has the operator's token; give it its own");
    }
  }
  tokens_.push_back({std::string(kOperator), std::move(operator_token)});
  for (Tenant& t : tenants) tokens_.push_back(std::move(t));
}

std::optional<std::string> Authenticator::identify(std::string_view authorization) const {
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.substr(0, kBearer.size()) != kBearer) return std::nullopt;
  const std::string_view token = authorization.substr(kBearer.size());
  std::optional<std::string> who;
  for (const Tenant& t : tokens_) {  // every entry is compared: the time does not tell which matched
    if (constant_time_equal(t.token, token) && !who) who = t.name;
  }
  return who;
}

}  // namespace atp::control
