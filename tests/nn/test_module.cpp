// Module: dotted parameter names in registration order, train/eval, state dicts.
#include "autograd/node.h"
#include "nn/module.h"
#include "tests/testing.h"

namespace glass {
namespace {

using namespace testing;

struct Leaf : Module {
  Tensor w, b;
  Leaf(int64_t n) {
    w = register_parameter("w", zeros({n, 3}));
    b = register_parameter("b", zeros({n}));
  }
};

struct Middle : Module {
  Tensor scale;
  Leaf first{2}, second{4};
  Middle() {
    scale = register_parameter("scale", ones({5}));
    register_module("first", first);
    register_module("second", second);
  }
};

struct Outer : Module {
  Middle inner;
  Leaf head{1};
  Outer() {
    register_module("inner", inner);
    register_module("head", head);
  }
};

std::vector<std::string> names_of(const NamedTensors& named) {
  std::vector<std::string> out;
  for (const auto& [name, t] : named) out.push_back(name);
  return out;
}

TEST(Module, NamesAreDottedInRegistrationOrder) {
  Outer m;
  const NamedTensors params = m.named_parameters();
  EXPECT_EQ(names_of(params),
            (std::vector<std::string>{"inner.scale", "inner.first.w", "inner.first.b",
                                      "inner.second.w", "inner.second.b", "head.w", "head.b"}));
  for (const auto& [name, p] : params) {
    EXPECT_EQ(p.autograd_meta().name, name);  // the full name, shown by the tape printer
    EXPECT_TRUE(p.requires_grad()) << name;
  }
  EXPECT_TRUE(params[1].second.is_same(m.inner.first.w));  // the member and the parameter are one
  EXPECT_EQ(m.num_parameters(), 5 + 2 * 3 + 2 + 4 * 3 + 4 + 3 + 1);
  EXPECT_EQ(m.parameters().size(), 7u);
}

TEST(Module, TapePrinterShowsParameterNames) {
  Outer m;
  Tensor y = sum(m.inner.scale * 2.0);
  EXPECT_TRUE(contains_all(tape_string(y), {"leaf inner.scale"}));
}

TEST(Module, TrainAndEvalReachEveryDescendant) {
  Outer m;
  EXPECT_TRUE(m.inner.first.is_training());
  m.eval();
  EXPECT_FALSE(m.is_training());
  EXPECT_FALSE(m.inner.second.is_training());
  m.train();
  EXPECT_TRUE(m.head.is_training());
}

TEST(Module, RegistrationErrors) {
  struct Twice : Module {
    Twice() {
      register_parameter("p", zeros({1}));
      register_parameter("p", zeros({1}));
    }
  };
  EXPECT_TRUE(contains_all(error_of([] { Twice(); }), {"'p' registered twice"}));
  struct IntParam : Module {
    IntParam() { register_parameter("ids", zeros({2}, DType::i32)); }
  };
  EXPECT_TRUE(contains_all(error_of([] { IntParam(); }), {"'ids'", "i32[2]"}));
}

TEST(Module, LoadStateDictCopiesInPlaceAndCastsBF16) {
  Outer src, dst;
  Generator gen(3);
  NamedTensors state;
  for (const auto& [name, p] : src.named_parameters())
    state.emplace_back(name, randn(p.shape(), gen));
  state[0].second = cast(state[0].second, DType::bf16);
  dst.load_state_dict(state);
  EXPECT_EQ(dst.inner.scale.dtype(), DType::f32);
  EXPECT_EQ(values(dst.inner.scale), values(state[0].second));
  EXPECT_EQ(values(dst.head.w), values(state[5].second));
  EXPECT_EQ(values(dst.inner.second.w), values(state[3].second));
}

TEST(Module, LoadStateDictListsEveryProblemAndChangesNothing) {
  Outer m;
  NamedTensors state = m.state_dict();
  state.erase(state.begin());                     // inner.scale missing
  state[0].second = zeros({2, 4});                // inner.first.w: [2, 3] expected
  state.emplace_back("inner.extra", zeros({1}));  // unexpected
  state.emplace_back("head.b", zeros({1}));       // given twice
  state[1].second = zeros({2}, DType::i32);       // inner.first.b: not floating
  const std::string msg = error_of([&] { m.load_state_dict(state); });
  EXPECT_TRUE(contains_all(
      msg, {"missing 'inner.scale'",
            "'inner.first.w' is f32[2, 4] on cpu in the state dict but f32[2, 3] on cpu "
            "in the model",
            "'inner.first.b' is i32[2]", "unexpected 'inner.extra'", "'head.b' appears twice"}));
  EXPECT_EQ(values(m.inner.scale), std::vector<double>(5, 1.0));
}

TEST(Module, NonStrictLoadIgnoresMissingAndUnexpectedButNotShapes) {
  Outer m;
  m.load_state_dict({{"head.b", full({1}, 7.0)}, {"something.else", zeros({9})}}, false);
  EXPECT_EQ(values(m.head.b), std::vector<double>{7.0});
  EXPECT_TRUE(
      contains_all(error_of([&] {
                     m.load_state_dict({{"head.b", zeros({2})}}, false);
                   }),
                   {"'head.b' is f32[2] on cpu in the state dict but f32[1] on cpu in the model"}));
}

}  // namespace
}  // namespace glass
