// SmallVector<T, N>: a vector that keeps up to N elements inside itself and moves them to the heap
// only beyond that. A tensor's shape and strides, a node's input edges and an op's inputs are
// almost always short, and each eager op makes several of them: with inline storage, making them
// costs no heap allocation (issue 14: recording an op cost ~10 mallocs, most of them these).
//
// The interface is the part of std::vector's that glass uses; iterators are plain pointers, and
// any change of size may move the elements (as with std::vector, iterators do not survive it).
#pragma once

#include <algorithm>
#include <compare>
#include <cstddef>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <new>
#include <stdexcept>
#include <utility>
#include <vector>

namespace glass {

template <class T, size_t N>
class SmallVector {
  static_assert(N > 0, "SmallVector needs room for at least one element inline");

 public:
  using value_type = T;
  using size_type = size_t;
  using difference_type = std::ptrdiff_t;
  using reference = T&;
  using const_reference = const T&;
  using pointer = T*;
  using const_pointer = const T*;
  using iterator = T*;
  using const_iterator = const T*;
  using reverse_iterator = std::reverse_iterator<iterator>;
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;

  SmallVector() = default;
  explicit SmallVector(size_t n) { resize(n); }
  SmallVector(size_t n, const T& value) { assign(n, value); }
  // A list that fits is copied straight into the inline storage: `InputGrads{dy, dy}`, in every
  // backward node of a binary op, went through assign's clear, reserve and growth checks.
  SmallVector(std::initializer_list<T> values) {
    if (values.size() > N) {
      assign(values.begin(), values.end());
      return;
    }
    std::uninitialized_copy(values.begin(), values.end(), data_);
    size_ = values.size();
  }
  template <std::input_iterator It>
  SmallVector(It first, It last) {
    assign(first, last);
  }
  // From and to std::vector, so that code holding a std::vector passes it where this is expected.
  SmallVector(const std::vector<T>& v) { assign(v.begin(), v.end()); }  // NOLINT: implicit
  std::vector<T> to_vector() const { return std::vector<T>(begin(), end()); }

  SmallVector(const SmallVector& other) { assign(other.begin(), other.end()); }
  SmallVector(SmallVector&& other) noexcept { take(std::move(other)); }
  SmallVector& operator=(const SmallVector& other) {
    if (this != &other) assign(other.begin(), other.end());
    return *this;
  }
  SmallVector& operator=(SmallVector&& other) noexcept {
    if (this != &other) {
      release();
      take(std::move(other));
    }
    return *this;
  }
  SmallVector& operator=(std::initializer_list<T> values) {
    assign(values.begin(), values.end());
    return *this;
  }
  ~SmallVector() { release(); }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t capacity() const { return capacity_; }
  T* data() { return data_; }
  const T* data() const { return data_; }
  T* begin() { return data_; }
  T* end() { return data_ + size_; }
  const T* begin() const { return data_; }
  const T* end() const { return data_ + size_; }
  const T* cbegin() const { return data_; }
  const T* cend() const { return data_ + size_; }
  reverse_iterator rbegin() { return reverse_iterator(end()); }
  reverse_iterator rend() { return reverse_iterator(begin()); }
  const_reverse_iterator rbegin() const { return const_reverse_iterator(end()); }
  const_reverse_iterator rend() const { return const_reverse_iterator(begin()); }

  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  T& at(size_t i) {
    if (i >= size_) throw std::out_of_range("SmallVector::at");
    return data_[i];
  }
  const T& at(size_t i) const {
    if (i >= size_) throw std::out_of_range("SmallVector::at");
    return data_[i];
  }
  T& front() { return data_[0]; }
  const T& front() const { return data_[0]; }
  T& back() { return data_[size_ - 1]; }
  const T& back() const { return data_[size_ - 1]; }

  void reserve(size_t n) {
    if (n > capacity_) grow_to(n);
  }
  void clear() {
    std::destroy(begin(), end());
    size_ = 0;
  }
  void resize(size_t n) {
    reserve(n);
    if (n > size_) std::uninitialized_value_construct(data_ + size_, data_ + n);
    if (n < size_) std::destroy(data_ + n, data_ + size_);
    size_ = n;
  }
  void resize(size_t n, const T& value) {
    if (n > size_) {
      const T copy = value;  // `value` may be an element, which growing moves
      reserve(n);
      std::uninitialized_fill(data_ + size_, data_ + n, copy);
      size_ = n;
    } else {
      resize(n);
    }
  }
  void assign(size_t n, const T& value) {
    const T copy = value;
    clear();
    resize(n, copy);
  }
  template <std::input_iterator It>
  void assign(It first, It last) {
    clear();
    if constexpr (std::forward_iterator<It>)
      reserve(static_cast<size_t>(std::distance(first, last)));
    for (; first != last; ++first) emplace_back(*first);
  }

  template <class... Args>
  T& emplace_back(Args&&... args) {
    if (size_ == capacity_) {
      // Build the element first: the arguments may refer to an element that growing moves.
      T value(std::forward<Args>(args)...);
      grow_to(2 * capacity_);
      ::new (static_cast<void*>(data_ + size_)) T(std::move(value));
    } else {
      ::new (static_cast<void*>(data_ + size_)) T(std::forward<Args>(args)...);
    }
    return data_[size_++];
  }
  void push_back(const T& value) { emplace_back(value); }
  void push_back(T&& value) { emplace_back(std::move(value)); }
  void pop_back() { std::destroy_at(data_ + --size_); }

  // Inserts before `pos` (appended, then rotated into place).
  T* insert(const T* pos, const T& value) {
    const size_t i = static_cast<size_t>(pos - data_);
    emplace_back(value);
    std::rotate(data_ + i, data_ + size_ - 1, data_ + size_);
    return data_ + i;
  }
  template <std::input_iterator It>
  T* insert(const T* pos, It first, It last) {
    const size_t i = static_cast<size_t>(pos - data_), old_size = size_;
    for (; first != last; ++first) emplace_back(*first);
    std::rotate(data_ + i, data_ + old_size, data_ + size_);
    return data_ + i;
  }
  T* insert(const T* pos, std::initializer_list<T> values) {
    return insert(pos, values.begin(), values.end());
  }
  T* erase(const T* pos) { return erase(pos, pos + 1); }
  T* erase(const T* first, const T* last) {
    T* f = data_ + (first - data_);
    T* l = data_ + (last - data_);
    T* new_end = std::move(l, end(), f);
    std::destroy(new_end, end());
    size_ -= static_cast<size_t>(l - f);
    return f;
  }

  // A plain loop, not std::equal: for the few elements of a shape, which every op compares
  // several times, std::equal's call to memcmp costs more than the comparisons themselves.
  friend bool operator==(const SmallVector& a, const SmallVector& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!(a[i] == b[i])) return false;
    return true;
  }
  friend auto operator<=>(const SmallVector& a, const SmallVector& b) {
    return std::lexicographical_compare_three_way(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  T* inline_data() { return std::launder(reinterpret_cast<T*>(inline_)); }
  bool on_heap() const { return data_ != reinterpret_cast<const T*>(inline_); }

  void grow_to(size_t n) {
    T* p = static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(alignof(T))));
    std::uninitialized_move(begin(), end(), p);
    std::destroy(begin(), end());
    if (on_heap()) ::operator delete(data_, std::align_val_t(alignof(T)));
    data_ = p;
    capacity_ = n;
  }
  // Destroys the elements and gives back heap memory; leaves an empty inline vector.
  void release() {
    clear();
    if (on_heap()) ::operator delete(data_, std::align_val_t(alignof(T)));
    data_ = inline_data();
    capacity_ = N;
  }
  // Takes other's elements (its heap block, or moved one by one from its inline storage); `this`
  // must be empty and inline. Leaves `other` empty.
  void take(SmallVector&& other) noexcept {
    if (other.on_heap()) {
      data_ = other.data_;
      size_ = other.size_;
      capacity_ = other.capacity_;
      other.data_ = other.inline_data();
      other.capacity_ = N;
    } else {
      std::uninitialized_move(other.begin(), other.end(), data_);
      size_ = other.size_;
      other.clear();
    }
    other.size_ = 0;
  }

  alignas(T) unsigned char inline_[N * sizeof(T)];
  T* data_ = inline_data();
  size_t size_ = 0;
  size_t capacity_ = N;
};

}  // namespace glass
