#include "data/mnist.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/data/test_files.h"

namespace fulcrum::data {
namespace {

using ::testing::AllOf;
using testing::Bytes;
using ::testing::HasSubstr;
using testing::IdxImages;
using testing::IdxLabels;
using testing::ScratchDir;
using testing::Truncated;
using testing::WriteGz;
using testing::WritePlain;

TEST(MnistRealTest, FashionMnistTrainAndTest) {
  if (!std::filesystem::exists(kDefaultMnistDir)) {
    GTEST_SKIP() << kDefaultMnistDir << " is not installed (apt install dataset-fashion-mnist)";
  }
  absl::StatusOr<Dataset> train = LoadMnistFormat(kDefaultMnistDir, Split::kTrain);
  ASSERT_TRUE(train.ok()) << train.status();
  EXPECT_EQ(train->name, "fashion-mnist/train");
  EXPECT_EQ(train->size(), 60000);
  EXPECT_EQ(train->images.shape(), ops::Shape({60000, 28, 28, 1}));
  EXPECT_EQ(train->example_size(), 784);
  EXPECT_EQ(train->num_classes, 10);
  std::vector<int> per_class(10, 0);
  for (int32_t label : train->labels) {
    ASSERT_GE(label, 0);
    ASSERT_LT(label, 10);
    ++per_class[static_cast<size_t>(label)];
  }
  for (int c = 0; c < 10; ++c) EXPECT_EQ(per_class[static_cast<size_t>(c)], 6000) << c;
  float lo = 1.0f, hi = 0.0f;
  for (float v : train->images.flat()) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  EXPECT_EQ(lo, 0.0f);
  EXPECT_EQ(hi, 1.0f);

  absl::StatusOr<Dataset> test = LoadMnistFormat(kDefaultMnistDir, Split::kTest);
  ASSERT_TRUE(test.ok()) << test.status();
  EXPECT_EQ(test->name, "fashion-mnist/test");
  EXPECT_EQ(test->size(), 10000);
  EXPECT_EQ(test->images.shape(), ops::Shape({10000, 28, 28, 1}));
  for (int32_t label : test->labels) ASSERT_TRUE(label >= 0 && label < 10) << label;
}

class MnistFilesTest : public ::testing::Test {
 protected:
  std::string Images() const { return dir_.File("train-images-idx3-ubyte"); }
  std::string Labels() const { return dir_.File("train-labels-idx1-ubyte"); }
  void WriteGood() {
    WritePlain(Images(), IdxImages(3, 2, 4));
    WritePlain(Labels(), IdxLabels({0, 9, 4}));
  }
  absl::Status Load() { return LoadMnistFormat(dir_.path(), Split::kTrain).status(); }

  ScratchDir dir_;
};

void ExpectContents(const Dataset& dataset) {
  EXPECT_EQ(dataset.images.shape(), ops::Shape({3, 2, 4, 1}));
  EXPECT_EQ(dataset.labels, (std::vector<int32_t>{0, 9, 4}));
  EXPECT_EQ(dataset.num_classes, 10);
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t j = 0; j < 8; ++j) {
      EXPECT_FLOAT_EQ(dataset.images.data()[i * 8 + j], testing::TestPixel(i, j) / 255.0f);
    }
  }
}

TEST_F(MnistFilesTest, ReadsPlainFiles) {
  WriteGood();
  absl::StatusOr<Dataset> dataset = LoadMnistFormat(dir_.path(), Split::kTrain);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  ExpectContents(*dataset);
}

TEST_F(MnistFilesTest, ReadsGzippedFilesAndTestSplit) {
  WriteGz(dir_.File("t10k-images-idx3-ubyte.gz"), IdxImages(3, 2, 4));
  WriteGz(dir_.File("t10k-labels-idx1-ubyte.gz"), IdxLabels({0, 9, 4}));
  absl::StatusOr<Dataset> dataset = LoadMnistFormat(dir_.path(), Split::kTest);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  EXPECT_THAT(dataset->name, ::testing::EndsWith("/test"));
  ExpectContents(*dataset);
}

TEST_F(MnistFilesTest, PrefersPlainOverGz) {
  WriteGood();
  WriteGz(Images() + ".gz", IdxImages(5, 2, 4));  // would mismatch the 3 labels
  absl::StatusOr<Dataset> dataset = LoadMnistFormat(dir_.path(), Split::kTrain);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  EXPECT_EQ(dataset->size(), 3);
}

TEST_F(MnistFilesTest, MissingImages) {
  WritePlain(Labels(), IdxLabels({0, 9, 4}));
  absl::Status status = Load();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), AllOf(HasSubstr(Images()), HasSubstr("not found")));
}

TEST_F(MnistFilesTest, MissingLabels) {
  WritePlain(Images(), IdxImages(3, 2, 4));
  absl::Status status = Load();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), AllOf(HasSubstr(Labels()), HasSubstr("not found")));
}

TEST_F(MnistFilesTest, DirectoryInsteadOfFile) {
  std::filesystem::create_directory(Images());
  WritePlain(Labels(), IdxLabels({0, 9, 4}));
  absl::Status status = Load();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), AllOf(HasSubstr(Images()), HasSubstr("not a regular file")));
}

TEST_F(MnistFilesTest, TruncatedImages) {
  WritePlain(Images(), Truncated(IdxImages(3, 2, 4), 16 + 20));
  WritePlain(Labels(), IdxLabels({0, 9, 4}));
  absl::Status status = Load();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr(Images()), HasSubstr("truncated"),
                    HasSubstr("header promises 24 bytes of pixels, file has 20")));
}

TEST_F(MnistFilesTest, TruncatedGzImages) {
  WriteGz(Images() + ".gz", Truncated(IdxImages(3, 2, 4), 16 + 5));
  WritePlain(Labels(), IdxLabels({0, 9, 4}));
  absl::Status status = Load();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), AllOf(HasSubstr(Images() + ".gz"), HasSubstr("truncated")));
}

TEST_F(MnistFilesTest, CorruptGzStream) {
  // A gzip file cut in the middle of its compressed stream.
  WriteGz(Images() + ".gz", IdxImages(200, 28, 28));
  Bytes gz(std::filesystem::file_size(Images() + ".gz"));
  {
    std::ifstream in(Images() + ".gz", std::ios::binary);
    in.read(reinterpret_cast<char*>(gz.data()), static_cast<std::streamsize>(gz.size()));
  }
  WritePlain(Images() + ".gz", Truncated(gz, gz.size() / 2));
  WritePlain(Labels(), IdxLabels(std::vector<uint8_t>(200, 1)));
  absl::Status status = Load();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr(Images() + ".gz"));
}

TEST_F(MnistFilesTest, TruncatedHeader) {
  WritePlain(Images(), Truncated(IdxImages(3, 2, 4), 10));
  WritePlain(Labels(), IdxLabels({0, 9, 4}));
  absl::Status status = Load();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), AllOf(HasSubstr(Images()), HasSubstr("truncated"),
                                      HasSubstr("header needs 16 bytes, file has 10")));
}

TEST_F(MnistFilesTest, TruncatedLabels) {
  WritePlain(Images(), IdxImages(3, 2, 4));
  WritePlain(Labels(), Truncated(IdxLabels({0, 9, 4}), 8 + 2));
  absl::Status status = Load();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), AllOf(HasSubstr(Labels()), HasSubstr("truncated"),
                                      HasSubstr("header promises 3 bytes of labels, file has 2")));
}

TEST_F(MnistFilesTest, TrailingBytes) {
  Bytes images = IdxImages(3, 2, 4);
  images.push_back(0);
  WritePlain(Images(), images);
  WritePlain(Labels(), IdxLabels({0, 9, 4}));
  absl::Status status = Load();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), AllOf(HasSubstr(Images()), HasSubstr("trailing bytes")));
}

TEST_F(MnistFilesTest, WrongImagesMagic) {
  WritePlain(Images(), IdxImages(3, 2, 4, /*magic=*/1234));
  WritePlain(Labels(), IdxLabels({0, 9, 4}));
  absl::Status status = Load();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      status.message(),
      AllOf(HasSubstr(Images()), HasSubstr("wrong magic number 1234, expected 2051 (IDX images)")));
}

TEST_F(MnistFilesTest, WrongLabelsMagic) {
  WritePlain(Images(), IdxImages(3, 2, 4));
  WritePlain(Labels(), IdxLabels({0, 9, 4}, /*magic=*/2051));
  absl::Status status = Load();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      status.message(),
      AllOf(HasSubstr(Labels()), HasSubstr("wrong magic number 2051, expected 2049 (IDX labels)")));
}

TEST_F(MnistFilesTest, ZeroSizedDimension) {
  WritePlain(Images(), IdxImages(3, 0, 4));
  WritePlain(Labels(), IdxLabels({0, 9, 4}));
  absl::Status status = Load();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), AllOf(HasSubstr(Images()), HasSubstr("zero-sized dimension")));
}

TEST_F(MnistFilesTest, CountMismatch) {
  WritePlain(Images(), IdxImages(3, 2, 4));
  WritePlain(Labels(), IdxLabels({0, 9}));
  absl::Status status = Load();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr(Labels()), HasSubstr(Images()), HasSubstr("count mismatch: 2 labels"),
                    HasSubstr("has 3 images")));
}

TEST_F(MnistFilesTest, LabelOutOfRange) {
  WritePlain(Images(), IdxImages(3, 2, 4));
  WritePlain(Labels(), IdxLabels({0, 12, 4}));
  absl::Status status = Load();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr(Labels()), HasSubstr("label 12 at index 1 is out of range")));
}

}  // namespace
}  // namespace fulcrum::data
