// Shared by the metrics tests: what a Prometheus scraper requires of a /metrics text (the text
// exposition format 0.0.4, and Prometheus' naming rules for counters), checked line by line.
#pragma once

#include <cstdlib>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace atp::test {

// One sentence per rule `text` breaks, with the line; empty when a scraper takes it all:
// - every line is "# HELP name text", "# TYPE name counter|gauge" or "name{labels} value";
// - names are [a-zA-Z_:][a-zA-Z0-9_:]*, label names [a-zA-Z_][a-zA-Z0-9_]* and not __-prefixed,
//   label values quoted with only \\, \" and \n escaped, values numbers;
// - a family has one HELP and one TYPE, before its samples, which are contiguous;
// - a counter's name ends in _total; no series (name and labels) appears twice.
inline std::vector<std::string> exposition_errors(const std::string& text) {
  static const std::regex help(R"(# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) .+)");
  static const std::regex type(R"(# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge))");
  static const std::regex sample(R"(([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+))");
  static const std::regex label(R"re(^([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$))re");
  std::vector<std::string> errors;
  std::map<std::string, std::string> types;
  std::set<std::string> helped, closed, series;
  std::string current;  // the family whose samples are being read
  std::istringstream lines(text);
  std::string line;
  for (int n = 1; std::getline(lines, line); ++n) {
    const std::string at = "line " + std::to_string(n) + " '" + line + "': ";
    std::smatch m;
    if (std::regex_match(line, m, help)) {
      if (!helped.insert(m[1]).second) errors.push_back(at + "a second HELP");
    } else if (std::regex_match(line, m, type)) {
      if (!types.emplace(m[1], m[2]).second) errors.push_back(at + "a second TYPE");
      if (m[2] == "counter" && !m[1].str().ends_with("_total")) errors.push_back(at + "a counter not named *_total");
      if (!helped.contains(m[1])) errors.push_back(at + "TYPE without a HELP before it");
    } else if (std::regex_match(line, m, sample)) {
      const std::string name = m[1];
      if (!types.contains(name)) errors.push_back(at + "a sample before its family's TYPE");
      if (name != current) {
        if (!current.empty()) closed.insert(current);
        if (closed.contains(name)) errors.push_back(at + "samples of " + name + " not contiguous");
        current = name;
      }
      std::string rest = m[3];
      std::vector<std::string> pairs;
      while (!rest.empty()) {
        std::smatch l;
        if (!std::regex_search(rest, l, label) || l[1].str().starts_with("__")) {
          errors.push_back(at + "a bad label at '" + rest + "'");
          break;
        }
        pairs.push_back(l[1].str() + "=" + l[2].str());
        rest = l.suffix();
      }
      std::set<std::string> sorted(pairs.begin(), pairs.end());
      std::string key = name;
      for (const std::string& p : sorted) key += "," + p;
      if (!series.insert(key).second) errors.push_back(at + "a series listed twice");
      char* end = nullptr;
      const std::string value = m[4];
      std::strtod(value.c_str(), &end);
      if (end != value.c_str() + value.size()) errors.push_back(at + "the value is no number");
    } else {
      errors.push_back(at + "neither HELP, TYPE nor a sample");
    }
  }
  return errors;
}

}  // namespace atp::test
