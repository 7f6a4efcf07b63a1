// docs/tour.md quotes one step of the default `make train` model: how many launches each phase
// makes, how many nodes the tape has, and the optimizer's kernels in order. Those numbers move
// whenever a kernel is fused or split (they went stale three times before this test), so this runs
// the tour's own command on cpu and checks each quoted number against what train_gpt prints and
// traces.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <vector>

#include "cli_testing.h"

namespace {

using glass::testing::file_bytes;
using glass::testing::run_sample;
using glass::testing::scratch_path;

// The integers of the first match of `pattern` in `text` (each capture group one number).
std::vector<int> numbers_of(const std::string& text, const std::string& pattern) {
  std::smatch m;
  if (!std::regex_search(text, m, std::regex(pattern))) return {};
  std::vector<int> v;
  for (size_t i = 1; i < m.size(); ++i) v.push_back(std::stoi(m[i].str()));
  return v;
}

// The recorded step's launches in trace order: {kernel name, phase}.
std::vector<std::pair<std::string, std::string>> traced_launches(const std::string& path) {
  std::ifstream in(path);
  const nlohmann::json trace = nlohmann::json::parse(in);
  std::vector<std::pair<double, std::pair<std::string, std::string>>> timed;
  for (const auto& e : trace.at("traceEvents")) {
    // launches only: not the host work's slices (cat "host"), which have a phase but no kernel
    if (e.value("ph", "") != "X" || e.value("cat", "") == "host" || !e.contains("args") ||
        !e["args"].contains("phase"))
      continue;
    const double seq =
        e["args"].contains("seq") ? e["args"]["seq"].get<double>() : e["ts"].get<double>();
    timed.push_back(
        {seq, {e["args"]["kernel"].get<std::string>(), e["args"]["phase"].get<std::string>()}});
  }
  std::sort(timed.begin(), timed.end(), [](auto& a, auto& b) { return a.first < b.first; });
  std::vector<std::pair<std::string, std::string>> launches;
  for (auto& t : timed) launches.push_back(t.second);
  return launches;
}

// "a  b × 52  c": consecutive launches of one kernel folded, as the tour writes them.
std::string folded(const std::vector<std::string>& kernels) {
  std::vector<std::pair<std::string, int>> runs;
  for (const std::string& k : kernels) {
    if (!runs.empty() && runs.back().first == k)
      ++runs.back().second;
    else
      runs.push_back({k, 1});
  }
  std::string s;
  for (const auto& [k, n] : runs)
    s += (s.empty() ? "" : "  ") + k + (n > 1 ? " × " + std::to_string(n) : "");
  return s;
}

TEST(TourNumbers, TheTourQuotesTheDefaultModelsStep) {
  const std::string tour = file_bytes(std::string(GLASS_SOURCE_DIR) + "/docs/tour.md");
  const std::string trace = scratch_path("tour_trace.json");
  // the tour's command, on cpu, without the report (two steps; step 2 is recorded) and with one
  // batch for the final evaluation, which the quoted numbers do not depend on
  const auto r = run_sample("train_gpt", "--data " + glass::testing::kTinyShakespeare +
                                             " --device cpu --steps 2 --eval-every 0 "
                                             "--eval-batches 1 --sample 0 --print-tape --trace " +
                                             trace + " --profile-steps 2:2");
  ASSERT_EQ(r.status, 0) << r.out;

  // "The tape of one step has N nodes" against "tape: N nodes reachable from ..."
  const std::vector<int> quoted_nodes = numbers_of(tour, R"(The tape of one step has (\d+) nodes)");
  const std::vector<int> printed_nodes = numbers_of(r.out, R"(tape: (\d+) nodes reachable)");
  ASSERT_EQ(quoted_nodes.size(), 1u) << "docs/tour.md no longer quotes the tape's node count";
  ASSERT_EQ(printed_nodes.size(), 1u) << r.out;
  EXPECT_EQ(quoted_nodes[0], printed_nodes[0]) << "docs/tour.md section 3";

  // "saw **N launches**: F in forward, B in backward, O in the optimizer and X other"
  const std::vector<int> quoted = numbers_of(
      tour, R"(saw \*\*(\d+) launches\*\*: (\d+) in forward, (\d+) in\s+backward, (\d+) in the )"
            R"(optimizer and (\d+) other)");
  ASSERT_EQ(quoted.size(), 5u) << "docs/tour.md no longer quotes the launches per phase";
  const auto launches = traced_launches(trace);
  std::map<std::string, int> per_phase;
  std::vector<std::string> optimizer;
  for (const auto& [kernel, phase] : launches) {
    ++per_phase[phase];
    if (phase == "optimizer") optimizer.push_back(kernel);
  }
  const int other = static_cast<int>(launches.size()) - per_phase["forward"] -
                    per_phase["backward"] - per_phase["optimizer"];
  EXPECT_EQ(quoted[0], static_cast<int>(launches.size())) << "docs/tour.md: launches in the step";
  EXPECT_EQ(quoted[1], per_phase["forward"]) << "docs/tour.md: forward launches";
  EXPECT_EQ(quoted[2], per_phase["backward"]) << "docs/tour.md: backward launches";
  EXPECT_EQ(quoted[3], per_phase["optimizer"]) << "docs/tour.md: optimizer launches";
  EXPECT_EQ(quoted[4], other) << "docs/tour.md: other launches";
  EXPECT_EQ(numbers_of(tour, R"(Backward makes (\d+) of the step's (\d+) launches)"),
            (std::vector<int>{per_phase["backward"], static_cast<int>(launches.size())}));

  // section 6's line of optimizer kernels, as the trace has them
  const std::string line = folded(optimizer);
  EXPECT_NE(tour.find("```\n" + line + "\n```"), std::string::npos)
      << "docs/tour.md section 6 should show the optimizer's launches as: " << line;
}

}  // namespace
