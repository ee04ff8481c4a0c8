#include "runtime/config/run_dir.h"

#include <string>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "base/files.h"
#include "nlohmann/json.hpp"

namespace fulcrum::runtime {

bool IsFinalSummary(const std::filesystem::path& path) {
  const absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) return false;
  const nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  return !(j.is_object() && j.value("partial", false));
}

namespace {

// The first finished run's record in `run_dir`, relative to it; empty when there is none.
std::string FinishedRecord(const std::filesystem::path& run_dir) {
  std::error_code ec;
  if (std::filesystem::exists(run_dir / "report.json", ec)) return "report.json";
  // A single-mode run writes its summary at the top.
  if (IsFinalSummary(run_dir / "summary.json")) return "summary.json";
  for (const auto& entry : std::filesystem::directory_iterator(run_dir, ec)) {
    if (!entry.is_directory(ec)) continue;
    const std::filesystem::path summary = entry.path() / "summary.json";
    if (IsFinalSummary(summary)) return (entry.path().filename() / "summary.json").string();
  }
  return "";
}

}  // namespace

absl::Status CheckRunDirReusable(const std::filesystem::path& run_dir, bool overwrite) {
  std::error_code ec;
  if (overwrite || !std::filesystem::is_directory(run_dir, ec)) return absl::OkStatus();
  const std::string record = FinishedRecord(run_dir);
  if (record.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--run_dir=", run_dir.string(), " already holds a finished run (", record,
                   "): give a new folder, or --overwrite to replace that run's records"));
}

}  // namespace fulcrum::runtime
