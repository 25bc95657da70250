// The strict readers of a scenario file's values (yaml_fields.h): types, ranges and unknown keys,
// each error one sentence that starts with the key path.
#include "yaml_fields.h"

#include <charconv>
#include <cmath>
#include <set>

namespace atp::scenario_detail {

void fail(const std::string& path, const std::string& what) {
  throw ScenarioError((path.empty() ? std::string("scenario") : path) + ": " + what);
}

std::string child(const std::string& path, const std::string& key) { return path.empty() ? key : path + "." + key; }
std::string item(const std::string& path, std::size_t i) { return path + "[" + std::to_string(i) + "]"; }

std::string describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
      return "nothing";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Scalar:
      return node.Scalar().empty() ? std::string("an empty string") : node.Scalar();
    default:
      return "an undefined value";
  }
}

void expect_map(const YAML::Node& node, const std::string& path, std::initializer_list<const char*> allowed) {
  if (!node.IsMap()) fail(path, "must be a map, got " + describe(node));
  std::set<std::string> seen;
  for (const auto& kv : node) {
    if (!kv.first.IsScalar()) fail(path, "keys must be plain names, got " + describe(kv.first));
    const std::string key = kv.first.Scalar();
    // yaml-cpp keeps the first of two equal keys; the second is almost always a mistake.
    if (!seen.insert(key).second) fail(child(path, key), "the key appears twice");
    bool known = false;
    for (const char* a : allowed) known = known || key == a;
    if (!known) {
      std::string list;
      for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      fail(child(path, key), "unknown key (expected one of: " + list + ")");
    }
  }
}

YAML::Node expect_list(const YAML::Node& node, const std::string& path, bool non_empty) {
  if (!node.IsSequence()) fail(path, "must be a list, got " + describe(node));
  if (non_empty && node.size() == 0) fail(path, "must not be empty");
  return node;
}

void require(const YAML::Node& map, const std::string& path, const char* key) {
  if (!map[key]) fail(path, std::string("missing required key '") + key + "'");
}

bool parse_double(const std::string& text, double& out) {
  const char* first = text.data();
  const char* last = text.data() + text.size();
  if (first != last && *first == '+') ++first;  // YAML allows "+1.5"; from_chars does not
  auto [end, ec] = std::from_chars(first, last, out);
  return ec == std::errc() && end == last && std::isfinite(out);
}

std::string as_string(const YAML::Node& node, const std::string& path) {
  if (!node.IsScalar() || node.Scalar().empty()) fail(path, "must be a non-empty string, got " + describe(node));
  return node.Scalar();
}

std::uint64_t as_integer(const YAML::Node& node, const std::string& path, std::uint64_t min, std::uint64_t max) {
  const char* kind = min >= 1 ? "a positive integer" : "a non-negative integer";
  if (!node.IsScalar()) fail(path, std::string("must be ") + kind + ", got " + describe(node));
  const std::string& text = node.Scalar();
  std::uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    double d = 0;
    if (!parse_double(text, d) || d < 0 || d != std::floor(d) || d >= 18446744073709551616.0) {
      fail(path, std::string("must be ") + kind + ", got " + describe(node));
    }
    value = static_cast<std::uint64_t>(d);
  }
  if (value < min) fail(path, std::string("must be ") + kind + ", got " + describe(node));
  if (value > max) fail(path, "must be at most " + std::to_string(max) + ", got " + describe(node));
  return value;
}

double as_number(const YAML::Node& node, const std::string& path, double min, double max, const std::string& kind) {
  double value = 0;
  if (!node.IsScalar() || !parse_double(node.Scalar(), value) || value < min || value > max) {
    fail(path, "must be " + kind + ", got " + describe(node));
  }
  return value;
}

double as_positive(const YAML::Node& node, const std::string& path) {
  double value = as_number(node, path, 0, std::numeric_limits<double>::max(), "a positive number");
  if (value == 0) fail(path, "must be a positive number, got " + describe(node));
  return value;
}

bool as_bool(const YAML::Node& node, const std::string& path) {
  if (node.IsScalar()) {
    const std::string& t = node.Scalar();
    if (t == "true" || t == "True" || t == "yes" || t == "on") return true;
    if (t == "false" || t == "False" || t == "no" || t == "off") return false;
  }
  fail(path, "must be true or false, got " + describe(node));
}

Duration as_microseconds(const YAML::Node& node, const std::string& path, bool allow_zero) {
  constexpr double kMaxUs = 9.0e12;  // about 104 days: far beyond any simulated run, fits int64 ns
  double us = as_number(node, path, 0, kMaxUs,
                        allow_zero ? "a non-negative number of microseconds" : "a positive number of microseconds");
  const Duration d(static_cast<std::int64_t>(std::llround(us * 1000.0)));  // the core counts nanoseconds
  if (!allow_zero && d <= Duration::zero()) {
    fail(path, "must be a positive number of microseconds (at least 0.001), got " + describe(node));
  }
  return d;
}

}  // namespace atp::scenario_detail
