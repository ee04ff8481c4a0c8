#include "chief/checkpoints.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <system_error>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "base/crc32c.h"
#include "base/files.h"
#include "base/status_macros.h"
#include "chief/ps_tasks.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace fulcrum::chief {
namespace fs = std::filesystem;
namespace {

constexpr char kFormat[] = "fulcrum-checkpoint-1";
constexpr char kManifestName[] = "manifest.json";
constexpr char kFolderPrefix[] = "ckpt-";
// How far ahead of the cluster's step a sync save aims: this much training time, at least 2
// steps (a chunk may be one step ahead of the step the chief reads).
constexpr double kLeadSeconds = 0.25;
constexpr int kSyncAttempts = 3;

std::string FolderName(int64_t step) { return absl::StrCat(kFolderPrefix, step); }

std::string ShardFile(int ps) { return absl::StrCat("ps-", ps, ".ckpt"); }

// The manifest's body (everything but its own CRC) in one canonical text.
nlohmann::json ManifestBody(const Manifest& m) {
  nlohmann::json j;
  j["format"] = kFormat;
  j["global_step"] = m.global_step;
  j["run_id"] = m.run_id;
  j["model"] = m.model;
  j["layout"] = m.layout;
  nlohmann::json shards = nlohmann::json::array();
  for (const Manifest::Shard& s : m.shards) {
    shards.push_back({{"ps", s.ps},
                      {"path", s.path},
                      {"bytes", s.bytes},
                      {"crc32c", absl::StrFormat("%08x", s.crc32c)},
                      {"global_step", s.global_step}});
  }
  j["shards"] = shards;
  return j;
}

}  // namespace

std::string LayoutFingerprint(const std::vector<pb::CreateVariablesRequest>& shards) {
  uint32_t crc = 0;
  for (const pb::CreateVariablesRequest& shard : shards) {
    pb::CreateVariablesRequest layout;
    for (const pb::VariableDef& v : shard.variables()) {
      pb::VariableDef* d = layout.add_variables();
      d->set_name(v.name());
      *d->mutable_full_shape() = v.full_shape();
      d->set_row_begin(v.row_begin());
      d->set_row_end(v.row_end());
    }
    layout.set_chunk_bytes(shard.chunk_bytes());
    layout.mutable_optimizer()->set_kind(shard.optimizer().kind());
    crc = Crc32c(layout.SerializeAsString(), crc);
  }
  return absl::StrFormat("%d-ps-%08x", shards.size(), crc);
}

absl::StatusOr<Manifest> ReadManifest(const fs::path& folder) {
  const fs::path path = folder / kManifestName;
  FULCRUM_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  const auto corrupt = [&](const std::string& why) {
    return absl::DataLossError(absl::StrCat(path.string(), ": corrupt manifest: ", why));
  };
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return corrupt("not JSON");
  if (!j.contains("body") || !j.contains("crc32c") || !j["crc32c"].is_string()) {
    return corrupt("no body or crc32c");
  }
  const std::string body = j["body"].dump();
  const std::string want = absl::StrFormat("%08x", Crc32c(body));
  if (j["crc32c"].get<std::string>() != want) {
    return corrupt(absl::StrCat("CRC-32C ", want, " does not match the recorded ",
                                j["crc32c"].get<std::string>()));
  }
  const nlohmann::json& b = j["body"];
  Manifest m;
  try {
    if (b.at("format").get<std::string>() != kFormat) return corrupt("unknown format");
    m.global_step = b.at("global_step").get<int64_t>();
    m.run_id = b.at("run_id").get<std::string>();
    m.model = b.at("model").get<std::string>();
    m.layout = b.at("layout").get<std::string>();
    for (const nlohmann::json& s : b.at("shards")) {
      Manifest::Shard shard;
      shard.ps = s.at("ps").get<int>();
      // The file's name in the folder, so that a moved folder still resumes (manifests of
      // older versions held the absolute path the ps wrote; only its name counts).
      shard.path = fs::path(s.at("path").get<std::string>()).filename().string();
      if (shard.path.empty() || shard.path == "." || shard.path == "..") {
        return corrupt("a shard's path names no file");
      }
      shard.bytes = s.at("bytes").get<int64_t>();
      shard.global_step = s.at("global_step").get<int64_t>();
      uint32_t crc = 0;
      if (!absl::SimpleHexAtoi(s.at("crc32c").get<std::string>(), &crc)) {
        return corrupt("a shard's crc32c is not hexadecimal");
      }
      shard.crc32c = crc;
      if (shard.ps != static_cast<int>(m.shards.size()) || shard.bytes <= 0) {
        return corrupt("shards out of order or empty");
      }
      m.shards.push_back(std::move(shard));
    }
  } catch (const nlohmann::json::exception& e) {
    return corrupt(e.what());
  }
  if (m.shards.empty()) return corrupt("no shards");
  return m;
}

absl::Status WriteManifest(const fs::path& folder, const Manifest& manifest) {
  const nlohmann::json body = ManifestBody(manifest);
  nlohmann::json j;
  j["body"] = body;
  j["crc32c"] = absl::StrFormat("%08x", Crc32c(body.dump()));
  return WriteFileAtomically(folder / kManifestName, j.dump(2) + "\n");
}

std::vector<fs::path> ListCheckpoints(const fs::path& dir) {
  std::vector<std::pair<int64_t, fs::path>> found;
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    int64_t step = 0;
    if (name.rfind(kFolderPrefix, 0) != 0 ||
        !absl::SimpleAtoi(name.substr(sizeof(kFolderPrefix) - 1), &step) ||
        !fs::exists(entry.path() / kManifestName, error)) {
      continue;
    }
    found.emplace_back(step, entry.path());
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a > b; });
  std::vector<fs::path> folders;
  for (auto& [step, path] : found) folders.push_back(std::move(path));
  return folders;
}

Checkpointer::Checkpointer(CheckpointOptions options, PsTasks* ps, std::string run_id,
                           std::string model, const std::vector<pb::CreateVariablesRequest>& shards)
    : options_(std::move(options)),
      ps_(ps),
      run_id_(std::move(run_id)),
      model_(std::move(model)),
      layout_(LayoutFingerprint(shards)),
      last_save_time_(absl::Now()),
      pending_removals_(shards.size()) {}

absl::StatusOr<std::optional<Restored>> Checkpointer::RestoreLatest() {
  if (!enabled()) return std::optional<Restored>();
  const std::vector<fs::path> folders = ListCheckpoints(options_.dir);
  if (folders.empty()) return std::optional<Restored>();
  Restored restored;
  for (const fs::path& folder : folders) {
    absl::StatusOr<Manifest> manifest = ReadManifest(folder);
    if (!manifest.ok()) {
      spdlog::error("checkpoint {} refused: {}", folder.string(), manifest.status().ToString());
      restored.refused.push_back(std::string(manifest.status().message()));
      continue;
    }
    if (manifest->layout != layout_ || manifest->model != model_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--checkpoint_dir ", options_.dir, " holds checkpoints of another job: ",
          (folder / kManifestName).string(), " is of model ", manifest->model, " with layout ",
          manifest->layout, ", this job is ", model_, " with layout ", layout_,
          " (same model, flags and ps count needed; or give another --checkpoint_dir)"));
    }
    absl::Status all = absl::OkStatus();
    for (const Manifest::Shard& shard : manifest->shards) {
      pb::RestoreShardRequest request;
      request.set_path((folder / shard.path).string());
      request.set_bytes(shard.bytes);
      request.set_crc32c(shard.crc32c);
      pb::RestoreShardResponse response;
      all = ps_->RestoreShard(shard.ps, request, &response, options_.timeout);
      if (!all.ok()) break;
    }
    if (all.ok()) {
      restored.global_step = manifest->global_step;
      restored.folder = folder.string();
      spdlog::info("resumed from checkpoint {} (global step {}, {} ps shard(s))", folder.string(),
                   manifest->global_step, manifest->shards.size());
      last_saved_step_ = manifest->global_step;
      return std::optional<Restored>(std::move(restored));
    }
    // A shard file missing or corrupt makes the whole checkpoint unusable (the shards that
    // were restored are overwritten by the next one tried). Anything else is not the file's
    // fault: the run fails.
    if (all.code() != absl::StatusCode::kDataLoss && all.code() != absl::StatusCode::kNotFound) {
      return all;
    }
    spdlog::error("checkpoint {} refused: {}", folder.string(), all.ToString());
    restored.refused.push_back(std::string(all.message()));
  }
  return absl::DataLossError(absl::StrCat("--checkpoint_dir ", options_.dir,
                                          ": no intact checkpoint among ", folders.size(), ": ",
                                          absl::StrJoin(restored.refused, "; ")));
}

bool Checkpointer::Due(int64_t step, absl::Time now) const {
  if (!enabled()) return false;
  if (options_.every_steps > 0 &&
      step >= std::max<int64_t>(0, last_saved_step_) + options_.every_steps) {
    return true;
  }
  return options_.every > absl::ZeroDuration() && now - last_save_time_ >= options_.every;
}

absl::StatusOr<int64_t> Checkpointer::Save(int64_t step, double steps_per_sec, bool stopped,
                                           int64_t last_step) {
  last_save_time_ = absl::Now();
  // A stopped run whose step was just saved has nothing new to save.
  if (stopped && step == last_saved_step_) return step;
  if (!options_.sync || stopped) return SaveAt(0, step);
  int64_t lead =
      std::max<int64_t>(2, static_cast<int64_t>(std::ceil(steps_per_sec * kLeadSeconds)));
  absl::Status last = absl::OkStatus();
  for (int attempt = 0; attempt < kSyncAttempts; ++attempt, lead *= 4) {
    const int64_t at = step + lead;
    if (at > last_step) {
      // The run ends before that step: its final checkpoint will be taken then.
      return -1;
    }
    absl::StatusOr<int64_t> saved = SaveAt(at, step);
    if (saved.ok()) return saved;
    last = saved.status();
    // A chunk was already past the step (training is faster than the estimate): aim further.
    if (last.message().find("past at_step") == std::string::npos) return last;
  }
  return last;
}

absl::StatusOr<int64_t> Checkpointer::SaveAt(int64_t at_step, int64_t step) {
  const int num_ps = static_cast<int>(pending_removals_.size());
  // Named by the step saved (sync) or the cluster's step when the save began (async: each
  // ps's own step is in the manifest, and the manifest's step is the smallest of them).
  const fs::path folder = fs::path(options_.dir) / FolderName(at_step > 0 ? at_step : step);
  std::vector<pb::SaveShardRequest> requests(static_cast<size_t>(num_ps));
  for (int p = 0; p < num_ps; ++p) {
    pb::SaveShardRequest& r = requests[static_cast<size_t>(p)];
    r.set_path((folder / ShardFile(p)).string());
    r.set_at_step(at_step);
    r.set_timeout_ms(absl::ToInt64Milliseconds(options_.timeout));
    for (const std::string& old : pending_removals_[static_cast<size_t>(p)])
      r.add_remove_paths(old);
  }
  std::vector<pb::SaveShardResponse> responses;
  if (absl::Status s = ps_->SaveShards(requests, &responses, options_.timeout); !s.ok()) {
    // No manifest was written, so the folder is not a checkpoint: what the ps tasks wrote
    // into it goes (here, and on each ps with its next save, wherever its disk is).
    std::error_code error;
    for (int p = 0; p < num_ps; ++p) {
      const std::string& path = requests[static_cast<size_t>(p)].path();
      pending_removals_[static_cast<size_t>(p)].push_back(path);
      fs::remove(path, error);
      fs::remove(path + ".tmp", error);
    }
    if (fs::is_empty(folder, error) && !error) fs::remove(folder, error);
    return s;
  }
  for (auto& removals : pending_removals_) removals.clear();

  Manifest manifest;
  manifest.run_id = run_id_;
  manifest.model = model_;
  manifest.layout = layout_;
  manifest.global_step = std::numeric_limits<int64_t>::max();
  for (int p = 0; p < num_ps; ++p) {
    const pb::SaveShardResponse& r = responses[static_cast<size_t>(p)];
    manifest.shards.push_back({.ps = p,
                               .path = ShardFile(p),
                               .bytes = r.bytes_written(),
                               .crc32c = r.crc32c(),
                               .global_step = r.global_step()});
    manifest.global_step = std::min(manifest.global_step, r.global_step());
  }
  FULCRUM_RETURN_IF_ERROR(MakeDirs(folder, "--checkpoint_dir"));
  FULCRUM_RETURN_IF_ERROR(WriteManifest(folder, manifest));
  ++saves_;
  last_saved_step_ = manifest.global_step;
  spdlog::info("checkpoint {} written (global step {})", folder.string(), manifest.global_step);
  Prune();
  return manifest.global_step;
}

void Checkpointer::Prune() {
  // Newest first: the newest --keep_checkpoints with a valid manifest stay; older ones go, and
  // so do folders without a valid manifest older than the newest valid checkpoint (a save
  // that was cut off: the manifest is written last).
  int kept = 0;
  for (const fs::path& folder : ListCheckpoints(options_.dir)) {
    absl::StatusOr<Manifest> manifest = ReadManifest(folder);
    if (manifest.ok() && kept < options_.keep) {
      ++kept;
      continue;
    }
    if (!manifest.ok() && kept == 0) continue;  // newer than every checkpoint: not ours to judge
    // The manifest goes first: a half-removed checkpoint is never taken for a complete one.
    std::error_code error;
    fs::remove(folder / kManifestName, error);
    if (manifest.ok()) {
      for (const Manifest::Shard& s : manifest->shards) {
        const std::string path = (folder / s.path).string();
        pending_removals_[static_cast<size_t>(s.ps)].push_back(path);
        fs::remove(path, error);
      }
    }
    fs::remove_all(folder, error);
    if (error) {
      spdlog::warn("could not remove old checkpoint {}: {}", folder.string(), error.message());
    } else {
      spdlog::info("removed {} checkpoint {} (--keep_checkpoints={})",
                   manifest.ok() ? "old" : "incomplete", folder.string(), options_.keep);
    }
  }
}

}  // namespace fulcrum::chief
