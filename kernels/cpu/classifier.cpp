// The fused classifier on cpu (contract in kernels/backend.h; the CUDA kernel and why it is fused
// are in kernels/cuda/classifier.cu): per row, the logsumexp over the classes [0, V), the loss,
// and, in place of the logits, the gradient of the mean loss. Rows run in parallel; each row is
// summed in an order fixed by the code, so results are bit-identical run to run. Columns from V
// on are padding: never a target, no probability, gradient 0.
#include <cmath>

#include "kernels/costs/classifier.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/cpu_kernels.h"

namespace glass::kernels::cpu {

void fused_classifier(const Tensor& logits, const Tensor& targets, const Tensor& losses,
                      const Tensor& valid, int64_t vocab, int64_t ignore_index,
                      bool write_dlogits) {
  const char* kernel = "fused_classifier";
  const ClassifierShape g(kernel, logits, targets, losses, valid, vocab);
  // 1. check the targets (throws naming the first bad row) and count the rows that count
  const int64_t n_valid = count_valid_targets(kernel, targets, vocab, ignore_index);
  // the row pass, and the count of valid rows written by the same launch
  LaunchCost cost = fused_classifier_cost(logits, targets, losses, write_dlogits);
  cost.bytes += bytes_of({&valid});
  visit_element(logits, kernel, [&]<class T>() {
    // the losses and the count are accum_dtype (f32 for bf16 logits, whose gradient is bf16)
    using A = compute_t<T>;
    T* x = logits.data<T>();
    const int32_t* t = targets.data<int32_t>();
    A* loss = losses.data<A>();
    A* n_rows = valid.data<A>();
    const A inv_valid = A(1) / static_cast<A>(n_valid);
    launch(cpu_launch_info(kernel, g.rows, cost.flops, cost.bytes), [&] {
      for_each_row(g.rows, logits.numel(), [&](int64_t r) {
        T* xr = x + r * g.cols;
        const bool counted = t[r] != ignore_index;
        // 2. the loss, logsumexp - x[t] = log_sum - (x[t] - max)
        const LogSumExp<A> lse = row_logsumexp(xr, vocab);
        loss[r] = counted ? lse.log_sum - (to_compute(xr[t[r]]) - lse.max) : A(0);
        if (!write_dlogits) return;
        // 3. the row becomes (softmax - onehot(t)) / valid on the classes, 0 on the padding; the
        // target's entry has the one subtracted before it is rounded
        const A scale = counted ? inv_valid : A(0);
        const A l = lse.value();
        const int64_t target = counted ? t[r] : -1;
#pragma omp simd
        for (int64_t j = 0; j < vocab; ++j)
          xr[j] = from_compute<T>(std::exp(to_compute(xr[j]) - l) * scale -
                                  (j == target ? scale : A(0)));
        for (int64_t j = vocab; j < g.cols; ++j) xr[j] = from_compute<T>(A(0));
      });
      n_rows[0] = static_cast<A>(n_valid);
    });
  });
}

}  // namespace glass::kernels::cpu
