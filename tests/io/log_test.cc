// The daemons' log level (log.h): its names, and which messages a level lets through.
#include "atp/io/log.h"

#include <gtest/gtest.h>

namespace atp::log {
namespace {

TEST(LogLevel, ParsesEveryNameAndNothingElse) {
  EXPECT_EQ(parse_level("trace"), Level::kTrace);
  EXPECT_EQ(parse_level("debug"), Level::kDebug);
  EXPECT_EQ(parse_level("info"), Level::kInfo);
  EXPECT_EQ(parse_level("warn"), Level::kWarn);
  EXPECT_EQ(parse_level("error"), Level::kError);
  EXPECT_EQ(parse_level("off"), Level::kOff);
  EXPECT_EQ(parse_level("warning"), std::nullopt);
  EXPECT_EQ(parse_level("INFO"), std::nullopt);
  EXPECT_EQ(parse_level(""), std::nullopt);
}

TEST(LogLevel, LetsThroughItsLevelAndAbove) {
  EXPECT_TRUE(enabled(Level::kInfo)) << "info until set";
  EXPECT_FALSE(enabled(Level::kDebug));
  set_level(Level::kWarn);
  EXPECT_FALSE(enabled(Level::kInfo));
  EXPECT_TRUE(enabled(Level::kWarn));
  EXPECT_TRUE(enabled(Level::kError));
  set_level(Level::kOff);
  EXPECT_FALSE(enabled(Level::kError));
  set_level(Level::kTrace);
  EXPECT_TRUE(enabled(Level::kTrace));
  EXPECT_FALSE(enabled(Level::kOff)) << "off is no message's level";
  set_level(Level::kInfo);
}

}  // namespace
}  // namespace atp::log
