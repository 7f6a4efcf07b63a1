// Counter-based random numbers (Philox4x32-10, Salmon et al., SC'11).
//
// A random number is a pure function of (seed, counter): element i of a random op uses counter
// block offset + i/4, lane i%4. So the numbers do not depend on the thread count, the device or
// the order in which threads run, and a Generator's whole state is two integers (seed, offset)
// that a checkpoint saves. The functions are host/device so CUDA kernels use the same code.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__) || defined(GLASS_EMU)
#define GLASS_HD __host__ __device__
#else
#define GLASS_HD
#endif

namespace glass {

struct Philox4 {
  uint32_t v[4];
};

// Ten rounds of Philox4x32 on counter `ctr` (128 bits as lo/hi words) with a 64-bit key.
GLASS_HD inline Philox4 philox4x32_10(uint64_t key, uint64_t ctr_lo, uint64_t ctr_hi) {
  uint32_t c0 = static_cast<uint32_t>(ctr_lo), c1 = static_cast<uint32_t>(ctr_lo >> 32);
  uint32_t c2 = static_cast<uint32_t>(ctr_hi), c3 = static_cast<uint32_t>(ctr_hi >> 32);
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int r = 0; r < 10; ++r) {
    // One round: two 32x32->64 multiplies mix the even words into the odd ones; the key is
    // bumped by the Weyl constants (golden ratio, sqrt(3)-1) between rounds.
    const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0;
    const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2;
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return Philox4{{c0, c1, c2, c3}};
}

// The i-th 32-bit random word of stream (key, offset): counter block offset + i/4, lane i%4.
GLASS_HD inline uint32_t philox_word(uint64_t key, uint64_t offset, uint64_t i) {
  return philox4x32_10(key, offset + i / 4, 0).v[i % 4];
}

// Uniform in [0, 1) with 24 random bits (every value exactly representable as a float).
GLASS_HD inline float philox_uniform(uint64_t key, uint64_t offset, uint64_t i) {
  return static_cast<float>(philox_word(key, offset, i) >> 8) * (1.0f / 16777216.0f);
}

// Standard normal for element i, by Box-Muller on the pair of words (2*(i/2), 2*(i/2)+1):
// even i takes the cosine branch, odd i the sine branch, so pairs share one transform.
GLASS_HD inline double philox_normal(uint64_t key, uint64_t offset, uint64_t i) {
  const uint64_t pair = i & ~uint64_t{1};
  // u1 in (0, 1] so that log(u1) is finite; u2 in [0, 1).
  const double u1 = (static_cast<double>(philox_word(key, offset, pair)) + 1.0) / 4294967296.0;
  const double u2 = static_cast<double>(philox_word(key, offset, pair + 1)) / 4294967296.0;
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double theta = 6.283185307179586 * u2;
  return (i & 1) ? r * std::sin(theta) : r * std::cos(theta);
}

// The counter range of one random op as its kernel receives it: element i uses counter block
// philox_offset(args) + i/4 under key `seed`. `offset_base`, when set, points to device memory the
// kernel reads when it runs, added to `offset`: a CUDA graph replays its launches with the
// arguments they were captured with, so a captured random op finds each replay's counters there
// (Generator::offsets_from_device below), and its replays draw fresh numbers.
struct PhiloxArgs {
  uint64_t seed = 0;
  uint64_t offset = 0;
  const uint64_t* offset_base = nullptr;
};

GLASS_HD inline uint64_t philox_offset(const PhiloxArgs& a) {
  return a.offset + (a.offset_base != nullptr ? *a.offset_base : 0);
}

// A stream of random numbers: each random op reserves a range of counter blocks.
class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : seed_(seed) {}
  uint64_t seed() const { return seed_; }
  uint64_t offset() const { return offset_; }
  void set_state(uint64_t seed, uint64_t offset) {
    seed_ = seed;
    offset_ = offset;
  }
  // Reserves counter blocks for n random words; returns the first block's offset.
  uint64_t reserve(uint64_t n_words) {
    const uint64_t start = offset_;
    offset_ += (n_words + 3) / 4;
    return start;
  }
  // Reserves counter blocks for n random words, as the kernel of a random op receives them: the
  // absolute offset, or while offsets_from_device is on, the offset relative to where the
  // generator stood when it was turned on, with the device memory that holds the base.
  PhiloxArgs next(uint64_t n_words) {
    const uint64_t start = reserve(n_words);
    if (device_base_ == nullptr) return {seed_, start, nullptr};
    return {seed_, start - device_start_, device_base_};
  }
  // CUDA graph capture: from now until offsets_from_host(), next() hands out offsets relative to
  // offset() now, and kernels add the uint64 at `base` (device memory). The replayer writes the
  // generator's offset at the start of each replayed step there before the replay: the counters
  // are then those the eager step would have used.
  void offsets_from_device(const uint64_t* base) {
    device_base_ = base;
    device_start_ = offset_;
  }
  void offsets_from_host() { device_base_ = nullptr; }

 private:
  uint64_t seed_ = 0, offset_ = 0;
  const uint64_t* device_base_ = nullptr;
  uint64_t device_start_ = 0;
};

// The process-wide default generator (weight init, dropout), seeded by manual_seed().
Generator& default_generator();
void manual_seed(uint64_t seed);

}  // namespace glass
