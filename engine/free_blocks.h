// FreeBlocks: the free lists of a caching allocator, stream-aware.
//
// On a GPU, freeing a tensor's memory does not mean the GPU is done with it: kernels queued on
// the stream that used it may still be reading or writing it. A block freed on stream S may be
// handed out again for work on S at once (a stream runs its work in order, so the new work starts
// after the old work ends), but for work on another stream T only once the work queued on S
// before the free has finished: an event recorded on S has completed.
//
// The event is recorded lazily, the first time another stream asks for the block. It then covers
// everything queued on S so far, which includes every use of the block before it was freed, and
// the common case (one stream) records no event at all.
//
// A template over the device's events so that this bookkeeping is tested on the CPU with fake
// events (tests/engine/test_free_blocks.cpp). Events provides:
//   using Stream = ...; using Event = ...;
//   Event record(Stream s);   // an event capturing the work queued on s so far
//   bool done(Event e);       // whether that work has finished
//   void release(Event e);    // the event is no longer needed
// Not thread-safe: the Allocator holds its lock around every call.
#pragma once

#include <cstddef>
#include <map>
#include <vector>

namespace glass {

template <class Events>
class FreeBlocks {
 public:
  using Stream = typename Events::Stream;
  using Event = typename Events::Event;

  explicit FreeBlocks(Events events = {}) : events_(events) {}
  ~FreeBlocks() {
    drain([](void*, size_t) {});  // releases pending events; the owner frees the memory
  }
  FreeBlocks(const FreeBlocks&) = delete;
  FreeBlocks& operator=(const FreeBlocks&) = delete;

  // `ptr`, a block of `size_class` bytes, was freed while `stream` was current.
  void put(size_t size_class, void* ptr, Stream stream) {
    lists_[size_class].push_back({ptr, stream, Event{}, false});
  }

  // A cached block of `size_class` that work on `stream` may use now, or nullptr. Prefers the
  // most recently freed block of the same stream (its memory is likely still in cache), then,
  // unless `same_stream_only`, a block of another stream whose work has finished (which asks the
  // events: a caller that may not query them, a stream capture, passes true).
  void* take(size_t size_class, Stream stream, bool same_stream_only = false) {
    auto it = lists_.find(size_class);
    if (it == lists_.end()) return nullptr;
    std::vector<Block>& blocks = it->second;
    for (size_t i = blocks.size(); i-- > 0;)
      if (blocks[i].stream == stream) return remove(blocks, i);
    if (same_stream_only) return nullptr;
    for (size_t i = 0; i < blocks.size(); ++i) {
      Block& b = blocks[i];
      if (!b.has_event) {
        b.event = events_.record(b.stream);
        b.has_event = true;
      }
      if (events_.done(b.event)) return remove(blocks, i);
    }
    return nullptr;
  }

  // Removes every cached block and calls free_block(ptr, size_class) for it, after releasing its
  // event. The caller's free must wait for pending work (cudaFree does: it synchronises).
  template <class Fn>
  void drain(Fn&& free_block) {
    for (auto& [size_class, blocks] : lists_) {
      for (Block& b : blocks) {
        if (b.has_event) events_.release(b.event);
        free_block(b.ptr, size_class);
      }
    }
    lists_.clear();
  }

  // The size class of the largest cached block (0: none), what an out-of-memory error quotes.
  size_t largest() const {
    for (auto it = lists_.rbegin(); it != lists_.rend(); ++it)
      if (!it->second.empty()) return it->first;
    return 0;
  }

  size_t size() const {
    size_t n = 0;
    for (const auto& [size_class, blocks] : lists_) n += blocks.size();
    return n;
  }

 private:
  struct Block {
    void* ptr;
    Stream stream;
    Event event;  // recorded on `stream` when another stream first asked for the block
    bool has_event;
  };

  void* remove(std::vector<Block>& blocks, size_t i) {
    void* ptr = blocks[i].ptr;
    if (blocks[i].has_event) events_.release(blocks[i].event);
    blocks.erase(blocks.begin() + static_cast<std::ptrdiff_t>(i));
    return ptr;
  }

  Events events_;
  std::map<size_t, std::vector<Block>> lists_;  // size class -> blocks, oldest first
};

}  // namespace glass
