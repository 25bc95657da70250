// read_config_file: regular files only, bounded size, one sentence for everything else.
#include "atp/io/config_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace atp {
namespace {

std::string temp_path(const char* name) { return ::testing::TempDir() + "config_file_test_" + name; }

std::string error_of(const std::string& path, std::size_t max_bytes = kMaxConfigFileBytes) {
  try {
    read_config_file(path, max_bytes);
  } catch (const ConfigFileError& e) {
    return e.what();
  }
  return "";
}

TEST(ConfigFile, ReadsARegularFileWhole) {
  const std::string path = temp_path("ok");
  std::ofstream(path, std::ios::binary) << std::string("a: 1\n\0b", 7);
  EXPECT_EQ(read_config_file(path), std::string("a: 1\n\0b", 7));
  std::ofstream(path, std::ios::binary | std::ios::trunc);
  EXPECT_EQ(read_config_file(path), "");
  std::remove(path.c_str());
}

TEST(ConfigFile, RefusesDevicesDirectoriesAndFifosInOneSentence) {
  EXPECT_EQ(error_of("/dev/zero"),
            "/dev/zero: not a regular file (a config must be a file, not a device, pipe or directory)");
  EXPECT_NE(error_of("/").find("not a regular file"), std::string::npos);
  const std::string fifo = temp_path("fifo");
  std::remove(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_NE(error_of(fifo).find("not a regular file"), std::string::npos);  // and does not block
  std::remove(fifo.c_str());
}

TEST(ConfigFile, RefusesAMissingFileNamingIt) {
  EXPECT_EQ(error_of("/nonexistent/x.yaml"), "/nonexistent/x.yaml: cannot open the file (No such file or directory)");
}

TEST(ConfigFile, RefusesAFileOverTheLimitBeforeReadingIt) {
  const std::string path = temp_path("big");
  std::ofstream(path, std::ios::binary) << std::string(101, 'x');
  EXPECT_EQ(error_of(path, 100), path + ": larger than 100 bytes, too large for a config file");
  EXPECT_EQ(read_config_file(path, 101).size(), 101u);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace atp
