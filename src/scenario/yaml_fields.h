// The strict readers of a scenario file's values (scenario_yaml.cc and its sections): each checks
// a node's type and range and throws ScenarioError with one sentence that starts with the key path.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>

#include "atp/scenario/scenario.h"

namespace atp::scenario_detail {

inline constexpr std::uint64_t kU32Max = std::numeric_limits<std::uint32_t>::max();

// Throws ScenarioError "PATH: WHAT" (the whole file, "scenario", where the path is empty).
[[noreturn]] void fail(const std::string& path, const std::string& what);

// The path of a map's key ("jobs[0].name") and of a list's item ("jobs[0]").
std::string child(const std::string& path, const std::string& key);
std::string item(const std::string& path, std::size_t i);

// How a value that has the wrong type looks, for "..., got X".
std::string describe(const YAML::Node& node);

// Checks that `node` is a map whose keys are all in `allowed`; the first other key is an error.
void expect_map(const YAML::Node& node, const std::string& path, std::initializer_list<const char*> allowed);
// `node`, which must be a list (and, if `non_empty`, not an empty one).
YAML::Node expect_list(const YAML::Node& node, const std::string& path, bool non_empty);
// Fails naming `key` where the map has no such key.
void require(const YAML::Node& map, const std::string& path, const char* key);

// `text` as a finite number ("+1.5" too), or false where it is none.
bool parse_double(const std::string& text, double& out);

std::string as_string(const YAML::Node& node, const std::string& path);  // non-empty
// An integer in [min, max]. Integral numbers written as floats (1e6) are accepted.
std::uint64_t as_integer(const YAML::Node& node, const std::string& path, std::uint64_t min, std::uint64_t max);
// A finite number in [min, max]; `kind` says what is expected ("a probability", ...).
double as_number(const YAML::Node& node, const std::string& path, double min, double max, const std::string& kind);
double as_positive(const YAML::Node& node, const std::string& path);
bool as_bool(const YAML::Node& node, const std::string& path);
// Microseconds (fractions allowed) as a Duration; zero only where `allow_zero`.
Duration as_microseconds(const YAML::Node& node, const std::string& path, bool allow_zero);

}  // namespace atp::scenario_detail
