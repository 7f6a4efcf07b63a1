// cpu kernels for the softmax family on the last dimension: softmax, log-softmax, and the fused
// cross-entropy (log-softmax of the logits, picked at the target), each with its backward.
//
// A tensor is seen as [rows, cols] over its last dimension; rows are independent and run in
// parallel. Every row subtracts its maximum before exponentiating: exp never overflows, and the
// shift cancels out of the result. Sums run in the row's compute type (float for f32 and bf16,
// kernels/cpu/element.h) in an order fixed by the code, never by the threads, so results are
// bit-identical from run to run. A bf16 softmax row is computed in an f32 copy of the row and
// rounded once when stored; the cross-entropy's losses, lse and dlosses are accum_dtype (f32).
// FLOP counts treat exp and log as one operation each.
#include <cmath>
#include <type_traits>
#include <vector>

#include "kernels/costs/softmax.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/cpu_kernels.h"

namespace glass::kernels::cpu {

namespace {

// The shared shape of the four row-wise kernels: check, pick the type, launch, run the rows.
// make_row<T>() fetches the typed pointers (checking dtypes, outside any parallel region) and
// returns row(offset, cols), which transforms one row.
template <class MakeRow>
void launch_rowwise(const char* kernel, const Tensor& x, std::initializer_list<const Tensor*> ts,
                    double flops_per_element, MakeRow&& make_row) {
  check_row_layout(kernel, x.numel(), ts);
  const Rows g(x);
  const LaunchCost cost = rowwise_cost(flops_per_element, static_cast<double>(x.numel()), ts);
  visit_element(x, kernel, [&]<class T>() {
    const auto row = make_row.template operator()<T>();
    launch(cpu_launch_info(kernel, g.rows, cost.flops, cost.bytes),
           [&] { for_each_row(g.rows, x.numel(), [&](int64_t r) { row(r * g.cols, g.cols); }); });
  });
}

}  // namespace

// y = exp(x - max) / sum(exp(x - max))
void softmax_forward(const Tensor& x, const Tensor& y) {
  launch_rowwise("softmax_forward", x, {&x, &y}, kSoftmaxForwardFlops, [&]<class T>() {
    return [xp = x.data<T>(), yp = y.data<T>()](int64_t off, int64_t n) {
      if constexpr (std::is_same_v<T, bf16>) {
        thread_local std::vector<float> row;  // the row in f32, normalised there
        row.resize(static_cast<size_t>(n));
        for (int64_t j = 0; j < n; ++j) row[j] = to_compute(xp[off + j]);
        masked_softmax_row(row.data(), row.data(), n, n);
        for (int64_t j = 0; j < n; ++j) yp[off + j] = from_compute<T>(row[j]);
      } else {
        masked_softmax_row(xp + off, yp + off, n, n);
      }
    };
  });
}

// dx = y * (dy - sum(dy * y))
void softmax_backward(const Tensor& y, const Tensor& dy, const Tensor& dx) {
  launch_rowwise("softmax_backward", y, {&y, &dy, &dx}, kSoftmaxBackwardFlops, [&]<class T>() {
    return [yp = y.data<T>(), dyp = dy.data<T>(), dxp = dx.data<T>()](int64_t off, int64_t n) {
      // dx = y * (dy - sum(dy * y)), as masked_softmax_backward_row with no mask
      const compute_t<T> dot = row_dot(dyp + off, yp + off, n);
#pragma omp simd
      for (int64_t j = 0; j < n; ++j)
        dxp[off + j] = from_compute<T>(to_compute(yp[off + j]) * (to_compute(dyp[off + j]) - dot));
    };
  });
}

// y = x - logsumexp(x) = (x - max) - log(sum(exp(x - max)))
void log_softmax_forward(const Tensor& x, const Tensor& y) {
  launch_rowwise("log_softmax_forward", x, {&x, &y}, kSoftmaxForwardFlops, [&]<class T>() {
    return [xp = x.data<T>(), yp = y.data<T>()](int64_t off, int64_t n) {
      const T* xr = xp + off;
      T* yr = yp + off;
      const LogSumExp<compute_t<T>> lse = row_logsumexp(xr, n);
#pragma omp simd
      for (int64_t j = 0; j < n; ++j)
        yr[j] = from_compute<T>((to_compute(xr[j]) - lse.max) - lse.log_sum);
    };
  });
}

// dx = dy - softmax(x) * sum(dy), with softmax(x) = exp(y)
void log_softmax_backward(const Tensor& y, const Tensor& dy, const Tensor& dx) {
  launch_rowwise("log_softmax_backward", y, {&y, &dy, &dx}, kSoftmaxBackwardFlops, [&]<class T>() {
    return [yp = y.data<T>(), dyp = dy.data<T>(), dxp = dx.data<T>()](int64_t off, int64_t n) {
      const T* yr = yp + off;
      const T* dyr = dyp + off;
      T* dxr = dxp + off;
      const compute_t<T> s = row_sum(dyr, n);
#pragma omp simd
      for (int64_t j = 0; j < n; ++j)
        dxr[j] = from_compute<T>(to_compute(dyr[j]) - std::exp(to_compute(yr[j])) * s);
    };
  });
}

// losses[r] = logsumexp(logits[r]) - logits[r, t_r] (0 for ignored rows), lse[r] for every row,
// valid[0] = the number of rows that count. `valid` has the logits' dtype, so that the mean loss is
// one division kernel away.
void cross_entropy_forward(const Tensor& logits, const Tensor& targets, const Tensor& losses,
                           const Tensor& lse, const Tensor& valid, int64_t ignore_index) {
  const char* kernel = "cross_entropy_forward";
  const Rows g(logits);
  check_row_layout(kernel, logits.numel(), {&logits});
  check_row_layout(kernel, g.rows, {&targets, &losses, &lse});
  check_row_layout(kernel, 1, {&valid});
  const int64_t n_valid = count_valid_targets(kernel, targets, g.cols, ignore_index);
  // the row pass, and the count of valid rows written by the same launch
  LaunchCost cost = cross_entropy_forward_cost(logits, targets, losses, lse);
  cost.bytes += bytes_of({&valid});
  visit_element(logits, kernel, [&]<class T>() {
    using A = compute_t<T>;
    const T* x = logits.data<T>();
    const int32_t* t = targets.data<int32_t>();
    A* loss = losses.data<A>();
    A* l = lse.data<A>();
    A* n_rows = valid.data<A>();
    launch(cpu_launch_info(kernel, g.rows, cost.flops, cost.bytes), [&] {
      for_each_row(g.rows, logits.numel(), [&](int64_t r) {
        const T* xr = x + r * g.cols;
        const LogSumExp<A> lse_r = row_logsumexp(xr, g.cols);
        l[r] = lse_r.value();
        loss[r] = t[r] == ignore_index ? A(0) : lse_r.log_sum - (to_compute(xr[t[r]]) - lse_r.max);
      });
      n_rows[0] = static_cast<A>(n_valid);
    });
  });
}

// dlogits[r] = (exp(logits[r] - lse[r]) - onehot(t_r)) * dlosses[r]; ignored rows get 0.
void cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse,
                            const Tensor& dlosses, const Tensor& dlogits, int64_t ignore_index) {
  const char* kernel = "cross_entropy_backward";
  const Rows g(logits);
  check_row_layout(kernel, logits.numel(), {&logits, &dlogits});
  check_row_layout(kernel, g.rows, {&targets, &lse, &dlosses});
  count_valid_targets(kernel, targets, g.cols, ignore_index);
  const LaunchCost cost = cross_entropy_backward_cost(logits, targets, lse, dlosses, dlogits);
  visit_element(logits, kernel, [&]<class T>() {
    using A = compute_t<T>;
    const T* x = logits.data<T>();
    const int32_t* t = targets.data<int32_t>();
    const A* l = lse.data<A>();
    const A* dl = dlosses.data<A>();
    T* dx = dlogits.data<T>();
    launch(cpu_launch_info(kernel, g.rows, cost.flops, cost.bytes), [&] {
      for_each_row(g.rows, logits.numel(), [&](int64_t r) {
        const T* xr = x + r * g.cols;
        T* dxr = dx + r * g.cols;
        const A scale = t[r] == ignore_index ? A(0) : dl[r];
        const A lr = l[r];
        // softmax * dloss everywhere, minus dloss at the target, rounded once
        const int64_t target = t[r] == ignore_index ? -1 : t[r];
#pragma omp simd
        for (int64_t j = 0; j < g.cols; ++j)
          dxr[j] = from_compute<T>(std::exp(to_compute(xr[j]) - lr) * scale -
                                   (j == target ? scale : A(0)));
      });
    });
  });
}

}  // namespace glass::kernels::cpu
