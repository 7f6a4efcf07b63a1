// The per-thread object pool behind TensorImpl, Storage and Node (engine/object_pool.h) and the
// one-word mutex of the allocator (engine/word_mutex.h): a freed block is the next one taken for
// its size class, lists are bounded, blocks freed on another thread or after the thread's lists
// are gone are handled, and the mutex excludes.
#include "engine/object_pool.h"

#include <gtest/gtest.h>

#include <mutex>
#include <thread>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

#include "engine/tensor.h"
#include "engine/word_mutex.h"

namespace glass {
namespace {

// Counts from what this thread's lists held when the test began.
class ObjectPool : public ::testing::Test {
 protected:
  void SetUp() override { start_ = object_pool::cached_blocks(); }
  size_t cached() const { return object_pool::cached_blocks() - start_; }
  size_t start_ = 0;
};

TEST_F(ObjectPool, AFreedBlockIsTheNextOneTakenForItsClass) {
  void* a = object_pool::allocate(200);
  object_pool::release(a, 200);
  EXPECT_EQ(cached(), 1u);
  // 185..200 bytes are one class (malloc's 208-byte chunk): the same block comes back.
  void* b = object_pool::allocate(196);
  EXPECT_EQ(b, a);
  EXPECT_EQ(cached(), 0u);
  // Another class does not take it.
  object_pool::release(b, 196);
  void* c = object_pool::allocate(64);
  EXPECT_NE(c, a);
  object_pool::release(c, 64);
  EXPECT_EQ(cached(), 2u);
}

#if defined(__SANITIZE_ADDRESS__)
// Under ASan a cached block is poisoned: a use of a freed tensor's or node's memory is reported.
TEST_F(ObjectPool, ACachedBlockIsPoisonedUntilHandedOutAgain) {
  void* p = object_pool::allocate(440);
  EXPECT_FALSE(__asan_address_is_poisoned(p));
  object_pool::release(p, 440);
  EXPECT_TRUE(__asan_address_is_poisoned(p));
  EXPECT_TRUE(__asan_address_is_poisoned(static_cast<char*>(p) + 439));
  EXPECT_EQ(object_pool::allocate(440), p);
  EXPECT_FALSE(__asan_address_is_poisoned(static_cast<char*>(p) + 439));
  object_pool::release(p, 440);
}
#endif

TEST_F(ObjectPool, LargeBlocksAreNotCached) {
  void* p = object_pool::allocate(object_pool::kMaxBytes + 1);
  object_pool::release(p, object_pool::kMaxBytes + 1);
  EXPECT_EQ(cached(), 0u);
}

TEST_F(ObjectPool, AClassKeepsAtMostKMaxCachedBlocks) {
  const size_t n = object_pool::kMaxCached + 100;
  std::vector<void*> blocks;
  for (size_t i = 0; i < n; ++i) blocks.push_back(object_pool::allocate(480));
  const size_t before = cached();
  for (void* p : blocks) object_pool::release(p, 480);
  EXPECT_LE(cached() - before, object_pool::kMaxCached);
  EXPECT_GE(cached(), object_pool::kMaxCached);
}

TEST_F(ObjectPool, ABlockFreedOnAnotherThreadJoinsThatThreadsList) {
  void* p = object_pool::allocate(100);
  size_t on_other = 0;
  std::thread([&] {
    object_pool::release(p, 100);
    on_other = object_pool::cached_blocks();
    EXPECT_EQ(object_pool::allocate(100), p);  // taken back from this thread's own list
    object_pool::release(p, 100);
  }).join();  // the thread's lists are given back as it ends
  EXPECT_EQ(on_other, 1u);
  EXPECT_EQ(cached(), 0u);
}

// A thread_local made before the thread's first cached block is destroyed after the pool's lists
// are given back: what it frees then must go straight to the system, not onto a drained list.
struct FreesAtThreadExit {
  void* block = nullptr;
  size_t* cached_after = nullptr;
  ~FreesAtThreadExit() {
    object_pool::release(block, 64);
    *cached_after = object_pool::cached_blocks();
  }
};

TEST_F(ObjectPool, BlocksFreedAfterTheThreadsListsAreGoneGoToTheSystem) {
  size_t cached_after = 99;
  std::thread([&] {
    thread_local FreesAtThreadExit late;
    late.block = object_pool::allocate(64);
    late.cached_after = &cached_after;
    object_pool::release(object_pool::allocate(32), 32);  // the first cached block: lists in use
    EXPECT_EQ(object_pool::cached_blocks(), 1u);
  }).join();
  EXPECT_EQ(cached_after, 0u);
}

TEST_F(ObjectPool, TensorsReuseTheirObjects) {
  { const Tensor t = Tensor::empty({16}); }
  const size_t after_one = cached();
  EXPECT_GE(after_one, 2u);  // its TensorImpl and its Storage
  for (int i = 0; i < 100; ++i) {
    const Tensor t = Tensor::empty({16});
  }
  EXPECT_EQ(cached(), after_one);  // the same blocks each time
}

TEST(WordMutex, Excludes) {
  WordMutex mu;
  long count = 0;  // a plain int: without the lock, the threads' increments would be lost
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 100000; ++i) {
        const std::lock_guard lock(mu);
        count = count + 1;
      }
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(count, 400000);
}

}  // namespace
}  // namespace glass
