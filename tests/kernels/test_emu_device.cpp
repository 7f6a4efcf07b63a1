// The `emu` device itself: naming, memory (allocator stats, host transfers), the kernel table's
// entries that autograd does not reach (fills, casts, norms, optimizer steps) against cpu, and
// the errors that bad input gets on emu.
#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "engine/allocator.h"
#include "engine/emu/error.h"
#include "engine/emu/memory.h"
#include "engine/emu/settings.h"
#include "engine/launch.h"
#include "kernels/backend.h"
#include "tests/testing.h"

namespace glass {
namespace {

using testing::all_close;

const kernels::Backend& emu = kernels::backend(kEmu);
const kernels::Backend& cpu = kernels::backend(kCPU);

// A copy of a cpu tensor on emu.
Tensor on_emu(const Tensor& t) {
  std::vector<unsigned char> host(t.nbytes());
  t.copy_to_host(host.data());
  return Tensor::from_host(host.data(), t.shape(), t.dtype(), kEmu);
}

// Restores the emulator's settings at the end of a test that changes them.
struct SettingsRestore {
  const emu::Settings saved = emu::settings();
  ~SettingsRestore() { emu::set_settings(saved); }
};

// Counts the launches made on emu.
struct EmuLaunchCounter : LaunchObserver {
  int launches = 0;
  EmuLaunchCounter() { subscribe(this); }
  ~EmuLaunchCounter() override { unsubscribe(this); }
  void on_launch_begin(const LaunchInfo& info) override { launches += info.device == kEmu; }
};

// Raw bytes of a tensor, for bit-exact comparisons.
std::vector<unsigned char> bytes_of(const Tensor& t) {
  std::vector<unsigned char> b(t.nbytes());
  t.copy_to_host(b.data());
  return b;
}

using testing::error_of;

TEST(EmuDevice, ParsesAndNamesItself) {
  EXPECT_EQ(Device::parse("emu"), kEmu);
  EXPECT_EQ(kEmu.str(), "emu");
  EXPECT_EQ(std::string(emu.name), "emu");
#if !defined(GLASS_HAS_CUDA)  // with CUDA, "cuda" parses (tests/engine/test_devices.cpp)
  const std::string cuda = error_of([] { Device::parse("cuda"); });
  EXPECT_NE(cuda.find("'cuda' is not available"), std::string::npos) << cuda;
  EXPECT_EQ(cuda.find('\n'), std::string::npos) << "one line: " << cuda;
#endif
  EXPECT_NE(error_of([] { Device::parse("tpu"); }).find("unknown device 'tpu'"), std::string::npos);
}

TEST(EmuDevice, MemoryRoundTripsAndIsCountedByItsOwnAllocator) {
  Allocator& a = Allocator::for_device(kEmu);
  EXPECT_NE(&a, &Allocator::for_device(kCPU));
  const AllocatorStats before = a.stats();
  std::vector<float> values(1037);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.5f * static_cast<float>(i) - 3;
  {
    Tensor t = Tensor::from_host(values.data(), {1037}, DType::f32, kEmu);
    EXPECT_EQ(t.device(), kEmu);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % 256, 0u);  // like cudaMalloc
    std::vector<float> back(values.size());
    t.copy_to_host(back.data());
    EXPECT_EQ(back, values);
    EXPECT_EQ(a.stats().allocated_bytes - before.allocated_bytes,
              static_cast<int64_t>(Allocator::size_class(1037 * 4)));
  }
  EXPECT_EQ(a.stats().allocated_bytes, before.allocated_bytes);
  // The freed block is cached: the same request again is a cache hit, not a device malloc.
  const AllocatorStats middle = a.stats();
  Tensor again = Tensor::empty({1037}, DType::f32, kEmu);
  EXPECT_EQ(a.stats().cache_hits, middle.cache_hits + 1);
  EXPECT_EQ(a.stats().device_malloc_count, middle.device_malloc_count);
}

TEST(EmuKernels, FillsAndCastsMatchCpuBitForBit) {
  EmuLaunchCounter counter;
  for (DType t : {DType::f32, DType::f64, DType::i32, DType::bf16}) {
    Tensor c = Tensor::empty({37, 33}, t), e = Tensor::empty({37, 33}, t, kEmu);
    cpu.fill(c, -2.7);
    emu.fill(e, -2.7);
    EXPECT_EQ(bytes_of(e), bytes_of(c)) << "fill " << dtype_name(t);
    cpu.fill_uniform(c, -3, 5, 11, 4);
    emu.fill_uniform(e, -3, 5, 11, 4);
    EXPECT_EQ(bytes_of(e), bytes_of(c)) << "fill_uniform " << dtype_name(t);
    if (t == DType::i32) continue;
    cpu.fill_normal(c, 1, 2, 11, 4);
    emu.fill_normal(e, 1, 2, 11, 4);
    EXPECT_TRUE(all_close(e, c, 1e-6)) << "fill_normal " << dtype_name(t);
  }
  // Every pair of dtypes, from values with fractions, negatives and bf16 rounding ties.
  Generator gen(5);
  const Tensor src = randn({1001}, gen, 0, 40, DType::f64);
  for (DType from : {DType::f32, DType::f64, DType::i32, DType::bf16})
    for (DType to : {DType::f32, DType::f64, DType::i32, DType::bf16}) {
      Tensor s = Tensor::empty({1001}, from);
      cpu.cast(src, s);
      Tensor c = Tensor::empty({1001}, to), e = Tensor::empty({1001}, to, kEmu);
      cpu.cast(s, c);
      emu.cast(on_emu(s), e);
      EXPECT_EQ(bytes_of(e), bytes_of(c)) << dtype_name(from) << " -> " << dtype_name(to);
    }
  EXPECT_GT(counter.launches, 0);
}

TEST(EmuKernels, StridedCopyOfEveryElementSize) {
  Generator gen(3);
  for (DType t : {DType::f32, DType::f64, DType::bf16}) {
    const Tensor src = cast(randn({3, 5, 7, 2}, gen), t);
    // A permuted view into a permuted view: nothing merges, every stride is odd.
    const Tensor c_src = src.as_strided({2, 7, 3, 5}, {1, 2, 70, 14}, 0);
    const Tensor e_src = on_emu(src).as_strided({2, 7, 3, 5}, {1, 2, 70, 14}, 0);
    Tensor c = Tensor::empty({5, 3, 7, 2}, t), e = Tensor::empty({5, 3, 7, 2}, t, kEmu);
    cpu.copy(c_src, c.as_strided({2, 7, 3, 5}, {1, 2, 14, 42}, 0));
    emu.copy(e_src, e.as_strided({2, 7, 3, 5}, {1, 2, 14, 42}, 0));
    EXPECT_EQ(bytes_of(e), bytes_of(c)) << dtype_name(t);
  }
}

TEST(EmuKernels, SumSquaresOfManyTensorsMatchesCpuAndIsDeterministic) {
  // 40 tensors (two multi-tensor launches of f32, then one of f64), sizes that leave partial
  // blocks and warps, one empty.
  Generator gen(9);
  std::vector<Tensor> xs;
  for (int64_t k = 0; k < 37; ++k) xs.push_back(randn({k == 5 ? 0 : 1 + 97 * k * k}, gen));
  for (int64_t n : {3, 2049, 33 * 1000 + 1}) xs.push_back(randn({n}, gen, 0, 1, DType::f64));
  std::vector<Tensor> xe;
  for (const Tensor& x : xs) xe.push_back(on_emu(x));
  Tensor c = Tensor::empty({1}, DType::f64), e = Tensor::empty({1}, DType::f64, kEmu);
  cpu.sum_squares(xs, c);
  emu.sum_squares(xe, e);
  EXPECT_TRUE(all_close(e, c, 1e-12));
  const std::vector<unsigned char> first = bytes_of(e);
  emu.sum_squares(xe, e);
  EXPECT_EQ(bytes_of(e), first);
  // One tensor, f32 out.
  Tensor c1 = Tensor::empty({1}), e1 = Tensor::empty({1}, DType::f32, kEmu);
  cpu.sum_squares(std::span(xs.data() + 1, 1), c1);
  emu.sum_squares(std::span(xe.data() + 1, 1), e1);
  EXPECT_TRUE(all_close(e1, c1, 1e-6));
}

// The reductions' barriers are all there and their order of additions is fixed: results stay
// bit-identical when the emulator shuffles the threads of each block and changes worker counts,
// and nothing writes outside its tensors (red zones on).
TEST(EmuKernels, ReductionsAreBitIdenticalUnderShuffledThreadOrder) {
  const SettingsRestore restore;
  const emu::Settings& saved = restore.saved;
  Generator gen(17);
  const Tensor x = on_emu(randn({5, 300, 7}, gen));
  auto run = [&](std::optional<uint64_t> seed, unsigned workers) {
    emu::Settings s = saved;
    s.shuffle_seed = seed;
    s.worker_threads = workers;
    s.check_memory = true;
    emu::set_settings(s);
    std::vector<unsigned char> all;
    for (int dim : {0, 1, 2}) {
      Shape shape = x.shape();
      shape.erase(shape.begin() + dim);
      Tensor out = Tensor::empty(shape, DType::f32, kEmu);
      emu.sum_dim(x, out, dim);
      const std::vector<unsigned char> b = bytes_of(out);
      all.insert(all.end(), b.begin(), b.end());
    }
    Tensor sq = Tensor::empty({1}, DType::f32, kEmu);
    emu.sum_squares(std::span(&x, 1), sq);
    const std::vector<unsigned char> b = bytes_of(sq);
    all.insert(all.end(), b.begin(), b.end());
    return all;
  };
  const std::vector<unsigned char> natural = run(std::nullopt, 1);
  EXPECT_EQ(run(3, 2), natural);
  EXPECT_EQ(run(11, 1), natural);
}

// Bias gradients: a few columns over many rows. sum_dim splits the rows so that the grid covers
// an H200's 132 SMs (two stages, fixed order), and still matches cpu.
TEST(EmuKernels, SumDimOverManyRowsFillsTheGpuAndMatchesCpu) {
  struct Grids : LaunchObserver {
    std::vector<LaunchInfo> launches;
    void on_launch_begin(const LaunchInfo& i) override { launches.push_back(i); }
  };
  Generator gen(5);
  for (const Shape& shape : {Shape{4096, 768}, Shape{2000, 33}}) {
    const Tensor x = randn(shape, gen);
    Tensor c = Tensor::empty({shape[1]}), e = Tensor::empty({shape[1]}, DType::f32, kEmu);
    cpu.sum_dim(x, c, 0);
    Grids grids;
    subscribe(&grids);
    emu.sum_dim(on_emu(x), e, 0);
    unsubscribe(&grids);
    EXPECT_TRUE(all_close(e, c, 1e-6)) << shape_str(shape);
    ASSERT_EQ(grids.launches.size(), 2u);  // the splits, then their sum
    // [4096, 768]: 24 column chunks x 11 row splits = 264 blocks, two per SM. (Narrow [2000, 33]
    // is held back by the 64 rows each split must have: 2 x 32 blocks.)
    const LaunchInfo& first = grids.launches[0];
    EXPECT_GE(first.grid.x * first.grid.y, shape[1] == 768 ? 264u : 64u) << shape_str(shape);
    const std::vector<unsigned char> bits = bytes_of(e);
    emu.sum_dim(on_emu(x), e, 0);
    EXPECT_EQ(bytes_of(e), bits);
  }
}

// With red zones on, a tensor's zone starts at its own last byte, not at the end of a size class:
// one float past 37 is reported, naming the kernel that the check runs after.
TEST(EmuDevice, RedZonesStartAtTheTensorsLastByte) {
  const SettingsRestore restore;
  emu::Settings s = restore.saved;
  s.check_memory = true;
  emu::set_settings(s);
  Allocator& alloc = Allocator::for_device(kEmu);
  const int64_t before = alloc.allocated_bytes();
  Tensor t = Tensor::empty({37}, DType::f32, kEmu);
  EXPECT_EQ(alloc.allocated_bytes() - before, 37 * 4);  // not rounded to 512
  float* p = static_cast<float*>(t.raw_data());
  p[36] = 1.0f;  // the last element: fine
  EXPECT_NO_THROW(emu::check_red_zones("planted_kernel"));
  p[37] = 1.0f;  // one past the end, inside what a size class would have rounded up to
  const std::string msg =
      testing::error_of<emu::EmuError>([] { emu::check_red_zones("planted_kernel"); });
  EXPECT_TRUE(
      testing::contains_all(msg, {"kernel 'planted_kernel' wrote outside device memory",
                                  "(148 bytes at", "past its end at byte offsets [148, 151]"}))
      << msg;
  t = Tensor();
  EXPECT_EQ(alloc.allocated_bytes(), before);  // freed at once, not cached
}

TEST(EmuKernels, OptimizerStepsMatchCpu) {
  // AdamW over 35 parameters of odd sizes (two multi-tensor launches on emu), decay on every
  // other one; then SGD with momentum on the first.
  Generator gen(21);
  std::vector<kernels::AdamWParam> on_cpu, on_device;
  for (int64_t k = 0; k < 35; ++k) {
    const Shape shape{1 + 3 * k, 33};
    const Tensor p = randn(shape, gen), g = randn(shape, gen), m = randn(shape, gen, 0, 0.1);
    const Tensor v = rand(shape, gen, 0, 0.01);
    const double wd = k % 2 == 0 ? 0.1 : 0.0;
    on_cpu.push_back({contiguous(p * 1.0), g, contiguous(m * 1.0), contiguous(v * 1.0), wd});
    on_device.push_back({on_emu(p), on_emu(g), on_emu(m), on_emu(v), wd});
  }
  for (int64_t step = 1; step <= 3; ++step) {
    cpu.adamw_step(on_cpu, {1e-2, 0.9, 0.95, 1e-8, step});
    emu.adamw_step(on_device, {1e-2, 0.9, 0.95, 1e-8, step});
  }
  for (size_t k = 0; k < on_cpu.size(); ++k) {
    EXPECT_TRUE(all_close(on_device[k].param, on_cpu[k].param, 1e-5)) << k;
    EXPECT_TRUE(all_close(on_device[k].m, on_cpu[k].m, 1e-5)) << k;
    EXPECT_TRUE(all_close(on_device[k].v, on_cpu[k].v, 1e-5)) << k;
  }
  const Tensor &cp = on_cpu[3].param, &ep = on_device[3].param, &g = on_cpu[3].grad;
  const Tensor eg = on_device[3].grad;
  Tensor cbuf = Tensor::empty(cp.shape()), ebuf = Tensor::empty(cp.shape(), DType::f32, kEmu);
  for (bool first : {true, false}) {
    cpu.sgd_step(cp, g, cbuf, 0.1, 0.9, 0.01, first);
    emu.sgd_step(ep, eg, ebuf, 0.1, 0.9, 0.01, first);
  }
  EXPECT_TRUE(all_close(ep, cp, 1e-5));
  EXPECT_TRUE(all_close(ebuf, cbuf, 1e-5));
}

TEST(EmuErrors, BadInputNamesTheKernelAndTensors) {
  const Tensor a = Tensor::empty({7, 33}, DType::f32, kEmu);
  const Tensor ids = Tensor::empty({7, 33}, DType::i32, kEmu);
  const std::string dtype = error_of([&] { emu.gelu_forward(ids, ids); });
  EXPECT_NE(dtype.find("gelu_forward"), std::string::npos) << dtype;
  EXPECT_NE(dtype.find("i32[7, 33] on emu"), std::string::npos) << dtype;
  const std::string shape = error_of([&] {
    emu.binary(kernels::BinaryOp::add, a, Tensor::empty({7, 32}, DType::f32, kEmu), a);
  });
  EXPECT_NE(shape.find("binary add"), std::string::npos) << shape;
  EXPECT_NE(shape.find("f32[7, 32] on emu"), std::string::npos) << shape;
  const std::string devices = error_of([&] { add(a, Tensor::empty({7, 33})); });
  EXPECT_NE(devices.find("on cpu"), std::string::npos) << devices;
  EXPECT_NE(devices.find("on emu"), std::string::npos) << devices;
  // Nine dimensions that no merge can reduce (a fully transposed 2x2x...): too many for copy.
  const Shape nine(9, 2);
  const Tensor big = Tensor::empty({512}, DType::f32, kEmu);
  const Tensor view = big.as_strided(nine, {1, 2, 4, 8, 16, 32, 64, 128, 256}, 0);
  const std::string rank = error_of([&] { emu.copy(view, Tensor::empty(nine, DType::f32, kEmu)); });
  EXPECT_NE(rank.find("copy"), std::string::npos) << rank;
  EXPECT_NE(rank.find("more than 8 dimensions"), std::string::npos) << rank;
}

}  // namespace
}  // namespace glass
