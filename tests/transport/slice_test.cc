// transport/slice.h: what a Slice references and how long.
#include "transport/slice.h"

#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace fulcrum::transport {
namespace {

TEST(SliceTest, BorrowedBytesAreTheCallersAndSharedOnesLiveAsLongAsASliceHoldsThem) {
  const std::vector<float> tensor = {1, 2, 3, 4, 5, 6, 7, 8};
  const Slice borrowed = Slice::Borrow(tensor.data(), tensor.size() * 4);
  EXPECT_EQ(borrowed.data(), reinterpret_cast<const char*>(tensor.data()));  // no copy
  EXPECT_EQ(borrowed.owner(), nullptr);
  Slice shared;
  {
    std::string header(100, 'h');  // longer than any small-string buffer
    shared = Slice::Own(std::move(header));
    header.assign(100, 'x');  // the moved-from string is not what the slice holds
  }
  ASSERT_EQ(shared.size(), 100u);
  EXPECT_EQ(std::string(shared.data(), shared.size()), std::string(100, 'h'));
  const Slice small = Slice::Own("ab");  // held inside the string object itself
  EXPECT_EQ(std::string(small.data(), small.size()), "ab");
  char* fill = nullptr;
  const Slice block = Slice::Allocate(4, &fill);
  std::memcpy(fill, "wxyz", 4);
  const Slice copy = block;  // the reference, not the bytes
  EXPECT_EQ(copy.data(), block.data());
  EXPECT_EQ(std::string(copy.data(), copy.size()), "wxyz");
}

}  // namespace
}  // namespace fulcrum::transport
