// The strict JSON field readers of json_fields.h, which every control message's codec uses.
#include "atp/control/json_fields.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace atp::control {
namespace {

using nlohmann::json;

// Error messages quote at most this many bytes of a bad value.
constexpr std::size_t kExcerptBytes = 64;

// `value` as compact JSON for an error message, at most about `limit` bytes: containers stop
// after the items that fit, strings are cut. Recursion ends when the text is full (each level
// adds a byte), so the nesting of `value` does not matter.
void append_excerpt(const json& value, std::string& out, std::size_t limit) {
  if (out.size() > limit) return;
  switch (value.type()) {
    case json::value_t::array: {
      out += '[';
      bool first = true;
      for (const json& item : value) {
        if (out.size() > limit) break;
        if (!first) out += ',';
        first = false;
        append_excerpt(item, out, limit);
      }
      out += ']';
      return;
    }
    case json::value_t::object: {
      out += '{';
      bool first = true;
      for (const auto& item : value.items()) {
        if (out.size() > limit) break;
        if (!first) out += ',';
        first = false;
        append_excerpt(json(excerpt(item.key())), out, limit);
        out += ':';
        append_excerpt(item.value(), out, limit);
      }
      out += '}';
      return;
    }
    case json::value_t::string:
      out += json(excerpt(value.get_ref<const std::string&>())).dump(-1, ' ', false, json::error_handler_t::replace);
      return;
    default:  // numbers, booleans, null: short
      out += value.dump();
  }
}

}  // namespace

std::string shown(const json& value) {
  std::string out;
  append_excerpt(value, out, kExcerptBytes);
  return out.size() > kExcerptBytes ? excerpt(out) : out;
}

namespace {

// True when arrays and objects in `text` nest deeper than `limit`, counted in one pass without
// building anything (brackets inside strings do not count). A prefix the parser accepts nests
// as deep here as in the parser, so no document it would build deeper than `limit` passes.
bool nests_deeper_than(std::string_view text, int limit) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character, whatever it is
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

}  // namespace

void check_keys(const json& object, const std::string& where, const std::vector<std::string_view>& allowed) {
  for (const auto& item : object.items()) {
    bool known = false;
    for (std::string_view a : allowed) known = known || item.key() == a;
    if (!known) {
      std::string list;
      for (std::string_view a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      throw ControlError(where + excerpt(item.key()) + ": unknown key (expected one of " + list + ")");
    }
  }
}

const json& require(const json& object, const std::string& where, const char* key) {
  auto it = object.find(key);
  if (it == object.end()) throw ControlError(where + key + ": missing");
  return *it;
}

std::string get_string(const json& object, const std::string& where, const char* key) {
  const json& value = require(object, where, key);
  if (!value.is_string()) throw ControlError(where + key + ": expected a string, got " + shown(value));
  return value.get<std::string>();
}

bool get_bool(const json& object, const std::string& where, const char* key) {
  const json& value = require(object, where, key);
  if (!value.is_boolean()) throw ControlError(where + key + ": expected true or false, got " + shown(value));
  return value.get<bool>();
}

const json& get_object(const json& object, const std::string& where, const char* key) {
  const json& value = require(object, where, key);
  if (!value.is_object()) throw ControlError(where + key + ": expected an object, got " + shown(value));
  return value;
}

const json& get_list(const json& object, const std::string& where, const char* key) {
  const json& value = require(object, where, key);
  if (!value.is_array()) throw ControlError(where + key + ": expected a list, got " + shown(value));
  return value;
}

std::uint64_t to_unsigned(const json& value, const std::string& field, std::uint64_t max) {
  if (!value.is_number_integer()) throw ControlError(field + ": expected an integer, got " + shown(value));
  if (value.is_number_unsigned()) {
    const auto v = value.get<std::uint64_t>();
    if (v <= max) return v;
  } else if (value.get<std::int64_t>() >= 0 && static_cast<std::uint64_t>(value.get<std::int64_t>()) <= max) {
    return static_cast<std::uint64_t>(value.get<std::int64_t>());
  }
  throw ControlError(field + ": must be between 0 and " + std::to_string(max) + ", got " + shown(value));
}

json parse_object(const std::string& text, const char* what) {
  // Checked first: nothing below then recurses deeper than this (nlohmann's parser and
  // destructor do not recurse, its dump() and copies do).
  if (nests_deeper_than(text, kMaxJsonDepth)) {
    throw ControlError(std::string(what) + ": body nests deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  }
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number like 1e400
    // The message quotes the offending token, which may be most of the body.
    throw ControlError(std::string(what) + ": not valid JSON (" + excerpt(e.what(), 160) + ")");
  }
  if (!doc.is_object()) throw ControlError(std::string(what) + ": expected a JSON object, got " + shown(doc));
  return doc;
}

double get_number(const nlohmann::json& object, const std::string& where, const char* key, double min, double max) {
  const nlohmann::json& value = require(object, where, key);
  if (!value.is_number()) throw ControlError(where + key + ": expected a number, got " + shown(value));
  const double v = value.get<double>();
  if (!std::isfinite(v) || v < min || v > max) {
    std::ostringstream range;  // 0 and 1, not json's 0.0 and 1.0
    range << where << key << ": must be between " << min << " and " << max << ", got " << shown(value);
    throw ControlError(range.str());
  }
  return v;
}

Address to_address(const nlohmann::json& value, const std::string& field) {
  if (!value.is_string()) throw ControlError(field + ": expected an address like \"10.0.0.1\", got " + shown(value));
  return parse_address(value.get<std::string>(), field);
}

Address get_address(const nlohmann::json& object, const std::string& where, const char* key) {
  return to_address(require(object, where, key), where + key);
}

std::vector<Address> get_address_list(const nlohmann::json& object, const std::string& where, const char* key,
                                      std::size_t max) {
  const nlohmann::json& list = require(object, where, key);
  if (!list.is_array()) throw ControlError(where + key + ": expected a list of addresses, got " + shown(list));
  if (list.size() > max) {
    throw ControlError(where + key + ": at most " + std::to_string(max) + " addresses, got " +
                       std::to_string(list.size()));
  }
  std::vector<Address> out;
  for (std::size_t i = 0; i < list.size(); ++i)
    out.push_back(to_address(list[i], where + key + "[" + std::to_string(i) + "]"));
  return out;
}

nlohmann::json congestion_json(const CongestionConfig& cc) {
  return {{"enabled", cc.enabled},       {"initial_window", cc.initial_window},     {"min_window", cc.min_window},
          {"max_window", cc.max_window}, {"initial_ssthresh", cc.initial_ssthresh}, {"mtu_bytes", cc.mtu_bytes}};
}

CongestionConfig congestion_from(const nlohmann::json& doc) {
  const nlohmann::json& cc = get_object(doc, "", "congestion");
  check_keys(cc, "congestion.",
             {"enabled", "initial_window", "min_window", "max_window", "initial_ssthresh", "mtu_bytes"});
  const nlohmann::json& enabled = require(cc, "congestion.", "enabled");
  if (!enabled.is_boolean()) throw ControlError("congestion.enabled: expected true or false, got " + shown(enabled));
  CongestionConfig c;
  c.enabled = enabled.get<bool>();
  c.initial_window = get_unsigned<std::uint32_t>(cc, "congestion.", "initial_window");
  c.min_window = get_unsigned<std::uint32_t>(cc, "congestion.", "min_window");
  c.max_window = get_unsigned<std::uint32_t>(cc, "congestion.", "max_window");
  c.initial_ssthresh = get_unsigned<std::uint32_t>(cc, "congestion.", "initial_ssthresh");
  c.mtu_bytes = get_unsigned<std::uint32_t>(cc, "congestion.", "mtu_bytes");
  return c;
}

}  // namespace atp::control
