// Runs the two gdb walkthroughs of docs/debugging.md (docs/gdb/*.gdb, quoted verbatim by the page)
// in batch mode against samples/debug_step and checks what gdb prints, so the page stays true:
// where each breakpoint stops, what the Tensor pretty-printer shows, and the values the softmax
// kernel's warp reduction goes through, each against the same numbers computed here on `cpu`.
// Registered only in builds with debug info (Debug, RelWithDebInfo) on machines with gdb.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "autograd/ops.h"
#include "tests/testing.h"

namespace glass {
namespace {

using namespace testing;

// gdb's output (stdout and stderr) for `gdb -batch -x docs/gdb/<script> --args debug_step <args>`,
// run from the source root as the page says. LeakSanitizer cannot run under ptrace, so in the
// sanitizer build it is switched off for the program gdb starts (the other checks stay on).
std::string run_gdb(const std::string& script, const std::string& args) {
  const std::string cmd = fmt::format(
      "cd '{}' && ASAN_OPTIONS=detect_leaks=0 '{}' -nx -batch -x docs/gdb/{} --args "
      "'{}/samples/debug_step' {} 2>&1",
      GLASS_SOURCE_DIR, GLASS_GDB, script, GLASS_BINARY_DIR, args);
  std::string out;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  EXPECT_NE(pipe, nullptr) << cmd;
  if (!pipe) return out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  ::pclose(pipe);
  return out;
}

// The softmax input debug_step builds, on cpu: LayerNorm (weight 1, bias 0) of x ~ N(0, 1) [6, 40]
// from Generator(1).
Tensor debug_step_x() {
  Generator gen(1);
  return randn({6, 40}, gen);
}

// The values the printer shows for the first tensor whose text starts with `head`: "{a, b, ...}".
std::vector<double> printed_values(const std::string& out, const std::string& head) {
  const size_t at = out.find(head);
  if (at == std::string::npos) return {};
  const size_t open = out.find('{', at), close = out.find('}', at);
  std::vector<double> v;
  std::stringstream s(out.substr(open + 1, close - open - 1));
  for (std::string item; std::getline(s, item, ',');)
    if (item.find("...") == std::string::npos) v.push_back(std::stod(item));
  return v;
}

// The number after the last "`name` = " in the output.
// The last value gdb showed for `name` as a number ("<optimized out>" lines are passed over).
double last_value(const std::string& out, const std::string& name) {
  for (size_t at = out.rfind(name + " = "); at != std::string::npos;
       at = at == 0 ? std::string::npos : out.rfind(name + " = ", at - 1)) {
    const std::string text = out.substr(at + name.size() + 3);
    if (!text.empty() && text[0] != '<') return std::stod(text);
  }
  return NAN;
}

// The part of docs/debugging.md up to its section 2 (part 1: the switches, the tape, the cpu
// walkthrough) or from there on (part 2: the emu walkthrough).
std::string page_part(int part) {
  const std::string page = file_bytes(std::string(GLASS_SOURCE_DIR) + "/docs/debugging.md");
  const size_t split = page.find("\n## 2. ");
  EXPECT_NE(split, std::string::npos) << "docs/debugging.md has no section 2";
  return part == 1 ? page.substr(0, split) : page.substr(split);
}

// What the page quotes of a run is what the run printed: every source position it names in
// `files` (e.g. `nn/layers.h:54`) and, with `listings`, every source line gdb listed ("169\t
// value = ..."), so that an edit which moves a line fails here, not in a reader's gdb. Only what
// does not depend on the optimisation level is compared: where a node was created, and the emu
// walkthrough, whose softmax.cu is compiled at -O0 in every build with debug info. Where `next`
// stops in the cpu kernel does depend on it (this suite's sanitizer build is -O1, the page's
// build-g -O2).
void expect_page_quotes(const std::string& part, const std::string& out,
                        const std::vector<std::string>& files, bool listings) {
  const std::regex position(R"(([\w/]+\.(?:h|cpp|cu)):(\d+))");
  for (std::sregex_iterator it(part.begin(), part.end(), position), end; it != end; ++it) {
    const std::string path = (*it)[1].str();  // relative, or under /path/to/glass/
    for (const std::string& file : files) {
      if (path != file && !path.ends_with("/" + file)) continue;
      const std::string quoted = file + ":" + (*it)[2].str();
      EXPECT_NE(out.find(quoted), std::string::npos)
          << "docs/debugging.md quotes " << quoted << "; gdb's run printed:\n"
          << out;
    }
  }
  const std::regex listed(R"((^|\n)(\d+\t[^\n]*))");
  for (std::sregex_iterator it(part.begin(), part.end(), listed), end; listings && it != end; ++it)
    EXPECT_NE(out.find((*it)[2].str()), std::string::npos)
        << "docs/debugging.md lists '" << (*it)[2].str() << "'; gdb's run printed:\n"
        << out;
}

TEST(GdbWalkthrough, ThePageQuotesEachScriptVerbatim) {
  const std::string page = file_bytes(std::string(GLASS_SOURCE_DIR) + "/docs/debugging.md");
  for (const char* script : {"layernorm_backward_cpu.gdb", "softmax_thread_emu.gdb"}) {
    const std::string text = file_bytes(std::string(GLASS_SOURCE_DIR) + "/docs/gdb/" + script);
    EXPECT_NE(page.find(text), std::string::npos) << script << " is not quoted verbatim";
  }
}

TEST(GdbWalkthrough, LayerNormBackwardOnCpu) {
  const std::string out = run_gdb("layernorm_backward_cpu.gdb", "--device cpu");
  // stopped before the launch, with its LaunchInfo, inside node #1's backward
  EXPECT_TRUE(
      contains_all(out, {"Breakpoint 1, glass_break_here (info=", "engine/debug.cpp",
                         "\"layernorm_backward\"", "op = ", "\"layernorm\"",
                         "phase = glass::Phase::backward", "$3 = \"nn/layers.h:", " in net.ln\""}))
      << out;
  // saved x, weight, mean, rstd and the incoming gradient, through the pretty-printer
  EXPECT_TRUE(
      contains_all(out, {"glass::Tensor f32[6, 40] on cpu requires_grad {",
                         "glass::Tensor f32[40] on cpu requires_grad name=net.ln.weight {1, 1,",
                         "$5 = glass::Tensor f32[6, 40] on cpu {"}))
      << out;
  const std::vector<double> x = values(debug_step_x());
  const std::vector<double> shown =
      printed_values(out, "glass::Tensor f32[6, 40] on cpu requires_grad");
  ASSERT_EQ(shown.size(), 8u) << out;
  EXPECT_TRUE(all_close(shown, std::vector<double>(x.begin(), x.begin() + 8), 1e-5));
  const std::vector<double> mean = printed_values(out, "glass::Tensor f32[6] on cpu");
  ASSERT_EQ(mean.size(), 6u) << out;
  EXPECT_TRUE(all_close(mean, values(glass::mean(debug_step_x(), {1})), 1e-4, 1e-6));
  // stepped through the gateway into the kernel's lambda (frame #0; gdb puts the address first
  // when it stopped mid-line, as it does at -O1), and the program ran to its end
  EXPECT_TRUE(std::regex_search(out, std::regex(R"(#0  (0x[0-9a-f]+ in )?operator\(\) \()")))
      << out;
  EXPECT_TRUE(
      contains_all(out, {"kernels/cpu/layernorm.cpp:", "[Inferior 1 (process", "exited normally]"}))
      << out;
  expect_page_quotes(page_part(1), out, {"nn/layers.h", "samples/debug_step.cpp"}, false);
}

TEST(GdbWalkthrough, SoftmaxThreadOnEmu) {
  const std::string out = run_gdb("softmax_thread_emu.gdb", "--device emu");
  EXPECT_TRUE(contains_all(out, {"Breakpoint 1, glass_emu_thread_hook",
                                 "softmax_forward_kernel<float> (x=", "$1 = {x = 3, y = 0, z = 0}",
                                 "$2 = {x = 5, y = 0, z = 0}", "block_reduce<float,",
                                 "1: lane_mask = 16", "1: lane_mask = 1\n", "exited normally]"}))
      << out;
  // thread 5 of block 3 starts with row 3's column 5 (its only column: 64 threads, 40 columns),
  // and after five butterfly shuffles holds the maximum of its warp's columns 0..31; the warps'
  // results in shared memory are the maxima of columns 0..31 and 32..39.
  const Tensor h = layer_norm(debug_step_x(), ones({40}), zeros({40}));
  const std::vector<double> row = values(slice(h, 0, 3, 4));
  const double warp0 = *std::max_element(row.begin(), row.begin() + 32);
  const double warp1 = *std::max_element(row.begin() + 32, row.end());
  EXPECT_NEAR(std::stod(out.substr(out.find("$3 = ") + 5)), row[5], 1e-5) << out;
  EXPECT_NEAR(last_value(out, "2: value"), warp0, 1e-5) << out;
  EXPECT_TRUE(all_close(printed_values(out, "$4 = "), {warp0, warp1}, 1e-5)) << out;
  expect_page_quotes(page_part(2), out, {"kernels/cuda/softmax.cu", "kernels/cuda/common.h"}, true);
}

}  // namespace
}  // namespace glass
