// The Chrome trace parsed back with nlohmann: the document shape, each kind of event, and
// spans added from several threads at once all present.
#include "profiler/chrome_trace.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace fulcrum::profiler {
namespace {

using nlohmann::json;

json Parse(const ChromeTrace& trace) {
  json doc = json::parse(trace.ToJson());
  EXPECT_TRUE(doc.is_object());
  EXPECT_EQ(doc.at("displayTimeUnit"), "ms");
  EXPECT_TRUE(doc.at("traceEvents").is_array());
  return doc;
}

std::vector<json> EventsWithPhase(const json& doc, const std::string& ph) {
  std::vector<json> out;
  for (const json& e : doc.at("traceEvents")) {
    if (e.at("ph") == ph) out.push_back(e);
  }
  return out;
}

TEST(ChromeTraceTest, EmptyTraceNamesTheProcess) {
  ChromeTrace trace(7, "worker-1");
  EXPECT_EQ(trace.num_events(), 1u);
  const json doc = Parse(trace);
  ASSERT_EQ(doc.at("traceEvents").size(), 1u);
  const json& meta = doc.at("traceEvents")[0];
  EXPECT_EQ(meta.at("ph"), "M");
  EXPECT_EQ(meta.at("name"), "process_name");
  EXPECT_EQ(meta.at("pid"), 7);
  EXPECT_EQ(meta.at("args").at("name"), "worker-1");
}

TEST(ChromeTraceTest, EventsRoundTrip) {
  ChromeTrace trace(3, "ps-0");
  trace.NameThread(1, "training");
  const int64_t begin = 1'700'000'000'123'456;  // microseconds since the epoch
  trace.Span("forward", "step", 1, begin, 2500, {{"step", 12}, {"bytes", 1.5e6}});
  trace.Span("push \"ps-1\"\n\xc3\xa9", "rpc", 2, begin + 10, 0);
  trace.Counter("cpu", begin + 100, {{"user", 0.5}, {"system", 0.25}});
  EXPECT_EQ(trace.num_events(), 5u);
  const json doc = Parse(trace);

  const std::vector<json> meta = EventsWithPhase(doc, "M");
  ASSERT_EQ(meta.size(), 2u);
  EXPECT_EQ(meta[1].at("name"), "thread_name");
  EXPECT_EQ(meta[1].at("tid"), 1);
  EXPECT_EQ(meta[1].at("pid"), 3);
  EXPECT_EQ(meta[1].at("args").at("name"), "training");

  const std::vector<json> spans = EventsWithPhase(doc, "X");
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[0].at("name"), "forward");
  EXPECT_EQ(spans[0].at("cat"), "step");
  EXPECT_EQ(spans[0].at("ts").get<int64_t>(), begin);
  EXPECT_EQ(spans[0].at("dur").get<int64_t>(), 2500);
  EXPECT_EQ(spans[0].at("pid"), 3);
  EXPECT_EQ(spans[0].at("tid"), 1);
  EXPECT_EQ(spans[0].at("args").at("step").get<double>(), 12.0);
  EXPECT_EQ(spans[0].at("args").at("bytes").get<double>(), 1.5e6);
  EXPECT_EQ(spans[1].at("name"), "push \"ps-1\"\n\xc3\xa9");  // escaped and back
  EXPECT_TRUE(spans[1].at("args").is_object());
  EXPECT_TRUE(spans[1].at("args").empty());

  const std::vector<json> counters = EventsWithPhase(doc, "C");
  ASSERT_EQ(counters.size(), 1u);
  EXPECT_EQ(counters[0].at("name"), "cpu");
  EXPECT_EQ(counters[0].at("ts").get<int64_t>(), begin + 100);
  EXPECT_EQ(counters[0].at("pid"), 3);
  EXPECT_EQ(counters[0].at("args"), (json{{"user", 0.5}, {"system", 0.25}}));
}

// An async span is a "b" and an "e" of one name, category and process-local id; a negative
// length (a clock step) ends it where it begins rather than before.
TEST(ChromeTraceTest, AsyncSpansAreBeginEndPairsWithALocalId) {
  ChromeTrace trace(200, "worker-0");
  trace.AsyncSpan("rpc ps-0", "rpc", 26, 1000, 40, {{"bytes", 8.0}}, {{"method", "PushPull"}});
  trace.AsyncSpan("rpc ps-1", "rpc", 27, 2000, -5);
  const json doc = Parse(trace);
  const std::vector<json> begins = EventsWithPhase(doc, "b");
  const std::vector<json> ends = EventsWithPhase(doc, "e");
  ASSERT_EQ(begins.size(), 2u);
  ASSERT_EQ(ends.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(begins[i]["name"], ends[i]["name"]);
    EXPECT_EQ(begins[i]["cat"], "rpc");
    EXPECT_EQ(ends[i]["cat"], "rpc");
    EXPECT_EQ(begins[i]["id2"], ends[i]["id2"]);
    EXPECT_EQ(begins[i]["pid"], 200);
  }
  EXPECT_EQ(begins[0]["id2"]["local"], "0x1a");
  EXPECT_EQ(begins[0]["ts"], 1000);
  EXPECT_EQ(ends[0]["ts"], 1040);
  EXPECT_EQ(begins[0]["args"]["bytes"], 8.0);
  EXPECT_EQ(begins[0]["args"]["method"], "PushPull");
  EXPECT_EQ(ends[1]["ts"], 2000);
}

TEST(ChromeTraceTest, NonFiniteValuesAndBadUtf8DoNotBreakTheDocument) {
  ChromeTrace trace(1, "chief");
  trace.Counter("mem", 5, {{"rss", std::nan("")}, {"ok", 2.0}});
  trace.Span("bad \xff name", "x", 0, 1, 1, {{"inf", std::numeric_limits<double>::infinity()}});
  const json doc = Parse(trace);
  EXPECT_EQ(EventsWithPhase(doc, "C")[0].at("args"), (json{{"ok", 2.0}}));
  EXPECT_TRUE(EventsWithPhase(doc, "X")[0].at("args").empty());
}

TEST(ChromeTraceTest, ConcurrentSpansAreAllKept) {
  constexpr int kThreads = 8;
  constexpr int kSpansPerThread = 2000;
  ChromeTrace trace(2, "worker-0");
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&trace, t] {
      trace.NameThread(t, absl::StrCat("thread-", t));
      for (int i = 0; i < kSpansPerThread; ++i) {
        trace.Span("span", "test", t, int64_t{i} * 10, 5, {{"i", i}});
        if (i % 100 == 0) trace.Counter("progress", i, {{absl::StrCat("t", t), i}});
      }
    });
  }
  for (std::thread& th : threads) th.join();
  const size_t counters_per_thread = kSpansPerThread / 100;
  EXPECT_EQ(trace.num_events(), 1u + kThreads * (1u + kSpansPerThread + counters_per_thread));
  const json doc = Parse(trace);
  const std::vector<json> spans = EventsWithPhase(doc, "X");
  ASSERT_EQ(spans.size(), size_t{kThreads} * kSpansPerThread);
  std::set<std::pair<int, int>> seen;
  for (const json& s : spans) {
    seen.emplace(s.at("tid").get<int>(), static_cast<int>(s.at("args").at("i").get<double>()));
  }
  EXPECT_EQ(seen.size(), spans.size());  // every (thread, i) exactly once
  EXPECT_EQ(EventsWithPhase(doc, "M").size(), 1u + kThreads);
  EXPECT_EQ(EventsWithPhase(doc, "C").size(), kThreads * counters_per_thread);
}

TEST(ChromeTraceTest, WriteReplacesTheFileWhole) {
  const std::filesystem::path path = std::filesystem::path(::testing::TempDir()) /
                                     absl::StrCat("fulcrum_trace_", getpid(), ".json");
  std::ofstream(path) << "old contents";
  ChromeTrace trace(4, "ps-1");
  trace.Span("apply", "ps", 0, 10, 20);
  ASSERT_TRUE(trace.Write(path.string()).ok());
  std::ifstream file(path);
  const std::string text((std::istreambuf_iterator<char>(file)), {});
  EXPECT_EQ(text, trace.ToJson());
  EXPECT_EQ(json::parse(text).at("traceEvents").size(), 2u);
  EXPECT_FALSE(std::filesystem::exists(path.string() + ".tmp"));
  std::filesystem::remove(path);

  const absl::Status bad = trace.Write("/nonexistent-dir/trace.json");
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("/nonexistent-dir/trace.json"), std::string::npos) << bad;
}

}  // namespace
}  // namespace fulcrum::profiler
