// Host launchers of the CUDA kernels (kernels/cuda/*.cu). The same sources build the `cuda` table
// (nvcc) and the `emu` table (host compiler + engine/emu), each in its own inline namespace
// (build.h); backend_table.cu, compiled in both builds, puts them into the dispatch table.
// Each kernel's contract is documented once, on its entry in kernels/backend.h.
#pragma once

#include "kernels/backend.h"
#include "kernels/cuda/build.h"

namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD {

// memory.cu
void fill(const Tensor& dst, double value);
void copy(const Tensor& src, const Tensor& dst);
void cast(const Tensor& src, const Tensor& dst);
void fill_normal(const Tensor& dst, double mean, double std, uint64_t seed, uint64_t offset);
void fill_uniform(const Tensor& dst, double lo, double hi, uint64_t seed, uint64_t offset);

// elementwise.cu
void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out);
void affine(const Tensor& x, const Tensor& out, double mul, double add);
void pow_scalar(const Tensor& x, const Tensor& out, double p);
void gelu_forward(const Tensor& x, const Tensor& y);
void gelu_backward(const Tensor& x, const Tensor& dy, const Tensor& dx);
void dropout_forward(const Tensor& x, const Tensor& y, double p, uint64_t seed, uint64_t off);
void dropout_backward(const Tensor& dy, const Tensor& dx, double p, uint64_t seed, uint64_t off);

// reduce.cu
void sum_dim(const Tensor& x, const Tensor& out, int dim);
void sum_squares(std::span<const Tensor> xs, const Tensor& out);

// gemm.cu
void gemm(const GemmArgs& args);
void check_gemm_args(const GemmArgs& args);  // throws naming what gemm() would refuse

// softmax.cu
void softmax_forward(const Tensor& x, const Tensor& y);
void softmax_backward(const Tensor& y, const Tensor& dy, const Tensor& dx);
void log_softmax_forward(const Tensor& x, const Tensor& y);
void log_softmax_backward(const Tensor& y, const Tensor& dy, const Tensor& dx);
void cross_entropy_forward(const Tensor& logits, const Tensor& targets, const Tensor& losses,
                           const Tensor& lse, const Tensor& valid, int64_t ignore_index);
void cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse,
                            const Tensor& dlosses, const Tensor& dlogits, int64_t ignore_index);

// layernorm.cu
void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y,
                       const Tensor& mean, const Tensor& rstd, double eps);
void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                        const Tensor& rstd, const Tensor& dx, const Tensor& dweight,
                        const Tensor& dbias);

// attention.cu
void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                       const Tensor& probs, double scale);
void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& probs,
                        const Tensor& dout, const Tensor& dq, const Tensor& dk, const Tensor& dv,
                        double scale);

// embedding.cu
void embedding_forward(const Tensor& ids, const Tensor& table, const Tensor& out);
void embedding_backward(const Tensor& ids, const Tensor& dout, const Tensor& dtable);

// optim.cu
void adamw_step(std::span<const AdamWParam> params, const AdamWHyper& hyper);
void sgd_step(const Tensor& param, const Tensor& grad, const Tensor& buf, double lr,
              double momentum, double weight_decay, bool first_step);

}  // namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD
