// cpu kernels that fill, copy and convert memory.
//
// copy takes any strides on both sides (contiguous(), slice backward, concat): the dimensions are
// simplified first; then rows contiguous on both sides (a transposed [B, T, H, D] <-> [B, H, T, D]
// pair: rows of D) are one memcpy each, and anything else (a transpose of the last two dimensions)
// is copied element by element in small square tiles, so that the side read or written across
// rows stays in cache. Rows and tiles run in parallel; per-element moves have a fixed size.
#include <cstring>

#include "engine/rng.h"
#include "kernels/costs/memory.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/saturating_cast.h"

namespace glass::kernels::cpu {

namespace {

// Reads element i of a contiguous tensor of any dtype as double / writes one back.
double load_any(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::f32:
      return static_cast<const float*>(p)[i];
    case DType::f64:
      return static_cast<const double*>(p)[i];
    case DType::i32:
      return static_cast<const int32_t*>(p)[i];
    case DType::bf16:
      return static_cast<const bf16*>(p)[i].to_float();
  }
  return 0;
}

void store_any(void* p, DType t, int64_t i, double v) {
  switch (t) {
    case DType::f32:
      static_cast<float*>(p)[i] = static_cast<float>(v);
      break;
    case DType::f64:
      static_cast<double*>(p)[i] = v;
      break;
    case DType::i32:
      static_cast<int32_t*>(p)[i] = saturating_i32(v);  // NaN -> 0, out of range saturates
      break;
    // Through float first: bf16 rounds from the f32 value, as a f32 -> bf16 cast does.
    case DType::bf16:
      static_cast<bf16*>(p)[i] = bf16::from_float(static_cast<float>(v));
      break;
  }
}

// Square tiles of the last two dimensions, for copies whose inner run is strided on one side.
constexpr int64_t kCopyTile = 16;

// One element of E bytes: a memcpy of constant size compiles to a single move.
template <size_t E>
void move(char* to, const char* from) {
  std::memcpy(to, from, E);
}

// Elements of E bytes from s to d over `loop`, whose strides are in bytes. The last two dimensions
// are walked tile by tile: a transpose reads columns on one side, and within a tile those cache
// lines are reused while they are still in L1. Tiles (of every outer index) run in parallel.
template <size_t E>
void copy_tiled(const StridedLoop<2>& loop, const char* s, char* d) {
  const int nd = static_cast<int>(loop.shape.size());
  const Shape& s_step = loop.strides[0];
  const Shape& d_step = loop.strides[1];
  // the tile's steps as locals: the char stores below could alias the vectors holding them
  const int64_t R = loop.shape[nd - 2], C = loop.shape[nd - 1];
  const int64_t s_row = s_step[nd - 2], s_col = s_step[nd - 1];
  const int64_t d_row = d_step[nd - 2], d_col = d_step[nd - 1];
  const int64_t row_tiles = (R + kCopyTile - 1) / kCopyTile;
  const int64_t col_tiles = (C + kCopyTile - 1) / kCopyTile;
  int64_t outer = 1;
  for (int dim = 0; dim < nd - 2; ++dim) outer *= loop.shape[dim];
  const int64_t tiles = outer * row_tiles * col_tiles;
  for_each_row(tiles, outer * R * C, [&](int64_t w) {
    // 1. the tile's rows and columns, and the byte offsets of its outer index
    const int64_t r0 = w / col_tiles % row_tiles * kCopyTile, c0 = w % col_tiles * kCopyTile;
    const int64_t r1 = std::min(R, r0 + kCopyTile), c1 = std::min(C, c0 + kCopyTile);
    const char* from = s;
    char* to = d;
    for (int64_t dim = nd - 3, rem = w / (row_tiles * col_tiles); dim >= 0; --dim) {
      from += rem % loop.shape[dim] * s_step[dim];
      to += rem % loop.shape[dim] * d_step[dim];
      rem /= loop.shape[dim];
    }
    // 2. the tile, row by row
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t c = c0; c < c1; ++c)
        move<E>(to + r * d_row + c * d_col, from + r * s_row + c * s_col);
  });
}

// Elements of E bytes from s to d over `loop`, whose strides are in bytes: rows contiguous on both
// sides are one memcpy each, in parallel; a lone strided run is a loop of moves; anything else
// goes through tiles.
template <size_t E>
void copy_strided(const StridedLoop<2>& loop, const char* s, char* d) {
  const int nd = static_cast<int>(loop.shape.size());
  const int64_t e = static_cast<int64_t>(E);
  if (nd >= 2 && (loop.strides[0][nd - 1] != e || loop.strides[1][nd - 1] != e))
    return copy_tiled<E>(loop, s, d);
  loop.run([&](const auto& off, const auto& step, int64_t n) {
    const int64_t s_step = step[0], d_step = step[1];  // locals: the stores could alias `step`
    if (s_step == e && d_step == e)
      std::memcpy(d + off[1], s + off[0], static_cast<size_t>(n * e));
    else
      for (int64_t j = 0; j < n; ++j) move<E>(d + off[1] + j * d_step, s + off[0] + j * s_step);
  });
}

// dst[i] = value_at(i) for contiguous dst, threaded from `grain` elements on. value_at(i) is a pure
// function of i (a constant, a Philox draw), so the values do not depend on the threads.
template <class ValueAt>
void fill_each(const char* kernel, const Tensor& dst, int64_t grain, ValueAt value_at) {
  GLASS_CHECK(dst.is_contiguous(), "{}: destination {} must be contiguous", kernel, dst.describe());
  const int64_t n = dst.numel();
  const LaunchCost cost = fill_cost(dst);
  launch(cpu_launch_info(kernel, n, cost.flops, cost.bytes), [&] {
    void* p = dst.raw_data();
    const DType t = dst.dtype();
    parallel_ranges(n, n >= grain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) store_any(p, t, i, value_at(i));
    });
  });
}

}  // namespace

void fill(const Tensor& dst, double value) {
  fill_each("fill", dst, kParallelGrain, [=](int64_t) { return value; });
}

void copy(const Tensor& src, const Tensor& dst) {
  GLASS_CHECK(src.shape() == dst.shape() && src.dtype() == dst.dtype(),
              "copy: source {} and destination {} differ", src.describe(), dst.describe());
  const LaunchCost cost = copy_cost(src, dst);
  launch(cpu_launch_info("copy", src.numel(), cost.flops, cost.bytes), [&] {
    // Dimensions both sides walk as one merged: contiguous tensors become a single run.
    const size_t e = dtype_size(src.dtype());
    StridedLoop<2> loop = simplify<2>(src.shape(), {src.strides(), dst.strides()});
    for (Shape& strides : loop.strides)
      for (int64_t& stride : strides) stride *= static_cast<int64_t>(e);  // in bytes
    const char* s = static_cast<const char*>(src.raw_data());
    char* d = static_cast<char*>(dst.raw_data());
    switch (e) {
      case 2:
        return copy_strided<2>(loop, s, d);
      case 4:
        return copy_strided<4>(loop, s, d);
      case 8:
        return copy_strided<8>(loop, s, d);
    }
    fail("copy: no element copy for {}", src.describe());
  });
}

void cast(const Tensor& src, const Tensor& dst) {
  GLASS_CHECK(src.shape() == dst.shape() && src.is_contiguous() && dst.is_contiguous(),
              "cast: source {} and destination {} must be contiguous and of one shape",
              src.describe(), dst.describe());
  const int64_t n = src.numel();
  const LaunchCost cost = copy_cost(src, dst);
  launch(cpu_launch_info("cast", n, cost.flops, cost.bytes), [&] {
    const void* s = src.raw_data();
    void* d = dst.raw_data();
    // f32 <-> bf16, mixed precision's casts of every step (weight copies, gradients to the
    // masters): a typed loop, which vectorises (kernels/cpu/element.h); the same values as below.
    const auto convert = [&]<class From, class To>() {
      const From* from = static_cast<const From*>(s);
      To* to = static_cast<To*>(d);
      parallel_ranges(
          n, n >= kParallelGrain,
          [&](int64_t begin, int64_t end) {
            for (int64_t i = begin; i < end; ++i) to[i] = from_compute<To>(to_compute(from[i]));
          },
          kRowLanes);
    };
    if (src.dtype() == DType::f32 && dst.dtype() == DType::bf16)
      return convert.template operator()<float, bf16>();
    if (src.dtype() == DType::bf16 && dst.dtype() == DType::f32)
      return convert.template operator()<bf16, float>();
    parallel_ranges(n, n >= kParallelGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        store_any(d, dst.dtype(), i, load_any(s, src.dtype(), i));
    });
  });
}

// Philox draws cost more than a store: threaded from fewer elements.
void fill_normal(const Tensor& dst, double mean, double std, uint64_t seed, uint64_t offset) {
  fill_each("fill_normal", dst, kParallelGrain / 8,
            [=](int64_t i) { return mean + std * philox_normal(seed, offset, i); });
}

void fill_uniform(const Tensor& dst, double lo, double hi, uint64_t seed, uint64_t offset) {
  fill_each("fill_uniform", dst, kParallelGrain / 8,
            [=](int64_t i) { return lo + (hi - lo) * philox_uniform(seed, offset, i); });
}

}  // namespace glass::kernels::cpu
