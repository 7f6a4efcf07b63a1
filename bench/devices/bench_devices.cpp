// bench_devices: the main training kernels on `cpu` and on `emu`, side by side, as a ratio.
//
// `emu` runs the CUDA sources of kernels/cuda on the CPU (engine/emu): this measures what the
// emulator costs against the native cpu kernels, kernel by kernel, on the shapes of the default
// train_gpt model (B=16, T=128, C=256, 4 heads, vocabulary 65). It is not a GPU estimate.
//
//   build/bench/devices/bench_devices [--repeats N]
//
// Each kernel runs once to warm up, then N times (default 5); the median wall time is reported.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "kernels/backend.h"
#include "samples/command_line.h"

namespace {

using namespace glass;
using kernels::Backend;

constexpr int64_t B = 16, T = 128, C = 256, H = 4, D = C / H, V = 65, N = B * T;

// One kernel call on a device: `prepare` makes its tensors there, `run` calls the kernel.
struct Case {
  const char* kernel;
  const char* shape;
  std::function<std::function<void()>(const Backend&, Device)> prepare;
};

Tensor normal(const Shape& shape, Device d, uint64_t seed, double std = 1.0) {
  Generator gen(seed);
  return randn(shape, gen, 0, std, DType::f32, d);
}

std::vector<Case> cases() {
  return {
      {"gemm (c_attn fwd)", "[2048,256] x [256,768]",
       [](const Backend& be, Device d) {
         kernels::GemmArgs g;
         g.a = normal({N, C}, d, 1);
         g.b = normal({C, 3 * C}, d, 2);
         g.c = Tensor::empty({N, 3 * C}, DType::f32, d);
         g.m = N, g.n = 3 * C, g.k = C, g.lda = C, g.ldb = 3 * C, g.ldc = 3 * C;
         return std::function<void()>([&be, g] { be.gemm(g); });
       }},
      {"layernorm_forward", "[2048,256]",
       [](const Backend& be, Device d) {
         Tensor x = normal({N, C}, d, 3), w = normal({C}, d, 4), b = normal({C}, d, 5);
         Tensor y = Tensor::empty({N, C}, DType::f32, d), mean = Tensor::empty({N}, DType::f32, d),
                rstd = Tensor::empty({N}, DType::f32, d);
         return std::function<void()>(
             [&be, x, w, b, y, mean, rstd] { be.layernorm_forward(x, w, b, y, mean, rstd, 1e-5); });
       }},
      {"layernorm_backward", "[2048,256]",
       [](const Backend& be, Device d) {
         Tensor x = normal({N, C}, d, 3), w = normal({C}, d, 4), b = normal({C}, d, 5);
         Tensor y = Tensor::empty({N, C}, DType::f32, d), mean = Tensor::empty({N}, DType::f32, d),
                rstd = Tensor::empty({N}, DType::f32, d);
         be.layernorm_forward(x, w, b, y, mean, rstd, 1e-5);
         Tensor dy = normal({N, C}, d, 6), dx = Tensor::empty({N, C}, DType::f32, d),
                dw = Tensor::empty({C}, DType::f32, d), db = Tensor::empty({C}, DType::f32, d);
         return std::function<void()>([&be, dy, x, w, mean, rstd, dx, dw, db] {
           be.layernorm_backward(dy, x, w, mean, rstd, dx, dw, db);
         });
       }},
      {"softmax_forward", "[8192,128]",
       [](const Backend& be, Device d) {
         Tensor x = normal({B * H * T / 4, T}, d, 7), y = Tensor::empty(x.shape(), DType::f32, d);
         return std::function<void()>([&be, x, y] { be.softmax_forward(x, y); });
       }},
      {"gelu_forward", "[2048,1024]",
       [](const Backend& be, Device d) {
         Tensor x = normal({N, 4 * C}, d, 8), y = Tensor::empty(x.shape(), DType::f32, d);
         return std::function<void()>([&be, x, y] { be.gelu_forward(x, y); });
       }},
      {"attention_forward", "B16 H4 T128 D64",
       [](const Backend& be, Device d) {
         Tensor q = normal({B, H, T, D}, d, 9), k = normal({B, H, T, D}, d, 10),
                v = normal({B, H, T, D}, d, 11);
         Tensor out = Tensor::empty(q.shape(), DType::f32, d),
                probs = Tensor::empty({B, H, T, T}, DType::f32, d);
         return std::function<void()>(
             [&be, q, k, v, out, probs] { be.attention_forward(q, k, v, out, probs, 0.125); });
       }},
      {"flash_attention_forward", "qkv [16,128,768] H4",
       [](const Backend& be, Device d) {
         Tensor qkv = normal({B, T, 3 * C}, d, 14), out = Tensor::empty({B, T, C}, DType::f32, d),
                lse = Tensor::empty({B, H, T}, DType::f32, d);
         return std::function<void()>(
             [&be, qkv, out, lse] { be.flash_attention_forward(qkv, out, lse, H, H, 0.125); });
       }},
      {"flash_attention_backward", "qkv [16,128,768] H4",
       [](const Backend& be, Device d) {
         Tensor qkv = normal({B, T, 3 * C}, d, 14), out = Tensor::empty({B, T, C}, DType::f32, d),
                lse = Tensor::empty({B, H, T}, DType::f32, d);
         be.flash_attention_forward(qkv, out, lse, H, H, 0.125);
         Tensor dout = normal({B, T, C}, d, 15), dqkv = Tensor::empty(qkv.shape(), DType::f32, d);
         return std::function<void()>([&be, qkv, out, lse, dout, dqkv] {
           be.flash_attention_backward(qkv, out, lse, dout, dqkv, H, H, 0.125);
         });
       }},
      {"cross_entropy_forward", "[2048,65]",
       [](const Backend& be, Device d) {
         std::vector<int32_t> ids(N);
         for (int64_t i = 0; i < N; ++i) ids[i] = static_cast<int32_t>((i * 7) % V);
         Tensor logits = normal({N, V}, d, 12);
         Tensor targets = to_device(Tensor::from_host(ids.data(), {N}, DType::i32), d);
         Tensor losses = Tensor::empty({N}, DType::f32, d), lse = Tensor::empty({N}, DType::f32, d),
                valid = Tensor::empty({1}, DType::f32, d);
         return std::function<void()>([&be, logits, targets, losses, lse, valid] {
           be.cross_entropy_forward(logits, targets, losses, lse, valid, -1);
         });
       }},
      {"embedding_backward", "2048 ids, [65,256]",
       [](const Backend& be, Device d) {
         std::vector<int32_t> ids(N);
         for (int64_t i = 0; i < N; ++i) ids[i] = static_cast<int32_t>((i * 13) % V);
         Tensor idt = to_device(Tensor::from_host(ids.data(), {N}, DType::i32), d);
         Tensor dout = normal({N, C}, d, 13), dtable = Tensor::empty({V, C}, DType::f32, d);
         return std::function<void()>(
             [&be, idt, dout, dtable] { be.embedding_backward(idt, dout, dtable); });
       }},
      {"adamw_step", "52 params, 3.2M",
       [](const Backend& be, Device d) {
         // The default GPT's parameter shapes: embeddings, then 4 blocks of 12, then ln_f.
         std::vector<Shape> shapes = {{V, C}, {T, C}};
         for (int l = 0; l < 4; ++l)
           for (const Shape& s : std::vector<Shape>{{C},
                                                    {C},
                                                    {C, 3 * C},
                                                    {3 * C},
                                                    {C, C},
                                                    {C},
                                                    {C},
                                                    {C},
                                                    {C, 4 * C},
                                                    {4 * C},
                                                    {4 * C, C},
                                                    {C}})
             shapes.push_back(s);
         shapes.push_back({C});
         shapes.push_back({C});
         std::vector<kernels::AdamWParam> params;
         uint64_t seed = 100;
         for (const Shape& s : shapes)
           params.push_back({normal(s, d, seed++), normal(s, d, seed++, 0.01),
                             zeros(s, DType::f32, d), zeros(s, DType::f32, d),
                             s.size() >= 2 ? 0.1 : 0.0});
         return std::function<void()>([&be, params] {
           be.adamw_step(params, {1e-3, 0.9, 0.95, 1e-8, 1});
         });
       }},
  };
}

double median_ms(const std::function<void()>& run, int repeats) {
  run();  // warm-up: caches, the allocator, the emulator's worker threads
  std::vector<double> ms;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 5;
  CLI::App app{"bench_devices: the main training kernels on cpu and on emu, side by side"};
  app.add_option("--repeats", repeats, "timed runs of each kernel after one warm-up (the median)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  if (const auto status = glass::samples::parse_command_line(app, argc, argv, "bench_devices"))
    return *status;
  std::printf("| kernel | shape | cpu ms | emu ms | emu / cpu |\n|---|---|---|---|---|\n");
  for (const Case& c : cases()) {
    double ms[2];
    int i = 0;
    for (Device d : {kCPU, kEmu}) {
      const kernels::Backend& be = kernels::backend(d);
      ms[i++] = median_ms(c.prepare(be, d), repeats);
    }
    std::printf("| %s | %s | %.3f | %.3f | %.1fx |\n", c.kernel, c.shape, ms[0], ms[1],
                ms[1] / ms[0]);
    std::fflush(stdout);
  }
  return 0;
}
