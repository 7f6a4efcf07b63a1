#include "nn/recompute.h"

#include "autograd/checkpoint.h"

namespace glass {

const char* recompute_name(Recompute r) {
  switch (r) {
    case Recompute::none:
      return "none";
    case Recompute::gelu:
      return "gelu";
    case Recompute::mlp:
      return "mlp";
    case Recompute::block:
      return "block";
  }
  return "?";
}

Recompute parse_recompute(const std::string& name) {
  for (Recompute r : {Recompute::none, Recompute::gelu, Recompute::mlp, Recompute::block})
    if (name == recompute_name(r)) return r;
  fail(
      "--recompute: '{}' is not a recomputation mode; choose none, gelu (the MLP's activation), "
      "mlp (the whole MLP) or block (each transformer block)",
      name);
}

Tensor checkpointed(const std::function<Tensor(const Tensor&)>& f, const Tensor& x,
                    const std::vector<Generator*>& generators) {
  return checkpoint([f](const std::vector<Tensor>& in) { return std::vector<Tensor>{f(in[0])}; },
                    {x}, generators)[0];
}

ResidualNorm checkpointed(const std::function<ResidualNorm(const ResidualNorm&)>& block,
                          const ResidualNorm& in, const std::vector<Generator*>& generators) {
  const std::vector<Tensor> out = checkpoint(
      [block](const std::vector<Tensor>& x) {
        const ResidualNorm r = block({x[0], x[1]});
        return std::vector<Tensor>{r.residual, r.normed};
      },
      {in.residual, in.normed}, generators);
  return {out[0], out[1]};
}

}  // namespace glass
