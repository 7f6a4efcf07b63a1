// The `meta` device: tensors with shapes and no data. Its allocator counts what cuda's would, its
// launches reach the observers without running, a value read is one clear error, and a training
// step planned on it records the launches and the peak memory of the same step run by the
// Trainer on emu, whose kernels do run (the independent check: nothing on meta executes a kernel,
// and a meta address faults if dereferenced).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "engine/allocator.h"
#include "engine/debug.h"
#include "engine/device_flags.h"
#include "engine/emu/settings.h"
#include "engine/launch.h"
#include "engine/roofline.h"
#include "kernels/backend.h"
#include "tests/train/train_testing.h"
#include "train/generate.h"
#include "train/step_plan.h"
#include "train/step_roofline.h"

namespace glass {
namespace {

using testing::error_of;

TEST(MetaDevice, ParsesNamesAndHasNoData) {
  EXPECT_EQ(Device::parse("meta"), kMeta);
  EXPECT_EQ(kMeta.str(), "meta");
  EXPECT_FALSE(has_data(kMeta));
  EXPECT_TRUE(has_data(kEmu));
  EXPECT_TRUE(runs_cuda_kernels(kMeta));
  EXPECT_FALSE(runs_cuda_kernels(kCPU));
  EXPECT_NE(device_name(kMeta).find("shapes only"), std::string::npos);
}

// Size classes, cache hits and statistics as every allocator; addresses aligned like cudaMalloc's
// and distinct while live.
TEST(MetaDevice, AllocatorCountsWithoutMemory) {
  Allocator& a = Allocator::for_device(kMeta);
  a.empty_cache();
  const AllocatorStats before = a.stats();
  {
    // 4 GiB: counted, nothing obtained from the host.
    const Tensor big = Tensor::empty({int64_t{1} << 30}, DType::f32, kMeta);
    const Tensor small = Tensor::empty({1000}, DType::f32, kMeta);
    EXPECT_NE(big.raw_data(), small.raw_data());
    for (const Tensor* t : {&big, &small})
      EXPECT_EQ(reinterpret_cast<uintptr_t>(t->raw_data()) % 256, 0u);
    const AllocatorStats s = a.stats();
    EXPECT_EQ(
        s.allocated_bytes - before.allocated_bytes,
        static_cast<int64_t>(Allocator::size_class(size_t{4} << 30) + Allocator::size_class(4000)));
    EXPECT_EQ(s.peak_allocated_bytes - before.allocated_bytes,
              s.allocated_bytes - before.allocated_bytes);
  }
  EXPECT_EQ(a.stats().allocated_bytes, before.allocated_bytes);
  // The freed block of 1000 floats serves the next request of its class from the cache.
  const int64_t hits = a.stats().cache_hits;
  const Tensor again = Tensor::empty({1000}, DType::f32, kMeta);
  EXPECT_EQ(a.stats().cache_hits, hits + 1);
}

// Every read of values names what was read and the tensor; writes from the host are dropped.
TEST(MetaDevice, ValueReadsAreOneClearError) {
  const float v = 1.5f;
  const Tensor t = Tensor::from_host(&v, {1}, DType::f32, kMeta);  // dropped: no data to hold
  const std::string item_error = error_of([&] { item(t); });
  EXPECT_NE(item_error.find("meta tensors have no data: item() of f32[1] on meta"),
            std::string::npos)
      << item_error;
  EXPECT_NE(error_of([&] { to_vector<float>(t); }).find("no data: to_vector"), std::string::npos);
  float out = 0;
  EXPECT_NE(error_of([&] { t.copy_to_host(&out); }).find("no data: copy_to_host"),
            std::string::npos);
  EXPECT_NE(error_of([&] { to_device(t, kCPU); }).find("no data: to_device"), std::string::npos);
  // To meta: shape and dtype only.
  const Tensor moved = to_device(zeros({2, 3}, DType::f32), kMeta);
  EXPECT_EQ(moved.device(), kMeta);
  EXPECT_EQ(moved.shape(), (Shape{2, 3}));
  // A flag check reads nothing on meta (no kernel ran to raise one).
  EXPECT_NO_THROW(check_device_flags(kMeta));
}

// Sampling and the anomaly mode's non-finite checks read values: each fails at once, naming
// itself.
TEST(MetaDevice, SamplingAndNanChecksAreOneClearError) {
  GPT model(GPTConfig{.vocab_size = 16, .block_size = 8, .n_layer = 1, .n_head = 1, .n_embd = 16});
  model.to(kMeta);
  EXPECT_NE(error_of([&] {
              train::generate(model, {1, 2}, 3, {});
            }).find("meta tensors have no data: sampling (generate)"),
            std::string::npos);
  const DebugSettings saved = debug_settings();
  DebugSettings nan_checks = saved;
  nan_checks.check_nan = true;
  set_debug_settings(nan_checks);
  const std::string e = error_of([] { gelu(Tensor::empty({4}, DType::f32, kMeta)); });
  set_debug_settings(saved);
  EXPECT_NE(e.find("no data: the non-finite check of GLASS_CHECK_NAN"), std::string::npos) << e;
}

// A kernel on meta reaches the observers with its LaunchInfo and never runs: its tensors'
// addresses are non-canonical, so a run would fault.
TEST(MetaDevice, LaunchesAreReportedNotRun) {
  const Tensor x = Tensor::empty({4096}, DType::bf16, kMeta);
  const Tensor y = Tensor::empty({4096}, DType::f32, kMeta);
  testing::LaunchRecorder rec;
  kernels::backend(kMeta).fill(x, 1.0);
  kernels::backend(kMeta).cast(x, y);
  kernels::backend(kMeta).gelu_forward(y, y);
  ASSERT_EQ(rec.launches.size(), 3u);
  EXPECT_STREQ(rec.launches[0].kernel, "fill");
  EXPECT_EQ(rec.launches[0].unit, ComputeUnit::memory);
  EXPECT_EQ(rec.launches[0].bytes, 4096.0 * 2);
  EXPECT_EQ(rec.launches[0].grid.x, 16u);  // 4096 elements, 256 threads a block
  EXPECT_EQ(rec.launches[0].device, kMeta);
  EXPECT_EQ(rec.launches[1].unit, ComputeUnit::memory);
  EXPECT_EQ(rec.launches[1].bytes, 4096.0 * (2 + 4));
  EXPECT_STREQ(rec.launches[2].kernel, "gelu_forward");
  EXPECT_EQ(rec.launches[2].unit, ComputeUnit::cuda_core);
  EXPECT_GT(rec.launches[2].flops, 0);
}

// Llama's kernels (RMSNorm, SwiGLU, rotary embedding) plan on meta: each launcher reports its
// launches from shapes alone (a data read would fault on meta's addresses).
TEST(MetaDevice, LlamaKernelsAreReportedNotRun) {
  auto empty = [](Shape s, DType d = DType::bf16) { return Tensor::empty(s, d, kMeta); };
  const Tensor x = empty({64, 256}), w = empty({256}), rstd = empty({64}, DType::f32);
  const Tensor gate_up = empty({64, 512}), qkv = empty({2, 32, (4 + 2 * 2) * 32});
  const kernels::Backend& k = kernels::backend(kMeta);
  testing::LaunchRecorder rec;
  k.rmsnorm_forward(x, w, x, rstd, 1e-5);
  k.rmsnorm_backward(x, x, w, rstd, x, w);
  k.residual_rmsnorm_forward(x, x, w, x, x, rstd, 1e-5);
  k.residual_rmsnorm_backward(x, x, x, w, rstd, x, w);
  k.swiglu_forward(gate_up, x);
  k.swiglu_backward(gate_up, x, gate_up);
  k.rope_forward(qkv, qkv, 4, 2, 1e4, 0);
  k.rope_backward(qkv, qkv, 4, 2, 1e4, 0);
  std::vector<std::string> names;
  for (const LaunchInfo& l : rec.launches) names.emplace_back(l.kernel);
  EXPECT_EQ(names,
            (std::vector<std::string>{"rmsnorm_forward", "rmsnorm_backward", "rmsnorm_weight_grad",
                                      "residual_rmsnorm_forward", "residual_rmsnorm_backward",
                                      "rmsnorm_weight_grad", "swiglu_forward", "swiglu_backward",
                                      "rope_forward", "rope_backward"}));
  EXPECT_EQ(rec.launches[0].grid.x, 64u);  // one block per row
  EXPECT_EQ(rec.launches[8].grid.x, 64u);  // one block per (b, t)
  for (const LaunchInfo& l : rec.launches) EXPECT_GT(l.bytes, 0) << l.kernel;
}

// The units of the GEMM launches: bf16 on the bf16 Tensor Cores, f32 on the CUDA cores, f32
// under TF32 on the TF32 Tensor Cores (cuBLASLt).
TEST(MetaDevice, GemmUnits) {
  struct Case {
    DType dtype;
    bool tf32;
    ComputeUnit unit;
  };
  for (const Case c : {Case{DType::bf16, false, ComputeUnit::tensor_core_bf16},
                       Case{DType::f32, false, ComputeUnit::cuda_core},
                       Case{DType::f32, true, ComputeUnit::tensor_core_tf32}}) {
    kernels::set_tf32(c.tf32);
    const Tensor a = Tensor::empty({64, 32}, c.dtype, kMeta);
    const Tensor b = Tensor::empty({32, 16}, c.dtype, kMeta);
    testing::LaunchRecorder rec;
    const Tensor y = matmul(a, b);
    kernels::set_tf32(false);
    ASSERT_EQ(rec.launches.size(), 1u);
    EXPECT_EQ(rec.launches[0].unit, c.unit) << rec.launches[0].kernel;
    EXPECT_EQ(rec.launches[0].flops, 2.0 * 64 * 32 * 16);
  }
}

// Everything the two launch lists must agree on.
void expect_same_launches(const std::vector<LaunchInfo>& meta, const std::vector<LaunchInfo>& emu) {
  ASSERT_EQ(meta.size(), emu.size());
  for (size_t i = 0; i < meta.size(); ++i) {
    const LaunchInfo &m = meta[i], &e = emu[i];
    SCOPED_TRACE(fmt::format("launch {}: {} on meta, {} on emu", i, m.kernel, e.kernel));
    EXPECT_STREQ(m.kernel, e.kernel);
    EXPECT_STREQ(m.function ? m.function : "", e.function ? e.function : "");
    EXPECT_STREQ(m.op, e.op);
    EXPECT_EQ(m.phase, e.phase);
    EXPECT_EQ(m.unit, e.unit);
    EXPECT_EQ(m.flops, e.flops);
    EXPECT_EQ(m.bytes, e.bytes);
    EXPECT_EQ(m.shared_bytes, e.shared_bytes);
    EXPECT_EQ(std::tie(m.grid.x, m.grid.y, m.grid.z), std::tie(e.grid.x, e.grid.y, e.grid.z));
    EXPECT_EQ(std::tie(m.block.x, m.block.y, m.block.z), std::tie(e.block.x, e.block.y, e.block.z));
    EXPECT_EQ(m.device, kMeta);
    EXPECT_EQ(e.device, kEmu);
  }
}

// The GEMM workspace is allocated once per device and kept: allocated on both devices before
// the comparison, so that neither step's peak includes it.
void allocate_gemm_workspaces() {
  for (Device d : {kEmu, kMeta})
    matmul(Tensor::empty({8, 8}, DType::f32, d), Tensor::empty({8, 8}, DType::f32, d));
}

struct TrainedStep {
  std::vector<LaunchInfo> launches;
  GPTConfig config;
  int64_t state_bytes = 0, peak_allocated_bytes = 0;
};

// The Trainer's first step on emu (kernels run), with the allocator's figures over what was
// allocated before the Trainer was built.
TrainedStep trainer_step_on_emu(train::TrainOptions o) {
  o.device = "emu";
  Allocator& a = Allocator::for_device(kEmu);
  a.empty_cache();
  const int64_t base = a.stats().allocated_bytes;
  train::Trainer trainer(o);
  TrainedStep t;
  t.config = trainer.model().config;
  t.state_bytes = a.stats().allocated_bytes - base;
  a.reset_peaks();
  {
    testing::LaunchRecorder rec;
    trainer.train_step();
    t.launches = rec.launches;
  }
  t.peak_allocated_bytes = a.stats().peak_allocated_bytes - base;
  // The step's launches only: the host read of its status launches nothing.
  std::erase_if(t.launches, [](const LaunchInfo& l) { return !(l.device == kEmu); });
  return t;
}

train::StepPlanOptions plan_options(const train::TrainOptions& o, const GPTConfig& config) {
  train::StepPlanOptions p;
  p.config = config;
  p.batch = o.batch;
  p.seq_len = o.seq_len;
  p.grad_accum = o.grad_accum;
  p.dtype = o.dtype == "bf16" ? DType::bf16 : DType::f32;
  p.attention = o.attention;
  p.tf32 = o.tf32;
  p.grad_clip = o.grad_clip;
  return p;
}

void expect_plan_matches_trainer(const train::TrainOptions& o) {
  allocate_gemm_workspaces();
  // the Trainer turns --tf32 on for the process and leaves it so; put the setting back after it,
  // or the tests that run next (the f32 cross-device GEMMs) would run on TF32
  const bool tf32_before = kernels::tf32_enabled();
  const TrainedStep emu = trainer_step_on_emu(o);
  kernels::set_tf32(tf32_before);
  const train::RecordedStep meta = train::record_training_step(kMeta, plan_options(o, emu.config));
  expect_same_launches(meta.launches, emu.launches);
  // The allocator's figures, with size classes on both (emu's red zones give exact sizes).
  if (!emu::settings().check_memory) {
    EXPECT_EQ(meta.state_bytes, emu.state_bytes);
    EXPECT_EQ(meta.peak_allocated_bytes, emu.peak_allocated_bytes);
  }
  EXPECT_GT(meta.peak_allocated_bytes, meta.state_bytes);
}

TEST(StepPlan, MetaPlansTheTrainersStepOnEmuBf16Flash) {
  train::TrainOptions o = testing::tiny_options();
  o.dtype = "bf16";
  o.n_embd = 32;  // head dim 16: flash attention
  expect_plan_matches_trainer(o);
}

// --grad-accum: the pre-flight plans the micro-steps as the Trainer runs them (the remedy
// `--batch N --grad-accum K` is planned so).
TEST(StepPlan, MetaPlansTheTrainersStepOnEmuWithGradAccum) {
  train::TrainOptions o = testing::tiny_options();
  o.dtype = "bf16";
  o.n_embd = 32;
  o.batch = 2;
  o.grad_accum = 3;
  expect_plan_matches_trainer(o);
}

TEST(StepPlan, MetaPlansTheTrainersStepOnEmuBf16FlashMma) {
  train::TrainOptions o = testing::tiny_options();
  o.dtype = "bf16";
  o.n_embd = 64;  // head dim 32: FlashAttention-2 on the Tensor Cores
  o.attention = "flash-mma";
  expect_plan_matches_trainer(o);
}

TEST(StepPlan, MetaPlansTheTrainersStepOnEmuF32NaiveTf32) {
  train::TrainOptions o = testing::tiny_options();
  o.dtype = "f32";
  o.attention = "naive";
  o.tf32 = true;
  o.grad_clip = 0;
  expect_plan_matches_trainer(o);
}

// The planned step against a GPU's roofs, recomputed from the launches by hand.
TEST(StepRoofline, BoundsAreConsistent) {
  const GPTConfig config{
      .vocab_size = 96, .block_size = 32, .n_layer = 2, .n_head = 2, .n_embd = 32};
  train::StepPlanOptions o;
  o.config = config;
  o.batch = 2;
  o.seq_len = 32;
  const train::RecordedStep step = train::record_training_step(kMeta, o);
  const DevicePeaks h200 = *find_known_gpu("h200");
  const train::StepRoofline r =
      train::step_roofline(step, config, o.batch, o.seq_len, DType::bf16, h200);
  // Model FLOPs by hand: N' = V C + L (12 C^2 + 13 C) + 2 C (no wpe), per token 6 N' + 12 L T C.
  const double C = 32, L = 2, T = 32, V = 96, tokens = 2 * 32;
  const double n_prime = V * C + L * (12 * C * C + 13 * C) + 2 * C;
  EXPECT_DOUBLE_EQ(r.model_flops, (6 * n_prime + 12 * L * T * C) * tokens);
  EXPECT_DOUBLE_EQ(r.ideal_s, r.model_flops / 989e12);
  double bound = 0, flops = 0, tc_flops = 0, unit_ideal = 0, bytes = 0;
  ASSERT_EQ(r.launches.size(), step.launches.size());
  for (const train::LaunchBound& l : r.launches) {
    const LaunchInfo& i = l.launch;
    const double peak = i.unit == ComputeUnit::tensor_core_bf16   ? 989e12
                        : i.unit == ComputeUnit::tensor_core_tf32 ? 494e12
                                                                  : 67e12;
    EXPECT_DOUBLE_EQ(l.bound_s, std::max(i.flops / peak, i.bytes / 4.8e12)) << i.kernel;
    if (i.unit == ComputeUnit::memory) {
      EXPECT_EQ(i.flops, 0) << i.kernel;
    }
    bound += l.bound_s;
    flops += i.flops;
    bytes += i.bytes;
    unit_ideal += i.flops / peak;
    if (i.unit == ComputeUnit::tensor_core_bf16) tc_flops += i.flops;
  }
  EXPECT_NEAR(r.bound_s, bound, 1e-12 * bound);
  EXPECT_GE(r.bound_s * (1 + 1e-12), unit_ideal);
  EXPECT_GE(r.bound_s * (1 + 1e-12), bytes / 4.8e12);
  EXPECT_DOUBLE_EQ(r.tensor_core_flop_share, tc_flops / flops);
  EXPECT_GT(r.tensor_core_flop_share, 0);
  // The sums by kernel and by unit add up to the step.
  double kernel_bound = 0, unit_bound = 0;
  int64_t kernel_launches = 0;
  for (const train::KernelBound& k : r.kernels) {
    kernel_bound += k.bound_s;
    kernel_launches += k.launches;
  }
  for (const train::UnitBound& u : r.units) unit_bound += u.bound_s;
  EXPECT_NEAR(kernel_bound, bound, 1e-9 * bound);
  EXPECT_NEAR(unit_bound, bound, 1e-9 * bound);
  EXPECT_EQ(kernel_launches, static_cast<int64_t>(r.launches.size()));
  for (size_t i = 1; i < r.kernels.size(); ++i)
    EXPECT_GE(r.kernels[i - 1].bound_s, r.kernels[i].bound_s);
}

// A Trainer refuses meta at once: it would train on no data.
TEST(StepPlan, TrainerRefusesMeta) {
  train::TrainOptions o = testing::tiny_options();
  o.device = "meta";
  const std::string e = error_of([&] { train::Trainer t(o); });
  EXPECT_NE(e.find("meta"), std::string::npos) << e;
  EXPECT_NE(e.find("roofline step"), std::string::npos) << e;
}

}  // namespace
}  // namespace glass
