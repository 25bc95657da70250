// The daemons' log (log.h) on one spdlog logger that writes to stderr, made on first use.
#include "atp/io/log.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <array>
#include <memory>
#include <utility>

namespace atp::log {
namespace {

constexpr std::array<std::pair<std::string_view, Level>, 6> kNames = {{{"trace", Level::kTrace},
                                                                       {"debug", Level::kDebug},
                                                                       {"info", Level::kInfo},
                                                                       {"warn", Level::kWarn},
                                                                       {"error", Level::kError},
                                                                       {"off", Level::kOff}}};

spdlog::level::level_enum to_spdlog(Level level) {
  switch (level) {
    case Level::kTrace:
      return spdlog::level::trace;
    case Level::kDebug:
      return spdlog::level::debug;
    case Level::kInfo:
      return spdlog::level::info;
    case Level::kWarn:
      return spdlog::level::warn;
    case Level::kError:
      return spdlog::level::err;
    case Level::kOff:
      break;
  }
  return spdlog::level::off;
}

// Not registered in spdlog's registry: a library that uses spdlog's default logger (or names one
// "atp") in the same process is left alone. A static local: made once, thread-safely.
spdlog::logger& logger() {
  static const std::shared_ptr<spdlog::logger> instance = [] {
    auto made = std::make_shared<spdlog::logger>("atp", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    made->set_pattern("%Y-%m-%d %H:%M:%S.%e %l %v");
    made->set_level(spdlog::level::info);
    made->flush_on(spdlog::level::trace);  // every line at once: a daemon may be killed any moment
    return made;
  }();
  return *instance;
}

}  // namespace

std::optional<Level> parse_level(std::string_view name) {
  for (const auto& [text, level] : kNames) {
    if (text == name) return level;
  }
  return std::nullopt;
}

void set_level(Level level) { logger().set_level(to_spdlog(level)); }

bool enabled(Level level) { return level != Level::kOff && logger().should_log(to_spdlog(level)); }

void write(Level level, std::string_view message) {
  if (enabled(level)) logger().log(to_spdlog(level), "{}", message);
}

}  // namespace atp::log
