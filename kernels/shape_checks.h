// Argument checks of the row kernels (softmax family, attention, layernorm, rmsnorm, swiglu, rope),
// shared by the cpu kernels and the CUDA host launchers, so that every device rejects the same bad
// input with the same message; and bytes_of, the ideal traffic every launcher reports.
#pragma once

#include <initializer_list>
#include <optional>

#include "engine/error.h"
#include "engine/tensor.h"

namespace glass::kernels {

// A contiguous tensor seen as [rows, cols] over its last dimension (a 0-d tensor is one 1-wide
// row): how the softmax family's kernels see their operands on every device.
struct Rows {
  int64_t cols, rows;
  explicit Rows(const Tensor& t)
      : cols(t.dim() ? t.size(-1) : 1), rows(cols ? t.numel() / cols : 0) {}
};

// Checks that every tensor is contiguous with `numel` elements, and of `dtype` where one is given:
// what the row kernels index by.
inline void check_row_layout(const char* kernel, int64_t numel,
                             std::initializer_list<const Tensor*> ts,
                             std::optional<DType> dtype = std::nullopt) {
  for (const Tensor* t : ts)
    GLASS_CHECK(t->is_contiguous() && t->numel() == numel && (!dtype || t->dtype() == *dtype),
                "{}: {} must be contiguous{}{} with {} elements", kernel, t->describe(),
                dtype ? " " : "", dtype ? dtype_name(*dtype) : "", numel);
}

// Bytes a kernel moves when it touches each of these tensors once.
inline double bytes_of(std::initializer_list<const Tensor*> ts) {
  double bytes = 0;
  for (const Tensor* t : ts) bytes += static_cast<double>(t->nbytes());
  return bytes;
}

// The fused classifier's operands: logits [rows, cols] contiguous with the classes in columns
// [0, vocab), 0 < vocab <= cols (the rest is padding); targets i32 [rows]; losses [rows] and
// valid [1] contiguous, of accum_dtype(logits) (f32 for bf16 logits).
struct ClassifierShape {
  int64_t rows = 0, cols = 0;

  ClassifierShape(const char* kernel, const Tensor& logits, const Tensor& targets,
                  const Tensor& losses, const Tensor& valid, int64_t vocab) {
    GLASS_CHECK(logits.dim() == 2 && logits.is_contiguous(),
                "{}: logits {} must be contiguous [rows, V]", kernel, logits.describe());
    rows = logits.size(0);
    cols = logits.size(1);
    GLASS_CHECK(vocab > 0 && vocab <= cols,
                "{}: the vocabulary {} must be in [1, {}] (the logits' columns, {})", kernel, vocab,
                cols, logits.describe());
    GLASS_CHECK(targets.dtype() == DType::i32 && targets.is_contiguous() && targets.numel() == rows,
                "{}: targets {} must be contiguous i32 with {} elements (logits {})", kernel,
                targets.describe(), rows, logits.describe());
    for (const Tensor* t : {&losses, &valid})
      GLASS_CHECK(t->is_contiguous() && t->dtype() == accum_dtype(logits.dtype()),
                  "{}: {} must be contiguous {} (logits {})", kernel, t->describe(),
                  dtype_name(accum_dtype(logits.dtype())), logits.describe());
    GLASS_CHECK(losses.numel() == rows && valid.numel() == 1,
                "{}: losses {} must hold {} values and valid {} one", kernel, losses.describe(),
                rows, valid.describe());
  }
};

// Checks that n_kv_head divides n_head (grouped-query attention: query head h reads key/value
// head h / (n_head / n_kv_head)); both positive.
inline void check_kv_heads(const char* kernel, int64_t n_head, int64_t n_kv_head) {
  GLASS_CHECK(n_head > 0 && n_kv_head > 0 && n_head % n_kv_head == 0,
              "{}: n_kv_head {} must divide n_head {} (both positive)", kernel, n_kv_head, n_head);
}

// q [B, H, T, D] with the tensors that must share its shape, k and v (and their gradients)
// [B, Hkv, T, D] with Hkv dividing H (query head h reads key/value head h / (H / Hkv)), and probs
// [B, H, T, T]; all contiguous and of q's dtype. A slice is one (batch, query head): T rows of D;
// query slice s reads key/value slice s / group.
struct AttentionShape {
  int64_t slices = 0, T = 0, D = 0, group = 1;

  AttentionShape(const char* kernel, const Tensor& q, std::initializer_list<const Tensor*> like_q,
                 std::initializer_list<const Tensor*> like_kv, const Tensor& probs) {
    GLASS_CHECK(q.dim() == 4 && q.size(3) > 0, "{}: q {} must be [B, H, T, D] with D > 0", kernel,
                q.describe());
    slices = q.size(0) * q.size(1);
    T = q.size(2);
    D = q.size(3);
    for (const Tensor* t : like_q)
      GLASS_CHECK(t->shape() == q.shape() && t->is_contiguous() && t->dtype() == q.dtype(),
                  "{}: {} must be contiguous and like q {}", kernel, t->describe(), q.describe());
    const Tensor& k = **like_kv.begin();
    GLASS_CHECK(k.dim() == 4 && k.size(0) == q.size(0) && k.size(2) == T && k.size(3) == D,
                "{}: k {} must be [B, Hkv, T, D] for q {}", kernel, k.describe(), q.describe());
    check_kv_heads(kernel, q.size(1), k.size(1));
    group = q.size(1) / k.size(1);
    for (const Tensor* t : like_kv)
      GLASS_CHECK(t->shape() == k.shape() && t->is_contiguous() && t->dtype() == q.dtype(),
                  "{}: {} must be contiguous {} {} (k's shape) for q {}", kernel, t->describe(),
                  dtype_name(q.dtype()), shape_str(k.shape()), q.describe());
    GLASS_CHECK(probs.shape() == Shape({q.size(0), q.size(1), T, T}) && probs.is_contiguous() &&
                    probs.dtype() == q.dtype(),
                "{}: probs {} must be contiguous [B, H, T, T] of q's dtype for q {}", kernel,
                probs.describe(), q.describe());
  }
  int64_t rows() const { return slices * T; }
  int64_t kv_slices() const { return slices / group; }
};

// The flash attention entries' operands: qkv [B, T, (H + 2 Hkv) D], the fused c_attn output (query
// head h at columns h*D.., key head j at (H + j)*D.., value head j at (H + Hkv + j)*D..; query head
// h reads key/value head h / (H / Hkv), grouped-query attention; Hkv = H is multi-head attention,
// qkv [B, T, 3C]), the tensors shaped like it (dqkv), the [B, T, C = H D] ones (out, dout) and lse
// f32 [B, H, T]; all contiguous, floating ones of qkv's dtype. A slice is one (batch, query head),
// a key/value slice one (batch, key/value head).
struct FlashAttentionShape {
  int64_t B = 0, T = 0, C = 0, H = 0, Hkv = 0, D = 0, W = 0;  // W: qkv's row, (H + 2 Hkv) D

  FlashAttentionShape(const char* kernel, const Tensor& qkv, int64_t n_head, int64_t n_kv_head,
                      std::initializer_list<const Tensor*> like_qkv,
                      std::initializer_list<const Tensor*> like_out, const Tensor& lse) {
    GLASS_CHECK(qkv.dim() == 3 && qkv.size(2) > 0 && qkv.is_contiguous(),
                "{}: qkv {} must be contiguous [B, T, (n_head + 2 n_kv_head) D]", kernel,
                qkv.describe());
    check_kv_heads(kernel, n_head, n_kv_head);
    B = qkv.size(0);
    T = qkv.size(1);
    W = qkv.size(2);
    H = n_head;
    Hkv = n_kv_head;
    GLASS_CHECK(W % (H + 2 * Hkv) == 0,
                "{}: qkv {}'s last dim {} is not (n_head + 2 n_kv_head) D = ({} + 2 * {}) D",
                kernel, qkv.describe(), W, H, Hkv);
    D = W / (H + 2 * Hkv);
    C = H * D;
    auto check = [&](std::initializer_list<const Tensor*> ts, const Shape& shape) {
      for (const Tensor* t : ts)
        GLASS_CHECK(t->shape() == shape && t->is_contiguous() && t->dtype() == qkv.dtype(),
                    "{}: {} must be contiguous {} {} for qkv {}", kernel, t->describe(),
                    dtype_name(qkv.dtype()), shape_str(shape), qkv.describe());
    };
    check(like_qkv, qkv.shape());
    check(like_out, Shape{B, T, C});
    GLASS_CHECK(lse.shape() == Shape({B, H, T}) && lse.is_contiguous() && lse.dtype() == DType::f32,
                "{}: lse {} must be contiguous f32 [B, n_head, T] = [{}, {}, {}]", kernel,
                lse.describe(), B, H, T);
  }
  int64_t slices() const { return B * H; }
  int64_t kv_slices() const { return B * Hkv; }
  int64_t group() const { return H / Hkv; }  // query heads per key/value head
  // columns of qkv where query head h's q, k and v start (k and v: its key/value head's)
  int64_t q_col(int64_t h) const { return h * D; }
  int64_t k_col(int64_t h) const { return (H + h / group()) * D; }
  int64_t v_col(int64_t h) const { return (H + Hkv + h / group()) * D; }
};

// x seen as [rows, C] over its last dimension, with its per-row statistics and per-column
// parameters checked to be contiguous and of matching sizes; the parameters of x's dtype, the
// statistics of accum_dtype(x) (f32 for bf16 x).
struct LayerNormShape {
  int64_t rows = 0, C = 0;

  LayerNormShape(const char* kernel, const Tensor& x, std::initializer_list<const Tensor*> like_x,
                 std::initializer_list<const Tensor*> per_row,
                 std::initializer_list<const Tensor*> per_column)
      : C(x.dim() ? x.size(-1) : 0) {
    GLASS_CHECK(C > 0, "{}: x {} has no last dimension to normalise", kernel, x.describe());
    rows = x.numel() / C;
    auto check = [&](std::initializer_list<const Tensor*> ts, int64_t numel, DType dtype) {
      for (const Tensor* t : ts)
        GLASS_CHECK(t->is_contiguous() && t->numel() == numel && t->dtype() == dtype,
                    "{}: {} must be contiguous {} with {} elements (x is {})", kernel,
                    t->describe(), dtype_name(dtype), numel, x.describe());
    };
    check(like_x, x.numel(), x.dtype());
    check(per_row, rows, accum_dtype(x.dtype()));
    check(per_column, C, x.dtype());
  }
};

// SwiGLU's operands: out [..., F] (or dout), gate_up [..., 2F] and, for backward, dgate_up like
// gate_up; all contiguous, of out's dtype. rows = out's rows.
struct SwigluShape {
  int64_t rows = 0, F = 0;

  SwigluShape(const char* kernel, const Tensor& gate_up, const Tensor& out,
              const Tensor* dgate_up = nullptr)
      : F(out.dim() ? out.size(-1) : 0) {
    rows = F ? out.numel() / F : 0;
    auto ok = [&](const Tensor& t) {
      return t.is_contiguous() && t.dtype() == out.dtype() && t.dim() >= 1 && t.size(-1) == 2 * F &&
             t.numel() == 2 * rows * F;
    };
    GLASS_CHECK(F > 0 && out.is_contiguous() && ok(gate_up) && (!dgate_up || ok(*dgate_up)),
                "{}: gate_up {}{}{} must be contiguous [..., 2F] for {} [..., F], one dtype",
                kernel, gate_up.describe(), dgate_up ? " and " : "",
                dgate_up ? dgate_up->describe() : "", out.describe());
  }
};

// The rotary embedding's operands: in and out contiguous [B, T, (n_head + 2 n_kv_head) D] of one
// dtype, D even (autograd/rope.cpp names each of these to the user; here they are asserted).
struct RopeShape {
  int64_t B = 0, T = 0, width = 0, D = 0;

  RopeShape(const char* kernel, const Tensor& in, const Tensor& out, int64_t n_head,
            int64_t n_kv_head) {
    const int64_t heads = n_head + 2 * n_kv_head;
    GLASS_CHECK(in.dim() == 3 && n_head > 0 && n_kv_head > 0 && in.size(2) % heads == 0 &&
                    in.size(2) / heads % 2 == 0 && in.is_contiguous() && out.is_contiguous() &&
                    out.shape() == in.shape() && out.dtype() == in.dtype(),
                "{}: in {} and out {} must be contiguous [B, T, (n_head + 2 n_kv_head) D] of one "
                "dtype with D even (n_head {}, n_kv_head {})",
                kernel, in.describe(), out.describe(), n_head, n_kv_head);
    B = in.size(0);
    T = in.size(1);
    width = in.size(2);
    D = width / heads;
  }
};

}  // namespace glass::kernels
