// A tiny GPT trained for 5 steps on a repeating token pattern, through an installed glass.
#include <cstdio>
#include <vector>

#include "autograd/backward.h"
#include "nn/gpt.h"
#include "optim/adamw.h"

int main() {
  using namespace glass;
  const int64_t B = 4, T = 8, V = 16;
  GPT model({.vocab_size = V, .block_size = T, .n_layer = 2, .n_head = 2, .n_embd = 32});
  Generator gen(1);
  model.init(gen);
  AdamW adamw(model.named_parameters(), {.lr = 1e-2});

  // Each row counts up from its own start: the next token is the current one plus one.
  std::vector<int32_t> x, y;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      x.push_back(static_cast<int32_t>((b + t) % V));
      y.push_back(static_cast<int32_t>((b + t + 1) % V));
    }
  const Tensor ids = from_vector(x, {B, T}), targets = from_vector(y, {B, T});

  for (int step = 1; step <= 5; ++step) {
    adamw.zero_grad();
    const Tensor loss = model.loss(model.forward(ids), targets);
    backward(loss);
    adamw.step();
    std::printf("step %d loss %.4f\n", step, item(loss));
  }
  return 0;
}
