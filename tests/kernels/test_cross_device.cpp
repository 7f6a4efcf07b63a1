// Cross-device table: every op, forward and backward through autograd, on each device that runs
// kernels/cuda against `cpu`: `emu` always, and `cuda` when this build has it and a GPU is present
// (the same table, parameterised over the devices).
//
// Each case builds random inputs on cpu (odd shapes, so that the CUDA kernels run partial blocks
// and partial warps), copies them to the device, runs the op on both devices with every floating
// input requiring grad, and compares outputs; then it back-propagates sum(out * w) for a random w
// and compares every input's gradient. The kernels differ (kernels/cpu vs kernels/cuda), so values
// agree to f32 rounding, judged against the magnitude of the cpu result (tests/testing.h).
// CrossDeviceBf16 runs the same table with bf16 tensors on the device (mixed precision) against f32
// on cpu, to bf16 rounding; its devices include cpu itself (the cpu bf16 kernels against the cpu
// f32 ones). CpuBf16AgainstEmu runs the table in bf16 on cpu and on emu from the same bf16 inputs:
// both follow one rounding rule (read bf16, compute in f32, round to nearest even once on store),
// so they differ only where their f32 math differs before a rounding (see that test).
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "autograd/ops.h"
#include "engine/launch.h"
#include "kernels/backend.h"
#include "tests/testing.h"
#if defined(GLASS_HAS_CUDA)
#include "engine/cuda/runtime.h"
#endif

namespace glass {
namespace {

using testing::all_close;
using Inputs = std::vector<Tensor>;

// Counts launches on `device` and on every other device while it lives.
struct LaunchCounter : LaunchObserver {
  Device device;
  int on_device = 0, elsewhere = 0;
  explicit LaunchCounter(Device d) : device(d) { subscribe(this); }
  ~LaunchCounter() override { unsubscribe(this); }
  void on_launch_begin(const LaunchInfo& info) override {
    (info.device == device ? on_device : elsewhere)++;
  }
};

using testing::cuda_kernel_devices;

struct Case {
  std::string name;
  std::function<Inputs(Generator&)> inputs;  // on cpu
  std::function<Tensor(const Inputs&)> op;
  double rtol = 1e-5;
  // The bf16 table's tolerance, in units of bf16's rounding error 2^-8 (see CrossDeviceBf16).
  double bf16_units = 4;
};

// ids in [0, n) as i32, with `ignored` positions set to -100 (cross-entropy's ignore_index).
Tensor random_ids(int64_t count, int64_t n, Generator& g, int64_t ignored = 0) {
  std::vector<int32_t> ids(static_cast<size_t>(count));
  const std::vector<float> u = to_vector<float>(rand({count}, g));
  for (int64_t i = 0; i < count; ++i)
    ids[i] = i < ignored ? -100 : std::min<int32_t>(static_cast<int32_t>(u[i] * n), n - 1);
  return from_vector(ids, {count});
}

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }
}  // namespace
void PrintTo(const Device& d, std::ostream* os) { *os << d.str(); }
namespace {

std::vector<Case> cases() {
  auto r = [](Shape s) { return [s](Generator& g) { return Inputs{randn(s, g)}; }; };
  auto r2 = [](Shape a, Shape b) {
    return [a, b](Generator& g) { return Inputs{randn(a, g), randn(b, g)}; };
  };
  return {
      // --- elementwise: broadcasting in either operand, non-contiguous operands ---
      {"add_broadcast_row", r2({7, 33}, {33}), [](const Inputs& x) { return x[0] + x[1]; }},
      {"sub_broadcast_col", r2({37, 13}, {37, 1}), [](const Inputs& x) { return x[0] - x[1]; }},
      {"mul_transposed", r2({13, 7}, {7, 13}),
       [](const Inputs& x) { return transpose(x[0], 0, 1) * x[1]; }},
      {"mul_broadcast_both", r2({5, 1, 33}, {1, 7, 1}),
       [](const Inputs& x) { return x[0] * x[1]; }},
      {"div",
       [](Generator& g) {
         return Inputs{randn({37, 33}, g), rand({37, 33}, g, 0.5, 2)};
       },
       [](const Inputs& x) { return x[0] / x[1]; }},
      // four ops, each storing a rounded bf16 result: 4 roundings forward, 4 back, + 1 seed
      {"scalar_ops", r({1000}), [](const Inputs& x) { return -(x[0] * 1.5 + 0.25) / 3.0; }, 1e-5,
       9},
      {"pow_square", r({37, 33}), [](const Inputs& x) { return pow(x[0], 2); }},
      // backward: 3 x^2 dy formed by three rounded ops (pow, mul, mul)
      {"pow_cube", r({37, 33}), [](const Inputs& x) { return pow(x[0], 3); }, 1e-5, 6},
      {"pow_fractional", [](Generator& g) { return Inputs{rand({1025}, g, 0.5, 2)}; },
       [](const Inputs& x) { return pow(x[0], 1.5); }, 1e-5, 6},
      {"gelu", r({37, 1000}), [](const Inputs& x) { return gelu(x[0]); }},
      {"dropout", r({37, 33}),
       [](const Inputs& x) {
         Generator g(7);  // the same stream on both devices: the same mask
         return dropout(x[0], 0.3, true, g);
       }},
      // --- views and copies: strided copies through contiguous() and concat ---
      {"permute_contiguous", r({5, 7, 9}),
       [](const Inputs& x) {
         return contiguous(permute(x[0], {2, 0, 1}));
       }},
      {"slice_reshape", r({13, 33}),
       [](const Inputs& x) { return reshape(slice(x[0], 1, 3, 30), {-1}); }},
      {"expand_mul", r2({7, 1}, {7, 33}),
       [](const Inputs& x) {
         return expand(x[0], {7, 33}) * x[1];
       }},
      {"concat", r2({7, 5}, {7, 11}),
       [](const Inputs& x) {
         return concat({x[0], x[1]}, 1);
       }},
      // --- reductions: rows, columns, middle dimensions, everything ---
      {"sum_all", r({37, 33}), [](const Inputs& x) { return sum(x[0]); }},
      {"sum_rows", r({37, 1000}), [](const Inputs& x) { return sum(x[0], {1}); }},
      {"sum_cols", r({1000, 37}), [](const Inputs& x) { return sum(x[0], {0}); }},
      {"sum_middle_keepdim", r({5, 37, 33}), [](const Inputs& x) { return sum(x[0], {1}, true); }},
      {"mean_two_dims", r({5, 7, 9}),
       [](const Inputs& x) {
         return mean(x[0], {0, 2});
       }},
      // --- matrix multiply: batched, broadcast, transposed operands as GEMM op flags ---
      {"matmul_batched", r2({3, 7, 13}, {3, 13, 9}),
       [](const Inputs& x) { return matmul(x[0], x[1]); }},
      {"matmul_broadcast_transposed", r2({2, 3, 13, 7}, {9, 13}),
       [](const Inputs& x) { return matmul(transpose(x[0], -2, -1), transpose(x[1], 0, 1)); }},
      {"linear_bias",
       [](Generator& g) {
         return Inputs{randn({5, 7, 33}, g), randn({13, 33}, g), randn({13}, g)};
       },
       [](const Inputs& x) { return linear(x[0], x[1], x[2]); }},
      // The fused MLP: hidden 37 is not a multiple of 8, so the GELU's aux rows are padded.
      {"mlp_fused",
       [](Generator& g) {
         return Inputs{randn({3, 7, 13}, g), randn({37, 13}, g), randn({37}, g), randn({11, 37}, g),
                       randn({11}, g)};
       },
       [](const Inputs& x) { return mlp(x[0], x[1], x[2], x[3], x[4]); }},
      {"mlp_fused_no_bias",
       [](Generator& g) {
         return Inputs{randn({17, 16}, g), randn({64, 16}, g), randn({5, 64}, g)};
       },
       [](const Inputs& x) { return mlp(x[0], x[1], Tensor(), x[2], Tensor()); }},
      // --- softmax family, rows that leave partial blocks and warps ---
      {"softmax", r({37, 33}), [](const Inputs& x) { return softmax(x[0]); }},
      // x * 3 is rounded before the softmax: an absolute error of up to |3x| 2^-9 ~ 6 units in
      // the logits becomes that relative error in every probability
      {"softmax_wide", r({5, 1000}), [](const Inputs& x) { return softmax(x[0] * 3.0); }, 1e-5, 12},
      {"softmax_one_column", r({37, 1}), [](const Inputs& x) { return softmax(x[0]); }},
      {"log_softmax", r({37, 1000}), [](const Inputs& x) { return log_softmax(x[0]); }},
      {"cross_entropy",
       [](Generator& g) {
         return Inputs{randn({37, 33}, g), random_ids(37, 33, g, 3)};
       },
       [](const Inputs& x) { return cross_entropy(x[0], x[1]); }},
      {"cross_entropy_3d",
       [](Generator& g) {
         return Inputs{randn({3, 5, 1000}, g), random_ids(15, 1000, g)};
       },
       [](const Inputs& x) {
         return cross_entropy(x[0], reshape(x[1], {3, 5}));
       }},
      // --- LayerNorm ---
      {"layer_norm",
       [](Generator& g) {
         return Inputs{randn({37, 33}, g), randn({33}, g), randn({33}, g)};
       },
       [](const Inputs& x) { return layer_norm(x[0], x[1], x[2]); }},
      {"layer_norm_wide",
       [](Generator& g) {
         return Inputs{randn({3, 5, 1000}, g, 2, 3), randn({1000}, g), randn({1000}, g)};
       },
       [](const Inputs& x) { return layer_norm(x[0], x[1], x[2]); }},
      // The fused residual add + LayerNorm: both outputs side by side, so that each one's
      // gradient is checked. bf16: the residual's rounding is carried into the normalised output
      // and its gradient (one more unit than layer_norm's four).
      {"residual_layer_norm",
       [](Generator& g) {
         return Inputs{randn({37, 33}, g), randn({37, 33}, g), randn({33}, g), randn({33}, g)};
       },
       [](const Inputs& x) {
         const ResidualNorm r = residual_layer_norm(x[0], x[1], x[2], x[3]);
         return concat({r.residual, r.normed}, -1);
       },
       1e-5, 5},
      // --- Llama's layers: RMSNorm (plain and fused with the residual add; C = 33 leaves a
      // scalar tail, 1000 rows over several row chunks), SwiGLU (F = 33: scalar path; F = 64:
      // 16-byte vectors), rotary embedding (grouped-query heads, a start position) ---
      {"rms_norm",
       [](Generator& g) {
         return Inputs{randn({37, 33}, g, 1, 2), randn({33}, g)};
       },
       [](const Inputs& x) { return rms_norm(x[0], x[1]); }},
      {"rms_norm_wide",
       [](Generator& g) {
         return Inputs{randn({3, 5, 1000}, g), randn({1000}, g)};
       },
       [](const Inputs& x) { return rms_norm(x[0], x[1]); }},
      // 600 rows: 19 row chunks in 3 groups, so the weight gradient's groups are combined
      {"rms_norm_many_rows",
       [](Generator& g) {
         return Inputs{randn({600, 24}, g), randn({24}, g)};
       },
       [](const Inputs& x) { return rms_norm(x[0], x[1]); }},
      // x and gate_up one element into their buffer: not 16-byte aligned, so the launchers must
      // take the scalar path (the emulator throws on a misaligned vector access)
      {"rms_norm_misaligned",
       [](Generator& g) {
         return Inputs{randn({37 * 32 + 1}, g), randn({32}, g)};
       },
       [](const Inputs& x) {
         return rms_norm(view(slice(x[0], 0, 1, 37 * 32 + 1), {37, 32}), x[1]);
       }},
      {"swiglu_misaligned", r({5 * 128 + 1}),
       [](const Inputs& x) {
         return swiglu(view(slice(x[0], 0, 1, 5 * 128 + 1), {5, 128}));
       }},
      // bf16: the residual's rounding is carried into the normalised output and its gradient
      {"residual_rms_norm",
       [](Generator& g) {
         return Inputs{randn({37, 33}, g), randn({37, 33}, g), randn({33}, g)};
       },
       [](const Inputs& x) {
         const ResidualNorm r = residual_rms_norm(x[0], x[1], x[2]);
         return concat({r.residual, r.normed}, -1);
       },
       1e-5, 5},
      {"swiglu", r({37, 2 * 33}), [](const Inputs& x) { return swiglu(x[0]); }},
      {"swiglu_vectorised", r({3, 7, 2 * 64}), [](const Inputs& x) { return swiglu(x[0]); }},
      {"rotary_embedding", r({2, 13, (4 + 2 * 2) * 16}),
       [](const Inputs& x) { return rotary_embedding(x[0], 4, 2, 10000, 5); }},
      // --- causal attention: T and D that leave partial tiles ---
      {"causal_attention",
       [](Generator& g) {
         return Inputs{randn({2, 3, 13, 8}, g), randn({2, 3, 13, 8}, g), randn({2, 3, 13, 8}, g)};
       },
       [](const Inputs& x) { return causal_attention(x[0], x[1], x[2]); }},
      {"causal_attention_long",
       [](Generator& g) {
         return Inputs{randn({1, 2, 67, 33}, g), randn({1, 2, 67, 33}, g),
                       randn({1, 2, 67, 33}, g)};
       },
       [](const Inputs& x) { return causal_attention(x[0], x[1], x[2]); }},
      // --- attention on the fused qkv layout with the flash kernels (the cpu's own flash loops as
      // the reference): head dim 16, T = 13 leaves a partial tile ---
      {"causal_attention_flash",
       [](Generator& g) {
         return Inputs{randn({2, 13, 3 * 32}, g)};
       },
       [](const Inputs& x) { return causal_attention(x[0], 2, AttentionKernel::flash); }},
      // --- grouped-query attention (fewer key/value heads than query heads): the probs-based op
      // with k and v of 2 heads for 4 query heads; the fused layout [B, T, (H + 2 Hkv) D] with
      // the flash kernels, head dim 16 (flash-simt on emu and cuda) and 32 with one key/value head
      // (flash-mma there in bf16) ---
      {"causal_attention_gqa",
       [](Generator& g) {
         return Inputs{randn({2, 4, 13, 8}, g), randn({2, 2, 13, 8}, g), randn({2, 2, 13, 8}, g)};
       },
       [](const Inputs& x) { return causal_attention(x[0], x[1], x[2]); }},
      {"causal_attention_gqa_flash",
       [](Generator& g) {
         return Inputs{randn({2, 13, (4 + 2 * 2) * 16}, g)};
       },
       [](const Inputs& x) { return causal_attention(x[0], 4, 2, AttentionKernel::flash); }},
      {"causal_attention_mqa_flash",
       [](Generator& g) {
         return Inputs{randn({1, 21, (4 + 2 * 1) * 32}, g)};
       },
       [](const Inputs& x) { return causal_attention(x[0], 4, 1, AttentionKernel::flash); }},
      // --- embedding: repeated ids accumulate into one row ---
      {"embedding",
       [](Generator& g) {
         return Inputs{random_ids(37, 11, g), randn({11, 33}, g)};
       },
       [](const Inputs& x) {
         return embedding(reshape(x[0], {37, 1}), x[1]);
       }},
  };
}

class CrossDevice : public ::testing::TestWithParam<std::tuple<Case, Device>> {};

TEST_P(CrossDevice, ForwardAndBackwardMatchCpu) {
  const auto& [c, device] = GetParam();
  Generator gen(1234);
  Inputs cpu_in = c.inputs(gen);
  Inputs dev_in;
  for (const Tensor& t : cpu_in) dev_in.push_back(to_device(t, device));
  for (Inputs* in : {&cpu_in, &dev_in})
    for (Tensor& t : *in)
      if (is_floating(t.dtype())) t.set_requires_grad(true);

  // Forward and backward of sum(out * w), the same random w on both devices. On the device every
  // launch must run there: nothing may fall back to cpu kernels.
  const Tensor cpu_out = c.op(cpu_in);
  const Tensor w = randn(cpu_out.shape(), gen);
  backward(sum(cpu_out * w));
  const Tensor dev_w = to_device(w, device);
  Tensor dev_out;
  {
    LaunchCounter launches(device);
    dev_out = c.op(dev_in);
    backward(sum(dev_out * dev_w));
    EXPECT_EQ(launches.elsewhere, 0) << c.name;
    EXPECT_GT(launches.on_device, 0) << c.name;
  }
  ASSERT_EQ(dev_out.device(), device) << c.name;
  EXPECT_TRUE(all_close(dev_out, cpu_out, c.rtol)) << c.name << " forward";
  for (size_t i = 0; i < cpu_in.size(); ++i) {
    if (!cpu_in[i].requires_grad()) continue;
    ASSERT_TRUE(dev_in[i].grad().defined()) << c.name << " input " << i;
    EXPECT_TRUE(all_close(dev_in[i].grad(), cpu_in[i].grad(), c.rtol))
        << c.name << " gradient of input " << i;
  }
}

// The same table in bf16 (mixed precision, README): the device runs every op on bf16 tensors
// (math and sums in f32, each stored result rounded to bf16), the cpu reference runs in f32 on the
// same values (inputs and w rounded to bf16 first, so both start from identical numbers). What
// separates them is the rounding of each value the device stores in bf16: at most 2^-8 relative
// (8 significant bits, round to nearest), so a compared value is allowed bf16_units x 2^-8 of the
// reference's largest magnitude, bf16_units counting the bf16 stores on its path: by default 4
// (forward output; the seed product out * w; the op's backward output; one more for a backward
// made of two launches or an intermediate stored in bf16), more where a case says why.
constexpr double kBf16Unit = 1.0 / 256;  // 2^-8

// t (f32, on cpu) with every element rounded to bf16 and back.
Tensor round_to_bf16(const Tensor& t) {
  return is_floating(t.dtype()) ? cast(cast(t, DType::bf16), t.dtype()) : t;
}

class CrossDeviceBf16 : public ::testing::TestWithParam<std::tuple<Case, Device>> {};

TEST_P(CrossDeviceBf16, ForwardAndBackwardMatchCpuWithinBf16Rounding) {
  const auto& [c, device] = GetParam();
  Generator gen(1234);
  Inputs cpu_in, dev_in;
  for (const Tensor& t : c.inputs(gen)) {
    cpu_in.push_back(round_to_bf16(t));
    dev_in.push_back(to_device(is_floating(t.dtype()) ? cast(t, DType::bf16) : t, device));
  }
  for (Inputs* in : {&cpu_in, &dev_in})
    for (Tensor& t : *in)
      if (is_floating(t.dtype())) t.set_requires_grad(true);

  const Tensor cpu_out = c.op(cpu_in);
  const Tensor w = round_to_bf16(randn(cpu_out.shape(), gen));
  backward(sum(cpu_out * w));
  // w as the device output's dtype will be (bf16; f32 for a loss), made before counting launches.
  const Tensor w_bf16 = cast(w, DType::bf16);
  Tensor dev_out;
  {
    LaunchCounter launches(device);
    dev_out = c.op(dev_in);
    const Tensor dev_w = to_device(dev_out.dtype() == DType::bf16 ? w_bf16 : w, device);
    backward(sum(dev_out * dev_w));
    EXPECT_EQ(launches.elsewhere, 0) << c.name;
  }
  // The device computed in bf16: its output is bf16 (a loss is f32, as the mixed precision keeps
  // it), and every gradient of a bf16 input is bf16.
  EXPECT_EQ(dev_out.dtype(), c.name.starts_with("cross_entropy") ? DType::f32 : DType::bf16)
      << c.name;
  const double rtol = c.bf16_units * kBf16Unit;
  EXPECT_TRUE(all_close(dev_out, cpu_out, rtol)) << c.name << " forward";
  for (size_t i = 0; i < cpu_in.size(); ++i) {
    if (!cpu_in[i].requires_grad()) continue;
    ASSERT_TRUE(dev_in[i].grad().defined()) << c.name << " input " << i;
    EXPECT_EQ(dev_in[i].grad().dtype(), DType::bf16) << c.name << " input " << i;
    EXPECT_TRUE(all_close(dev_in[i].grad(), cpu_in[i].grad(), rtol))
        << c.name << " gradient of input " << i;
  }
}

// cpu's bf16 kernels against cpu's f32 ones too (kernels/cpu/element.h): the same tolerances.
std::vector<Device> bf16_devices() {
  std::vector<Device> devices = cuda_kernel_devices();
  devices.push_back(kCPU);
  return devices;
}

INSTANTIATE_TEST_SUITE_P(Ops, CrossDeviceBf16,
                         ::testing::Combine(::testing::ValuesIn(cases()),
                                            ::testing::ValuesIn(bf16_devices())),
                         [](const auto& info) {
                           const Device d = std::get<1>(info.param);
                           return std::get<0>(info.param).name + "_" +
                                  (d.kind == DeviceKind::emu   ? "emu"
                                   : d.kind == DeviceKind::cpu ? "cpu"
                                                               : "cuda");
                         });

// cpu bf16 against emu bf16, from identical bf16 inputs and the same bf16 w. Both devices load
// bf16 exactly, compute in f32 and round each stored value once to nearest even, so a value is
// bit-identical wherever the two compute the same f32 value before rounding: the elementwise ops
// (one f32 operation per element, in the same order) and the pure data movement (copies,
// permutes, slices, concatenation, embedding rows). Elsewhere the kernels sum in different orders
// (a CUDA block's tree against cpu's lanes) or use different exp implementations, so the f32
// values differ in their last bits and a stored bf16 value can land one rounding step apart; a
// later op multiplies that step by its own sensitivity. Allowed: kCpuEmuUnits bf16 rounding
// steps (2^-8) of the largest magnitude, half of the bf16 table's budget of the case (which
// counts every rounding against exact f32), at least 1.
bool bit_identical_on_cpu_and_emu(const std::string& name) {
  for (const char* prefix :
       {"add_", "sub_", "mul_", "div", "permute_", "slice_", "expand_", "concat", "embedding"})
    if (name.starts_with(prefix)) return true;
  return false;
}

class CpuBf16AgainstEmu : public ::testing::TestWithParam<Case> {};

TEST_P(CpuBf16AgainstEmu, SameRoundingRulesAgree) {
  const Case& c = GetParam();
  Generator gen(1234);
  Inputs cpu_in, emu_in;
  for (const Tensor& t : c.inputs(gen)) {
    const auto as_bf16 = [&] { return is_floating(t.dtype()) ? cast(t, DType::bf16) : t; };
    cpu_in.push_back(as_bf16());
    emu_in.push_back(to_device(as_bf16(), kEmu));
  }
  for (Inputs* in : {&cpu_in, &emu_in})
    for (Tensor& t : *in)
      if (is_floating(t.dtype())) t.set_requires_grad(true);
  const Tensor cpu_out = c.op(cpu_in);
  const Tensor w = cast(randn(cpu_out.shape(), gen), cpu_out.dtype());
  backward(sum(cpu_out * w));
  const Tensor emu_out = c.op(emu_in);
  backward(sum(emu_out * to_device(w, kEmu)));
  ASSERT_EQ(cpu_out.dtype(), emu_out.dtype()) << c.name;
  const bool exact = bit_identical_on_cpu_and_emu(c.name);
  const double rtol = exact ? 0 : std::max(1.0, c.bf16_units / 2) * kBf16Unit;
  const auto agree = [&](const Tensor& got, const Tensor& want) {
    return all_close(got, want, rtol);  // rtol 0: bit-identical
  };
  EXPECT_TRUE(agree(emu_out, cpu_out)) << c.name << " forward";
  for (size_t i = 0; i < cpu_in.size(); ++i) {
    if (!cpu_in[i].requires_grad()) continue;
    ASSERT_TRUE(cpu_in[i].grad().defined()) << c.name << " input " << i;
    EXPECT_EQ(cpu_in[i].grad().dtype(), DType::bf16) << c.name << " input " << i;
    EXPECT_TRUE(agree(emu_in[i].grad(), cpu_in[i].grad())) << c.name << " gradient of input " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, CpuBf16AgainstEmu, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

INSTANTIATE_TEST_SUITE_P(Ops, CrossDevice,
                         ::testing::Combine(::testing::ValuesIn(cases()),
                                            ::testing::ValuesIn(cuda_kernel_devices())),
                         [](const auto& info) {
                           const Device d = std::get<1>(info.param);
                           return std::get<0>(info.param).name + "_" +
                                  (d.kind == DeviceKind::emu ? "emu" : "cuda");
                         });

}  // namespace
}  // namespace glass
