// rpc_observer.h, what runtime/ and ps/ use: ReportRpc measures the serialized sizes and the
// duration, a null observer is allowed, PeerName turns a task label into a folder name.
#include "profiler/rpc_observer.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "proto/tensorboard.pb.h"

namespace fulcrum::profiler {
namespace {

class Recorder : public RpcObserver {
 public:
  void OnRpc(const RpcEvent& e) override {
    peers.push_back(*e.peer);
    events.push_back(e);
  }
  std::vector<std::string> peers;
  std::vector<RpcEvent> events;
};

TEST(RpcObserverTest, ReportRpcGivesSizesAndDuration) {
  pb::tensorboard::Event sent, received;
  sent.set_file_version("brain.Event:2");
  received.set_step(12345);
  Recorder r;
  const std::string peer = "ps-0";
  const int64_t begin = NowUnixMicros();
  ReportRpc(&r, peer, "PushPull", begin, sent, received);
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.peers[0], "ps-0");
  EXPECT_STREQ(r.events[0].method, "PushPull");
  EXPECT_EQ(r.events[0].begin_unix_us, begin);
  EXPECT_GE(r.events[0].duration_us, 0);
  EXPECT_EQ(r.events[0].bytes_sent, sent.ByteSizeLong());
  EXPECT_EQ(r.events[0].bytes_received, received.ByteSizeLong());
  ReportRpc(nullptr, peer, "PushPull", begin, sent, received);  // no observer: nothing
}

TEST(RpcObserverTest, PeerNameIsTheTaskFolderName) {
  EXPECT_EQ(PeerName("worker:1"), "worker-1");
  EXPECT_EQ(PeerName("ps-0"), "ps-0");
  EXPECT_EQ(PeerName(""), "");
}

}  // namespace
}  // namespace fulcrum::profiler
