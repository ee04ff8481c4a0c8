// runtime/placement: round robin, greedy and partitioned placement of variables over PS tasks.
#include "runtime/cluster/placement.h"

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fulcrum::runtime {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// The MLP of the model zoo: 784-256-128-10, kernels and biases.
std::vector<VariableInfo> Mlp() {
  return {{"dense0/kernel", {784, 256}}, {"dense0/bias", {256}},
          {"dense1/kernel", {256, 128}}, {"dense1/bias", {128}},
          {"dense2/kernel", {128, 10}},  {"dense2/bias", {10}}};
}

int64_t TotalBytes(const std::vector<VariableInfo>& variables) {
  int64_t total = 0;
  for (const auto& v : variables) total += v.shape.num_elements() * 4;
  return total;
}

Placement Place(const std::vector<VariableInfo>& variables, int num_ps,
                PlacementStrategy strategy, int64_t partition_min_bytes = 0) {
  auto placement = PlaceVariables(variables, num_ps, strategy, partition_min_bytes);
  EXPECT_TRUE(placement.ok()) << placement.status();
  return placement.ok() ? *std::move(placement) : Placement();
}

// Which ps holds each whole variable (-1 if split or missing).
std::vector<int> PsOf(const Placement& p, size_t num_variables) {
  std::vector<int> ps(num_variables, -1);
  for (const auto& shard : p.shards) {
    for (const auto& v : shard) ps[static_cast<size_t>(v.source)] = v.ps;
  }
  return ps;
}

// Every element of every variable is held exactly once, by slices that are contiguous and
// consistent with their rows, shapes and ps.
void ExpectCoversExactly(const Placement& p, const std::vector<VariableInfo>& variables) {
  std::vector<std::vector<const PlacedVariable*>> pieces(variables.size());
  for (int ps = 0; ps < p.num_ps(); ++ps) {
    const auto& shard = p.shards[static_cast<size_t>(ps)];
    for (size_t i = 0; i < shard.size(); ++i) {
      const PlacedVariable& v = shard[i];
      EXPECT_EQ(v.ps, ps) << v.name;
      ASSERT_GE(v.source, 0);
      ASSERT_LT(static_cast<size_t>(v.source), variables.size());
      pieces[static_cast<size_t>(v.source)].push_back(&v);
      EXPECT_EQ(v.num_elements, v.shape.num_elements()) << v.name;
      if (i > 0) {  // ordered by (source, row_begin)
        EXPECT_LT(std::make_pair(shard[i - 1].source, shard[i - 1].row_begin),
                  std::make_pair(v.source, v.row_begin));
      }
    }
  }
  for (size_t s = 0; s < variables.size(); ++s) {
    const VariableInfo& var = variables[s];
    SCOPED_TRACE(var.name);
    auto& parts = pieces[s];
    ASSERT_FALSE(parts.empty());
    std::sort(parts.begin(), parts.end(),
              [](auto* a, auto* b) { return a->row_begin < b->row_begin; });
    const int64_t rows = var.shape.rank() > 0 ? var.shape.dim(0) : 1;
    const int64_t row_elements = var.shape.num_elements() / rows;
    int64_t next_row = 0;
    int64_t next_element = 0;
    for (const PlacedVariable* part : parts) {
      EXPECT_EQ(part->row_begin, next_row);
      EXPECT_GT(part->row_end, part->row_begin);
      EXPECT_EQ(part->element_offset, next_element);
      EXPECT_EQ(part->num_elements, (part->row_end - part->row_begin) * row_elements);
      if (var.shape.rank() > 0) {
        ASSERT_EQ(part->shape.rank(), var.shape.rank());
        EXPECT_EQ(part->shape.dim(0), part->row_end - part->row_begin);
        for (int d = 1; d < var.shape.rank(); ++d) EXPECT_EQ(part->shape.dim(d), var.shape.dim(d));
      }
      next_row = part->row_end;
      next_element += part->num_elements;
    }
    EXPECT_EQ(next_row, rows);
    EXPECT_EQ(next_element, var.shape.num_elements());
    if (parts.size() == 1) {
      EXPECT_EQ(parts[0]->name, var.name);
      EXPECT_EQ(parts[0]->shape, var.shape);
    } else {
      for (size_t i = 0; i < parts.size(); ++i) {
        EXPECT_EQ(parts[i]->name, absl::StrCat(var.name, "/part_", i));
        EXPECT_EQ(parts[i]->ps, static_cast<int>(i));
      }
    }
  }
  int64_t total = 0;
  for (int ps = 0; ps < p.num_ps(); ++ps) total += p.shard_bytes(ps);
  EXPECT_EQ(total, TotalBytes(variables));
}

std::string Describe(const Placement& p) {
  std::ostringstream out;
  out << PlacementName(p.strategy) << "\n";
  for (const auto& shard : p.shards) {
    for (const auto& v : shard) {
      out << v.name << " " << v.source << " " << v.ps << " " << v.row_begin << " " << v.row_end
          << " " << v.element_offset << " " << v.num_elements << " " << v.shape.ToString()
          << "\n";
    }
    out << "--\n";
  }
  return out.str();
}

TEST(PlacementStrategyTest, ParseAndName) {
  for (PlacementStrategy s :
       {PlacementStrategy::kRoundRobin, PlacementStrategy::kGreedy, PlacementStrategy::kPartition}) {
    PlacementStrategy parsed = PlacementStrategy::kRoundRobin;
    std::string error;
    ASSERT_TRUE(AbslParseFlag(PlacementName(s), &parsed, &error)) << error;
    EXPECT_EQ(parsed, s);
    EXPECT_EQ(AbslUnparseFlag(s), PlacementName(s));
  }
  EXPECT_STREQ(PlacementName(PlacementStrategy::kRoundRobin), "round_robin");
  EXPECT_STREQ(PlacementName(PlacementStrategy::kGreedy), "greedy");
  EXPECT_STREQ(PlacementName(PlacementStrategy::kPartition), "partition");
}

TEST(PlacementStrategyTest, UnknownListsTheChoices) {
  for (const char* name : {"random", "", "Greedy", "round-robin"}) {
    PlacementStrategy parsed = PlacementStrategy::kRoundRobin;
    std::string error;
    EXPECT_FALSE(AbslParseFlag(name, &parsed, &error)) << name;
    EXPECT_EQ(error, "expected round_robin, greedy or partition");
  }
}

TEST(PlaceVariablesTest, RoundRobinInModelOrder) {
  const auto vars = Mlp();
  const Placement p = Place(vars, 4, PlacementStrategy::kRoundRobin);
  EXPECT_EQ(p.strategy, PlacementStrategy::kRoundRobin);
  ASSERT_EQ(p.num_ps(), 4);
  EXPECT_EQ(PsOf(p, vars.size()), (std::vector<int>{0, 1, 2, 3, 0, 1}));
  ASSERT_EQ(p.shards[0].size(), 2u);
  EXPECT_EQ(p.shards[0][0].name, "dense0/kernel");
  EXPECT_EQ(p.shards[0][1].name, "dense2/kernel");
  EXPECT_EQ(p.shards[1][0].name, "dense0/bias");
  EXPECT_EQ(p.shards[1][1].name, "dense2/bias");
  ExpectCoversExactly(p, vars);
  EXPECT_EQ(p.shard_bytes(0), (784 * 256 + 128 * 10) * 4);
  EXPECT_EQ(p.shard_bytes(3), 128 * 4);
  EXPECT_EQ(p.shard_bytes(4), 0);   // no such ps
  EXPECT_EQ(p.shard_bytes(-1), 0);
}

TEST(PlaceVariablesTest, WholeVariablesKeepTheirShape) {
  const auto vars = Mlp();
  const Placement p = Place(vars, 2, PlacementStrategy::kRoundRobin);
  const PlacedVariable& kernel = p.shards[0][0];
  EXPECT_EQ(kernel.source, 0);
  EXPECT_EQ(kernel.row_begin, 0);
  EXPECT_EQ(kernel.row_end, 784);
  EXPECT_EQ(kernel.element_offset, 0);
  EXPECT_EQ(kernel.num_elements, 784 * 256);
  EXPECT_EQ(kernel.bytes(), 784 * 256 * 4);
  EXPECT_EQ(kernel.shape, (ops::Shape{784, 256}));
}

TEST(PlaceVariablesTest, GreedyLargestFirstOntoLeastLoaded) {
  // Elements 3, 5, 5, 2, 1, largest first (equal sizes in model order): b->ps0, c->ps1,
  // a->ps0 (tie: the lower ps), d->ps1 (5 < 8), e->ps1 (7 < 8): 8 and 8 elements.
  const std::vector<VariableInfo> vars = {
      {"a", {3}}, {"b", {5}}, {"c", {5}}, {"d", {2}}, {"e", {1}}};
  const Placement p = Place(vars, 2, PlacementStrategy::kGreedy);
  EXPECT_EQ(PsOf(p, vars.size()), (std::vector<int>{0, 0, 1, 1, 1}));
  EXPECT_EQ(p.shard_bytes(0), 8 * 4);
  EXPECT_EQ(p.shard_bytes(1), 8 * 4);
  EXPECT_DOUBLE_EQ(p.imbalance(), 1.0);
  ASSERT_EQ(p.shards[0].size(), 2u);
  EXPECT_EQ(p.shards[0][0].name, "a");  // ordered by source, not by placement order
  EXPECT_EQ(p.shards[0][1].name, "b");
  ExpectCoversExactly(p, vars);
}

TEST(PlaceVariablesTest, GreedyBalancesTheMlpBetterThanRoundRobin) {
  const auto vars = Mlp();
  const Placement rr = Place(vars, 2, PlacementStrategy::kRoundRobin);
  const Placement greedy = Place(vars, 2, PlacementStrategy::kGreedy);
  ExpectCoversExactly(greedy, vars);
  const double mean = static_cast<double>(TotalBytes(vars)) / 2;
  // Round robin puts all three kernels on ps 0.
  EXPECT_DOUBLE_EQ(rr.imbalance(), static_cast<double>((784 * 256 + 128 * 10 + 256 * 128) * 4) / mean);
  EXPECT_LT(greedy.imbalance(), rr.imbalance());
  // The 784x256 kernel alone is 85% of the model: greedy reaches that bound exactly (everything
  // else goes to the other ps); only partitioning can do better.
  EXPECT_DOUBLE_EQ(greedy.imbalance(), (784.0 * 256 * 4) / mean);
  EXPECT_EQ(PsOf(greedy, vars.size()), (std::vector<int>{0, 1, 1, 1, 1, 1}));
  const Placement part = Place(vars, 2, PlacementStrategy::kPartition, 256 << 10);
  EXPECT_LT(part.imbalance(), greedy.imbalance());
  EXPECT_LT(part.imbalance(), 1.15);
}

TEST(PlaceVariablesTest, GreedyIsCloseToEvenForManySimilarVariables) {
  std::vector<VariableInfo> vars;
  for (int i = 0; i < 24; ++i) vars.push_back({absl::StrCat("v", i), {100 + 37 * (i % 7), 64}});
  const Placement rr = Place(vars, 3, PlacementStrategy::kRoundRobin);
  const Placement greedy = Place(vars, 3, PlacementStrategy::kGreedy);
  ExpectCoversExactly(greedy, vars);
  EXPECT_LT(greedy.imbalance(), 1.02);
  EXPECT_LE(greedy.imbalance(), rr.imbalance());
  EXPECT_GE(greedy.imbalance(), 1.0);
}

TEST(PlaceVariablesTest, PartitionSplitsRowsEvenly) {
  // 10 rows over 3 ps: 4, 3, 3 (the first rows % k slices get the extra row).
  const std::vector<VariableInfo> vars = {{"emb", {10, 5}}};
  const Placement p = Place(vars, 3, PlacementStrategy::kPartition, 0);
  ASSERT_EQ(p.num_ps(), 3);
  const int64_t expected_rows[] = {4, 3, 3};
  int64_t row = 0;
  for (int ps = 0; ps < 3; ++ps) {
    ASSERT_EQ(p.shards[static_cast<size_t>(ps)].size(), 1u);
    const PlacedVariable& s = p.shards[static_cast<size_t>(ps)][0];
    EXPECT_EQ(s.name, absl::StrCat("emb/part_", ps));
    EXPECT_EQ(s.source, 0);
    EXPECT_EQ(s.ps, ps);
    EXPECT_EQ(s.row_begin, row);
    EXPECT_EQ(s.row_end, row + expected_rows[ps]);
    EXPECT_EQ(s.element_offset, row * 5);
    EXPECT_EQ(s.num_elements, expected_rows[ps] * 5);
    EXPECT_EQ(s.shape, (ops::Shape{expected_rows[ps], 5}));
    row += expected_rows[ps];
  }
  ExpectCoversExactly(p, vars);
}

TEST(PlaceVariablesTest, PartitionOfHigherRankVariables) {
  // A conv kernel [7, 3, 3, 64] over 2 ps: rows 4 and 3, each row 3*3*64 elements.
  const std::vector<VariableInfo> vars = {{"conv/kernel", {7, 3, 3, 64}}};
  const Placement p = Place(vars, 2, PlacementStrategy::kPartition, 0);
  ASSERT_EQ(p.shards[1].size(), 1u);
  EXPECT_EQ(p.shards[1][0].shape, (ops::Shape{3, 3, 3, 64}));
  EXPECT_EQ(p.shards[1][0].element_offset, 4 * 3 * 3 * 64);
  ExpectCoversExactly(p, vars);
}

TEST(PlaceVariablesTest, PartitionFewerRowsThanPs) {
  // 2 rows over 4 ps: two slices, on ps 0 and 1.
  const std::vector<VariableInfo> vars = {{"w", {2, 1000}}};
  const Placement p = Place(vars, 4, PlacementStrategy::kPartition, 0);
  ASSERT_EQ(p.shards[0].size(), 1u);
  ASSERT_EQ(p.shards[1].size(), 1u);
  EXPECT_TRUE(p.shards[2].empty());
  EXPECT_TRUE(p.shards[3].empty());
  EXPECT_EQ(p.shards[0][0].name, "w/part_0");
  EXPECT_EQ(p.shards[1][0].name, "w/part_1");
  EXPECT_DOUBLE_EQ(p.imbalance(), 2.0);  // empty ps count in the mean
  ExpectCoversExactly(p, vars);
}

TEST(PlaceVariablesTest, PartitionLeavesSmallAndUnsplittableVariablesWhole) {
  const std::vector<VariableInfo> vars = {
      {"big", {100, 100}},   // 40000 bytes > 1000: split
      {"small", {10, 25}},   // 1000 bytes, not larger: whole
      {"row", {1, 5000}},    // one row: cannot be split
      {"scalar", {}},        // rank 0: one element
  };
  const Placement p = Place(vars, 2, PlacementStrategy::kPartition, 1000);
  ExpectCoversExactly(p, vars);
  std::vector<std::string> names;
  for (const auto& shard : p.shards) {
    for (const auto& v : shard) names.push_back(v.name);
  }
  EXPECT_THAT(names, ::testing::UnorderedElementsAre("big/part_0", "big/part_1", "small", "row",
                                                     "scalar"));
}

TEST(PlaceVariablesTest, PartitionPlacesTheRestGreedilyAfterTheSlices) {
  // The slices of "big" load ps0 with 3 rows and ps1 with 2 rows (of 100 floats each); the
  // rest then goes greedily, largest first: "b" (150) to ps1 (200 < 300), "a" (100) to ps0
  // (300 < 350), "c" (50) to ps1 (350 < 400).
  const std::vector<VariableInfo> vars = {
      {"a", {100}}, {"big", {5, 100}}, {"b", {150}}, {"c", {50}}};
  const Placement p = Place(vars, 2, PlacementStrategy::kPartition, 150 * 4);
  ExpectCoversExactly(p, vars);
  ASSERT_EQ(p.shards[0].size(), 2u);
  EXPECT_EQ(p.shards[0][0].name, "a");
  EXPECT_EQ(p.shards[0][1].name, "big/part_0");
  ASSERT_EQ(p.shards[1].size(), 3u);
  EXPECT_EQ(p.shards[1][0].name, "big/part_1");
  EXPECT_EQ(p.shards[1][1].name, "b");
  EXPECT_EQ(p.shards[1][2].name, "c");
  EXPECT_EQ(p.shard_bytes(0), 400 * 4);
  EXPECT_EQ(p.shard_bytes(1), 400 * 4);
}

TEST(PlaceVariablesTest, OnePsHoldsEverythingWhole) {
  const auto vars = Mlp();
  for (PlacementStrategy s :
       {PlacementStrategy::kRoundRobin, PlacementStrategy::kGreedy, PlacementStrategy::kPartition}) {
    const Placement p = Place(vars, 1, s, 0);
    ASSERT_EQ(p.num_ps(), 1);
    ASSERT_EQ(p.shards[0].size(), vars.size());
    for (size_t i = 0; i < vars.size(); ++i) EXPECT_EQ(p.shards[0][i].name, vars[i].name);
    EXPECT_DOUBLE_EQ(p.imbalance(), 1.0);
  }
}

TEST(PlaceVariablesTest, Deterministic) {
  std::vector<VariableInfo> vars = Mlp();
  for (int i = 0; i < 10; ++i) vars.push_back({absl::StrCat("same", i), {32, 32}});
  for (PlacementStrategy s :
       {PlacementStrategy::kRoundRobin, PlacementStrategy::kGreedy, PlacementStrategy::kPartition}) {
    const std::string first = Describe(Place(vars, 3, s, 4096));
    for (int run = 0; run < 3; ++run) EXPECT_EQ(Describe(Place(vars, 3, s, 4096)), first);
  }
}

TEST(PlaceVariablesTest, NoVariables) {
  const Placement p = Place({}, 3, PlacementStrategy::kGreedy);
  ASSERT_EQ(p.num_ps(), 3);
  for (const auto& shard : p.shards) EXPECT_TRUE(shard.empty());
  EXPECT_DOUBLE_EQ(p.imbalance(), 1.0);
}

TEST(PlaceVariablesTest, Errors) {
  const auto vars = Mlp();
  for (int num_ps : {0, -1}) {
    auto p = PlaceVariables(vars, num_ps, PlacementStrategy::kGreedy, 0);
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << num_ps;
  }
  for (const ops::Shape& shape : {ops::Shape{0, 3}, ops::Shape{3, 0}, ops::Shape{-2}}) {
    const std::vector<VariableInfo> bad = {{"ok", {3}}, {"empty_var", shape}};
    auto p = PlaceVariables(bad, 2, PlacementStrategy::kPartition, 0);
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << shape.ToString();
    EXPECT_THAT(std::string(p.status().message()), HasSubstr("empty_var")) << shape.ToString();
  }
}

TEST(PlacementTableTest, FixedWidthWithPerPsTotals) {
  const auto vars = Mlp();
  const Placement p = Place(vars, 2, PlacementStrategy::kPartition, 256 << 10);
  const std::string table = p.Table();
  EXPECT_THAT(table, AllOf(HasSubstr("partition"), HasSubstr("variable"), HasSubstr("shape"),
                           HasSubstr("bytes"), HasSubstr("dense0/kernel/part_0"),
                           HasSubstr("dense0/kernel/part_1"), HasSubstr("dense2/bias"),
                           HasSubstr("[392, 256]"), HasSubstr("imbalance"), HasSubstr("%")));
  const std::vector<std::string> lines = absl::StrSplit(table, '\n', absl::SkipEmpty());
  // A title, the header, one line per placed variable, one per ps, the imbalance.
  ASSERT_EQ(lines.size(), 1 + 1 + 7 + 2 + 1u);
  for (size_t i = 2; i < 9; ++i) EXPECT_EQ(lines[i].size(), lines[1].size()) << lines[i];
  EXPECT_THAT(lines[2], HasSubstr("dense0/kernel/part_0"));  // model order
  EXPECT_THAT(lines[8], HasSubstr("dense2/bias"));
  EXPECT_THAT(lines[9], HasSubstr(absl::StrCat(p.shard_bytes(0))));
  EXPECT_THAT(lines[10], HasSubstr(absl::StrCat(p.shard_bytes(1))));
  EXPECT_THAT(lines[11], HasSubstr(absl::StrFormat("%.3f", p.imbalance())));
}

}  // namespace
}  // namespace fulcrum::runtime
