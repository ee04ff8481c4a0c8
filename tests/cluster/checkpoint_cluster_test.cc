// tests: checkpoints of whole clusters of the real binaries (issue 12): the chief saves every
// ps shard with a manifest, keeps --keep_checkpoints, a job started on the folder resumes from
// the newest intact checkpoint, a corrupt one is refused naming the file and the older one is
// used, and wrong set-ups (a checkpoint of another model, a ps without --checkpoint_dir) are
// refused with exit code 2. Issue 27: the manifests name files, not paths, so a moved folder
// resumes; a folder of corrupt checkpoints fails the start without writing one; the first
// checkpoint is written before training, so a ps lost early is restored from it.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/cluster.h"
#include "tests/testing/subprocess.h"

namespace fulcrum {
namespace {

namespace fs = std::filesystem;
using ::fulcrum::testing::FreshDir;
using ::fulcrum::testing::LocalCluster;
using ::fulcrum::testing::ReadFile;
using ::fulcrum::testing::ReadJson;
using ::fulcrum::testing::WriteLocalSpec;

// The ckpt-<step> folders of `dir`, by step.
std::vector<int64_t> CheckpointSteps(const fs::path& dir) {
  std::vector<int64_t> steps;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("ckpt-", 0) == 0) steps.push_back(std::stoll(name.substr(5)));
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

// One sync run of mlp on synthetic data over 2 ps and 2 workers into dir/<run>, with `extra`
// flags; returns the cluster after every task exited.
struct SyncRun {
  std::unique_ptr<LocalCluster> cluster;
  nlohmann::json report;
};
SyncRun TrainSync(const fs::path& dir, const std::string& run,
                  const std::vector<std::string>& extra) {
  const std::string spec = WriteLocalSpec(dir / (run + "-spec.json"), 2, 2);
  // Batch 512: steps slow enough that a sync save (aimed 0.25 s of steps ahead) lands before
  // the end several times in 300 steps.
  std::vector<std::string> flags = {absl::StrCat("--cluster_spec=", spec),
                                    "--model=mlp",
                                    "--dataset=synthetic",
                                    "--mode=sync",
                                    "--batch_size=512",
                                    "--eval_every=0",
                                    "--threads=1",
                                    "--profile=off",
                                    absl::StrCat("--checkpoint_dir=", (dir / "ckpt").string()),
                                    absl::StrCat("--run_dir=", (dir / run).string())};
  flags.insert(flags.end(), extra.begin(), extra.end());
  SyncRun r;
  r.cluster = std::make_unique<LocalCluster>(dir / (run + "-logs"));
  fs::create_directories(dir / (run + "-logs"));
  r.cluster->StartAll(2, 2, flags);
  r.cluster->WaitAll(std::chrono::seconds(180));
  r.report = ReadJson(dir / run / "report.json");
  return r;
}

TEST(CheckpointClusterTest, SavesKeepsResumesAndFallsBackFromACorruptCheckpoint) {
  const fs::path dir = FreshDir("cluster_checkpoints");
  const fs::path ckpt = dir / "ckpt";

  // 1. A fresh job: periodic checkpoints and a final one at step 300; only 2 kept.
  SyncRun first = TrainSync(
      dir, "run1", {"--train_steps=300", "--checkpoint_every_steps=60", "--keep_checkpoints=2"});
  for (const auto& t : first.cluster->tasks()) {
    ASSERT_EQ(t.exit_code, 0) << t.name() << "\n" << first.cluster->Logs();
  }
  ASSERT_TRUE(first.report.is_object()) << first.cluster->Logs();
  const nlohmann::json& c1 = first.report["checkpoint"];
  EXPECT_GE(c1.value("saves", 0), 3) << c1.dump();
  EXPECT_EQ(c1["last_step"], 300) << c1.dump();
  EXPECT_TRUE(c1["resumed_from"].is_null());
  const std::vector<int64_t> kept = CheckpointSteps(ckpt);
  ASSERT_EQ(kept.size(), 2u) << ::testing::PrintToString(kept);
  EXPECT_EQ(kept.back(), 300);
  const int64_t older = kept.front();
  EXPECT_LT(older, 300);
  // The manifest lists both shards with their sizes; the files are there with those sizes.
  const nlohmann::json manifest = ReadJson(ckpt / "ckpt-300" / "manifest.json");
  ASSERT_TRUE(manifest.is_object());
  EXPECT_EQ(manifest["body"]["global_step"], 300);
  ASSERT_EQ(manifest["body"]["shards"].size(), 2u);
  for (const nlohmann::json& shard : manifest["body"]["shards"]) {
    // The file's name only, so that the folder can be moved (step 4).
    const std::string name = shard["path"].get<std::string>();
    EXPECT_EQ(name, absl::StrCat("ps-", shard["ps"].get<int>(), ".ckpt"));
    const fs::path file = ckpt / "ckpt-300" / name;
    EXPECT_EQ(static_cast<int64_t>(fs::file_size(file)), shard["bytes"].get<int64_t>());
    EXPECT_EQ(shard["global_step"], 300);
  }
  EXPECT_FALSE(fs::exists(ckpt / "ckpt-300" / "ps-0.ckpt.tmp"));
  // Each ps says how long training waited for its saves' copies in memory (the file is
  // written after): every save it wrote, the longest within the total.
  for (int p = 0; p < 2; ++p) {
    const nlohmann::json ps = ReadJson(dir / "run1" / absl::StrCat("ps-", p) / "summary.json");
    const nlohmann::json& saves = ps["checkpoint"];
    ASSERT_TRUE(saves.is_object()) << ps.dump();
    EXPECT_EQ(saves["saves"], c1["saves"]) << saves.dump();
    EXPECT_GT(saves["pause_ms_max"].get<double>(), 0.0) << saves.dump();
    EXPECT_LE(saves["pause_ms_max"].get<double>(), saves["pause_ms"].get<double>()) << saves.dump();
  }

  // 2. One flipped bit in the newest checkpoint's ps:0 shard: the next job refuses it, naming
  // the file, and resumes from the older one.
  const fs::path bad = ckpt / "ckpt-300" / "ps-0.ckpt";
  {
    std::string bytes = ReadFile(bad);
    bytes[bytes.size() / 2] ^= 0x10;
    std::ofstream(bad, std::ios::binary | std::ios::trunc) << bytes;
  }
  SyncRun second = TrainSync(dir, "run2", {"--train_steps=400", "--checkpoint_every_secs=0"});
  for (const auto& t : second.cluster->tasks()) {
    ASSERT_EQ(t.exit_code, 0) << t.name() << "\n" << second.cluster->Logs();
  }
  const nlohmann::json& c2 = second.report["checkpoint"];
  EXPECT_EQ(c2["resumed_from_step"], older) << c2.dump();
  ASSERT_EQ(c2["refused"].size(), 1u) << c2.dump();
  EXPECT_NE(c2["refused"][0].get<std::string>().find(bad.string() + ": corrupt"), std::string::npos)
      << c2.dump();
  EXPECT_EQ(second.report["global_step"], 400);
  EXPECT_EQ(c2["last_step"], 400);
  EXPECT_NE(ReadFile(dir / "run2-logs" / "chief-0.log").find("resumed from checkpoint"),
            std::string::npos);

  // 3. A job of another model on the same folder is refused with exit code 2 before training,
  // and the checkpoints stay as they were.
  SyncRun other = TrainSync(dir, "run3", {"--train_steps=100", "--model=logreg"});
  EXPECT_EQ(other.cluster->task("chief", 0).exit_code, 2) << other.cluster->Logs();
  EXPECT_NE(ReadFile(dir / "run3-logs" / "chief-0.log").find("holds checkpoints of another job"),
            std::string::npos)
      << other.cluster->Logs();
  EXPECT_EQ(CheckpointSteps(ckpt).back(), 400);

  // 4. The folder moved elsewhere resumes from there (its manifests name files, not paths).
  const fs::path moved = dir / "moved";
  fs::rename(ckpt, moved);
  SyncRun fourth = TrainSync(dir, "run4",
                             {"--train_steps=450", "--checkpoint_every_secs=0",
                              absl::StrCat("--checkpoint_dir=", moved.string())});
  for (const auto& t : fourth.cluster->tasks()) {
    ASSERT_EQ(t.exit_code, 0) << t.name() << "\n" << fourth.cluster->Logs();
  }
  EXPECT_EQ(fourth.report["checkpoint"]["resumed_from_step"], 400) << fourth.report.dump();
  EXPECT_EQ(CheckpointSteps(moved).back(), 450);

  // 5. Every checkpoint corrupt: the start fails with exit code 2 naming them, and writes no
  // checkpoint (a later start must not take an untrained one for the newest).
  for (const int64_t step : CheckpointSteps(moved)) {
    const fs::path shard = moved / absl::StrCat("ckpt-", step) / "ps-1.ckpt";
    std::string bytes = ReadFile(shard);
    bytes[bytes.size() / 3] ^= 0x01;
    std::ofstream(shard, std::ios::binary | std::ios::trunc) << bytes;
  }
  const std::vector<int64_t> ruined = CheckpointSteps(moved);
  SyncRun fifth = TrainSync(
      dir, "run5", {"--train_steps=500", absl::StrCat("--checkpoint_dir=", moved.string())});
  EXPECT_EQ(fifth.cluster->task("chief", 0).exit_code, 2) << fifth.cluster->Logs();
  EXPECT_NE(ReadFile(dir / "run5-logs" / "chief-0.log").find("no intact checkpoint"),
            std::string::npos)
      << fifth.cluster->Logs();
  EXPECT_EQ(CheckpointSteps(moved), ruined);
}

// The first checkpoint is written right after the variables are initialised (ckpt-0), so a ps
// killed before the first periodic save (default: after 600 s) is restored from it and the
// run finishes, with every exit code 0.
TEST(CheckpointClusterTest, APsLostBeforeTheFirstPeriodicSaveIsRestoredFromTheInitialOne) {
  const fs::path dir = FreshDir("cluster_checkpoint_initial");
  const std::string spec = WriteLocalSpec(dir / "spec.json", 1, 2);
  const std::vector<std::string> flags = {
      absl::StrCat("--cluster_spec=", spec),
      "--model=mlp",
      "--dataset=synthetic",
      "--train_steps=2000",
      "--eval_every=0",
      "--threads=1",
      "--profile=off",
      "--recovery_timeout=60",
      absl::StrCat("--checkpoint_dir=", (dir / "ckpt").string()),
      absl::StrCat("--run_dir=", (dir / "run").string())};
  LocalCluster cluster(dir);
  cluster.StartAll(1, 2, flags);
  ASSERT_TRUE(cluster.WaitForLog("chief", 0, "ready: training starts", std::chrono::seconds(90)))
      << cluster.Logs();
  EXPECT_NE(ReadFile(dir / "chief-0.log").find("ckpt-0 written (global step 0)"), std::string::npos)
      << cluster.Logs();
  cluster.Kill("ps", 0);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  cluster.Start("ps", 0, flags);
  cluster.WaitAll(std::chrono::seconds(180));
  for (const auto& [job, n] :
       std::vector<std::pair<std::string, int>>{{"ps", 1}, {"worker", 2}, {"chief", 1}}) {
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ(cluster.task(job, i).exit_code, 0) << job << ":" << i << "\n" << cluster.Logs();
    }
  }
  const nlohmann::json report = ReadJson(dir / "run" / "report.json");
  ASSERT_TRUE(report.is_object()) << cluster.Logs();
  ASSERT_EQ(report["ps_recoveries"].size(), 1u) << report.dump(2);
  EXPECT_EQ(report["ps_recoveries"][0]["restored_step"], 0) << report.dump(2);
  EXPECT_GE(report["global_step"].get<int64_t>(), 2000);
}

// A chief asked to checkpoint into a folder the ps tasks were not given is refused with exit
// code 2 naming the flag before training starts (the ps would refuse every save).
TEST(CheckpointClusterTest, APsWithoutTheCheckpointFolderIsAnError) {
  const fs::path dir = FreshDir("cluster_checkpoint_no_ps_dir");
  const std::string spec = WriteLocalSpec(dir / "spec.json", 1, 1);
  LocalCluster cluster(dir);
  const std::vector<std::string> common = {absl::StrCat("--cluster_spec=", spec),
                                           "--model=logreg",
                                           "--dataset=synthetic",
                                           "--train_steps=50",
                                           "--threads=1",
                                           "--profile=off",
                                           absl::StrCat("--run_dir=", (dir / "run").string())};
  std::vector<std::string> chief = common;
  chief.push_back(absl::StrCat("--checkpoint_dir=", (dir / "ckpt").string()));
  cluster.Start("ps", 0, common);
  cluster.Start("worker", 0, chief);
  cluster.Start("chief", 0, chief);
  cluster.WaitAll(std::chrono::seconds(120));
  EXPECT_EQ(cluster.task("chief", 0).exit_code, 2) << cluster.Logs();
  const std::string log = ReadFile(dir / "chief-0.log");
  EXPECT_NE(log.find("ps:0 was started without it"), std::string::npos) << cluster.Logs();
  EXPECT_EQ(log.find("training starts"), std::string::npos) << cluster.Logs();
}

}  // namespace
}  // namespace fulcrum
