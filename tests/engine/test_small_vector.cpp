// SmallVector (engine/small_vector.h), checked against std::vector as the reference: the same
// random sequence of operations on both must leave the same elements, across the move from inline
// storage to the heap and back through copies and moves. Elements are strings longer than the
// small-string buffer, so that a lost, doubled or unconstructed element shows under ASan.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "engine/small_vector.h"
#include "engine/tensor.h"

namespace glass {
namespace {

using Strings = SmallVector<std::string, 3>;

std::vector<std::string> as_vector(const Strings& v) { return {v.begin(), v.end()}; }

std::string value(int i) { return "element number " + std::to_string(i) + " (heap-sized)"; }

TEST(SmallVector, RandomOperationsMatchStdVector) {
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    Strings v;
    std::vector<std::string> ref;
    for (int step = 0; step < 40; ++step) {
      const size_t n = ref.size();
      const int pick = std::uniform_int_distribution<int>(0, 9)(rng);
      const size_t at = n ? std::uniform_int_distribution<size_t>(0, n)(rng) : 0;
      switch (pick) {
        case 0:
        case 1:
          v.push_back(value(step));
          ref.push_back(value(step));
          break;
        case 2:
          v.insert(v.begin() + at, value(step));
          ref.insert(ref.begin() + static_cast<std::ptrdiff_t>(at), value(step));
          break;
        case 3:
          if (at < n) {
            v.erase(v.begin() + at);
            ref.erase(ref.begin() + static_cast<std::ptrdiff_t>(at));
          }
          break;
        case 4:
          v.resize(at + 1, value(-step));
          ref.resize(at + 1, value(-step));
          break;
        case 5:  // an element of the vector itself, pushed while the vector may have to grow
          if (n) {
            v.push_back(v[at % n]);
            ref.push_back(ref[at % n]);
          }
          break;
        case 6: {  // copy, then keep using the copy
          Strings copy(v);
          v = copy;
          break;
        }
        case 7: {  // move out and back
          Strings moved(std::move(v));
          EXPECT_TRUE(v.empty());
          v = std::move(moved);
          break;
        }
        case 8:
          if (n) {
            v.pop_back();
            ref.pop_back();
          }
          break;
        case 9: {  // a range from elsewhere (inserting a vector's own range is undefined)
          const std::vector<std::string> head(ref.begin(),
                                              ref.begin() + static_cast<std::ptrdiff_t>(at));
          v.insert(v.begin() + at, head.begin(), head.end());
          ref.insert(ref.begin() + static_cast<std::ptrdiff_t>(at), head.begin(), head.end());
          break;
        }
      }
      ASSERT_EQ(as_vector(v), ref) << "round " << round << " step " << step << " op " << pick;
    }
  }
}

TEST(SmallVector, StaysInlineUpToItsCapacityThenGrows) {
  Strings v{value(1), value(2), value(3)};
  EXPECT_EQ(v.capacity(), 3u);
  const std::string* inline_data = v.data();
  v.push_back(value(4));
  EXPECT_GT(v.capacity(), 3u);
  EXPECT_NE(v.data(), inline_data);
  EXPECT_EQ(as_vector(v), (std::vector<std::string>{value(1), value(2), value(3), value(4)}));
  // Moving a heap vector hands its block over; moving an inline one moves the elements.
  const std::string* heap_data = v.data();
  Strings moved(std::move(v));
  EXPECT_EQ(moved.data(), heap_data);
  Strings small{value(5)};
  Strings moved_small(std::move(small));
  EXPECT_EQ(as_vector(moved_small), std::vector<std::string>{value(5)});
  EXPECT_TRUE(small.empty());
}

// The list constructor copies a list that fits straight into the inline storage, and a longer one
// into a heap block; either way the elements are the list's, in order, and the list keeps its own.
TEST(SmallVector, BuildsFromListsOnBothSidesOfItsCapacity) {
  const auto check = [](std::initializer_list<std::string> values) {
    std::vector<std::string> ref(values);
    Strings v(values);
    EXPECT_EQ(as_vector(v), ref) << ref.size() << " elements";
    EXPECT_EQ(v.capacity(), std::max<size_t>(3, ref.size())) << ref.size() << " elements";
    v.push_back(value(9));  // the vector stays usable: it grows from where the list left it
    ref.push_back(value(9));
    EXPECT_EQ(as_vector(v), ref) << ref.size() << " elements";
  };
  check({});
  check({value(0)});
  check({value(0), value(1)});
  check({value(0), value(1), value(2)});
  check({value(0), value(1), value(2), value(3)});
  check({value(0), value(1), value(2), value(3), value(4)});
}

TEST(SmallVector, ShapesCompareAndConvertLikeVectors) {
  const Shape s{2, 3, 4};
  EXPECT_EQ(s, (std::vector<int64_t>{2, 3, 4}));
  EXPECT_NE(s, (Shape{2, 3}));
  EXPECT_LT((Shape{2, 3}), s);
  EXPECT_EQ(Shape(3, 7), (Shape{7, 7, 7}));
  EXPECT_EQ(s.to_vector(), (std::vector<int64_t>{2, 3, 4}));
  Shape big{1, 2, 3, 4, 5, 6, 7, 8};  // past the inline capacity of 6
  big.erase(big.begin() + 1, big.begin() + 7);
  EXPECT_EQ(big, (Shape{1, 8}));
  EXPECT_THROW(s.at(3), std::out_of_range);
}

}  // namespace
}  // namespace glass
