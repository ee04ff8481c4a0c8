// tests: blocking data calls of the PS contract, which speaks frames only
// (runtime/frames/wire_frame.h), written from generated messages whose chunk payloads sit in
// ChunkData.data, as the tests build their requests (malformed ones included): each payload's
// bytes are sent as they are, and each reply chunk's payload comes back in its data field.
#pragma once

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "proto/ps.pb.h"
#include "runtime/client/ps_client.h"
#include "runtime/frames/wire_frame.h"

namespace fulcrum::testing {

// The frame of a push message: its header, and each gradient's data as one owned slice.
inline runtime::PsClient::PushFrame FrameOf(const pb::PushRequest& message) {
  runtime::PsClient::PushFrame frame;
  frame.header = message;
  frame.header.clear_gradients();
  for (const pb::ChunkData& g : message.gradients()) {
    runtime::OutChunk& c = frame.chunks.emplace_back();
    c.meta = g;
    c.meta.clear_data();
    if (!g.data().empty()) c.slices.push_back(transport::Slice::Own(g.data()));
    c.bytes = g.data().size();
  }
  return frame;
}

// A reply frame whose payloads are copied into `chunks` (message form) as they arrive.
template <typename Header>
void CollectPayloads(runtime::InFrame<Header>* reply,
                     google::protobuf::RepeatedPtrField<pb::ChunkData>* chunks) {
  reply->sink = [chunks](const pb::ChunkData& meta, const transport::Pieces& pieces) {
    pb::ChunkData* c = chunks->Add();
    *c = meta;
    for (const auto& p : pieces) c->mutable_data()->append(p.data(), p.size());
    return absl::OkStatus();
  };
}

// The reply as a message: the header's fields, and the collected chunks with their data.
template <typename Header>
void ToMessage(runtime::InFrame<Header>& reply,
               google::protobuf::RepeatedPtrField<pb::ChunkData>& chunks, Header* out) {
  *out = std::move(reply.header);
  runtime::ChunkList(out)->Swap(&chunks);
}

// One blocking call: `send(reply)` starts it on the client; the reply comes back as a message.
template <typename Header, typename Send>
absl::Status CallAndCollect(Send send, Header* response) {
  runtime::InFrame<Header> reply;
  google::protobuf::RepeatedPtrField<pb::ChunkData> chunks;
  CollectPayloads(&reply, &chunks);
  const absl::Status s = send(&reply);
  ToMessage(reply, chunks, response);
  return s;
}

inline absl::Status CallPull(runtime::PsClient& client, const pb::PullRequest& request,
                             pb::PullResponse* response, absl::Duration timeout) {
  return CallAndCollect(
      [&](runtime::PsClient::PullReply* reply) { return client.Pull(request, reply, timeout); },
      response);
}

inline absl::Status CallPush(runtime::PsClient& client, const pb::PushRequest& request,
                             pb::PushResponse* response, absl::Duration timeout) {
  const runtime::PsClient::PushFrame frame = FrameOf(request);
  return CallAndCollect(
      [&](runtime::PsClient::PushReply* reply) { return client.Push(frame, reply, timeout); },
      response);
}

inline absl::Status CallPushPull(runtime::PsClient& client, const pb::PushRequest& request,
                                 pb::PushResponse* response, absl::Duration timeout) {
  const runtime::PsClient::PushFrame frame = FrameOf(request);
  return CallAndCollect(
      [&](runtime::PsClient::PushReply* reply) { return client.PushPull(frame, reply, timeout); },
      response);
}

}  // namespace fulcrum::testing
