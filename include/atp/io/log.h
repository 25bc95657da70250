// The daemons' log (spdlog, to stderr): what they did and what they refused, one line each,
// "2026-11-26 16:50:01.123 info switch tor0: job 7 installed by alice (lease 3)". Standard output
// stays the machine-read first line and what commands print. The level is the process's, set
// once at start-up (`--log-level`); messages below it cost one comparison, not their formatting,
// where the caller asks enabled() first.
#pragma once

#include <optional>
#include <string_view>

namespace atp::log {

enum class Level : int { kTrace, kDebug, kInfo, kWarn, kError, kOff };

// "trace", "debug", "info", "warn", "error" or "off"; nullopt for anything else.
std::optional<Level> parse_level(std::string_view name);
inline constexpr const char* kLevelNames = "trace, debug, info, warn, error or off";

void set_level(Level level);  // kInfo until set
bool enabled(Level level);
void write(Level level, std::string_view message);

inline void debug(std::string_view message) { write(Level::kDebug, message); }
inline void info(std::string_view message) { write(Level::kInfo, message); }
inline void warn(std::string_view message) { write(Level::kWarn, message); }
inline void error(std::string_view message) { write(Level::kError, message); }

}  // namespace atp::log
