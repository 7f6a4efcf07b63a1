// The debug switches (engine/debug.h) and creation sites (autograd/creation_site.h): GLASS_SYNC
// names the failing kernel, op, node and creation site; GLASS_CHECK_NAN stops at the first node
// that produced a NaN or infinity, forward or backward; GLASS_BREAK_ON calls glass_break_here
// before exactly the launches it names; tape printing shows where forward created each node.
#include <gtest/gtest.h>

#include <cstdlib>
#include <limits>
#include <stdexcept>

#include "autograd/anomaly.h"
#include "autograd/function.h"
#include "autograd/ops.h"
#include "engine/debug.h"
#if defined(GLASS_HAS_EMU)
#include "engine/emu/builtins.h"
#include "engine/emu/launch.h"
#endif
#include "kernels/backend.h"
#include "tests/debug_switches.h"
#include "tests/testing.h"

namespace glass {
namespace {

using namespace testing;

// "tests/autograd/test_debug.cpp:<line>": how a creation site in this file reads.
std::string here(int line) { return fmt::format("tests/autograd/test_debug.cpp:{}", line); }

enum class FailIn { forward, backward };

// The fault planted in faulty_identity's kernel.
void fault(bool fail) {
  if (fail) throw std::runtime_error("illegal memory access at 0x10");
}

// y = x, with a kernel that fails in forward or in backward the way a device fault shows: by
// throwing from inside the launch. On emu the kernel is a real emulated grid (2 blocks of 32
// threads) and only thread 5 of block 1 faults.
Tensor faulty_identity(const Tensor& x, FailIn where, CallSite site = CallSite::current()) {
  CallSiteScope at(site);
  OpScope op("faulty_identity", {x});
  auto run = [](const Tensor& in, bool fail) {
    LaunchInfo info;
    info.kernel = "faulty_kernel";
    info.device = in.device();
    launch(info, [&] {
#if defined(GLASS_HAS_EMU)
      if (in.device() == kEmu) {
        emu::launch_kernel("faulty_kernel", dim3(2), dim3(32), 0,
                           [&] { fault(fail && blockIdx.x == 1 && threadIdx.x == 5); });
        return;
      }
#endif
      fault(fail);
    });
    return in.detach();
  };
  Tensor y = run(x, where == FailIn::forward);
  return op.finish(y, {}, [run, where](Node&, const Tensor& dy) -> InputGrads {
    return {run(dy, where == FailIn::backward)};
  });
}

Tensor leaf(std::vector<float> v) {
  Tensor t = from_vector(v, {static_cast<int64_t>(v.size())});
  t.set_requires_grad(true);
  return t;
}

TEST(Sync, AFailingForwardLaunchNamesKernelOpNodeAndCreationSite) {
  DebugSwitches on({.sync = true});
  Tensor x = leaf({1, 2, 3});
  const int line = __LINE__ + 1;
  const std::string msg = error_of([&] { faulty_identity(x, FailIn::forward); });
  EXPECT_TRUE(contains_all(msg, {"GLASS_SYNC: kernel 'faulty_kernel' on cpu (op faulty_identity, "
                                 "node #",
                                 ", forward, created at " + here(line) + ") failed: ",
                                 "illegal memory access at 0x10"}));
}

TEST(Sync, AFailingBackwardLaunchNamesTheNodeAndWhereForwardCreatedIt) {
  DebugSwitches on({.sync = true});
  Tensor x = leaf({1, 2, 3});
  const int line = __LINE__ + 1;
  Tensor y = faulty_identity(x * 2.0, FailIn::backward);
  const int64_t id = y.grad_fn()->id;
  const std::string msg = error_of([&] { backward(sum(y)); });
  EXPECT_TRUE(contains_all(
      msg, {fmt::format("kernel 'faulty_kernel' on cpu (op faulty_identity, node #{}, backward, "
                        "created at {})",
                        id, here(line)),
            "illegal memory access"}));
}

TEST(Sync, WithoutItTheKernelsOwnErrorPassesUnchanged) {
  DebugSwitches off(DebugSettings{});
  Tensor x = leaf({1, 2, 3});
  const std::string msg =
      error_of<std::runtime_error>([&] { faulty_identity(x, FailIn::forward); });
  EXPECT_EQ(msg, "illegal memory access at 0x10");
}

#if defined(GLASS_HAS_EMU)
TEST(Sync, AFaultInOneEmulatedCudaThreadNamesTheThreadKernelAndNode) {
  DebugSwitches on({.sync = true});
  Tensor x = to_device(from_vector<float>({1, 2, 3}, {3}), kEmu).set_requires_grad(true);
  const int line = __LINE__ + 1;
  const std::string msg = error_of([&] { faulty_identity(x, FailIn::forward); });
  // the emulator names the CUDA thread; GLASS_SYNC adds the op, the node and where it was made
  EXPECT_TRUE(contains_all(msg, {"GLASS_SYNC: kernel 'faulty_kernel' on emu (op faulty_identity",
                                 "created at " + here(line), "block (1,0,0)", "thread (5,0,0)"}));
}
#endif

TEST(CheckNan, APlantedNanIsReportedAtTheNodeThatMadeItWithItsCreationSite) {
  DebugSwitches on({.check_nan = true});
  Tensor x = leaf({4, -1, 9});
  Tensor shifted = x * 2.0;  // finite: passes the check
  const int line = __LINE__ + 1;
  const std::string msg = error_of([&] { pow(shifted, 0.5); });  // sqrt(-2): NaN at element 1
  EXPECT_TRUE(contains_all(msg, {"GLASS_CHECK_NAN: node #", " pow (created at " + here(line) +
                                                                ") in forward produced nan at "
                                                                "element 1 of its output f32[3] on "
                                                                "cpu"}));
}

TEST(CheckNan, OffTheSameNanFlowsOnSilently) {
  DebugSwitches off(DebugSettings{});
  Tensor y = pow(leaf({4, -1, 9}) * 2.0, 0.5);
  EXPECT_TRUE(std::isnan(to_vector<float>(y)[1]));
}

TEST(CheckNan, AnInfiniteGradientNamesTheBackwardNode) {
  DebugSwitches on({.check_nan = true});
  Tensor x = leaf({1, 0, 4});
  const int line = __LINE__ + 1;
  Tensor r = pow(x, 0.5);  // forward finite; d sqrt(x)/dx = 0.5 / sqrt(x) is inf at x = 0
  Tensor loss = sum(r);
  const std::string msg = error_of([&] { backward(loss); });
  EXPECT_TRUE(contains_all(msg, {fmt::format("GLASS_CHECK_NAN: backward of node #{} pow (created "
                                             "at {}) produced inf at element 1 of the gradient "
                                             "for input 0 f32[3] on cpu",
                                             r.grad_fn()->id, here(line))}));
}

// Attention's causal mask is -inf on purpose: inside a MaskValuesScope -inf passes, NaN and +inf
// do not, and after the scope -inf is an anomaly again.
TEST(CheckNan, MaskValuesScopeLetsOnlyMinusInfinityPass) {
  DebugSwitches on({.check_nan = true});
  const double inf = std::numeric_limits<double>::infinity();
  Tensor x = leaf({1, 2, 3});
  {
    MaskValuesScope mask_values;
    EXPECT_TRUE(std::isinf(to_vector<float>(x * -inf)[0]));
    EXPECT_TRUE(contains_all(error_of([&] { x* inf; }), {"produced inf at element 0"}));
    EXPECT_TRUE(contains_all(error_of([&] { pow(x * -1.0, 0.5); }), {"produced nan at element 0"}));
  }
  EXPECT_TRUE(contains_all(error_of([&] { x * -inf; }), {"produced -inf at element 0"}));
}

TEST(CheckNan, LeavesNodeIdsAndResultsAsTheyAre) {
  // the ids a forward + backward uses, and the gradient it computes
  auto run = [] {
    const int64_t first_id = Tape::current().next_id();
    Generator gen(3);
    Tensor x = rnd({5, 7}, gen, DType::f32).set_requires_grad(true);
    Tensor w = rnd({5}, gen, DType::f32).set_requires_grad(true);
    backward(sum(softmax(layer_norm(transpose(x, 0, 1), w, zeros({5})))));
    return std::make_pair(Tape::current().next_id() - first_id, values(x.grad()));
  };
  std::pair<int64_t, std::vector<double>> off, on;
  {
    DebugSwitches s(DebugSettings{});
    off = run();
  }
  {
    DebugSwitches s({.check_nan = true});
    on = run();
  }
  EXPECT_EQ(off.first, on.first);  // the check records no node of its own
  EXPECT_EQ(off.second, on.second);
}

TEST(BreakOn, CallsTheHookBeforeEveryLaunchOfTheNamedKernelsOrOps) {
  Generator gen(5);
  Tensor x = rnd({3, 9}, gen, DType::f32).set_requires_grad(true);
  Tensor w = ones({9}).set_requires_grad(true), b = zeros({9}).set_requires_grad(true);
  DebugSwitches on({.break_on = {"layernorm_backward", "gelu"}});
  LaunchLog log;
  const uint64_t before = break_hits();
  backward(sum(gelu(layer_norm(x, w, b))));
  // one layernorm_backward kernel, and every launch of the gelu op: its forward and backward
  // kernels and nothing else
  EXPECT_EQ(log.kernels_of_op("gelu"), (std::vector<std::string>{"gelu_forward", "gelu_backward"}));
  EXPECT_EQ(break_hits() - before, 3u);
}

TEST(BreakOn, NamesThatMatchNothingNeverCallIt) {
  DebugSwitches on({.break_on = {"layernorm"}});  // an op name: no kernel of softmax carries it
  const uint64_t before = break_hits();
  softmax(rnd({2, 3}, 1, DType::f32));
  EXPECT_EQ(break_hits(), before);
}

// Runs from_environment() with one variable set, restoring the environment after.
DebugSettings settings_with(const char* name, const char* value) {
  ::setenv(name, value, 1);
  struct Unset {
    const char* name;
    ~Unset() { ::unsetenv(name); }
  } unset{name};
  return DebugSettings::from_environment();
}

TEST(DebugSettings, AreParsedFromTheEnvironment) {
  EXPECT_TRUE(settings_with("GLASS_SYNC", "1").sync);
  EXPECT_FALSE(settings_with("GLASS_CHECK_NAN", "0").check_nan);
  EXPECT_EQ(settings_with("GLASS_BREAK_ON", "softmax_forward,layernorm").break_on,
            (std::vector<std::string>{"softmax_forward", "layernorm"}));
}

TEST(DebugSettings, BadValuesNameTheVariable) {
  EXPECT_EQ(error_of([] { settings_with("GLASS_SYNC", "yes"); }),
            "GLASS_SYNC='yes': expected 0 or 1");
  EXPECT_TRUE(contains_all(error_of([] { settings_with("GLASS_BREAK_ON", "gelu,,softmax"); }),
                           {"GLASS_BREAK_ON='gelu,,softmax'"}));
  EXPECT_TRUE(contains_all(error_of([] { settings_with("GLASS_BREAK_ON", "gelu,"); }),
                           {"GLASS_BREAK_ON='gelu,'", "a name must follow every comma"}));
}

TEST(CreationSite, OperatorsAndNestedOpsRecordTheCallersLine) {
  Tensor a = leaf({1, 2}), b = leaf({3, 4});
  const int line = __LINE__ + 1;
  Tensor y = a * b;
  // linear's own nodes (its matmul and bias add, a transposed weight's copy) get the caller's line
  const int line2 = __LINE__ + 1;
  Tensor z = linear(view(y, {1, 2}), transpose(from_vector<float>({1, 2, 3, 4}, {2, 2}), 0, 1));
  EXPECT_EQ(y.grad_fn()->created_at.str(), here(line));
  EXPECT_EQ(z.grad_fn()->created_at.str(), here(line2));
}

TEST(CreationSite, TapePrintingShowsOpIdShapesSavedTensorsAndCreationSite) {
  Tensor x = leaf({1, 2, 3, 4, 5, 6});
  const int line = __LINE__ + 1;
  Tensor y = softmax(view(x, {2, 3}));
  const std::string tape = tape_string(y, true);
  EXPECT_TRUE(contains_all(
      tape,
      {fmt::format("#{} softmax out [2, 3] <- #{} view", y.grad_fn()->id, y.grad_fn()->id - 1),
       "(created at " + here(line) + ")", "saved[0]: f32[2, 3] on cpu"}));
}

}  // namespace
}  // namespace glass
