#include "profiler/tfevents.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/crc32c.h"
#include "base/files.h"
#include "base/status_macros.h"
#include "proto/tensorboard.pb.h"

namespace fulcrum::profiler {
namespace {

constexpr size_t kLengthBytes = 8;
constexpr size_t kCrcBytes = 4;
constexpr size_t kHeaderBytes = kLengthBytes + kCrcBytes;

// TFRecord is little-endian whatever the host; writing byte by byte says so explicitly and
// costs nothing next to the stdio call.
void AppendLittleEndian(uint64_t value, size_t bytes, std::string* out) {
  for (size_t i = 0; i < bytes; ++i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

uint64_t ReadLittleEndian(absl::string_view bytes) {
  uint64_t value = 0;
  for (size_t i = bytes.size(); i > 0; --i) {
    value = (value << 8) | static_cast<uint8_t>(bytes[i - 1]);
  }
  return value;
}

uint32_t MaskedCrc(absl::string_view data) { return MaskCrc32c(Crc32c(data)); }

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

std::string ErrnoText() { return std::strerror(errno); }

}  // namespace

absl::StatusOr<EventFileWriter> EventFileWriter::Create(const std::string& dir,
                                                        const std::string& suffix) {
  // TensorFlow's EventsWriter creates the log directory too; callers pass a run subfolder.
  FULCRUM_RETURN_IF_ERROR(MakeDirs(dir, "event file directory"));
  std::string name =
      absl::StrCat("events.out.tfevents.", absl::ToUnixSeconds(absl::Now()), ".", HostName());
  if (!suffix.empty()) absl::StrAppend(&name, ".", suffix);
  std::string path = (std::filesystem::path(dir) / name).string();
  // "x": two writers that start in the same second without a suffix must not truncate each
  // other's file; the second one gets an error instead.
  std::FILE* file = std::fopen(path.c_str(), "wbx");
  if (file == nullptr) {
    const int err = errno;
    const std::string why = std::strerror(err);
    if (err == EEXIST) return absl::AlreadyExistsError(absl::StrCat(path, ": ", why));
    return absl::InternalError(absl::StrCat(path, ": cannot create: ", why));
  }
  EventFileWriter writer(std::move(path), file);
  pb::tensorboard::Event event;
  event.set_wall_time(absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()));
  event.set_file_version("brain.Event:2");
  FULCRUM_RETURN_IF_ERROR(writer.WriteRecord(event.SerializeAsString()));
  return writer;
}

EventFileWriter::EventFileWriter(EventFileWriter&& other) noexcept
    : path_(std::move(other.path_)), file_(std::exchange(other.file_, nullptr)) {}

EventFileWriter& EventFileWriter::operator=(EventFileWriter&& other) noexcept {
  if (this != &other) {
    Close().IgnoreError();  // a destructor-like path: nobody to report to
    path_ = std::move(other.path_);
    file_ = std::exchange(other.file_, nullptr);
  }
  return *this;
}

EventFileWriter::~EventFileWriter() { Close().IgnoreError(); }

absl::Status EventFileWriter::WriteScalar(const std::string& tag, int64_t step, double wall_time,
                                          double value) {
  pb::tensorboard::Event event;
  event.set_wall_time(wall_time);
  event.set_step(step);
  pb::tensorboard::SummaryValue* summary_value = event.mutable_summary()->add_value();
  summary_value->set_tag(tag);
  // simple_value is a float in TensorFlow's summary.proto; TensorBoard shows float32 anyway.
  summary_value->set_simple_value(static_cast<float>(value));
  return WriteRecord(event.SerializeAsString());
}

absl::Status EventFileWriter::WriteGraph(absl::string_view graph_def, double wall_time) {
  pb::tensorboard::Event event;
  event.set_wall_time(wall_time);
  event.set_step(0);
  event.set_graph_def(std::string(graph_def));
  return WriteRecord(event.SerializeAsString());
}

absl::Status EventFileWriter::WriteRecord(absl::string_view data) {
  if (file_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(path_, ": event file is closed"));
  }
  const std::string frame = FrameTfRecord(data);
  if (std::fwrite(frame.data(), 1, frame.size(), file_) != frame.size()) {
    return absl::InternalError(absl::StrCat(path_, ": write failed: ", ErrnoText()));
  }
  return absl::OkStatus();
}

absl::Status EventFileWriter::Flush() {
  if (file_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(path_, ": event file is closed"));
  }
  // fflush hands the data to the kernel, which is what a TensorBoard reading the live file
  // needs; fsync would only add durability against a machine crash, at a disk round trip.
  if (std::fflush(file_) != 0) {
    return absl::InternalError(absl::StrCat(path_, ": flush failed: ", ErrnoText()));
  }
  return absl::OkStatus();
}

absl::Status EventFileWriter::Close() {
  if (file_ == nullptr) return absl::OkStatus();
  // fclose releases the FILE even when its final flush fails, so never retry it.
  const bool flushed = std::fflush(file_) == 0;
  const std::string flush_error = flushed ? "" : ErrnoText();
  const bool closed = std::fclose(std::exchange(file_, nullptr)) == 0;
  if (!flushed) return absl::InternalError(absl::StrCat(path_, ": flush failed: ", flush_error));
  if (!closed) return absl::InternalError(absl::StrCat(path_, ": close failed: ", ErrnoText()));
  return absl::OkStatus();
}

std::string FrameTfRecord(absl::string_view data) {
  std::string frame;
  frame.reserve(kHeaderBytes + data.size() + kCrcBytes);
  AppendLittleEndian(data.size(), kLengthBytes, &frame);
  // The length has its own CRC so a reader never trusts a corrupt length to skip or allocate.
  AppendLittleEndian(MaskedCrc(frame), kCrcBytes, &frame);
  frame.append(data.data(), data.size());
  AppendLittleEndian(MaskedCrc(data), kCrcBytes, &frame);
  return frame;
}

absl::StatusOr<std::vector<std::string>> ReadTfRecords(absl::string_view file_bytes) {
  std::vector<std::string> records;
  size_t offset = 0;
  while (offset < file_bytes.size()) {
    const absl::string_view rest = file_bytes.substr(offset);
    if (rest.size() < kHeaderBytes) {
      return absl::DataLossError(absl::StrCat("TFRecord at offset ", offset, ": truncated header (",
                                              rest.size(), " of ", kHeaderBytes, " bytes)"));
    }
    const absl::string_view length_bytes = rest.substr(0, kLengthBytes);
    if (ReadLittleEndian(rest.substr(kLengthBytes, kCrcBytes)) != MaskedCrc(length_bytes)) {
      return absl::DataLossError(absl::StrCat("TFRecord at offset ", offset, ": bad length CRC"));
    }
    const uint64_t length = ReadLittleEndian(length_bytes);
    // Compare against what is left rather than computing offset + length, which could overflow
    // for a length that passed its CRC by chance.
    if (length > rest.size() - kHeaderBytes || rest.size() - kHeaderBytes - length < kCrcBytes) {
      return absl::DataLossError(absl::StrCat("TFRecord at offset ", offset, ": truncated (",
                                              length, " data bytes + CRC expected, ",
                                              rest.size() - kHeaderBytes, " left)"));
    }
    const absl::string_view data = rest.substr(kHeaderBytes, length);
    if (ReadLittleEndian(rest.substr(kHeaderBytes + length, kCrcBytes)) != MaskedCrc(data)) {
      return absl::DataLossError(absl::StrCat("TFRecord at offset ", offset, ": bad data CRC"));
    }
    records.emplace_back(data);
    offset += kHeaderBytes + length + kCrcBytes;
  }
  return records;
}

absl::StatusOr<std::vector<std::string>> ReadTfRecordFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat(path, ": cannot open: ", ErrnoText()));
  std::ostringstream bytes;
  bytes << file.rdbuf();
  if (file.bad()) return absl::InternalError(absl::StrCat(path, ": read failed: ", ErrnoText()));
  absl::StatusOr<std::vector<std::string>> records = ReadTfRecords(bytes.str());
  if (!records.ok()) {
    return absl::Status(records.status().code(),
                        absl::StrCat(path, ": ", records.status().message()));
  }
  return records;
}

}  // namespace fulcrum::profiler
