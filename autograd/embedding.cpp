// Differentiable embedding lookup: out[..., :] = table[ids[...], :]. Forward gathers rows;
// backward scatter-adds dy rows into a fresh table gradient (deterministically, see the kernel).
// Token ids carry no gradient.
#include "autograd/creation_site.h"
#include "autograd/function.h"
#include "autograd/ops.h"
#include "kernels/backend.h"

namespace glass {

Tensor embedding(const Tensor& ids_in, const Tensor& table_in, CallSite site) {
  CallSiteScope at(site);
  GLASS_CHECK(ids_in.dtype() == DType::i32, "embedding: ids {} must be i32", ids_in.describe());
  GLASS_CHECK(table_in.dim() == 2 && is_floating(table_in.dtype()),
              "embedding: table {} must be a floating [V, C] matrix", table_in.describe());
  GLASS_CHECK(ids_in.device() == table_in.device(),
              "embedding: ids {} and table {} differ in device", ids_in.describe(),
              table_in.describe());
  const Tensor ids = contiguous(ids_in), table = contiguous(table_in);
  OpScope scope("embedding", {ids, table});
  Shape out_shape = ids.shape();
  out_shape.push_back(table.size(1));
  Tensor out = Tensor::empty(out_shape, table.dtype(), table.device());
  kernels::backend(table).embedding_forward(ids, table, out);
  // dtable[ids[i]] += dy[i]
  return scope.finish(std::move(out), {ids},
                      [table_shape = table.shape()](Node& n, const Tensor& dy) {
                        // dtable[v] = sum of dy rows at the positions holding id v.
                        Tensor dtable = Tensor::empty(table_shape, dy.dtype(), dy.device());
                        kernels::backend(dy).embedding_backward(n.saved[0], contiguous(dy), dtable);
                        return std::vector<Tensor>{Tensor(), dtable};
                      });
}

}  // namespace glass
