// Every program's --help, as a new user first reads it: each flag's default, and the page of the
// documentation that explains the program (a page that exists).
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <string>

#include "cli_testing.h"

namespace {

struct HelpCase {
  const char* name;
  const char* default_shown;  // a flag's default as --help prints it
  const char* subcommand = "";
};

TEST(HelpCli, EveryProgramShowsDefaultsAndItsDocumentation) {
  for (const HelpCase& p :
       {HelpCase{"train_gpt", "--steps INT=600"}, HelpCase{"profile_op", "--device TEXT=cpu"},
        HelpCase{"debug_step", "--device TEXT=cpu"},
        HelpCase{"prepare_data", "--val-fraction FLOAT=0.1"},
        HelpCase{"generate", "--temperature FLOAT=1"},
        HelpCase{"roofline", "--device TEXT=h200", "gemm"}}) {
    const auto r = glass::testing::run_sample(p.name, std::string(p.subcommand) + " --help");
    ASSERT_EQ(r.status, 0) << p.name << ": " << r.out;
    EXPECT_NE(r.out.find(p.default_shown), std::string::npos)
        << p.name << " --help does not show '" << p.default_shown << "':\n"
        << r.out;
    std::smatch m;
    const auto top = glass::testing::run_sample(p.name, "--help");  // subcommands: the parent's
    ASSERT_TRUE(std::regex_search(top.out, m, std::regex(R"(Documentation: ([^ ]+\.md))")))
        << p.name << " --help names no documentation:\n"
        << top.out;
    EXPECT_TRUE(std::filesystem::exists(std::string(GLASS_SOURCE_DIR) + "/" + m[1].str()))
        << p.name << " points to " << m[1] << ", which does not exist";
  }
}

}  // namespace
