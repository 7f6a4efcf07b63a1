// Device memory: poisoned fresh allocations, red zones and the out-of-bounds report.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "engine/emu/launch.h"
#include "engine/emu/memory.h"
#include "tests/emu/emu_test.h"
#include "tests/emu/kernels.h"

namespace glass::emu::testing {
namespace {

class MemoryTest : public EmuTest {
 protected:
  void check_memory() {
    configure([](Settings& s) { s.check_memory = true; });
  }
  static float* alloc_floats(size_t n) { return static_cast<float*>(device_malloc(n * 4)); }
};

TEST_F(MemoryTest, FreshAllocationIsPoisonedAndAligned) {
  for (bool checked : {false, true}) {
    configure([&](Settings& s) { s.check_memory = checked; });
    float* p = alloc_floats(100);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 256, 0u);
    for (int i = 0; i < 100; ++i) ASSERT_TRUE(std::isnan(p[i])) << "element " << i;
    device_free(p);
  }
}

TEST_F(MemoryTest, WritePastTheEndNamesKernelAndAllocation) {
  check_memory();
  float* p = alloc_floats(1000);
  launch_kernel("write_at", write_at, dim3(1), dim3(32), 0, p, 999L, 1.0f);  // last element: fine
  const std::string msg = emu_error_of(
      [&] { launch_kernel("write_at", write_at, dim3(1), dim3(32), 0, p, 1000L, 1.0f); });
  EXPECT_NE(msg.find("kernel 'write_at' wrote outside device memory"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(4000 bytes at"), std::string::npos) << msg;
  EXPECT_NE(msg.find("past its end at byte offsets [4000, 4003]"), std::string::npos) << msg;
  // The zone was restored: the next good launch is not blamed.
  EXPECT_NO_THROW(launch_kernel("write_at", write_at, dim3(1), dim3(32), 0, p, 0L, 1.0f));
  device_free(p);
}

TEST_F(MemoryTest, WriteBeforeTheStartIsReported) {
  check_memory();
  float* p = alloc_floats(10);
  const std::string msg =
      emu_error_of([&] { launch_kernel("write_at", write_at, dim3(1), dim3(1), 0, p, -2L, 1.0f); });
  EXPECT_NE(msg.find("kernel 'write_at'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("before its start at byte offsets [-8, -5]"), std::string::npos) << msg;
  device_free(p);
}

TEST_F(MemoryTest, FreeReportsDamageFromHostCode) {
  check_memory();
  auto* p = static_cast<unsigned char*>(device_malloc(10));
  p[12] = 0;  // host code, not a kernel: found when the allocation is freed
  const std::string msg = emu_error_of([&] { device_free(p); });
  EXPECT_NE(msg.find("past its end at byte offsets [12, 12]"), std::string::npos) << msg;
}

TEST_F(MemoryTest, FreeOfForeignPointerIsAnError) {
  int x = 0;
  EXPECT_NE(emu_error_of([&] { device_free(&x); }).find("not a pointer returned by device_malloc"),
            std::string::npos);
  EXPECT_NO_THROW(device_free(nullptr));
}

}  // namespace
}  // namespace glass::emu::testing
