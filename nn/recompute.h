// Activation recomputation in the models (train_gpt --recompute): which part of each transformer
// block keeps only its input for backward and runs its forward again there (autograd/checkpoint.h).
//
//   none   everything forward computes that backward needs is kept
//   gelu   GPT-2: the MLP keeps the GELU's input and rebuilds its output in backward (the fused
//          mlp op's recompute_gelu, autograd/ops.h); Llama: SwiGLU's analogue, the MLP keeps the
//          gate/up projection and re-runs silu(gate) * up and down_proj from it (checkpoint)
//   mlp    the MLP keeps its input (post-LayerNorm / post-RMSNorm activations, which the block
//          keeps anyway) and re-runs all of itself, dropout included (checkpoint)
//   block  each block keeps its input (the residual stream and its first norm, fused with the
//          add before) and re-runs all of itself, the norm after it included (checkpoint)
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "autograd/ops.h"

namespace glass {

enum class Recompute { none, gelu, mlp, block };
const char* recompute_name(Recompute r);  // "none" | "gelu" | "mlp" | "block"
// Or one error listing the valid names.
Recompute parse_recompute(const std::string& name);

// f(x) as a checkpointed part of the tape, replaying `generators` (dropout's) in backward.
Tensor checkpointed(const std::function<Tensor(const Tensor&)>& f, const Tensor& x,
                    const std::vector<Generator*>& generators = {});
// A block's forward (residual stream, its normed copy) -> (output stream, next norm of it), as a
// checkpointed part of the tape.
ResidualNorm checkpointed(const std::function<ResidualNorm(const ResidualNorm&)>& block,
                          const ResidualNorm& in, const std::vector<Generator*>& generators = {});

}  // namespace glass
