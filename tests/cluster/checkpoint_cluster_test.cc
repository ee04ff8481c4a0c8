// tests: checkpoints of whole clusters of the real binaries (issue 12): the chief saves every
// ps shard with a manifest, keeps --keep_checkpoints, a job started on the folder resumes from
// the newest intact checkpoint, a corrupt one is refused naming the file and the older one is
// used, and wrong set-ups (a checkpoint of another model, a ps without --checkpoint_dir) are
// refused with exit code 2.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
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
    const fs::path file = shard["path"].get<std::string>();
    EXPECT_EQ(file.parent_path(), ckpt / "ckpt-300");
    EXPECT_EQ(static_cast<int64_t>(fs::file_size(file)), shard["bytes"].get<int64_t>());
    EXPECT_EQ(shard["global_step"], 300);
  }
  EXPECT_FALSE(fs::exists(ckpt / "ckpt-300" / "ps-0.ckpt.tmp"));

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
