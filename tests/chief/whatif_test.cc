// PredictWhatIf on a run whose figures make every prediction a hand calculation (docs/profiler.md
// "What-if"), the records it refuses without, and `chief --whatif` on a real report file.
#include "chief/whatif.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/subprocess.h"

namespace fulcrum::chief {
namespace {

using ::testing::HasSubstr;

// 2 workers of batch 100 at 10,000 examples/s together (a 20 ms step: 6 ms of compute), two
// 1 MB variables, one per ps, every task on a host of its own; the ps tasks spent 0.2 ms of
// CPU per round of pushes.
nlohmann::json ARun() {
  nlohmann::json r;
  r["num_workers"] = 2;
  r["num_ps"] = 2;
  r["batch_size"] = 100;
  r["mode"] = "sync";
  r["placement"] = "round_robin";
  r["wire_dtype"] = "f32";
  r["workers_examples_per_sec"] = 10000.0;
  r["pushes_applied"] = 2000;
  r["placement_table"] = {{{"variable", "a"}, {"ps", 0}, {"bytes", 1000000}, {"source", 0}},
                          {{"variable", "b"}, {"ps", 1}, {"bytes", 1000000}, {"source", 1}}};
  const nlohmann::json phases = {{"data", 1.0},  {"forward", 2.0}, {"backward", 3.0},
                                 {"pull", 10.0}, {"push", 0.0},    {"sync_wait", 4.0}};
  r["workers"] = {{{"step_phase_mean_ms", phases}}, {{"step_phase_mean_ms", phases}}};
  r["ps"] = {{{"cpu_seconds", 0.1}}, {{"cpu_seconds", 0.1}}};
  r["hosts"] = {{{"host", "h1"}, {"tasks", {"chief-0", "ps-0"}}},
                {{"host", "h2"}, {"tasks", {"ps-1"}}},
                {{"host", "h3"}, {"tasks", {"worker-0"}}},
                {{"host", "h4"}, {"tasks", {"worker-1"}}}};
  return r;
}

WhatIfOptions Gigabit() {
  WhatIfOptions o;
  o.link_bits_per_sec = 1e9;
  o.host_cpus = 1;
  return o;
}

const nlohmann::json* Scenario(const nlohmann::json& w, const std::string& name) {
  for (const nlohmann::json& s : w["scenarios"]) {
    if (s["name"] == name) return &s;
  }
  return nullptr;
}

TEST(WhatIfTest, EveryPredictionFollowsTheModel) {
  absl::StatusOr<nlohmann::json> w = PredictWhatIf(ARun(), Gigabit());
  ASSERT_TRUE(w.ok()) << w.status();
  // Each host moves 2 MB each way per step; in sync one way and then the other: 32 ms at
  // 1 Gbit/s, of which the 14 ms of measured communication show 0.4375.
  EXPECT_DOUBLE_EQ((*w)["run"]["step_ms"].get<double>(), 20.0);
  EXPECT_DOUBLE_EQ((*w)["run"]["compute_ms"].get<double>(), 6.0);
  EXPECT_DOUBLE_EQ((*w)["run"]["link_ms"].get<double>(), 32.0);
  EXPECT_DOUBLE_EQ((*w)["run"]["link_bound_ms"].get<double>(), 16.0);
  EXPECT_NEAR((*w)["run"]["ps_cpu_ms"].get<double>(), 0.1, 1e-12);
  EXPECT_DOUBLE_EQ((*w)["run"]["exposed"].get<double>(), 14.0 / 32.0);
  auto rate = [&](const char* name) {
    const nlohmann::json* s = Scenario(*w, name);
    return s != nullptr ? (*s)["examples_per_sec"].get<double>() : -1.0;
  };
  EXPECT_NEAR(rate("link_2x"), 200 / 0.013, 1e-6);     // 6 + 16 x 0.4375 = 13 ms
  EXPECT_NEAR(rate("link_half"), 200 / 0.034, 1e-6);   // 6 + 64 x 0.4375 = 34 ms
  EXPECT_NEAR(rate("wire_bf16"), 200 / 0.013, 1e-6);   // half the bytes: as the 2x link
  EXPECT_NEAR(rate("workers_2x"), 400 / 0.034, 1e-6);  // 4 MB on each ps's link
  EXPECT_NEAR(rate("placement_greedy"), 10000, 1e-6);  // the same split of two equal variables
  EXPECT_EQ((*w)["most_useful"], "link_2x");
  // Three ps tasks cannot share two variables round robin: that run would be refused.
  ASSERT_EQ((*w)["skipped"].size(), 1u);
  EXPECT_EQ((*w)["skipped"][0]["name"], "one_more_ps");
  EXPECT_THAT((*w)["skipped"][0]["why"].get<std::string>(), HasSubstr("leaves ps:2 without"));
}

TEST(WhatIfTest, WithoutALinkRateTheLinkChangesAreNotPredicted) {
  absl::StatusOr<nlohmann::json> w = PredictWhatIf(ARun(), WhatIfOptions{});
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(Scenario(*w, "link_2x"), nullptr);
  bool said = false;
  for (const nlohmann::json& s : (*w)["skipped"]) {
    if (s["name"] == "link_half") {
      said = s["why"].get<std::string>().find("--link_rate") != std::string::npos;
    }
  }
  EXPECT_TRUE(said) << w->dump(2);
}

TEST(WhatIfTest, AMissingRecordIsNamed) {
  nlohmann::json single = ARun();
  single.erase("ps");
  single["num_ps"] = 0;
  absl::StatusOr<nlohmann::json> w = PredictWhatIf(single, Gigabit());
  EXPECT_EQ(w.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(w.status().message()), HasSubstr("ps tasks"));

  nlohmann::json unprofiled = ARun();
  for (nlohmann::json& worker : unprofiled["workers"]) worker.erase("step_phase_mean_ms");
  w = PredictWhatIf(unprofiled, Gigabit());
  EXPECT_EQ(w.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(w.status().message()), HasSubstr("step_phase_mean_ms"));
  EXPECT_THAT(std::string(w.status().message()), HasSubstr("--profile=off"));

  // Wrongly typed records are missing records, never a crash.
  nlohmann::json garbled = ARun();
  garbled["hosts"] = "h1";
  garbled["workers"] = 5;
  w = PredictWhatIf(garbled, Gigabit());
  EXPECT_THAT(std::string(w.status().message()), HasSubstr("step_phase_mean_ms"));
  garbled = ARun();
  garbled["placement_table"] = {1, "x"};
  w = PredictWhatIf(garbled, Gigabit());
  EXPECT_THAT(std::string(w.status().message()), HasSubstr("placement table"));

  nlohmann::json no_table = ARun();
  no_table.erase("placement_table");
  w = PredictWhatIf(no_table, Gigabit());
  EXPECT_THAT(std::string(w.status().message()), HasSubstr("placement_table"));
}

// The chief's --whatif reads a finished run's report.json: predictions on stdout, exit 0; a
// report without the records it needs: exit 2 naming the file and the record.
TEST(WhatIfTest, TheChiefAnswersForAFinishedRun) {
  const std::filesystem::path dir = ::fulcrum::testing::FreshDir("whatif_cli");
  std::ofstream(dir / "report.json") << ARun().dump(2);
  ::fulcrum::testing::RunResult r = ::fulcrum::testing::RunBinary(
      "chief", {"--whatif=" + dir.string(), "--link_rate=1gbit", "--host_cpus=1"}, 60);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("most useful change: link_2x"));
  EXPECT_THAT(r.output, HasSubstr("one_more_ps            not predicted: --placement=round_robin"));

  nlohmann::json unprofiled = ARun();
  for (nlohmann::json& worker : unprofiled["workers"]) worker.erase("step_phase_mean_ms");
  std::ofstream(dir / "report.json") << unprofiled.dump(2);
  r = ::fulcrum::testing::RunBinary("chief", {"--whatif=" + dir.string()}, 60);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr((dir / "report.json").string() + ": what-if needs the "
                                                                   "workers' step phases"));
  r = ::fulcrum::testing::RunBinary("chief", {"--whatif=" + (dir / "nope.json").string()}, 60);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("nope.json"));
}

}  // namespace
}  // namespace fulcrum::chief
