// glass's own f32 GEMM: C = alpha op(A) op(B) + beta C, row-major, for the cpu device.
//
// Why not only OpenBLAS: OpenBLAS picks its GEMM kernel by CPU model, and a model it does not know
// gets its generic SSE3 "Prescott" kernel: 4 lanes and no FMA on a core that has AVX-512, a tenth
// of the core's peak (bench/RESULTS.md). This GEMM is written once against GCC vector extensions,
// its panels laid out in 16-float vectors and its k loop in the build's own register width (one
// AVX-512 register of 16 floats, an AVX2 one of 8, an SSE one of 4: native_vector.h), so its speed
// follows the ISA glass is built for, not a model table.
//
// The algorithm is the one every fast GEMM uses (Goto and van de Geijn; BLIS):
//
//   for each NC-wide block of C's columns:
//     for each KC-deep slab of k:              pack op(B)[slab, block] into NR-wide panels
//       for each MC-tall block of C's rows:    pack op(A)[rows, slab] into MR-tall panels
//         for each NR panel, each MR panel:    micro-kernel: an MR x NR tile of C in registers,
//                                              KC rank-1 updates, then C written once
//
// Packing makes every load of the micro-kernel contiguous (a transpose is only a packing order)
// and keeps the working set in cache: the block of A (MC x KC) in L2, B's panels (KC x NR) in L2
// or L1, the packed B block in L3. The micro-kernel does MR x NR/16 vector FMAs per k for NR/16
// vector loads of B and MR broadcasts of A: with MR = 8 that is 16 FMAs per 2 loads, and its 16
// independent accumulators hide the FMA latency (4 cycles x 2 FMA units needs at least 8). Tiles of
// 6, 12 and 14 rows measured within a few percent of this one (bench/RESULTS.md). Where the tile
// does not fit the registers (AVX2's 16 registers of 8 floats hold a quarter of it), the k loop
// runs once per part that fits (tile_passes).
//
// The slab depth KC is the deepest of 1024, 512 and 256 whose block of A fills at most half of
// this machine's L2 (slab_depth). Every slab after the first adds onto C, so C is read and written
// once per slab: slabs of 1024 made the default model's GEMMs with k = 768 ... 2048 5-12% faster
// than slabs of 256 on two threads of a 1 MB-L2 core (bench/RESULTS.md, 2026-12-05), although a
// B panel (128 KB) then streams from L2 instead of sitting in L1: the micro-kernel reads 160 bytes
// per 8 cycles, well within what L2 delivers.
//
// Three additions, each for a caller that needs it: a small operand is read where it is stored
// instead of packed (flash attention's products, where packing cost as much as the arithmetic);
// a causal product skips the tiles its mask zeroes (`Causal`, sgemm.h); and the row sums of op(A)
// can be taken while A is packed (a linear layer's bias gradient, read with its dW GEMM's A).
// A C of at most kGemvMaxRows rows (decoding a token) does not come here at all: it is
// matrix-vector work, done without packing by kernels/cpu/gemv.cpp.
//
// bf16 operands (sgemm_bf16, for the cpu's bf16 GEMMs) run through these same loops, threads and
// shares with a second micro-kernel, where the CPU has AVX512-BF16: vdpbf16ps multiplies 32 bf16
// pairs and adds each pair's two products into one f32 lane, acc[i] = (acc[i] + x[2i+1] y[2i+1])
// + x[2i] y[2i] (the products exact in f32, each add rounded to nearest even, subnormals read and
// written as zero). So A and B are packed in k pairs (the 32-bit word (x[2q], x[2q+1]) of a row of
// A or a column of B), the tile stays 8 x 32 f32 accumulators, and one instruction does two k
// steps of what an f32 FMA does one: twice the FLOPs per cycle, half the bytes per operand. C
// stays f32 across k slabs; the last slab of each tile adds the bias and rounds to bf16 from the
// registers where the caller asks (Bf16Store, sgemm.h), else the caller rounds C once. Where a
// line of op(A) or op(B) runs along k in storage, a k pair is one 32-bit word and the f32 packing
// (its register transposes) packs the pairs. kernels/cpu/sgemm_bf16.cpp has the other packings,
// the micro-kernel and the f32 conversion path of CPUs without AVX512-BF16. A row-major bf16 A
// whose pairs are such words is not packed at all: the micro-kernel broadcasts each row's pair from
// where it is stored (8 rows, ld apart), as it would from a panel.
#include "kernels/cpu/sgemm.h"

#include "kernels/cpu/gemv.h"
#include "kernels/cpu/native_vector.h"
#include "kernels/cpu/sgemm_bf16_kernel.h"
#include "kernels/cpu/threads.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace glass::kernels::cpu {

namespace {

using Vec = float __attribute__((vector_size(64)));  // 16 floats
constexpr int kLanes = 16;
constexpr int kMR = 8;           // rows of the register tile
constexpr int kNR = 2 * kLanes;  // columns of the register tile: two vectors
constexpr int kMC = 12 * kMR;    // rows of A packed at once: 96 x KC floats, 384 KB at KC 1024
constexpr int kNC = 1024;        // columns of B packed at once: 256 x 1024 floats = 1 MB
static_assert(kMR == kBf16MR && kNR == kBf16NR, "the bf16 micro-kernel holds sgemm's tile");
// A split by columns: the fewest columns a share takes (it packs all of A once).
constexpr int64_t kMinShareColumns = 2 * kNR;
// Products below this many FLOPs run on one thread (bench/RESULTS.md, thread thresholds).
constexpr double kParallelFlops = 4e6;

Vec load(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
void store(float* p, Vec v) { std::memcpy(p, &v, sizeof v); }

// A 16 x 16 transpose in registers, for the packings that turn rows into columns. Round `kBlock`
// swaps the top-right kBlock x kBlock block of every 2 kBlock x 2 kBlock block with the
// bottom-left one; rounds 8, 4, 2, 1 transpose the whole. Each round is 16 two-vector shuffles,
// so 256 floats cost 64 shuffles instead of 256 scalar loads and stores. Always inlined: called
// out of line, the 16 vectors would go through memory.
template <int kBlock, int... lane>
[[gnu::always_inline]] inline void swap_blocks(Vec& upper, Vec& lower,
                                               std::integer_sequence<int, lane...>) {
  const Vec x = upper, y = lower;
  upper = __builtin_shufflevector(x, y, ((lane & kBlock) == 0 ? lane : kLanes + lane - kBlock)...);
  lower = __builtin_shufflevector(x, y, ((lane & kBlock) == 0 ? lane + kBlock : kLanes + lane)...);
}
template <int kBlock>
[[gnu::always_inline]] inline void transpose_round(Vec (&v)[kLanes]) {
  for (int i = 0; i < kLanes; ++i)
    if ((i & kBlock) == 0)
      swap_blocks<kBlock>(v[i], v[i + kBlock], std::make_integer_sequence<int, kLanes>{});
}
[[gnu::always_inline]] inline void transpose(Vec (&v)[kLanes]) {
  transpose_round<8>(v);
  transpose_round<4>(v);
  transpose_round<2>(v);
  transpose_round<1>(v);
}

// A 64-byte aligned float buffer per thread, grown on demand and kept: no allocation per call.
class PackBuffer {
 public:
  float* get(size_t floats) {
    if (floats > size_) {
      data_.reset(static_cast<float*>(std::aligned_alloc(64, (floats * 4 + 63) / 64 * 64)));
      size_ = floats;
    }
    return data_.get();
  }

 private:
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float, Free> data_;
  size_t size_ = 0;
};

// One operand as GEMM sees it: element (i, j) of op(X), whatever X's storage order. Elements are
// f32 (sgemm) or bf16 (sgemm_bf16's fast path).
template <class T>
struct OperandOf {
  const T* data;
  int64_t ld;
  bool trans;
  const T* at(int64_t i, int64_t j) const { return trans ? data + j * ld + i : data + i * ld + j; }
};
using Operand = OperandOf<float>;
using Bf16Operand = OperandOf<bf16>;

double widened(float x) { return x; }
double widened(bf16 x) { return x.to_float(); }

// A bf16 operand whose k pairs are words where stored (k_pairs_are_words, sgemm_bf16_kernel.h),
// seen as an f32 matrix of those words with half the k: its pair panel is that matrix's f32 panel,
// which the f32 packing (register transposes) makes with the bits unchanged. An odd slab depth
// (only the last slab of an odd k) is packed pair by pair instead.
Operand as_words(const Bf16Operand& x) {
  return {reinterpret_cast<const float*>(x.data), x.ld / 2, x.trans};
}

// Rows [i, i + live) of a non-transposed A over k in [p0, p0 + kc) into one MR-tall panel
// ([kc][MR]): out[p * MR + r] = A[i + r][p0 + p]. A full panel goes 32 k at a time through the
// register transpose: vector r < 8 holds row r's first 16 k, vector 8 + r its next 16, so after
// the transpose vector q holds the panel's k = q in its low 8 lanes and k = 16 + q in its high 8.
void pack_rows_as_columns(const Operand& a, int64_t i, int64_t live, int64_t p0, int64_t kc,
                          float* out) {
  static_assert(2 * kMR == kLanes);
  int64_t p = 0;
  if (live == kMR)
    for (; p + 2 * kLanes <= kc; p += 2 * kLanes) {
      Vec v[kLanes];
      for (int r = 0; r < kMR; ++r) {
        v[r] = load(a.at(i + r, p0 + p));
        v[kMR + r] = load(a.at(i + r, p0 + p + kLanes));
      }
      transpose(v);
      alignas(64) float lanes[kLanes];
      for (int q = 0; q < kLanes; ++q) {
        store(lanes, v[q]);
        std::memcpy(out + (p + q) * kMR, lanes, kMR * sizeof(float));
        std::memcpy(out + (p + kLanes + q) * kMR, lanes + kMR, kMR * sizeof(float));
      }
    }
  for (; p < kc; ++p)  // the rest of k, and partial panels (whose missing rows are already zero)
    for (int64_t r = 0; r < live; ++r) out[p * kMR + r] = *a.at(i + r, p0 + p);
}

// The same for a transposed A: row p of the stored matrix holds op(A)'s column p, the MR values
// of every panel for k = p. Each stored row is read once, its `rows` values dealt out to the
// panels (a whole panel's share has a constant size: one vector move). Walking the panels one by
// one instead read MR floats from every row in turn, a stride of lda floats (4 KB at 1024 columns,
// where every row of a slab falls into one set of the L1 cache): the weight gradient of a
// 1024-wide layer (1024 x 256 x 2048) ran at 370 GFLOP/s that way, 393 this way (2 threads).
// With row_sums, each stored row read is also added to the rows' sums over k (SgemmOptions).
void pack_a_transposed(const Operand& a, int64_t i0, int64_t rows, int64_t p0, int64_t kc,
                       float* out, double* row_sums) {
  const int64_t whole = rows / kMR * kMR, tail = rows - whole;
  if (tail) std::fill(out + whole * kc, out + (whole + kMR) * kc, 0.0f);
  for (int64_t p = 0; p < kc; ++p) {
    const float* src = a.at(i0, p0 + p);
    for (int64_t panel = 0; panel < whole; panel += kMR)
      std::memcpy(out + panel * kc + p * kMR, src + panel, kMR * sizeof(float));
    if (tail) std::memcpy(out + whole * kc + p * kMR, src + whole, tail * sizeof(float));
    if (!row_sums) continue;
#pragma omp simd
    for (int64_t i = 0; i < rows; ++i) row_sums[i] += static_cast<double>(src[i]);
  }
}

// op(A)[i0 : i0+rows, p0 : p0+kc] into MR-tall panels, each stored k-major ([kc][MR]), the rows
// past `rows` zero: the micro-kernel then reads A's MR values for one k as MR consecutive floats.
// row_sums (a transposed A only) as for pack_a_transposed.
void pack_a(const Operand& a, int64_t i0, int64_t rows, int64_t p0, int64_t kc, float* out,
            double* row_sums) {
  if (a.trans) return pack_a_transposed(a, i0, rows, p0, kc, out, row_sums);
  for (int64_t panel = 0; panel < rows; panel += kMR, out += kc * kMR) {
    const int64_t live = std::min<int64_t>(kMR, rows - panel);
    if (live < kMR) std::fill(out, out + kc * kMR, 0.0f);
    // row i of A is contiguous along k: the panel is its rows transposed
    pack_rows_as_columns(a, i0 + panel, live, p0, kc, out);
  }
}

// Columns [j, j + live) of a transposed B (column j of op(B) is row j of the stored matrix) over
// k in [p0, p0 + kc) into one NR-wide panel ([kc][NR]): out[p * NR + c] = op(B)[p0 + p][j + c].
// A full panel goes as two 16 x 16 register transposes per 16 k.
void pack_columns_as_rows(const Operand& b, int64_t p0, int64_t kc, int64_t j, int64_t live,
                          float* out) {
  int64_t p = 0;
  if (live == kNR)
    for (; p + kLanes <= kc; p += kLanes)
      for (int half = 0; half < kNR; half += kLanes) {
        Vec v[kLanes];
        for (int c = 0; c < kLanes; ++c) v[c] = load(b.at(p0 + p, j + half + c));
        transpose(v);
        for (int q = 0; q < kLanes; ++q) store(out + (p + q) * kNR + half, v[q]);
      }
  for (; p < kc; ++p)  // the rest of k, and partial panels (whose missing columns are zero)
    for (int64_t c = 0; c < live; ++c) out[p * kNR + c] = *b.at(p0 + p, j + c);
}

// The same for a B that is not transposed: row p of op(B) is contiguous, each panel takes NR floats
// of it (two vector moves when whole). Rows go kRowGroup at a time through every panel: walking
// one panel down all kc rows read 128 bytes per row at a stride of ldb floats, and at 1024 columns
// (4 KB) every row of the slab fell into the same cache sets, so each panel re-read its rows from
// L3; a group of rows stays in L1 while the panels take their shares.
void pack_rows_as_panels(const Operand& b, int64_t p0, int64_t kc, int64_t j0, int64_t cols,
                         float* out) {
  constexpr int64_t kRowGroup = 8;
  for (int64_t g = 0; g < kc; g += kRowGroup) {
    const int64_t group_end = std::min(kc, g + kRowGroup);
    float* panel_out = out;
    for (int64_t panel = 0; panel < cols; panel += kNR, panel_out += kc * kNR) {
      const int64_t live = std::min<int64_t>(kNR, cols - panel);
      for (int64_t p = g; p < group_end; ++p) {
        const float* src = b.at(p0 + p, j0 + panel);
        float* dst = panel_out + p * kNR;
        if (live == kNR) {
          store(dst, load(src));
          store(dst + kLanes, load(src + kLanes));
          continue;
        }
        std::memcpy(dst, src, live * sizeof(float));
        std::fill(dst + live, dst + kNR, 0.0f);
      }
    }
  }
}

// op(B)[p0 : p0+kc, j0 : j0+cols] into NR-wide panels, each stored k-major ([kc][NR]), the columns
// past `cols` zero: the micro-kernel reads B's NR values for one k as two aligned vectors.
void pack_b(const Operand& b, int64_t p0, int64_t kc, int64_t j0, int64_t cols, float* out) {
  if (!b.trans) return pack_rows_as_panels(b, p0, kc, j0, cols, out);
  // column j of op(B) is row j of the stored matrix
  for (int64_t panel = 0; panel < cols; panel += kNR, out += kc * kNR) {
    const int64_t live = std::min<int64_t>(kNR, cols - panel);
    if (live < kNR) std::fill(out, out + kc * kNR, 0.0f);
    pack_columns_as_rows(b, p0, kc, j0 + panel, live, out);
  }
}

// Where the micro-kernel reads A's MR values for k = p: a packed panel ([kc][MR]), or MR rows of a
// row-major A where they are stored (a small A, below).
struct PackedRows {
  const float* panel;
  float at(int r, int64_t p) const { return panel[p * kMR + r]; }
};
struct StoredRows {
  const float* row[kMR];
  float at(int r, int64_t p) const { return row[r][p]; }
};

// The tile's sums: kMR rows of kNR floats in Native vectors.
using TileSums = Native[kMR][kNR / kNativeLanes];

// Rows [r0, r0 + kRows) and columns [c0, c0 + kColumns) of the tile: acc = sum over p of A's
// column p times B's row p (B's row p at b + p * b_step).
template <int kRows, int kColumns, class Rows>
[[gnu::always_inline]] inline void tile_pass(int64_t kc, const Rows& a, int r0, int c0,
                                             const float* b, int64_t b_step, TileSums& acc) {
  constexpr int kVectors = kColumns / kNativeLanes;
  Native part[kRows][kVectors];
  for (int r = 0; r < kRows; ++r)
    for (int v = 0; v < kVectors; ++v) part[r][v] = Native{};
  b += c0;
  for (int64_t p = 0; p < kc; ++p, b += b_step) {
    // one rank-1 update: B's row p (its vectors) times each of A's values in column p
    Native b_row[kVectors];
    for (int v = 0; v < kVectors; ++v) {
      b_row[v] = load_native(b + v * kNativeLanes);
      // in a register: left to itself, GCC folds the load into every FMA that uses it, and a
      // load per FMA plus A's broadcasts is more than the load ports issue in the FMAs' cycles
      // (AVX2, 4 x 16: 46 -> 30 GFLOP/s without this line)
      asm("" : "+x"(b_row[v]));
    }
    for (int r = 0; r < kRows; ++r)
      for (int v = 0; v < kVectors; ++v) part[r][v] += a.at(r0 + r, p) * b_row[v];
  }
  for (int r = 0; r < kRows; ++r)
    for (int v = 0; v < kVectors; ++v) acc[r0 + r][c0 / kNativeLanes + v] = part[r][v];
}

// The k loop over the whole tile runs in passes that each keep their part of it in registers: its
// accumulators, B's row and A's broadcast value must fit the register file (in Native vectors).
// A part too large for it lives on the stack, and the loop runs at a fraction of the FMA rate.
// A pass: rows [r0, r0 + rows) and columns [c0, c0 + columns) of the tile.
struct TilePass {
  int rows, columns, r0, c0;
};
#if defined(__AVX512F__)
// AVX-512 (32 registers of 16 floats): the whole tile, 16 accumulators, one pass.
constexpr TilePass kTilePasses[] = {{kMR, kNR, 0, 0}};
#elif defined(__AVX__)
// AVX2 (16 registers of 8 floats): rows 0-5 of each 16-column half (12 accumulators, 2 B vectors,
// a broadcast: 15 registers), then rows 6-7 of all 32 columns (8 accumulators). Each pass does 2
// FMAs a cycle at best, and 12 accumulators leave the 4-cycle FMA latency slack; four passes of
// 4 x 16 (8 accumulators each) measured 4% slower (bench/RESULTS.md, 2026-12-07). Each pass reads
// A's panel from L1; B's (64 KB at KC 512) is larger than a 32 KB L1, so each pass streams its part
// from L2. Slabs of 256, which would keep a pass's part in L1, were not faster (the same entry).
constexpr TilePass kTilePasses[] = {{6, 16, 0, 0}, {6, 16, 0, 16}, {2, 32, 6, 0}};
#else
// SSE (16 registers of 4 floats): 2 rows of 16 columns, eight passes.
constexpr TilePass kTilePasses[] = {{2, 16, 0, 0}, {2, 16, 0, 16}, {2, 16, 2, 0}, {2, 16, 2, 16},
                                    {2, 16, 4, 0}, {2, 16, 4, 16}, {2, 16, 6, 0}, {2, 16, 6, 16}};
#endif

// Every entry of the tile in exactly one pass, and every pass in whole Native vectors.
consteval bool passes_cover_the_tile_once() {
  int count[kMR][kNR] = {};
  for (const TilePass& pass : kTilePasses) {
    if (pass.columns % kNativeLanes != 0 || pass.c0 % kNativeLanes != 0) return false;
    for (int r = pass.r0; r < pass.r0 + pass.rows; ++r)
      for (int c = pass.c0; c < pass.c0 + pass.columns; ++c)
        if (r >= kMR || c >= kNR || ++count[r][c] != 1) return false;
  }
  for (const auto& row : count)
    for (int n : row)
      if (n != 1) return false;
  return true;
}
static_assert(passes_cover_the_tile_once(),
              "kTilePasses must cover the kMR x kNR tile exactly once");

// The passes of kTilePasses, one after another. The sums of each entry of C are taken in the same
// order in every layout: the bits do not depend on the passes.
template <class Rows, size_t... kPass>
[[gnu::always_inline]] inline void tile_passes(int64_t kc, const Rows& a, const float* b,
                                               int64_t b_step, TileSums& acc,
                                               std::index_sequence<kPass...>) {
  (tile_pass<kTilePasses[kPass].rows, kTilePasses[kPass].columns>(
       kc, a, kTilePasses[kPass].r0, kTilePasses[kPass].c0, b, b_step, acc),
   ...);
}
template <class Rows>
[[gnu::always_inline]] inline void tile_passes(int64_t kc, const Rows& a, const float* b,
                                               int64_t b_step, TileSums& acc) {
  tile_passes(kc, a, b, b_step, acc, std::make_index_sequence<std::size(kTilePasses)>{});
}

// Row r's 16 sums from column 16 * half of the tile, as one Vec.
[[gnu::always_inline]] inline Vec tile_row_half(const TileSums& acc, int r, int half) {
  Vec v;
  std::memcpy(&v, &acc[r][half * kLanes / kNativeLanes], sizeof v);
  return v;
}

// The MR x NR tile of C at c: c = alpha * sum_p a[p] b[p]^T + beta * c (+ bias[j] in column j
// when bias is not null), for the first `rows` x `cols` of it (the rest are padding). B's NR
// values for k = p are at b + p * b_step (NR for a packed panel, ldb for a row-major B read where
// it is stored). beta == 0 does not read c.
template <class Rows>
void micro_kernel(int64_t kc, const Rows& a, const float* b, int64_t b_step, float alpha,
                  float beta, const float* bias, float* c, int64_t ldc, int64_t rows,
                  int64_t cols) {
  // 1. the tile's sums: kMR rows of two vectors, written by the k loop's passes
  TileSums acc;
  // A tile that adds onto C (a later k slab, or beta != 0) asks for its 16 cache lines now, so
  // that they arrive while the k loop runs instead of stalling the write at the end: the weight
  // gradients (k = 2048, 8 slabs) re-read C from L3 once a slab, and measured 3-9% faster so.
  if (beta != 0.0f)
    for (int r = 0; r < kMR; ++r) {
      __builtin_prefetch(c + r * ldc, 1);
      __builtin_prefetch(c + r * ldc + kLanes, 1);
    }
  // 2. kc rank-1 updates, one pass per part of the tile that fits the registers (once, on AVX-512)
  tile_passes(kc, a, b, b_step, acc);
  // 3. scale and write the tile once; a partial tile at C's edge goes through a bounce buffer
  const bool whole = rows == kMR && cols == kNR;
  alignas(64) float edge[kMR][kNR];
  const Vec bias0 = whole && bias ? load(bias) : Vec{},
            bias1 = whole && bias ? load(bias + kLanes) : Vec{};
  for (int r = 0; r < kMR; ++r) {
    if (!whole) {
      store(edge[r], alpha * tile_row_half(acc, r, 0));
      store(edge[r] + kLanes, alpha * tile_row_half(acc, r, 1));
      continue;
    }
    float* row = c + r * ldc;
    Vec out0 = alpha * tile_row_half(acc, r, 0) + bias0,
        out1 = alpha * tile_row_half(acc, r, 1) + bias1;
    if (beta != 0.0f) {
      out0 += beta * load(row);
      out1 += beta * load(row + kLanes);
    }
    store(row, out0);
    store(row + kLanes, out1);
  }
  if (whole) return;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j)
      c[r * ldc + j] =
          edge[r][j] + (bias ? bias[j] : 0.0f) + (beta != 0.0f ? beta * c[r * ldc + j] : 0.0f);
}

// B's NR-wide panels for one k slab as the micro-kernel reads them: panel jr (C's columns from
// j0 + jr) at base + jr * column_step, the next k b_step floats on. Packed: column_step kc, b_step
// NR (bf16: the same in 32-bit words of k pairs, column_step k_pairs(kc)); a small f32 B read
// where it is stored: column_step 1, b_step ldb.
struct BPanels {
  const float* base;
  int64_t column_step, b_step;
};

// Rows [i0, i0 + rows) of C's columns [j0, j0 + cols), for k slab [p0, p0 + kc): A's block packed
// into a_packed (unless A is read where it is stored; row_sums: its rows' sums, see pack_a), then
// every register tile against B's panels, over the k range the causal band leaves it.
void row_block(const Operand& a, bool a_stored, int64_t i0, int64_t rows, int64_t p0, int64_t kc,
               int64_t j0, int64_t cols, const BPanels& b, float alpha, float beta,
               const SgemmOptions& options, float* c, int64_t ldc, float* a_packed,
               double* row_sums, const Bf16Store*) {
  const Causal& causal = options.causal;
  // later slabs add onto what the earlier ones wrote; the bias is added once, with the first
  const float slab_beta = p0 == 0 ? beta : 1.0f;
  const float* slab_bias = p0 == 0 ? options.bias : nullptr;
  if (!a_stored) pack_a(a, i0, rows, p0, kc, a_packed, row_sums ? row_sums + i0 : nullptr);
  for (int64_t jr = 0; jr < cols; jr += kNR)
    for (int64_t ir = 0; ir < rows; ir += kMR) {
      const int64_t tile_rows = std::min<int64_t>(kMR, rows - ir);
      const int64_t first_row = i0 + ir, last_row = first_row + tile_rows - 1;
      if (causal.skips_tile(j0 + jr, last_row)) continue;
      const Causal::KRange k = causal.tile_k_range(first_row, last_row, p0, kc);
      if (k.end == k.begin && p0 > 0) continue;  // nothing to add to what earlier slabs wrote
      const float* b_panel = b.base + jr * b.column_step + k.begin * b.b_step;
      float* c_tile = c + (i0 + ir) * ldc + j0 + jr;
      const float* tile_bias = slab_bias ? slab_bias + j0 + jr : nullptr;
      const int64_t tile_cols = std::min<int64_t>(kNR, cols - jr);
      if (a_stored) {
        // the rows past a partial tile's last read that row again; the tile drops them
        StoredRows stored;
        for (int r = 0; r < kMR; ++r)
          stored.row[r] = a.at(first_row + std::min<int64_t>(r, tile_rows - 1), p0 + k.begin);
        micro_kernel(k.end - k.begin, stored, b_panel, b.b_step, alpha, slab_beta, tile_bias,
                     c_tile, ldc, tile_rows, tile_cols);
      } else {
        micro_kernel(k.end - k.begin, PackedRows{a_packed + ir * kc + k.begin * kMR}, b_panel,
                     b.b_step, alpha, slab_beta, tile_bias, c_tile, ldc, tile_rows, tile_cols);
      }
    }
}

// op(A)[i0 : i0+rows, p0 : p0+kc] of a bf16 A into MR-tall k-pair panels at out (MR * k_pairs(kc)
// words each); row_sums (at row 0, a transposed A only) as pack_a_bf16_pairs takes them.
void pack_a_bf16(const Bf16Operand& a, int64_t i0, int64_t rows, int64_t p0, int64_t kc,
                 uint32_t* out, double* row_sums) {
  if (k_pairs_are_words(a.data, a.ld, !a.trans, p0, kc))
    return pack_a(as_words(a), i0, rows, p0 / 2, kc / 2, reinterpret_cast<float*>(out), nullptr);
  pack_a_bf16_pairs(a.data, a.ld, a.trans, i0, rows, p0, kc, out,
                    row_sums ? row_sums + i0 : nullptr);
}

// op(B)[p0 : p0+kc, j0 : j0+cols] of a bf16 B into NR-wide k-pair panels at out.
void pack_b_bf16(const Bf16Operand& b, int64_t p0, int64_t kc, int64_t j0, int64_t cols,
                 uint32_t* out) {
  if (k_pairs_are_words(b.data, b.ld, b.trans, p0, kc))
    return pack_b(as_words(b), p0 / 2, kc / 2, j0, cols, reinterpret_cast<float*>(out));
  pack_b_bf16_pairs(b.data, b.ld, b.trans, p0, kc, j0, cols, out);
}

// The same for bf16 operands: A packed in k pairs (a panel of MR * k_pairs(kc) words), every tile
// by the vdpbf16ps micro-kernel (sgemm_bf16_kernel.h). Never read where stored, never causal; the
// row sums of a transposed A taken by its packing, as sgemm's. `store` (at C's corner): the last
// slab's bf16 destination.
void row_block(const Bf16Operand& a, bool, int64_t i0, int64_t rows, int64_t p0, int64_t kc,
               int64_t j0, int64_t cols, const BPanels& b, float alpha, float beta,
               const SgemmOptions&, float* c, int64_t ldc, float* a_packed, double* row_sums,
               const Bf16Store* store) {
  const float slab_beta = p0 == 0 ? beta : 1.0f;
  const int64_t pairs = k_pairs(kc);
  // A read where it is stored when its k pairs are 32-bit words there and the block fills whole
  // tiles: packing it only copied it into MR-tall panels, which the micro-kernel reads from L2 as
  // it would the stored rows
  const bool in_place = rows % kMR == 0 && k_pairs_are_words(a.data, a.ld, !a.trans, p0, kc);
  const uint32_t* a_words = reinterpret_cast<const uint32_t*>(a_packed);
  int64_t row_step = 1, pair_step = kMR, tile_step = kMR * pairs;  // a packed panel's
  if (in_place) {
    a_words = reinterpret_cast<const uint32_t*>(a.at(i0, p0));
    row_step = a.ld / 2, pair_step = 1, tile_step = kMR * row_step;
  } else {
    pack_a_bf16(a, i0, rows, p0, kc, reinterpret_cast<uint32_t*>(a_packed), row_sums);
  }
  for (int64_t jr = 0; jr < cols; jr += kNR)
    for (int64_t ir = 0; ir < rows; ir += kMR) {
      const Bf16Store tile = store ? store->at(i0 + ir, j0 + jr) : Bf16Store{};
      micro_kernel_bf16(pairs, a_words + ir / kMR * tile_step, row_step, pair_step,
                        reinterpret_cast<const uint32_t*>(b.base + jr * b.column_step), alpha,
                        slab_beta, c + (i0 + ir) * ldc + j0 + jr, ldc,
                        std::min<int64_t>(kMR, rows - ir), std::min<int64_t>(kNR, cols - jr),
                        store ? &tile : nullptr);
    }
}

// The k slab, KC (see the top of the file): the deepest of 1024, 512 and 256 whose block of A
// (kMC x KC floats) takes at most half of L2, leaving the rest to B's panels and C; 256 where the
// system does not say how large L2 is. Fixed for the process (unless set_sgemm_slab_depth says
// otherwise), so the order of every sum is too.
std::atomic<int64_t> slab_depth_override{0};
int64_t slab_depth() {
  static const int64_t machine_depth = [] {
    const long l2_bytes = sysconf(_SC_LEVEL2_CACHE_SIZE);
    for (const int64_t kc : {1024, 512})
      if (l2_bytes > 0 && kMC * kc * int64_t{sizeof(float)} <= l2_bytes / 2) return kc;
    return int64_t{256};
  }();
  const int64_t override_depth = slab_depth_override.load(std::memory_order_relaxed);
  return override_depth > 0 ? override_depth : machine_depth;
}

// Packed panels of A and of B for slabs of `slab` k, one pair per thread, kept between calls: no
// allocation per call.
float* a_pack_buffer(int64_t slab) {
  thread_local PackBuffer buffer;
  return buffer.get(static_cast<size_t>(kMC * slab));
}
float* b_pack_buffer(int64_t n, int64_t slab) {
  thread_local PackBuffer buffer;
  return buffer.get(static_cast<size_t>(slab) *
                    ((std::min<int64_t>(n, kNC) + kNR - 1) / kNR * kNR));
}

// A small operand is read where it is stored instead of packed, when its layout lets the
// micro-kernel read it as packed (A's rows, B's NR-wide rows) and it is small enough to stay in
// L1 while it is read (32 KB): packing it would cost about as much as the product (a 64 x 64 x 128
// product of flash attention does 1 MFLOP; packing its A and B moves 48 KB).
constexpr int64_t kStoredFloats = 8192;

// The sums over k of op(A)'s m rows into sums (double, zeroed by the caller), in a pass of their
// own, reading A along its stored rows: for an A that is not transposed, and for a product with
// nothing to multiply (scale_c). A transposed A being packed is summed by its packing instead, in
// the same order as here (k ascending for each row).
template <class T>
void sum_rows_of_a(const OperandOf<T>& a, int64_t m, int64_t k, double* sums) {
  if (a.trans) {
    for (int64_t p = 0; p < k; ++p) {
      const T* src = a.at(0, p);
#pragma omp simd
      for (int64_t i = 0; i < m; ++i) sums[i] += widened(src[i]);
    }
    return;
  }
  for (int64_t i = 0; i < m; ++i) {
    const T* row = a.at(i, 0);
    double s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t p = 0; p < k; ++p) s += widened(row[p]);
    sums[i] = s;
  }
}

// The product on the calling thread: the blocked loops above. bf16 operands (T = bf16) are always
// packed, in k pairs, but for a row-major A whose pairs are words where stored (row_block); the
// row sums as for f32 (while packing a transposed A, else a pass).
template <class T>
void sgemm_serial(const OperandOf<T>& a, const OperandOf<T>& b, int64_t m, int64_t n, int64_t k,
                  float alpha, float beta, const SgemmOptions& options, float* c, int64_t ldc,
                  const Bf16Store& store) {
  constexpr bool f32 = std::is_same_v<T, float>;
  const int64_t slab = slab_depth();
  const bool a_stored = f32 && !a.trans && m * k <= kStoredFloats;
  const bool b_stored = f32 && !b.trans && n % kNR == 0 && k * n <= kStoredFloats;
  float* a_packed = a_stored ? nullptr : a_pack_buffer(slab);
  float* b_packed = b_stored ? nullptr : b_pack_buffer(n, slab);
  // the row sums: while the first column block packs a transposed A, else in a pass of their own
  std::vector<double> sums(options.a_row_sums ? static_cast<size_t>(m) : 0, 0.0);
  if (options.a_row_sums && !a.trans) sum_rows_of_a(a, m, k, sums.data());
  for (int64_t j0 = 0; j0 < n; j0 += kNC) {
    const int64_t cols = std::min<int64_t>(kNC, n - j0);
    double* row_sums = options.a_row_sums && a.trans && j0 == 0 ? sums.data() : nullptr;
    for (int64_t p0 = 0; p0 < k; p0 += slab) {
      const int64_t kc = std::min<int64_t>(slab, k - p0);
      BPanels panels{b_packed, kc, kNR};
      if constexpr (!f32) {
        panels.column_step = k_pairs(kc);
        pack_b_bf16(b, p0, kc, j0, cols, reinterpret_cast<uint32_t*>(b_packed));
      } else if (b_stored) {
        panels = {b.at(p0, j0), 1, b.ld};
      } else {
        pack_b(b, p0, kc, j0, cols, b_packed);
      }
      const bool last_slab = p0 + kc >= k;
      for (int64_t i0 = 0; i0 < m; i0 += kMC)
        row_block(a, a_stored, i0, std::min<int64_t>(kMC, m - i0), p0, kc, j0, cols, panels, alpha,
                  beta, options, c, ldc, a_packed, row_sums,
                  last_slab && store.active() ? &store : nullptr);
    }
  }
  for (int64_t i = 0; i < static_cast<int64_t>(sums.size()); ++i)
    options.a_row_sums[i] = static_cast<float>(sums[i]);
}

// beta C (+ bias), for a product with nothing to add (k == 0 or alpha == 0); A's row sums all
// the same.
template <class T>
void scale_c(const OperandOf<T>& a, int64_t m, int64_t n, int64_t k, float beta,
             const SgemmOptions& options, float* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      c[i * ldc + j] =
          (beta == 0.0f ? 0.0f : beta * c[i * ldc + j]) + (options.bias ? options.bias[j] : 0.0f);
  if (!options.a_row_sums) return;
  std::vector<double> sums(static_cast<size_t>(m), 0.0);
  sum_rows_of_a(a, m, k, sums.data());
  for (int64_t i = 0; i < m; ++i) options.a_row_sums[i] = static_cast<float>(sums[i]);
}

// The product, on the pool's threads when it is big enough (sgemm's and sgemm_bf16's).
template <class T>
void blocked(const OperandOf<T>& op_a, const OperandOf<T>& op_b, int64_t m, int64_t n, int64_t k,
             float alpha, float beta, const SgemmOptions& options, float* c, int64_t ldc,
             const Bf16Store& store = {}) {
  const int64_t lda = op_a.ld, ldb = op_b.ld;
  const bool trans_a = op_a.trans, trans_b = op_b.trans;
  const int threads = in_parallel() ? 1 : num_threads();
  if (threads == 1 || 2.0 * m * n * k < kParallelFlops)
    return sgemm_serial(op_a, op_b, m, n, k, alpha, beta, options, c, ldc, store);
  // C is cut into shares, each computed with the serial loops: its own packed panels of A and B,
  // nothing shared, no barrier. The pool's threads claim shares one at a time (caller included),
  // so a thread the scheduler leaves waiting leaves its shares to the others
  // (kernels/cpu/threads.h). C is split by rows when every thread gets at least two row blocks,
  // else by columns (a short C: the weight gradient of a 256-wide layer, or of the tied LM head,
  // 65 rows). Each share packs its B (by rows) or all of A (by columns) once: O(k n) or O(m k)
  // against O(m n k / shares) of arithmetic, so a share keeps at least two row blocks or
  // kMinShareColumns columns. Sharing the panels instead meant a barrier per k slab and C's rows
  // moving between the cores' caches from slab to slab, which cost 5-37% per shape on 2 cores
  // (bench/RESULTS.md, 2026-12-04).
  const bool by_rows = m >= int64_t(threads) * 2 * kMC;
  const int64_t unit = by_rows ? kMR : kNR, extent = by_rows ? m : n;
  const int64_t units = (extent + unit - 1) / unit;
  const int64_t widest = by_rows ? extent / (2 * kMC) : extent / kMinShareColumns;
  // One share per thread: each packs its own B (by rows) or A (by columns), so the packing grows
  // with the shares (at 2 threads the f32 step's B copies took 25 ms of CPU per step against 13
  // at 1). Two per thread left a late thread's second share to the others, but read 1.76x
  // against one's 1.80x in the idle step's speed-up (bench_thread_scaling, eleven alternated
  // runs each, bench/RESULTS.md 2026-12-06 04:25), and four (chunk_count's) cost the 2-thread step
  // another 5%; a machine busy enough to leave a share late is the back-off's case
  // (kernels/cpu/threads.h). A bf16 B packed once, on all threads, before the shares start (one
  // copy for all, and shares of one row block) made the default model's 2-thread step GEMMs 7%
  // slower in quiet runs, not faster (bench/RESULTS.md, 2026-12-06, 02:20 UTC): a private copy in
  // the share's own L2 beats a shared one that the other core wrote.
  const int64_t shares = std::clamp<int64_t>(std::min({widest, units, int64_t{threads}}), 1, units);
  parallel_chunks(shares, [&](int64_t t) {
    const int64_t begin = units * t / shares * unit,
                  end = std::min(extent, units * (t + 1) / shares * unit);
    // A share's rows and columns are numbered from its own corner: the causal diagonal moves too.
    // Split by rows, each share sums its own rows of A; by columns, every share packs all of A and
    // the one with column 0 sums it.
    SgemmOptions share = options;
    const Bf16Store share_store = by_rows ? store.at(begin, 0) : store.at(0, begin);
    if (by_rows) {
      share.causal.diagonal += begin;
      if (options.a_row_sums) share.a_row_sums = options.a_row_sums + begin;
    } else {
      if (options.causal.kind == Causal::kLowerC) share.causal.diagonal -= begin;
      if (options.bias) share.bias = options.bias + begin;
      if (begin != 0) share.a_row_sums = nullptr;
    }
    if (begin < end && by_rows)
      sgemm_serial(OperandOf<T>{op_a.at(begin, 0), lda, trans_a}, op_b, end - begin, n, k, alpha,
                   beta, share, c + begin * ldc, ldc, share_store);
    else if (begin < end)
      sgemm_serial(op_a, OperandOf<T>{op_b.at(0, begin), ldb, trans_b}, m, end - begin, k, alpha,
                   beta, share, c + begin, ldc, share_store);
  });
}

}  // namespace

void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc,
           const SgemmOptions& options) {
  if (m <= 0 || n <= 0) return;
  const Operand op_a{a, lda, trans_a}, op_b{b, ldb, trans_b};
  if (k == 0 || alpha == 0.0f) return scale_c(op_a, m, n, k, beta, options, c, ldc);
  // A C of a few rows (decoding a token) is matrix-vector work: B read once, unpacked (gemv.cpp).
  if (m <= kGemvMaxRows && options.causal.kind == Causal::kNone && !options.a_row_sums)
    return sgemv_rows(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, options.bias);
  blocked(op_a, op_b, m, n, k, alpha, beta, options, c, ldc);
}

void sgemm_bf16_blocked(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                        const bf16* a, int64_t lda, const bf16* b, int64_t ldb, float beta,
                        float* c, int64_t ldc, float* a_row_sums, const Bf16Store& store) {
  if (m <= 0 || n <= 0) return;
  const Bf16Operand op_a{a, lda, trans_a}, op_b{b, ldb, trans_b};
  const SgemmOptions options{.a_row_sums = a_row_sums};
  if (k == 0 || alpha == 0.0f) {
    scale_c(op_a, m, n, k, beta, options, c, ldc);
    return store_from_f32(c, ldc, m, n, store);
  }
  blocked(op_a, op_b, m, n, k, alpha, beta, options, c, ldc, store);
}

void set_sgemm_slab_depth(int64_t kc) {
  if (kc < 0)
    throw std::invalid_argument(
        "set_sgemm_slab_depth: the k slab depth must be positive (or 0 for "
        "the machine's choice), got " +
        std::to_string(kc));
  slab_depth_override.store(kc, std::memory_order_relaxed);
}

SgemmBlocking sgemm_blocking() {
  // kTilePasses in words, e.g. "3 passes: 6x16, 6x16, 2x32"
  static const std::string passes = [] {
    std::string words = std::to_string(std::size(kTilePasses)) +
                        (std::size(kTilePasses) == 1 ? " pass: " : " passes: ");
    for (const TilePass& pass : kTilePasses)
      words += (&pass == kTilePasses ? "" : ", ") + std::to_string(pass.rows) + "x" +
               std::to_string(pass.columns);
    return words;
  }();
  return {kMR, kNR, passes.c_str(), static_cast<int>(slab_depth()), kMC, kNC, 32 * kNativeLanes};
}

}  // namespace glass::kernels::cpu
