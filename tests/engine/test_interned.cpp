// interned() (engine/interned.h): one copy of each distinct text for the life of the process. The
// lookup takes a string_view without making a std::string, so these check what callers rely on:
// equal texts give one address, whatever buffer they came from, and distinct texts distinct ones.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "engine/interned.h"

namespace glass {
namespace {

TEST(Interned, EqualTextsFromDifferentBuffersShareOneCopy) {
  std::string first = "transformer.h.0.attn.c_attn (longer than the small-string buffer)";
  const std::string* a = &interned(first);
  first.assign(first.size(), 'x');  // the caller's buffer changes; the interned copy must not
  const std::string second = "transformer.h.0.attn.c_attn (longer than the small-string buffer)";
  EXPECT_EQ(&interned(std::string_view(second)), a);
  EXPECT_EQ(*a, second);
  EXPECT_NE(&interned("transformer.h.0.attn.c_proj"), a);
  EXPECT_EQ(interned("").size(), 0u);
}

TEST(Interned, ThreadsInterningTheSameTextsAgreeOnTheirAddresses) {
  constexpr int kThreads = 4, kTexts = 200;
  std::vector<std::vector<const std::string*>> seen(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([t, &seen] {
      for (int i = 0; i < kTexts; ++i)
        seen[t].push_back(&interned("module path number " + std::to_string((i * 7 + t) % kTexts)));
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t)
    for (int i = 0; i < kTexts; ++i) {
      const std::string text = "module path number " + std::to_string((i * 7 + t) % kTexts);
      EXPECT_EQ(seen[t][i], &interned(text)) << text;
      EXPECT_EQ(*seen[t][i], text);
    }
}

}  // namespace
}  // namespace glass
