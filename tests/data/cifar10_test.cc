#include "data/cifar10.h"

#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/data/test_files.h"

namespace fulcrum::data {
namespace {

using ::testing::AllOf;
using testing::CifarRecords;
using ::testing::HasSubstr;
using testing::ScratchDir;
using testing::Truncated;
using testing::WriteGz;
using testing::WritePlain;

class Cifar10Test : public ::testing::Test {
 protected:
  std::string Batch(int i) const { return dir_.File("data_batch_" + std::to_string(i) + ".bin"); }
  // Five train files with 1..5 records; record r of file i has label (i + r) % 10.
  void WriteTrain() {
    for (int i = 1; i <= 5; ++i) {
      std::vector<uint8_t> labels;
      for (int r = 0; r < i; ++r) labels.push_back(static_cast<uint8_t>((i + r) % 10));
      WritePlain(Batch(i), CifarRecords(labels));
    }
  }
  absl::Status LoadTrain() { return LoadCifar10(dir_.path(), Split::kTrain).status(); }

  ScratchDir dir_;
};

TEST_F(Cifar10Test, ReadsAllTrainBatchesInOrder) {
  WriteTrain();
  absl::StatusOr<Dataset> dataset = LoadCifar10(dir_.path(), Split::kTrain);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  EXPECT_EQ(dataset->images.shape(), ops::Shape({15, 32, 32, 3}));
  EXPECT_EQ(dataset->num_classes, 10);
  EXPECT_THAT(dataset->name, ::testing::EndsWith("/train"));
  std::vector<int32_t> expected;
  for (int i = 1; i <= 5; ++i) {
    for (int r = 0; r < i; ++r) expected.push_back((i + r) % 10);
  }
  EXPECT_EQ(dataset->labels, expected);
  // Example 1 is record 0 of data_batch_2: file byte j = j % 256 (R plane, then G, then B),
  // interleaved into NHWC: byte j of plane c lands at pixel j, channel c.
  const float* example = dataset->images.data() + 3072;
  EXPECT_FLOAT_EQ(example[0], 0.0f);                  // R of pixel 0
  EXPECT_FLOAT_EQ(example[255 * 3], 1.0f);            // R of pixel 255
  EXPECT_FLOAT_EQ(example[1 * 3 + 1], 1.0f / 255.0f);  // G of pixel 1: file byte 1025
  EXPECT_FLOAT_EQ(example[2 * 3 + 2], 2.0f / 255.0f);  // B of pixel 2: file byte 2050
}

TEST_F(Cifar10Test, ReadsGzippedTestBatch) {
  WriteGz(dir_.File("test_batch.bin.gz"), CifarRecords({3, 7}));
  absl::StatusOr<Dataset> dataset = LoadCifar10(dir_.path(), Split::kTest);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  EXPECT_EQ(dataset->images.shape(), ops::Shape({2, 32, 32, 3}));
  EXPECT_EQ(dataset->labels, (std::vector<int32_t>{3, 7}));
  EXPECT_FLOAT_EQ(dataset->images.data()[3072], 3 / 255.0f);  // record 1, pixel 0
}

TEST_F(Cifar10Test, MissingTrainBatchIsAnError) {
  WriteTrain();
  std::filesystem::remove(Batch(4));
  absl::Status status = LoadTrain();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), AllOf(HasSubstr(Batch(4)), HasSubstr("not found")));
}

TEST_F(Cifar10Test, TruncatedRecord) {
  WriteTrain();
  WritePlain(Batch(3), Truncated(CifarRecords({1, 2, 3}), 2 * 3073 + 100));
  absl::Status status = LoadTrain();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), AllOf(HasSubstr(Batch(3)), HasSubstr("truncated record"),
                                      HasSubstr("not a multiple of the 3073-byte record")));
}

TEST_F(Cifar10Test, EmptyFile) {
  WritePlain(dir_.File("test_batch.bin"), {});
  absl::Status status = LoadCifar10(dir_.path(), Split::kTest).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr(dir_.File("test_batch.bin")), HasSubstr("no records")));
}

TEST_F(Cifar10Test, LabelOutOfRange) {
  WritePlain(dir_.File("test_batch.bin"), CifarRecords({1, 10}));
  absl::Status status = LoadCifar10(dir_.path(), Split::kTest).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), AllOf(HasSubstr(dir_.File("test_batch.bin")),
                                      HasSubstr("label 10 of record 1 is out of range")));
}

}  // namespace
}  // namespace fulcrum::data
