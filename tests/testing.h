// Helpers shared by the test suites: comparisons whose tolerance scales with the reference, error
// capture, launch recording, seeded random inputs, gradcheck expectations, thread-count control
// scratch files, and running the PyTorch oracle.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <mutex>
#include <sstream>
#include <string>
#include <string_view>
#include <typeinfo>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "engine/launch.h"
#include "kernels/cpu/threads.h"
#if defined(GLASS_HAS_CUDA)
#include "engine/cuda/runtime.h"
#endif

namespace glass::testing {

// Whether the cuda device exists here: this build has it (GLASS_CUDA) and a GPU, or the emulated
// CUDA runtime, is there.
inline bool have_cuda() {
#if defined(GLASS_HAS_CUDA)
  return cuda::device_count() > 0;
#else
  return false;
#endif
}

// The devices that run kernels/cuda here: emu, and cuda where have_cuda().
inline std::vector<Device> cuda_kernel_devices() {
  std::vector<Device> devices{kEmu};
  if (have_cuda()) devices.push_back(kCUDA);
  return devices;
}

// Passes when |a - e| <= atol + rtol * max|e| for every element, where max|e| is the largest
// magnitude in the reference: errors are judged against the scale of the values, and a tensor of
// small entries next to large ones is not held to a tighter absolute bound than the large ones.
inline ::testing::AssertionResult all_close(const std::vector<double>& actual,
                                            const std::vector<double>& expected, double rtol,
                                            double atol = 0) {
  if (actual.size() != expected.size())
    return ::testing::AssertionFailure()
           << "size " << actual.size() << " != expected size " << expected.size();
  double scale = 0;
  for (double e : expected) scale = std::max(scale, std::abs(e));
  const double tol = atol + rtol * scale;
  for (size_t i = 0; i < actual.size(); ++i)
    if (!(std::abs(actual[i] - expected[i]) <= tol))
      return ::testing::AssertionFailure()
             << "element " << i << ": " << actual[i] << " vs expected " << expected[i]
             << " (tolerance " << tol << ", reference max " << scale << ")";
  return ::testing::AssertionSuccess();
}

// Any floating tensor as doubles, row-major.
inline std::vector<double> values(const Tensor& t) {
  Tensor c = t.dtype() == DType::f64 ? t : cast(t, DType::f64);
  return to_vector<double>(c);
}

inline ::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected,
                                            double rtol, double atol = 0) {
  if (actual.shape() != expected.shape())
    return ::testing::AssertionFailure()
           << "shape " << actual.describe() << " != expected " << expected.describe();
  return all_close(values(actual), values(expected), rtol, atol);
}

// The message of the exception of type E (a glass::Error by default) that fn throws; a test
// failure (and "") when it throws none.
template <class E = Error, class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an exception (" << typeid(E).name() << ")";
  return "";
}

// A file's bytes, whole ("" when it cannot be read: the comparison that follows then fails).
inline std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// How many times `name` occurs in `names` (kernel names, say).
inline int count_of(const std::vector<std::string>& names, std::string_view name) {
  return static_cast<int>(std::count(names.begin(), names.end(), name));
}

// The text most tests train on.
inline const std::string kTinyShakespeare =
    std::string(GLASS_SOURCE_DIR) + "/data/tinyshakespeare.txt";

// Passes when `text` contains every one of `parts`; on failure the message shows the text.
inline ::testing::AssertionResult contains_all(const std::string& text,
                                               std::initializer_list<std::string_view> parts) {
  for (std::string_view p : parts)
    if (text.find(p) == std::string::npos)
      return ::testing::AssertionFailure() << "'" << p << "' not found in: " << text;
  return ::testing::AssertionSuccess();
}

// Records every launch that ends while it lives: subscribed on construction, unsubscribed on
// destruction. Launches may end on several threads (side streams); read `records` once they are
// synchronized.
struct LaunchLog : LaunchObserver {
  std::vector<LaunchRecord> records;
  std::mutex mu;

  LaunchLog() { subscribe(this); }
  ~LaunchLog() override { unsubscribe(this); }
  LaunchLog(const LaunchLog&) = delete;
  LaunchLog& operator=(const LaunchLog&) = delete;
  void on_launch_end(const LaunchRecord& r) override {
    std::lock_guard lock(mu);
    records.push_back(r);
  }

  // The launches whose kernel name starts with `prefix` (all of them by default), in order.
  std::vector<LaunchInfo> launches(std::string_view prefix = "") const {
    std::vector<LaunchInfo> out;
    for (const LaunchRecord& r : records)
      if (std::string_view(r.info.kernel).starts_with(prefix)) out.push_back(r.info);
    return out;
  }
  // The kernel names launched, in order; those of one phase or of one op.
  std::vector<std::string> kernels() const {
    return kernels_where([](const LaunchInfo&) { return true; });
  }
  std::vector<std::string> kernels(Phase phase) const {
    return kernels_where([&](const LaunchInfo& l) { return l.phase == phase; });
  }
  std::vector<std::string> kernels_of_op(std::string_view op) const {
    return kernels_where([&](const LaunchInfo& l) { return l.op == op; });
  }

 private:
  template <class Keep>
  std::vector<std::string> kernels_where(Keep keep) const {
    std::vector<std::string> out;
    for (const LaunchRecord& r : records)
      if (keep(r.info)) out.emplace_back(r.info.kernel);
    return out;
  }
};

// A leaf that requires grad, from values (f64, as from_vector makes them): the tape tests' inputs.
inline Tensor leaf(std::vector<double> v, Shape s) {
  Tensor t = from_vector(v, s);
  t.set_requires_grad(true);
  return t;
}

// A standard-normal tensor drawn from `gen` (f64 by default: gradcheck inputs).
inline Tensor rnd(const Shape& shape, Generator& gen, DType dtype = DType::f64) {
  return randn(shape, gen, 0, 1, dtype);
}

// A standard-normal tensor drawn from a fresh Generator(seed): each input fixed by its own seed.
inline Tensor rnd(const Shape& shape, uint64_t seed, DType dtype = DType::f64) {
  Generator gen(seed);
  return rnd(shape, gen, dtype);
}

// Random token ids in [0, V), i32 [B, T].
inline Tensor random_ids(int64_t B, int64_t T, int64_t V, Generator& gen) {
  std::vector<int32_t> ids;
  for (double u : values(rand({B * T}, gen)))
    ids.push_back(static_cast<int32_t>(u * static_cast<double>(V)));
  return from_vector(ids, {B, T});
}

// Passes when gradcheck of f at `inputs` does; on failure the message is gradcheck's report.
inline ::testing::AssertionResult gradcheck_passes(const GradcheckFn& f,
                                                   const std::vector<Tensor>& inputs) {
  const GradcheckResult r = gradcheck(f, inputs);
  if (r.ok) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "gradcheck failed:\n" << r.report;
}

// f's output followed by the gradient of each input, from backward(f(inputs), dout) run on fresh
// leaf copies of the inputs (so the same inputs can be used again).
inline std::vector<Tensor> output_and_grads(const GradcheckFn& f, const std::vector<Tensor>& inputs,
                                            const Tensor& dout) {
  std::vector<Tensor> leaves;
  for (const Tensor& t : inputs) leaves.push_back(t.detach().set_requires_grad(true));
  std::vector<Tensor> result{f(leaves)};
  backward(result[0], dout);
  for (const Tensor& leaf : leaves) result.push_back(leaf.grad());
  return result;
}

// Each f32 tensor's values, for bit-exact comparisons.
inline std::vector<std::vector<float>> f32_values(const std::vector<Tensor>& ts) {
  std::vector<std::vector<float>> out;
  for (const Tensor& t : ts) out.push_back(to_vector<float>(t));
  return out;
}

// One row of a gradcheck table: a name for the failure message, the inputs, the function.
struct GradCase {
  const char* name;
  std::vector<Tensor> inputs;
  GradcheckFn f;
};

// Runs fn with the cpu kernels limited to `threads` (kernels/cpu/threads.h), restoring the
// previous setting; returns fn's result.
template <class Fn>
auto with_threads(int threads, Fn&& fn) {
  const int saved = glass::kernels::cpu::num_threads();
  glass::kernels::cpu::set_threads(threads);
  auto result = fn();
  glass::kernels::cpu::set_threads(saved);
  return result;
}

// A path called `name` in a directory private to this test process, removed when it exits.
inline std::string scratch_path(const std::string& name) {
  struct ScratchDir {
    std::filesystem::path path = std::filesystem::temp_directory_path() /
                                 ("glass_test_scratch_" + std::to_string(::getpid()));
    ScratchDir() { std::filesystem::create_directories(path); }
    ~ScratchDir() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static const ScratchDir dir;
  return (dir.path / name).string();
}

// One parameter's elements before K AdamW steps, after them in glass, and after them in the
// reference (PyTorch in f32), for bf16_steps_close.
struct WeightsAfterSteps {
  std::string name;
  std::vector<double> start, got, want;
};

// The f32 master weights of a bf16 mixed-precision run after `steps` AdamW steps of learning rate
// `lr` against an f32 reference run from the same start. An AdamW step moves an element by
// lr * m^/(sqrt(v^)+eps) (+ the decay lr wd w, the same in both); with consistent gradient signs
// |m^/sqrt(v^)| is ~1, so an element moves ~lr per step whatever its gradient's size. bf16 changes
// a gradient by a few 2^-8 relative, which changes the update little when the gradient is well
// above its rounding noise, but flips the update's sign where the gradient is near 0 (e.g. GPT-2's
// key bias, whose exact gradient is 0): such an element can differ by up to 2 lr per step. So
// every element is held to 2 K lr (what a sign-flipped update can reach, not more), and the
// updates as a whole to 25% of the reference's: |dw_glass - dw_ref| <= 0.25 |dw_ref| over all
// elements of all parameters, dw = after - start (a missing or wrong update is ~100%).
inline ::testing::AssertionResult bf16_steps_close(const std::vector<WeightsAfterSteps>& weights,
                                                   int steps, double lr) {
  double diff2 = 0, ref2 = 0;
  for (const WeightsAfterSteps& w : weights) {
    if (w.got.size() != w.want.size() || w.start.size() != w.want.size())
      return ::testing::AssertionFailure()
             << w.name << ": " << w.got.size() << " elements, the "
             << "reference " << w.want.size() << ", the start " << w.start.size();
    if (::testing::AssertionResult r = all_close(w.got, w.want, 0, 2 * steps * lr); !r)
      return ::testing::AssertionFailure() << w.name << ": " << r.message();
    for (size_t i = 0; i < w.got.size(); ++i) {
      diff2 += (w.got[i] - w.want[i]) * (w.got[i] - w.want[i]);
      ref2 += (w.want[i] - w.start[i]) * (w.want[i] - w.start[i]);
    }
  }
  if (!(ref2 > 0)) return ::testing::AssertionFailure() << "the reference's weights did not move";
  if (!(std::sqrt(diff2) <= 0.25 * std::sqrt(ref2)))
    return ::testing::AssertionFailure()
           << "relative update error " << std::sqrt(diff2 / ref2) << " > 0.25";
  return ::testing::AssertionSuccess();
}

// The Python that has PyTorch (Debian's python3-torch), for the oracle scripts in tests/oracle.
inline const char* const kTorchPython = "/usr/bin/python3";

// Runs an oracle command line (kTorchPython tests/oracle/...). `ran` when it exited 0. Otherwise
// only a missing PyTorch is a reason to skip, and only under a bare ctest: GLASS_REQUIRE_ORACLE=1
// (set by `make test`, and so in CI) makes it a failure, so that a skipped oracle cannot leave CI
// green. Torch is probed after the fact, because importing it twice would double a test's time.
//   const OracleRun r = run_torch_oracle(cmd);
//   if (r.skip) GTEST_SKIP() << r.message;
//   ASSERT_TRUE(r.ran) << r.message;
struct OracleRun {
  bool ran = false, skip = false;
  std::string message;
};
inline OracleRun run_torch_oracle(const std::string& cmd) {
  if (std::system(cmd.c_str()) == 0) return {.ran = true, .skip = false, .message = ""};
  const std::string probe = std::string(kTorchPython) + " -c 'import torch, numpy' 2>/dev/null";
  if (std::system(probe.c_str()) == 0) return {.message = "the oracle failed: " + cmd};
  const char* required = std::getenv("GLASS_REQUIRE_ORACLE");
  const std::string missing = std::string(kTorchPython) +
                              " cannot import torch and numpy (apt install python3-torch "
                              "python3-numpy)";
  if (required != nullptr && std::string(required) == "1")
    return {.message =
                "the PyTorch oracle is required (GLASS_REQUIRE_ORACLE=1, as under make "
                "test), but " +
                missing};
  return {.skip = true,
          .message = "PyTorch oracle skipped: " + missing +
                     "; make test sets GLASS_REQUIRE_ORACLE=1, which makes this a failure"};
}

// The LaunchInfo of every launch the gateway reports while this is alive, in the order they end.
class LaunchRecorder : public LaunchObserver {
 public:
  LaunchRecorder() { subscribe(this); }
  ~LaunchRecorder() override { unsubscribe(this); }
  void on_launch_end(const LaunchRecord& r) override {
    const std::lock_guard lock(mu_);
    launches.push_back(r.info);
  }
  // The last launch of `kernel`; a test failure (and an empty LaunchInfo) when there is none.
  LaunchInfo last(std::string_view kernel) const {
    for (auto it = launches.rbegin(); it != launches.rend(); ++it)
      if (kernel == it->kernel) return *it;
    ADD_FAILURE() << "no launch of " << kernel << " was recorded";
    return {};
  }
  std::vector<LaunchInfo> launches;

 private:
  std::mutex mu_;
};

}  // namespace glass::testing
