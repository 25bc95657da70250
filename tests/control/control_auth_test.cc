// Control-plane tokens: where daemons and clients find them, generation at a daemon's first
// start, the permission rule, the tenants file, and matching Authorization headers.
#include "atp/control/control_auth.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace atp::control {
namespace {

namespace fs = std::filesystem;

// Each test gets a fresh ATP_HOME and no ATP_TOKEN / ATP_TOKEN_FILE.
class ControlAuth : public ::testing::Test {
 protected:
  void SetUp() override {
    home_ = fs::path(::testing::TempDir()) / ("control_auth_" + std::to_string(::getpid()) + "_" +
                                              ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(home_);
    fs::create_directories(home_);
    ::setenv("ATP_HOME", (home_ / "atp").c_str(), 1);
    ::unsetenv("ATP_TOKEN");
    ::unsetenv("ATP_TOKEN_FILE");
  }
  void TearDown() override {
    ::unsetenv("ATP_HOME");
    ::unsetenv("ATP_TOKEN");
    ::unsetenv("ATP_TOKEN_FILE");
    fs::remove_all(home_);
  }
  std::string write(const std::string& name, const std::string& text, mode_t mode = 0600) {
    const std::string path = (home_ / name).string();
    std::ofstream(path) << text;
    ::chmod(path.c_str(), mode);
    return path;
  }
  template <class F>
  std::string error_of(F f) {
    try {
      f();
    } catch (const AuthError& e) {
      return e.what();
    }
    return "";
  }
  fs::path home_;
};

TEST_F(ControlAuth, ADaemonGeneratesAPrivateTokenThatClientsThenFind) {
  EXPECT_NE(error_of([] { client_token(); }).find("no control token: set ATP_TOKEN or ATP_TOKEN_FILE"),
            std::string::npos);
  const DaemonToken first = daemon_token();
  EXPECT_TRUE(first.generated);
  EXPECT_EQ(first.origin, default_token_file());
  EXPECT_EQ(first.token.size(), 64u);
  struct stat st {};
  ASSERT_EQ(::stat(first.origin.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat((home_ / "atp").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  // A second daemon and a client find the same token.
  const DaemonToken second = daemon_token();
  EXPECT_FALSE(second.generated);
  EXPECT_EQ(second.token, first.token);
  EXPECT_EQ(client_token(), first.token);
}

TEST_F(ControlAuth, DaemonsStartingAtOnceAgreeOnOneToken) {
  std::vector<std::string> tokens(8);
  std::vector<std::thread> threads;
  for (auto& t : tokens) threads.emplace_back([&t] { t = daemon_token().token; });
  for (auto& th : threads) th.join();
  for (const auto& t : tokens) EXPECT_EQ(t, tokens[0]);
  EXPECT_EQ(client_token(), tokens[0]);
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(home_ / "atp")) ++files;
  EXPECT_EQ(files, 1u) << "no temporary file is left behind";
}

TEST_F(ControlAuth, TheEnvironmentComesFirst) {
  const std::string file = write("t", "file-token-0123456789\n");
  ::setenv("ATP_TOKEN_FILE", file.c_str(), 1);
  EXPECT_EQ(client_token(), "file-token-0123456789");
  EXPECT_EQ(daemon_token().origin, file);
  ::setenv("ATP_TOKEN", "env-token-0123456789", 1);
  EXPECT_EQ(client_token(), "env-token-0123456789");
  EXPECT_EQ(daemon_token().origin, "ATP_TOKEN");
  // --token-file beats both.
  const std::string flag = write("flag", "flag-token-0123456789");
  EXPECT_EQ(daemon_token(flag).token, "flag-token-0123456789");
  ::setenv("ATP_TOKEN", "short", 1);
  EXPECT_EQ(error_of([] { client_token(); }), "ATP_TOKEN: the token must be 16 to 256 characters, has 5");
}

TEST_F(ControlAuth, ATokenFileOthersCanReadIsRefused) {
  const std::string file = write("open", "open-token-0123456789", 0644);
  EXPECT_EQ(error_of([&] { read_token_file(file); }),
            file + ": others can read or write this token file; make it private with `chmod 600 " + file + "`");
  const std::string bad = write("bad", "has spaces in it and more");
  EXPECT_EQ(error_of([&] { read_token_file(bad); }),
            bad + ": the token on its first line may hold only letters, digits and -._~+/=");
  EXPECT_NE(error_of([] { read_token_file("/dev/zero"); }).find("not a regular file"), std::string::npos);
}

TEST_F(ControlAuth, TenantsFileNamesEachTenant) {
  const std::string file =
      write("tenants", "# shared switch\nalice alice-token-0123456789\n\nbob  bob-token-0123456789  # b\n");
  const std::vector<Tenant> tenants = read_tenants_file(file);
  ASSERT_EQ(tenants.size(), 2u);
  EXPECT_EQ(tenants[1].name, "bob");
  EXPECT_EQ(tenants[1].token, "bob-token-0123456789");
  const std::string twice = write("twice", "a x-token-0123456789\na y-token-0123456789\n");
  EXPECT_EQ(error_of([&] { read_tenants_file(twice); }), twice + ":2: tenant a is listed twice");
  const std::string op = write("op", "operator x-token-0123456789\n");
  EXPECT_EQ(error_of([&] { read_tenants_file(op); }), op + ":1: \"operator\" is the daemon's own token's name");
  const std::string alone = write("alone", "carol\n");
  EXPECT_EQ(error_of([&] { read_tenants_file(alone); }), alone + ":1: expected NAME TOKEN");
}

TEST_F(ControlAuth, AuthenticatorIdentifiesBearerTokens) {
  const Authenticator auth("operator-token-0123456789", {{"alice", "alice-token-0123456789"}});
  EXPECT_EQ(auth.identify("Bearer operator-token-0123456789"), "operator");
  EXPECT_EQ(auth.identify("Bearer alice-token-0123456789"), "alice");
  EXPECT_EQ(auth.identify("Bearer alice-token-012345678"), std::nullopt);
  EXPECT_EQ(auth.identify("Bearer "), std::nullopt);
  EXPECT_EQ(auth.identify("alice-token-0123456789"), std::nullopt);
  EXPECT_EQ(auth.identify(""), std::nullopt);
  EXPECT_THROW(Authenticator("operator-token-0123456789", {{"mallory", "operator-token-0123456789"}}), AuthError);
}

}  // namespace
}  // namespace atp::control
