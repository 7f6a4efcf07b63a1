// kernels/cuda/embedding.cu on `emu` against the cpu kernels: the gather is a copy, bit-identical;
// the backward sums a token's rows in ascending position order on both (bit-identical) up to 32
// occurrences, a more frequent token's in segments (within f32 rounding; test_memory_bound.cpp).
// Widths leave partial warps and partial blocks; ids repeat; bad ids name position and value.
#include <algorithm>

#include "engine/device_flags.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cuda/cuda_kernels.h"
#include "tests/emu_cublas/emu_cublas_test.h"
#include "tests/testing.h"

namespace glass::emu_cublas_test {
namespace {

using glass::testing::all_close;

// n ids in [0, vocab), many repeated (vocab is small next to n), from a fixed stream.
std::vector<int32_t> token_ids(int64_t n, int64_t vocab, uint64_t seed) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    ids[i] = static_cast<int32_t>(philox_uniform(seed, 0, i) * static_cast<float>(vocab)) % vocab;
  return ids;
}

// Forward copies rows: bit for bit. Backward sums a token's dout rows; a token that occurs at most
// 32 times (one segment of kernels/cuda/embedding.cu's rows pass) is summed in cpu's order, bit
// for bit; a more frequent one in segments of 32 and then the segments, within f32 rounding.
TEST(EmuEmbedding, ForwardAndBackwardMatchCpu) {
  // {300, 7, 64}: ~43 occurrences per token, two segments each. The last: more tokens than a rank
  // block (256), a vocabulary with unused rows, many short repeats.
  const int64_t sizes[][3] = {
      {37, 13, 33}, {37, 13, 1000}, {1, 1, 1}, {300, 7, 64}, {1500, 400, 40}};
  for (const auto& s : sizes) {
    const int64_t n = s[0], vocab = s[1], channels = s[2];
    const std::vector<int32_t> ids = token_ids(n, vocab, 5);
    const std::vector<float> table = randoms(vocab * channels, 6), dout = randoms(n * channels, 7);
    std::vector<float> out[2], dtable[2];
    for (int d = 0; d < 2; ++d) {
      const Device device = d == 0 ? kEmu : kCPU;
      const Tensor id_t = make(ids, {n}, device);
      Tensor out_t = Tensor::empty({n, channels}, DType::f32, device);
      // Stale values in the gradient must be overwritten, not accumulated onto.
      Tensor dtable_t = make(randoms(vocab * channels, 8), {vocab, channels}, device);
      if (d == 0) {
        kernels::cuda::embedding_forward(id_t, make(table, {vocab, channels}, device), out_t);
        kernels::cuda::embedding_backward(id_t, make(dout, {n, channels}, device), dtable_t);
      } else {
        kernels::cpu::embedding_forward(id_t, make(table, {vocab, channels}, device), out_t);
        kernels::cpu::embedding_backward(id_t, make(dout, {n, channels}, device), dtable_t);
      }
      out[d] = read(out_t);
      dtable[d] = read(dtable_t);
    }
    EXPECT_EQ(out[0], out[1]) << "n " << n << " vocab " << vocab << " channels " << channels;
    std::vector<int64_t> count(static_cast<size_t>(vocab));
    for (int32_t id : ids) ++count[static_cast<size_t>(id)];
    if (*std::max_element(count.begin(), count.end()) <= 32)
      EXPECT_EQ(dtable[0], dtable[1])
          << "n " << n << " vocab " << vocab << " channels " << channels;
    else
      EXPECT_TRUE(all_close(as_double(dtable[0]), as_double(dtable[1]), 1e-6))
          << "n " << n << " vocab " << vocab << " channels " << channels;
  }
}

TEST(EmuEmbedding, BackwardWithNoTokensIsZero) {
  Tensor dtable = make(randoms(5 * 33, 9), {5, 33}, kEmu);
  kernels::cuda::embedding_backward(Tensor::empty({0}, DType::i32, kEmu),
                                    Tensor::empty({0, 33}, DType::f32, kEmu), dtable);
  for (float v : read(dtable)) ASSERT_EQ(v, 0.0f);
}

TEST(EmuEmbedding, BadIdsNameTheFirstPositionAndTheValue) {
  std::vector<int32_t> ids = token_ids(37, 13, 10);
  ids[20] = -1;
  ids[5] = 13;
  const Tensor id_t = make(ids, {37}, kEmu);
  const Tensor table = make(randoms(13 * 33, 11), {13, 33}, kEmu);
  Tensor out = Tensor::empty({37, 33}, DType::f32, kEmu);
  // The kernels raise a device flag; the next host read (here check_device_flags) throws.
  std::string e = error_of([&] {
    kernels::cuda::embedding_forward(id_t, table, out);
    check_device_flags(kEmu);
  });
  EXPECT_CONTAINS(e, "embedding_forward: id 13 at position 5 is outside the table's rows [0, 13)");
  Tensor dtable = Tensor::empty({13, 33}, DType::f32, kEmu);
  e = error_of([&] {
    kernels::cuda::embedding_backward(id_t, out, dtable);
    read(dtable);
  });
  EXPECT_CONTAINS(e, "embedding_backward: id 13 at position 5");
  ids[5] = 0;
  e = error_of([&] {
    kernels::cuda::embedding_forward(make(ids, {37}, kEmu), table, out);
    check_device_flags(kEmu);
  });
  EXPECT_CONTAINS(e, "id -1 at position 20");
}

TEST(EmuEmbedding, BadOperandsAreNamed) {
  const Tensor ids = make(token_ids(4, 3, 12), {4}, kEmu);
  const Tensor table = Tensor::empty({3, 8}, DType::f32, kEmu);
  Tensor out = Tensor::empty({4, 7}, DType::f32, kEmu);
  EXPECT_CONTAINS(error_of([&] { kernels::cuda::embedding_forward(ids, table, out); }),
                  "rows f32[4, 7] on emu");
  Tensor f64_table = Tensor::empty({3, 8}, DType::f64, kEmu);
  out = Tensor::empty({4, 8}, DType::f64, kEmu);
  EXPECT_CONTAINS(error_of([&] { kernels::cuda::embedding_forward(ids, f64_table, out); }),
                  "must be contiguous f32 or bf16");
  const Tensor float_ids = Tensor::empty({4}, DType::f32, kEmu);
  EXPECT_CONTAINS(error_of([&] { kernels::cuda::embedding_forward(float_ids, table, out); }),
                  "must be contiguous i32");
}

}  // namespace
}  // namespace glass::emu_cublas_test
