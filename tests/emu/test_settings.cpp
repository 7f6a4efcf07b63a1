// Settings from the environment, the debugger hook, and events.
#include <cstdlib>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "engine/emu/debug_hook.h"
#include "engine/emu/event.h"
#include "engine/emu/launch.h"
#include "tests/emu/emu_test.h"
#include "tests/emu/kernels.h"

namespace glass::emu::testing {
namespace {

// Runs each test with none of the GLASS_EMU_* variables set, and puts them back afterwards.
class EnvTest : public EmuTest {
 protected:
  static constexpr const char* kVariables[] = {"GLASS_EMU_THREADS", "GLASS_EMU_STACK_KB",
                                               "GLASS_EMU_SHUFFLE_SEED", "GLASS_EMU_CHECK",
                                               "GLASS_EMU_BREAK"};
  void SetUp() override {
    EmuTest::SetUp();
    for (const char* v : kVariables) {
      if (const char* value = std::getenv(v)) saved_.emplace_back(v, value);
      unsetenv(v);
    }
  }
  void TearDown() override {
    for (const char* v : kVariables) unsetenv(v);
    for (const auto& [name, value] : saved_) setenv(name.c_str(), value.c_str(), 1);
    EmuTest::TearDown();
  }

 private:
  std::vector<std::pair<std::string, std::string>> saved_;
};

TEST_F(EnvTest, ReadsEveryVariable) {
  setenv("GLASS_EMU_THREADS", "3", 1);
  setenv("GLASS_EMU_STACK_KB", "512", 1);
  setenv("GLASS_EMU_SHUFFLE_SEED", "42", 1);
  setenv("GLASS_EMU_CHECK", "1", 1);
  setenv("GLASS_EMU_BREAK", "5,1/37,2,1@softmax", 1);
  const Settings s = Settings::from_environment();
  EXPECT_EQ(s.worker_threads, 3u);
  EXPECT_EQ(s.fiber_stack_bytes, 512u * 1024);
  EXPECT_EQ(s.shuffle_seed, 42u);
  EXPECT_TRUE(s.check_memory);
  ASSERT_TRUE(s.break_at.has_value());
  EXPECT_EQ(s.break_at->kernel, "softmax");
  EXPECT_EQ(s.break_at->block.x, 5u);
  EXPECT_EQ(s.break_at->block.y, 1u);
  EXPECT_EQ(s.break_at->block.z, 0u);
  EXPECT_EQ(s.break_at->thread.x, 37u);
  EXPECT_EQ(s.break_at->thread.z, 1u);
}

TEST_F(EnvTest, DefaultsWithoutVariables) {
  const Settings s = Settings::from_environment();
  EXPECT_EQ(s.worker_threads, std::max(1u, std::thread::hardware_concurrency()));
  EXPECT_FALSE(s.shuffle_seed.has_value());
  EXPECT_FALSE(s.check_memory);
  EXPECT_FALSE(s.break_at.has_value());
}

TEST_F(EnvTest, BadValuesNameTheVariable) {
  setenv("GLASS_EMU_THREADS", "many", 1);
  EXPECT_NE(emu_error_of([] { Settings::from_environment(); }).find("GLASS_EMU_THREADS='many'"),
            std::string::npos);
  unsetenv("GLASS_EMU_THREADS");
  setenv("GLASS_EMU_BREAK", "5", 1);
  EXPECT_NE(emu_error_of([] { Settings::from_environment(); }).find("GLASS_EMU_BREAK"),
            std::string::npos);
}

using HookTest = EmuTest;

TEST_F(HookTest, CalledOnceForTheChosenThreadOfTheChosenKernel) {
  std::vector<float> x(1024, 1.0f), y(1024, 0.0f);
  auto run = [&](const char* name) {
    const uint64_t before = thread_hook_calls();
    launch_kernel(name, scale_add, dim3(4), dim3(256), 0, x.data(), y.data(), 1.0f, 1024);
    return thread_hook_calls() - before;
  };
  configure([](Settings& s) { s.break_at = BreakTarget{{2, 0, 0}, {37, 0, 0}, "scale_add"}; });
  EXPECT_EQ(run("scale_add"), 1u);
  EXPECT_EQ(run("other_kernel"), 0u);
  configure([](Settings& s) { s.break_at = BreakTarget{{2, 0, 0}, {300, 0, 0}, ""}; });
  EXPECT_EQ(run("scale_add"), 0u);  // no such thread
}

TEST(EventTest, ElapsedTimeBetweenRecordedEvents) {
  Event start, end;
  EXPECT_THROW(Event::elapsed_ms(start, end), EmuError);
  start.record();
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  end.record();
  EXPECT_GE(Event::elapsed_ms(start, end), 2.0f);
  EXPECT_LE(Event::elapsed_ms(end, start), 0.0f);
}

}  // namespace
}  // namespace glass::emu::testing
