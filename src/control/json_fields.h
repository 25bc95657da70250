// The strict JSON field readers every control message's codec uses (control.cc, stats.cc; defined in
// json_fields.cc), private to the control layer: each failure is a ControlError naming the field.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "atp/control/control.h"

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

}  // namespace atp::control
