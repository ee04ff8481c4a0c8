// profiler: TensorBoard event files. A file is a sequence of TFRecords — uint64 length,
// uint32 masked CRC-32C of the length, the data, uint32 masked CRC-32C of the data (all
// little-endian) — each holding a serialized tensorboard Event proto (proto/tensorboard.proto,
// the few messages of TensorFlow's event.proto/summary.proto we need). The first record is
// the file_version event "brain.Event:2"; scalars are Summary.Value.simple_value; the graph is
// Event.graph_def.
// Thread-safety: EventFileWriter is not thread-safe (one writer per file); ReadTfRecords is
// a pure function.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fulcrum::profiler {

class EventFileWriter {
 public:
  // Creates `dir`/events.out.tfevents.<unix seconds>.<hostname>[.<suffix>] and writes the
  // file_version record. `suffix` keeps the names of two writers in one folder apart.
  static absl::StatusOr<EventFileWriter> Create(const std::string& dir,
                                                const std::string& suffix = "");
  EventFileWriter(EventFileWriter&&) noexcept;
  EventFileWriter& operator=(EventFileWriter&&) noexcept;
  ~EventFileWriter();  // Close()s

  const std::string& path() const { return path_; }
  // One scalar at `step`, `wall_time` in seconds since the epoch (fractional).
  absl::Status WriteScalar(const std::string& tag, int64_t step, double wall_time, double value);
  // The run's graph at step 0, as TensorFlow 1.x's FileWriter(graph=...) writes it:
  // `graph_def` is a serialized tensorflow.GraphDef (proto/tf_graph.proto), put as it is into
  // Event.graph_def for TensorBoard's graph tab.
  absl::Status WriteGraph(absl::string_view graph_def, double wall_time);
  absl::Status Flush();
  absl::Status Close();

 private:
  EventFileWriter(std::string path, std::FILE* file) : path_(std::move(path)), file_(file) {}
  absl::Status WriteRecord(absl::string_view data);

  std::string path_;
  std::FILE* file_ = nullptr;
};

// One TFRecord frame around `data` (length, masked CRC of the length, data, masked CRC).
std::string FrameTfRecord(absl::string_view data);

// The records of a TFRecord file's bytes; DataLoss naming the offset on a bad length/data CRC
// or a truncated record.
absl::StatusOr<std::vector<std::string>> ReadTfRecords(absl::string_view file_bytes);

// ReadTfRecords() over the file at `path`; errors name the path (NotFound if it cannot be
// opened).
absl::StatusOr<std::vector<std::string>> ReadTfRecordFile(const std::string& path);

}  // namespace fulcrum::profiler
