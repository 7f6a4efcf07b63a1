// FreeBlocks (engine/free_blocks.h), the stream-aware free lists of the caching allocator, over
// fake streams and events: a block freed on one stream is reused there at once, and on another
// stream only after an event recorded on the first has completed. The same code runs on `cuda`
// with CUDA events.
#include <gtest/gtest.h>

#include <vector>

#include "engine/free_blocks.h"

namespace glass {
namespace {

// Streams are ints; an event is an index into `log`, done once the test says so.
struct FakeEvents {
  struct Record {
    int stream;
    bool done = false;
    bool released = false;
  };
  std::vector<Record>* log;

  using Stream = int;
  using Event = size_t;
  Event record(Stream s) {
    log->push_back({s});
    return log->size() - 1;
  }
  bool done(Event e) { return (*log)[e].done; }
  void release(Event e) {
    EXPECT_FALSE((*log)[e].released) << "event " << e << " released twice";
    (*log)[e].released = true;
  }
};

class FreeBlocksTest : public ::testing::Test {
 protected:
  std::vector<FakeEvents::Record> events;
  FreeBlocks<FakeEvents> blocks{FakeEvents{&events}};
  char memory[4] = {};
  void* a = &memory[0];
  void* b = &memory[1];
  void* c = &memory[2];
};

TEST_F(FreeBlocksTest, EmptyCacheHasNothingToGive) {
  EXPECT_EQ(blocks.take(512, 0), nullptr);
  EXPECT_TRUE(events.empty());
}

TEST_F(FreeBlocksTest, SameStreamReusesAtOnceNewestFirstWithoutEvents) {
  blocks.put(512, a, 0);
  blocks.put(512, b, 0);
  EXPECT_EQ(blocks.take(512, 0), b);  // the most recently freed: likely still in cache
  EXPECT_EQ(blocks.take(512, 0), a);
  EXPECT_EQ(blocks.take(512, 0), nullptr);
  EXPECT_TRUE(events.empty()) << "one stream must not cost an event";
}

TEST_F(FreeBlocksTest, SizeClassesAreSeparate) {
  blocks.put(512, a, 0);
  EXPECT_EQ(blocks.take(1024, 0), nullptr);
  EXPECT_EQ(blocks.take(512, 0), a);
}

TEST_F(FreeBlocksTest, OtherStreamWaitsForTheEventRecordedOnTheFreeingStream) {
  blocks.put(512, a, 1);
  // Stream 2 asks: an event is recorded on stream 1 and is not done yet, so no block.
  EXPECT_EQ(blocks.take(512, 2), nullptr);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].stream, 1);
  // Asking again records no second event.
  EXPECT_EQ(blocks.take(512, 2), nullptr);
  EXPECT_EQ(events.size(), 1u);
  // Once stream 1's work is done, stream 2 gets the block and the event is released.
  events[0].done = true;
  EXPECT_EQ(blocks.take(512, 2), a);
  EXPECT_TRUE(events[0].released);
  EXPECT_EQ(blocks.size(), 0u);
}

TEST_F(FreeBlocksTest, FreeingStreamReusesItsBlockEvenWithAPendingEvent) {
  blocks.put(512, a, 1);
  EXPECT_EQ(blocks.take(512, 2), nullptr);  // records an event, pending
  EXPECT_EQ(blocks.take(512, 1), a);        // stream 1 runs in order: no wait
  EXPECT_TRUE(events[0].released);
}

TEST_F(FreeBlocksTest, PrefersTheSameStreamOverAFinishedOtherStream) {
  blocks.put(512, a, 1);
  blocks.put(512, b, 2);
  EXPECT_EQ(blocks.take(512, 2), b);
  EXPECT_TRUE(events.empty());
}

TEST_F(FreeBlocksTest, TakesTheFirstFinishedBlockOfOtherStreams) {
  blocks.put(512, a, 1);
  blocks.put(512, b, 3);
  EXPECT_EQ(blocks.take(512, 2), nullptr);  // both get events, neither done
  ASSERT_EQ(events.size(), 2u);
  events[1].done = true;  // stream 3 finished, stream 1 not
  EXPECT_EQ(blocks.take(512, 2), b);
  EXPECT_FALSE(events[0].released);
  EXPECT_EQ(blocks.size(), 1u);
}

// A stream capture may not query events: asked for the same stream only, take neither records
// nor asks one, even when another stream's block is free and finished.
TEST_F(FreeBlocksTest, SameStreamOnlyNeverAsksAnEvent) {
  blocks.put(512, a, 1);
  EXPECT_EQ(blocks.take(512, 2, /*same_stream_only=*/true), nullptr);
  EXPECT_TRUE(events.empty());
  blocks.put(512, b, 2);
  EXPECT_EQ(blocks.take(512, 2, /*same_stream_only=*/true), b);
  EXPECT_TRUE(events.empty());
  EXPECT_EQ(blocks.size(), 1u);  // stream 1's block stays cached
}

TEST_F(FreeBlocksTest, DrainHandsOverEveryBlockAndReleasesPendingEvents) {
  blocks.put(512, a, 1);
  blocks.put(512, b, 2);
  blocks.put(4096, c, 1);
  EXPECT_EQ(blocks.take(512, 3), nullptr);  // events for a and b, pending
  std::vector<std::pair<void*, size_t>> freed;
  blocks.drain([&](void* p, size_t size_class) { freed.emplace_back(p, size_class); });
  EXPECT_EQ(freed, (std::vector<std::pair<void*, size_t>>{{a, 512}, {b, 512}, {c, 4096}}));
  for (const auto& e : events) EXPECT_TRUE(e.released);
  EXPECT_EQ(blocks.size(), 0u);
  EXPECT_EQ(blocks.take(512, 1), nullptr);
}

}  // namespace
}  // namespace glass
