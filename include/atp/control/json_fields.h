// The strict JSON field readers and writers every control message's codec uses (control.cc,
// stats.cc, and the algorithms' worker config codecs, such as src/rina/config_json.cc; defined in
// json_fields.cc): each failure is a ControlError naming the field.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "atp/congestion.h"
#include "atp/control/control.h"
#include "atp/time.h"

namespace atp::control {

// A bad value as an error message quotes it: `[1,2,3]`, `"abc"`, at most about 64 bytes.
std::string shown(const nlohmann::json& value);

// The document `text`, which must be a JSON object nesting at most kMaxJsonDepth levels; `what`
// names it in errors ("switch job: not valid JSON (...)").
nlohmann::json parse_object(const std::string& text, const char* what);

// Rejects keys of `object` not in `allowed`, so that a misspelt field is not silently ignored.
// `where` is the object's path ("roles[0].", "" at the top).
void check_keys(const nlohmann::json& object, const std::string& where, const std::vector<std::string_view>& allowed);
inline void check_keys(const nlohmann::json& object, const std::string& where,
                       std::initializer_list<std::string_view> allowed) {
  check_keys(object, where, std::vector<std::string_view>(allowed));
}

// object[key]; "<where><key>: missing" when it has none.
const nlohmann::json& require(const nlohmann::json& object, const std::string& where, const char* key);

// An unsigned integer field in [0, max].
std::uint64_t to_unsigned(const nlohmann::json& value, const std::string& field, std::uint64_t max);

template <class T>
T get_unsigned(const nlohmann::json& object, const std::string& where, const char* key) {
  return static_cast<T>(to_unsigned(require(object, where, key), where + key, std::numeric_limits<T>::max()));
}

// A string field; a true-or-false field; an object field; a list field.
std::string get_string(const nlohmann::json& object, const std::string& where, const char* key);
bool get_bool(const nlohmann::json& object, const std::string& where, const char* key);
const nlohmann::json& get_object(const nlohmann::json& object, const std::string& where, const char* key);
const nlohmann::json& get_list(const nlohmann::json& object, const std::string& where, const char* key);

// A number field (integer or not) in [min, max].
double get_number(const nlohmann::json& object, const std::string& where, const char* key, double min, double max);

// An address field ("10.0.0.1") named `field` in errors; the same as `object[key]`; a list of at
// most `max` of them.
Address to_address(const nlohmann::json& value, const std::string& field);
Address get_address(const nlohmann::json& object, const std::string& where, const char* key);
std::vector<Address> get_address_list(const nlohmann::json& object, const std::string& where, const char* key,
                                      std::size_t max);

// A worker config's "congestion" object (CongestionConfig, every key required).
nlohmann::json congestion_json(const CongestionConfig& cc);
CongestionConfig congestion_from(const nlohmann::json& doc);  // doc["congestion"]

// The four timeouts and the first seq that every worker config has (ATP's, Rina's), as
// "retransmit_timeout_ns", "min_retransmit_timeout_ns", "max_retransmit_timeout_ns",
// "progress_timeout_ns" and "initial_seq".
template <class Config>
void put_timeouts(const Config& c, nlohmann::json& doc) {
  doc["retransmit_timeout_ns"] = c.retransmit_timeout.count();
  doc["min_retransmit_timeout_ns"] = c.min_retransmit_timeout.count();
  doc["max_retransmit_timeout_ns"] = c.max_retransmit_timeout.count();
  doc["progress_timeout_ns"] = c.progress_timeout.count();
  doc["initial_seq"] = c.initial_seq;
}

template <class Config>
void get_timeouts(const nlohmann::json& doc, Config& c) {
  auto nanoseconds = [&doc](const char* key) {
    return Duration(
        static_cast<std::int64_t>(to_unsigned(require(doc, "", key), key, std::numeric_limits<std::int64_t>::max())));
  };
  c.retransmit_timeout = nanoseconds("retransmit_timeout_ns");
  c.min_retransmit_timeout = nanoseconds("min_retransmit_timeout_ns");
  c.max_retransmit_timeout = nanoseconds("max_retransmit_timeout_ns");
  c.progress_timeout = nanoseconds("progress_timeout_ns");
  c.initial_seq = get_unsigned<Seq>(doc, "", "initial_seq");
}

}  // namespace atp::control
