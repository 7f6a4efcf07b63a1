// Nodes created inside a module's forward carry its dotted path ("transformer.h.1.ln_2") in their
// creation site, next to the source line; the tape printer shows both.
#include <algorithm>
#include <memory>
#include <set>

#include "autograd/backward.h"
#include "autograd/creation_site.h"
#include "autograd/node.h"
#include "engine/launch.h"
#include "nn/gpt.h"
#include "tests/testing.h"

namespace glass {
namespace {

using namespace testing;

// The creation sites of the nodes of the ops `ops` reachable from `root`, in tape order.
std::vector<std::string> sites_of(const Tensor& root, std::set<std::string_view> ops) {
  std::vector<std::string> out;
  std::vector<Node*> stack{root.grad_fn().get()};
  std::vector<std::pair<int64_t, std::string>> found;
  std::set<Node*> seen;
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    if (!n || !seen.insert(n).second) continue;
    if (ops.count(n->op)) found.emplace_back(n->id, n->created_at.str());
    for (const Edge& e : n->inputs) stack.push_back(e.node.get());
  }
  std::sort(found.begin(), found.end());
  for (auto& [id, site] : found) out.push_back(site);
  return out;
}

TEST(ModulePath, GptNodesNameTheModuleThatCreatedThem) {
  GPT model({/*vocab*/ 11, /*block*/ 8, /*layers*/ 2, /*heads*/ 2, /*width*/ 8});
  Generator gen(1);
  model.init(gen);
  Tensor logits = model.forward(random_ids(2, 5, 11, gen));
  // ln_1, ln_2 of each block, then ln_f, in forward order; the line is the LayerNorm's call. All
  // but the first run fused with the residual add before them (residual_layernorm).
  const std::vector<std::string> ln = sites_of(logits, {"layernorm", "residual_layernorm"});
  ASSERT_EQ(ln.size(), 5u);
  EXPECT_EQ(sites_of(logits, {"residual_layernorm"}).size(), 4u);
  const char* modules[] = {"transformer.h.0.ln_1", "transformer.h.0.ln_2", "transformer.h.1.ln_1",
                           "transformer.h.1.ln_2", "transformer.ln_f"};
  for (size_t i = 0; i < ln.size(); ++i) {
    EXPECT_TRUE(ln[i].starts_with("nn/layers.h:")) << ln[i];
    EXPECT_TRUE(ln[i].ends_with(std::string(" in ") + modules[i])) << ln[i];
  }
  // the only add left is the embeddings' (token + position), in GPT::forward
  const std::vector<std::string> adds = sites_of(logits, {"add"});
  ASSERT_EQ(adds.size(), 1u);
  EXPECT_TRUE(adds[0].starts_with("nn/gpt.cpp:")) << adds[0];
  // a Linear's op is created in Linear::forward, in the linear's path; the MLP is one fused op,
  // created in MLP::forward, in the MLP's path
  EXPECT_TRUE(contains_all(tape_string(logits),
                           {"(created at nn/layers.h:", " in transformer.h.1.attn.c_attn)",
                            "(created at nn/layers.cpp:", " in transformer.h.1.mlp)"}));
}

TEST(ModulePath, ANodeStillNamesItsModuleAfterTheModuleIsGone) {
  Tensor logits;
  {
    auto model = std::make_unique<GPT>(GPTConfig{/*vocab*/ 11, /*block*/ 8, /*layers*/ 1,
                                                 /*heads*/ 2, /*width*/ 8});
    Generator gen(2);
    model->init(gen);
    logits = model->forward(random_ids(1, 3, 11, gen));
  }
  // The creation sites are formatted now, from the module paths the nodes kept.
  EXPECT_TRUE(contains_all(tape_string(logits), {" in transformer.h.0.attn.c_attn)"}));
}

TEST(ModulePath, AModuleWithoutAParentHasNoPath) {
  LayerNorm ln(4);
  Tensor y = ln.forward(from_vector<float>({1, 2, 3, 4}, {1, 4}));
  EXPECT_TRUE(ln.path().empty());
  const std::string site = y.grad_fn()->created_at.str();
  EXPECT_TRUE(site.starts_with("nn/layers.h:")) << site;
  EXPECT_EQ(site.find(" in "), std::string::npos) << site;
}

// Backward runs each node inside the module that made it: what an out-of-memory error in backward
// names (engine/out_of_memory.h reads the open module scope). Every backward launch of a node made
// in a module sees that module's path as the current one, and the launch's own record agrees.
TEST(ModulePath, BackwardRunsEachNodeInItsModule) {
  GPT model({/*vocab*/ 11, /*block*/ 8, /*layers*/ 1, /*heads*/ 2, /*width*/ 8});
  Generator gen(3);
  model.init(gen);
  Tensor loss = sum(model.forward(random_ids(1, 4, 11, gen)));
  struct ScopeSeen : LaunchObserver {
    std::set<std::string> modules;  // the open module scope at each backward launch
    int mismatches = 0, launches = 0;
    void on_launch_begin(const LaunchInfo& info) override {
      if (info.phase != Phase::backward) return;
      ++launches;
      const std::string* open = current_creation_site().module;
      const std::string seen = open ? *open : "";
      if (seen != info.module) ++mismatches;
      modules.insert(seen);
    }
  } observer;
  subscribe(&observer);
  backward(loss);
  unsubscribe(&observer);
  EXPECT_GT(observer.launches, 0);
  EXPECT_EQ(observer.mismatches, 0);
  EXPECT_TRUE(observer.modules.count("transformer.h.0.attn.c_attn"));
  EXPECT_TRUE(observer.modules.count("transformer.h.0.mlp"));
  EXPECT_TRUE(observer.modules.count(""));             // the final sum, made outside any module
  EXPECT_EQ(current_creation_site().module, nullptr);  // and closed again after backward
}

}  // namespace
}  // namespace glass
