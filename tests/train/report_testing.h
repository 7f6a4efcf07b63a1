// The step explorer's data, as its JavaScript reads it: the JSON in the report's <script
// id="glass-data"> element (train/report.h). For tests that check what a report shows.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace glass::testing {

inline nlohmann::json report_json(const std::string& html) {
  const std::string open = "<script type=\"application/json\" id=\"glass-data\">";
  const size_t a = html.find(open), b = html.find("</script>", a);
  EXPECT_NE(a, std::string::npos);
  if (a == std::string::npos) return nlohmann::json::object();
  return nlohmann::json::parse(html.substr(a + open.size(), b - a - open.size()));
}

}  // namespace glass::testing
