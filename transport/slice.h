// transport: Slice, the buffer type of the data path's frames (runtime/frames/wire_frame.h) and of
// its transports: a run of bytes that is either borrowed (the caller's memory, kept alive and
// unchanged by the caller until the call that sends it ends: a worker's gradient tensors) or
// shared (a block that lives as long as a slice references it). Copying a Slice copies the
// reference, never the bytes. A received body is handed on as Pieces: the spans of the
// transport's buffers it lies in, valid while the receiver looks at them.
// Thread-safety: a Slice is a value; slices sharing a block may live on different threads.
#pragma once

#include <cstddef>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <utility>

#include "absl/container/inlined_vector.h"

namespace fulcrum::transport {

class Slice {
 public:
  Slice() = default;
  // The caller's memory, not copied.
  static Slice Borrow(const void* data, size_t size) {
    return Slice(static_cast<const char*>(data), size, nullptr);
  }
  // The string's bytes, moved into a shared block.
  static Slice Own(std::string bytes) {
    auto block = std::make_shared<const std::string>(std::move(bytes));
    const char* data = block->data();  // read before the block moves into the slice
    const size_t size = block->size();
    return Slice(data, size, std::move(block));
  }
  // A shared block of `size` bytes for the caller to fill through *data before it is sent.
  static Slice Allocate(size_t size, char** data) {
    std::shared_ptr<char[]> block(new char[size > 0 ? size : 1]);
    *data = block.get();
    return Slice(block.get(), size, std::shared_ptr<const void>(block, block.get()));
  }

  const char* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // What keeps a shared slice's block alive (null for a borrowed one).
  const std::shared_ptr<const void>& owner() const { return owner_; }

 private:
  Slice(const char* data, size_t size, std::shared_ptr<const void> owner)
      : data_(data), size_(size), owner_(std::move(owner)) {}

  const char* data_ = nullptr;
  size_t size_ = 0;
  std::shared_ptr<const void> owner_;
};

// A received body: the pieces of the transport's buffers it lies in, in order.
using Pieces = absl::InlinedVector<std::span<const char>, 8>;

}  // namespace fulcrum::transport
