#include "runtime/ps_client.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "base/mutex.h"

namespace fulcrum::runtime {
namespace {

// How long past the call's own timeout a blocking caller waits for the call to end before
// giving up on it (the call's deadline should always end it first).
constexpr absl::Duration kWaitGrace = absl::Seconds(10);

// The outcome of one asynchronous call; shared with the callback so that a callback that
// runs after its caller gave up touches nothing freed.
struct Outcome {
  Mutex mu;
  CondVar cv;
  bool done ABSL_GUARDED_BY(mu) = false;
  absl::Status result ABSL_GUARDED_BY(mu);
};

template <typename Call>
absl::Status Wait(absl::Duration timeout, Call call) {
  auto outcome = std::make_shared<Outcome>();
  call([outcome](absl::Status s) {
    MutexLock lock(&outcome->mu);
    outcome->result = std::move(s);
    outcome->done = true;
    outcome->cv.Signal();
  });
  MutexLock lock(&outcome->mu);
  const absl::Time deadline = absl::Now() + timeout + kWaitGrace;
  while (!outcome->done) {
    if (outcome->cv.WaitUntil(&outcome->mu, deadline)) continue;
    if (outcome->done) break;
    // The request and response stay the caller's; by now the call's own deadline has long
    // ended it in every client, so nothing writes them after this return.
    return absl::DeadlineExceededError(
        absl::StrCat("the call did not end within its timeout of ", absl::FormatDuration(timeout)));
  }
  return outcome->result;
}

}  // namespace

namespace {

// A frame's chunk payloads copied into a generated message's data fields.
pb::PushRequest ToMessage(const PsClient::PushFrame& frame) {
  pb::PushRequest message = frame.header;
  for (const OutChunk& c : frame.chunks) {
    pb::ChunkData* data = message.add_gradients();
    *data = c.meta;
    std::string* bytes = data->mutable_data();
    bytes->reserve(c.bytes);
    for (const grpc::Slice& s : c.slices) {
      bytes->append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
  }
  return message;
}

// A generated reply handed to a frame: metas into its header, payloads to its sink.
template <typename Message>
absl::Status ToFrame(Message& message, InFrame<Message>* frame) {
  auto* chunks = ChunkList(&message);
  google::protobuf::RepeatedPtrField<pb::ChunkData> list;
  list.Swap(chunks);
  frame->header.Clear();
  frame->header.Swap(&message);
  frame->floats.clear();
  frame->error = absl::OkStatus();
  for (pb::ChunkData& c : list) {
    Pieces pieces;
    if (!c.data().empty()) pieces.emplace_back(c.data().data(), c.data().size());
    if (frame->sink) {
      frame->error = frame->sink(c, pieces);
    } else {
      absl::StatusOr<PooledFloats> f = DecodeToFloats(c, pieces);
      if (f.ok()) frame->floats.push_back(std::move(*f));
      frame->error = f.status();
    }
    if (!frame->error.ok()) break;
    c.clear_data();
    *ChunkList(&frame->header)->Add() = std::move(c);
  }
  return frame->error;
}

}  // namespace

void PsClient::PullFrameAsync(const pb::PullRequest* request, PullReply* response,
                              absl::Duration timeout, Done done) {
  auto reply = std::make_shared<pb::PullResponse>();
  PullAsync(request, reply.get(), timeout,
            [reply, response, done = std::move(done)](absl::Status s) {
              if (s.ok()) s = ToFrame(*reply, response);
              done(std::move(s));
            });
}

void PsClient::PushPullFrameAsync(const PushFrame* request, PushReply* response,
                                  absl::Duration timeout, Done done) {
  auto message = std::make_shared<pb::PushRequest>(ToMessage(*request));
  auto reply = std::make_shared<pb::PushResponse>();
  PushPullAsync(message.get(), reply.get(), timeout,
                [message, reply, response, done = std::move(done)](absl::Status s) {
                  if (s.ok()) s = ToFrame(*reply, response);
                  done(std::move(s));
                });
}

absl::Status PsClient::Pull(const pb::PullRequest& request, pb::PullResponse* response,
                            absl::Duration timeout) {
  return Wait(timeout, [&](Done d) { PullAsync(&request, response, timeout, std::move(d)); });
}

absl::Status PsClient::Push(const pb::PushRequest& request, pb::PushResponse* response,
                            absl::Duration timeout) {
  return Wait(timeout, [&](Done d) { PushAsync(&request, response, timeout, std::move(d)); });
}

absl::Status PsClient::PushPull(const pb::PushRequest& request, pb::PushResponse* response,
                                absl::Duration timeout) {
  return Wait(timeout, [&](Done d) { PushPullAsync(&request, response, timeout, std::move(d)); });
}

}  // namespace fulcrum::runtime
