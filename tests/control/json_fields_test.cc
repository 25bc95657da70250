// The strict JSON field readers every control codec uses (json_fields.h): each refusal is one
// ControlError naming the field, and a bad value is quoted short.
#include "atp/control/json_fields.h"

#include <gtest/gtest.h>

#include <string>

#include "atp/control/control.h"

namespace atp::control {
namespace {

using nlohmann::json;

// The message of the ControlError `f` throws ("" if it throws none).
template <class F>
std::string refusal(F&& f) {
  try {
    f();
  } catch (const ControlError& e) {
    return e.what();
  }
  return "";
}

TEST(JsonFields, ShownQuotesABadValueShort) {
  EXPECT_EQ(shown(json::parse(R"([1,2,3])")), "[1,2,3]");
  EXPECT_EQ(shown(json("abc")), "\"abc\"");
  const std::string long_list = shown(json(std::vector<int>(1000, 7)));
  EXPECT_LE(long_list.size(), 80u) << long_list;
  EXPECT_EQ(long_list.rfind("[7,7,7", 0), 0u);
  // Nesting does not make it long (or deep: each level adds a byte to a text already full).
  json deep = json::array();
  for (int i = 0; i < 100; ++i) deep = json::array({deep});
  EXPECT_LE(shown(deep).size(), 80u);
}

TEST(JsonFields, ParseObjectRefusesWhatIsNotAnObjectOfBoundedDepth) {
  EXPECT_EQ(parse_object(R"({"a": 1})", "job")["a"], 1);
  EXPECT_EQ(refusal([] { parse_object("[1]", "job"); }), "job: expected a JSON object, got [1]");
  EXPECT_EQ(refusal([] { parse_object("{", "job"); }).rfind("job: not valid JSON (", 0), 0u);
  const std::string deep = std::string(33, '[') + std::string(33, ']');
  EXPECT_EQ(refusal([&] { parse_object(deep, "job"); }), "job: body nests deeper than 32 levels");
  // Brackets inside strings are not nesting.
  const std::string brackets = R"({"a": ")" + std::string(100, '[') + R"("})";
  EXPECT_NO_THROW(parse_object(brackets, "job"));
}

TEST(JsonFields, CheckKeysNamesAMisspeltKeyAndTheAllowedOnes) {
  const json doc = json::parse(R"({"job": 1, "jobz": 2})");
  EXPECT_EQ(refusal([&] {
              check_keys(doc, "roles[0].", {"job", "node"});
            }),
            "roles[0].jobz: unknown key (expected one of job, node)");
  EXPECT_NO_THROW(check_keys(json::parse(R"({"job": 1})"), "", {"job", "node"}));
}

TEST(JsonFields, UnsignedFieldsAreIntegersInRange) {
  const json doc = json::parse(R"({"a": 7, "b": -1, "c": 1.5, "d": 70000, "e": "7"})");
  EXPECT_EQ(get_unsigned<std::uint16_t>(doc, "x.", "a"), 7u);
  EXPECT_EQ(refusal([&] { get_unsigned<std::uint16_t>(doc, "x.", "b"); }), "x.b: must be between 0 and 65535, got -1");
  EXPECT_EQ(refusal([&] { get_unsigned<std::uint16_t>(doc, "x.", "c"); }), "x.c: expected an integer, got 1.5");
  EXPECT_EQ(refusal([&] { get_unsigned<std::uint16_t>(doc, "x.", "d"); }),
            "x.d: must be between 0 and 65535, got 70000");
  EXPECT_EQ(refusal([&] { get_unsigned<std::uint16_t>(doc, "x.", "e"); }), "x.e: expected an integer, got \"7\"");
  EXPECT_EQ(refusal([&] { get_unsigned<std::uint16_t>(doc, "x.", "f"); }), "x.f: missing");
}

TEST(JsonFields, NumbersAreFiniteAndInRange) {
  const json doc = json::parse(R"({"p": 0.5, "q": 2, "r": true})");
  EXPECT_EQ(get_number(doc, "", "p", 0, 1), 0.5);
  EXPECT_EQ(refusal([&] { get_number(doc, "", "q", 0, 1); }), "q: must be between 0 and 1, got 2");
  EXPECT_EQ(refusal([&] { get_number(doc, "", "r", 0, 1); }), "r: expected a number, got true");
}

TEST(JsonFields, AddressesAreDottedQuadsInBoundedLists) {
  const json doc =
      json::parse(R"({"a": "10.0.0.1", "b": 167772161, "l": ["10.0.0.1", "10.0.0.2"], "m": ["10.0.0.1", 5]})");
  EXPECT_EQ(get_address(doc, "", "a"), 0x0A000001u);
  EXPECT_EQ(refusal([&] { get_address(doc, "", "b"); }), "b: expected an address like \"10.0.0.1\", got 167772161");
  EXPECT_EQ(get_address_list(doc, "", "l", 2), (std::vector<Address>{0x0A000001u, 0x0A000002u}));
  EXPECT_EQ(refusal([&] { get_address_list(doc, "", "l", 1); }), "l: at most 1 addresses, got 2");
  EXPECT_EQ(refusal([&] { get_address_list(doc, "", "m", 2); }), "m[1]: expected an address like \"10.0.0.1\", got 5");
}

TEST(JsonFields, CongestionRoundTripsAndEveryKeyIsRequired) {
  CongestionConfig c;
  c.enabled = false;
  c.initial_window = 3;
  c.max_window = 99;
  json doc = {{"congestion", congestion_json(c)}};
  const CongestionConfig back = congestion_from(doc);
  EXPECT_EQ(back.enabled, false);
  EXPECT_EQ(back.initial_window, 3u);
  EXPECT_EQ(back.max_window, 99u);
  EXPECT_EQ(back.min_window, c.min_window);
  EXPECT_EQ(back.initial_ssthresh, c.initial_ssthresh);
  EXPECT_EQ(back.mtu_bytes, c.mtu_bytes);
  doc["congestion"].erase("mtu_bytes");
  EXPECT_EQ(refusal([&] { congestion_from(doc); }), "congestion.mtu_bytes: missing");
  doc["congestion"]["enabled"] = 1;
  EXPECT_EQ(refusal([&] { congestion_from(doc); }), "congestion.enabled: expected true or false, got 1");
}

}  // namespace
}  // namespace atp::control
