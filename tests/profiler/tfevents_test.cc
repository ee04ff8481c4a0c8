// TensorBoard event files: one frame checked byte for byte against a CRC computed here from the
// definition, a written file (scalars, a graph) read back and parsed, and every corruption or
// truncation caught.
#include "profiler/tfevents.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "proto/tensorboard.pb.h"
#include "proto/tf_graph.pb.h"

namespace fulcrum::profiler {
namespace {

namespace fs = std::filesystem;

// CRC-32C bit by bit straight from the definition (reflected polynomial 0x82F63B78, init and
// final XOR ~0), independent of the table in profiler/crc32c.cc.
uint32_t BitwiseCrc32c(const std::string& data) {
  uint32_t crc = 0xffffffffu;
  for (const char c : data) {
    crc ^= static_cast<uint8_t>(c);
    for (int bit = 0; bit < 8; ++bit) crc = (crc & 1) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
  }
  return ~crc;
}

uint32_t BitwiseMasked(const std::string& data) {
  const uint32_t crc = BitwiseCrc32c(data);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string LittleEndian(uint64_t value, int bytes) {
  std::string out;
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>(value >> (8 * i)));
  return out;
}

std::string Bytes(std::initializer_list<uint8_t> bytes) {
  return std::string(bytes.begin(), bytes.end());
}

std::string ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(file), {});
}

class ScratchDir {
 public:
  ScratchDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::path(::testing::TempDir()) /
            (std::string("fulcrum_tfevents_") + info->name() + "_" + std::to_string(getpid()));
    fs::remove_all(path_);
  }
  ~ScratchDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  std::string path() const { return path_.string(); }

 private:
  fs::path path_;
};

TEST(TfRecordTest, FrameOfAbcIsExact) {
  // "abc": length 3, CRC-32C("abc") = 0x364B3FB7 (masked 0x21F1576E); CRC-32C of the length
  // bytes 03 00 .. 00 = 0x576C35E3 (masked 0x0E4999B0).
  const std::string expected = Bytes(
      {0x03, 0, 0, 0, 0, 0, 0, 0, 0xb0, 0x99, 0x49, 0x0e, 'a', 'b', 'c', 0x6e, 0x57, 0xf1, 0x21});
  EXPECT_EQ(FrameTfRecord("abc"), expected);
  EXPECT_EQ(BitwiseCrc32c("abc"), 0x364B3FB7u);
  EXPECT_EQ(BitwiseMasked(LittleEndian(3, 8)), 0x0E4999B0u);
}

TEST(TfRecordTest, FrameMatchesDefinition) {
  for (const std::string& payload : {std::string(), std::string("x"), std::string(300, '\x7f')}) {
    const std::string length = LittleEndian(payload.size(), 8);
    const std::string expected = length + LittleEndian(BitwiseMasked(length), 4) + payload +
                                 LittleEndian(BitwiseMasked(payload), 4);
    EXPECT_EQ(FrameTfRecord(payload), expected) << payload.size();
  }
  // An empty record: CRC-32C("") = 0, so its data CRC is the bare mask constant.
  EXPECT_EQ(FrameTfRecord("").substr(12), LittleEndian(0xa282ead8u, 4));
}

TEST(TfRecordTest, ReadsBackFrames) {
  const std::vector<std::string> payloads = {"first", "", std::string(1000, 'z'), "last"};
  std::string file;
  for (const std::string& p : payloads) file += FrameTfRecord(p);
  absl::StatusOr<std::vector<std::string>> records = ReadTfRecords(file);
  ASSERT_TRUE(records.ok()) << records.status();
  EXPECT_EQ(*records, payloads);
  EXPECT_TRUE(ReadTfRecords("").ok());
}

TEST(TfRecordTest, EveryFlippedByteIsDataLoss) {
  const std::string first = FrameTfRecord("alpha");
  const std::string file = first + FrameTfRecord("beta");
  for (size_t i = 0; i < file.size(); ++i) {
    std::string bad = file;
    bad[i] = static_cast<char>(bad[i] ^ 0x01);
    absl::StatusOr<std::vector<std::string>> records = ReadTfRecords(bad);
    ASSERT_EQ(records.status().code(), absl::StatusCode::kDataLoss) << "byte " << i;
    const std::string offset = absl::StrCat("offset ", i < first.size() ? 0 : first.size(), ":");
    EXPECT_NE(records.status().message().find(offset), std::string::npos) << records.status();
  }
}

TEST(TfRecordTest, EveryTruncationIsDataLoss) {
  const std::string first = FrameTfRecord("alpha");
  const std::string file = first + FrameTfRecord(std::string(40, 'b'));
  for (size_t keep = 0; keep < file.size(); ++keep) {
    absl::StatusOr<std::vector<std::string>> records = ReadTfRecords(file.substr(0, keep));
    if (keep == 0 || keep == first.size()) {
      ASSERT_TRUE(records.ok()) << keep << ": " << records.status();
      EXPECT_EQ(records->size(), keep == 0 ? 0u : 1u);
    } else {
      ASSERT_EQ(records.status().code(), absl::StatusCode::kDataLoss) << "keep " << keep;
      EXPECT_NE(records.status().message().find("truncated"), std::string::npos)
          << records.status();
    }
  }
}

TEST(TfRecordTest, HugeLengthWithValidCrcIsDataLossNotOverflow) {
  const std::string length = LittleEndian(~uint64_t{0} - 5, 8);
  const std::string file = length + LittleEndian(BitwiseMasked(length), 4) + "xyz";
  EXPECT_EQ(ReadTfRecords(file).status().code(), absl::StatusCode::kDataLoss);
}

TEST(EventFileWriterTest, WritesScalarsTensorBoardCanParse) {
  ScratchDir dir;
  absl::StatusOr<EventFileWriter> writer = EventFileWriter::Create(dir.path() + "/run", "worker-0");
  ASSERT_TRUE(writer.ok()) << writer.status();
  const std::string path = writer->path();
  const std::string name = fs::path(path).filename().string();
  EXPECT_EQ(fs::path(path).parent_path(), fs::path(dir.path() + "/run"));
  EXPECT_EQ(name.rfind("events.out.tfevents.", 0), 0u) << name;
  EXPECT_TRUE(name.ends_with(".worker-0")) << name;
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof(host) - 1), 0);
  EXPECT_NE(name.find(std::string(".") + host + "."), std::string::npos) << name;

  struct Scalar {
    std::string tag;
    int64_t step;
    double wall_time;
    double value;
  };
  const std::vector<Scalar> scalars = {{"loss", 0, 1700000000.25, 2.5},
                                       {"throughput/examples_per_sec", 0, 1700000000.5, 1234.5},
                                       {"loss", 1, 1700000001.75, 1.125},
                                       {"loss", 1LL << 40, 1700000002.0, -0.1}};
  for (const Scalar& s : scalars) {
    ASSERT_TRUE(writer->WriteScalar(s.tag, s.step, s.wall_time, s.value).ok());
  }
  ASSERT_TRUE(writer->Flush().ok());
  ASSERT_TRUE(writer->Close().ok());
  EXPECT_TRUE(writer->Close().ok());  // closing twice is harmless
  EXPECT_EQ(writer->WriteScalar("late", 9, 0, 0).code(), absl::StatusCode::kFailedPrecondition);

  absl::StatusOr<std::vector<std::string>> records = ReadTfRecordFile(path);
  ASSERT_TRUE(records.ok()) << records.status();
  ASSERT_EQ(records->size(), scalars.size() + 1);
  pb::tensorboard::Event version;
  ASSERT_TRUE(version.ParseFromString((*records)[0]));
  EXPECT_EQ(version.file_version(), "brain.Event:2");
  EXPECT_GT(version.wall_time(), 1.6e9);
  for (size_t i = 0; i < scalars.size(); ++i) {
    pb::tensorboard::Event event;
    ASSERT_TRUE(event.ParseFromString((*records)[i + 1])) << i;
    EXPECT_EQ(event.step(), scalars[i].step);
    EXPECT_EQ(event.wall_time(), scalars[i].wall_time);
    ASSERT_TRUE(event.has_summary());
    ASSERT_EQ(event.summary().value_size(), 1);
    EXPECT_EQ(event.summary().value(0).tag(), scalars[i].tag);
    ASSERT_TRUE(event.summary().value(0).has_simple_value());
    EXPECT_EQ(event.summary().value(0).simple_value(), static_cast<float>(scalars[i].value));
  }
}

// The graph event as TensorFlow 1.x's FileWriter writes it: step 0, the GraphDef's bytes in
// Event.graph_def (field 4), which parse back as the same graph.
TEST(EventFileWriterTest, WritesTheGraphAsGraphDefBytes) {
  ScratchDir dir;
  absl::StatusOr<EventFileWriter> writer = EventFileWriter::Create(dir.path());
  ASSERT_TRUE(writer.ok()) << writer.status();
  pb::tensorflow::GraphDef graph;
  pb::tensorflow::NodeDef* node = graph.add_node();
  node->set_name("dense/kernel");
  node->set_op("VariableV2");
  node->set_device("/job:ps/task:1");
  auto* shape = (*node->mutable_attr())["shape"].mutable_shape();
  shape->add_dim()->set_size(784);
  shape->add_dim()->set_size(10);
  ASSERT_TRUE(writer->WriteGraph(graph.SerializeAsString(), 1700000000.5).ok());
  ASSERT_TRUE(writer->Close().ok());

  absl::StatusOr<std::vector<std::string>> records = ReadTfRecordFile(writer->path());
  ASSERT_TRUE(records.ok()) << records.status();
  ASSERT_EQ(records->size(), 2u);
  pb::tensorboard::Event event;
  ASSERT_TRUE(event.ParseFromString((*records)[1]));
  EXPECT_EQ(event.step(), 0);
  EXPECT_EQ(event.wall_time(), 1700000000.5);
  ASSERT_EQ(event.what_case(), pb::tensorboard::Event::kGraphDef);
  // Field 4, length-delimited: the tag byte (4 << 3) | 2 leads the record after wall_time
  // (tag 0x09 + 8 bytes); step 0 is not written.
  EXPECT_EQ(static_cast<uint8_t>((*records)[1][9]), 0x22);
  pb::tensorflow::GraphDef back;
  ASSERT_TRUE(back.ParseFromString(event.graph_def()));
  ASSERT_EQ(back.node_size(), 1);
  EXPECT_EQ(back.node(0).name(), "dense/kernel");
  EXPECT_EQ(back.node(0).device(), "/job:ps/task:1");
  EXPECT_EQ(back.node(0).attr().at("shape").shape().dim(1).size(), 10);
}

TEST(EventFileWriterTest, ReadFileErrorsNameThePath) {
  ScratchDir dir;
  absl::StatusOr<EventFileWriter> writer = EventFileWriter::Create(dir.path());
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_TRUE(writer->WriteScalar("loss", 1, 1.0, 1.0).ok());
  ASSERT_TRUE(writer->Close().ok());
  const std::string path = writer->path();
  std::string bytes = ReadFile(path);
  bytes.resize(bytes.size() - 1);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  absl::StatusOr<std::vector<std::string>> records = ReadTfRecordFile(path);
  EXPECT_EQ(records.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(records.status().message().find(path), std::string::npos) << records.status();
  EXPECT_EQ(ReadTfRecordFile(path + ".missing").status().code(), absl::StatusCode::kNotFound);
}

TEST(EventFileWriterTest, SameNameTwiceIsAnErrorNotATruncation) {
  ScratchDir dir;
  absl::StatusOr<EventFileWriter> first = EventFileWriter::Create(dir.path(), "a");
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<EventFileWriter> other = EventFileWriter::Create(dir.path(), "b");
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_NE(first->path(), other->path());
  // The same suffix within the same second collides; retry if the second just turned over.
  for (int attempt = 0; attempt < 3; ++attempt) {
    absl::StatusOr<EventFileWriter> again = EventFileWriter::Create(dir.path(), "a");
    if (!again.ok()) {
      EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists);
      EXPECT_NE(again.status().message().find(dir.path()), std::string::npos) << again.status();
      return;
    }
  }
  ADD_FAILURE() << "three writers with one name in a row never collided";
}

TEST(EventFileWriterTest, MovedWriterKeepsWriting) {
  ScratchDir dir;
  absl::StatusOr<EventFileWriter> created = EventFileWriter::Create(dir.path());
  ASSERT_TRUE(created.ok()) << created.status();
  EventFileWriter writer = std::move(*created);
  ASSERT_TRUE(writer.WriteScalar("x", 1, 1.0, 3.0).ok());
  EventFileWriter moved_again(std::move(writer));
  ASSERT_TRUE(moved_again.WriteScalar("x", 2, 2.0, 4.0).ok());
  const std::string path = moved_again.path();
  ASSERT_TRUE(moved_again.Close().ok());
  absl::StatusOr<std::vector<std::string>> records = ReadTfRecordFile(path);
  ASSERT_TRUE(records.ok()) << records.status();
  EXPECT_EQ(records->size(), 3u);
}

TEST(EventFileWriterTest, UncreatableDirectoryIsAnError) {
  ScratchDir dir;
  fs::create_directories(dir.path());
  const std::string blocker = dir.path() + "/a_file";
  std::ofstream(blocker) << "x";
  absl::StatusOr<EventFileWriter> writer = EventFileWriter::Create(blocker + "/sub");
  EXPECT_FALSE(writer.ok());
  EXPECT_NE(writer.status().message().find(blocker), std::string::npos) << writer.status();
}

}  // namespace
}  // namespace fulcrum::profiler
