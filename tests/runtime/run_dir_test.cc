// runtime/run_dir: which --run_dir folders hold a finished run's records (issue 13: a reused
// --run_dir was silently overwritten). On real folders in the test's scratch space.
#include "runtime/config/run_dir.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fulcrum::runtime {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;

fs::path Scratch() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const fs::path dir = fs::path(::testing::TempDir()) /
                       absl::StrCat("fulcrum_run_dir_", getpid(), "_", info->name());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void Write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

TEST(RunDirTest, MissingEmptyOrUnfinishedFoldersMayBeUsed) {
  const fs::path dir = Scratch();
  EXPECT_TRUE(CheckRunDirReusable(dir / "missing", false).ok());
  EXPECT_TRUE(CheckRunDirReusable(dir, false).ok());
  // What a running or crashed job leaves: partial summaries (a task restarted into it, a
  // chief that takes it over) and the profiler's other files.
  Write(dir / "worker-0" / "summary.json", R"({"partial": true, "steps": 3})");
  Write(dir / "chief-0" / "summary.json", R"({"partial": true})");
  Write(dir / "worker-0" / "steps.csv", "step\n1\n");
  Write(dir / "launch" / "chief-0.log", "log");
  EXPECT_TRUE(CheckRunDirReusable(dir, false).ok());
}

TEST(RunDirTest, AFinishedRunIsRefusedNamingTheFolderTheRecordAndOverwrite) {
  struct Case {
    std::string file;
    std::string text;
  };
  const Case cases[] = {
      {"report.json", "{}"},
      {"worker-1/summary.json", R"({"partial": false, "steps": 10})"},
      {"ps-0/summary.json", R"({"job": "ps"})"},
      {"summary.json", R"({"steps": 10})"},  // a single-mode run
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    const fs::path dir = Scratch();
    Write(dir / "worker-0" / "summary.json", R"({"partial": true})");
    Write(dir / c.file, c.text);
    const absl::Status s = CheckRunDirReusable(dir, false);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.message()), AllOf(HasSubstr("--run_dir=" + dir.string()),
                                                HasSubstr(c.file), HasSubstr("--overwrite")));
    EXPECT_TRUE(CheckRunDirReusable(dir, true).ok());
    // Only read: the record is still there.
    EXPECT_TRUE(fs::exists(dir / c.file));
  }
}

TEST(RunDirTest, IsFinalSummary) {
  const fs::path dir = Scratch();
  EXPECT_FALSE(IsFinalSummary(dir / "none.json"));
  Write(dir / "partial.json", R"({"partial": true})");
  EXPECT_FALSE(IsFinalSummary(dir / "partial.json"));
  Write(dir / "final.json", R"({"partial": false})");
  EXPECT_TRUE(IsFinalSummary(dir / "final.json"));
  Write(dir / "old.json", R"({"steps": 1})");  // summaries before "partial" existed
  EXPECT_TRUE(IsFinalSummary(dir / "old.json"));
}

}  // namespace
}  // namespace fulcrum::runtime
