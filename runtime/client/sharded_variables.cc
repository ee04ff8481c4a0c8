#include "runtime/client/sharded_variables.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/blocking_counter.h"
#include "base/random.h"
#include "spdlog/spdlog.h"

namespace fulcrum::runtime {

// One chunk's calls. The push frame borrows the gradient tensors' memory (float32) or holds
// their 16-bit encoding; replies are parsed straight into the value tensors by ExpectChunk's sink.
struct ShardedVariables::Slot {
  int index = 0;  // among all chunks (ps-major)
  int ps = 0;
  int chunk = 0;
  pb::PullRequest pull_request;
  PsClient::PullReply pull_reply;
  PsClient::PushFrame push;
  PsClient::PushReply push_reply;
  absl::Status status;
  int replies = 0;              // chunks the current reply carried
  int64_t reply_bytes = 0;      // their payload bytes
  std::vector<std::span<float>> dest;  // where the current reply's values go
  // The chunk's step in the last reply of values (-1: none yet): the step the next gradient
  // of this chunk is computed at, sent in its ChunkData.step.
  int64_t read_step = -1;
  bool pull_stopped = false;  // the last StartChunkPull reply said training has ended
};

namespace {

// How much longer than the transfer's timeout one call may take: the PS's own wait is bounded
// by the timeout, the slack covers the transport.
constexpr absl::Duration kCallSlack = absl::Seconds(5);

// Waits for every call of one fan-out. Each call carries its own deadline (the transfer's
// timeout plus kCallSlack), so this returns soon after it; a client that overruns its
// deadline is reported, not abandoned: its callback still writes into the slot.
void AwaitAll(BlockingCounter& pending, absl::Duration timeout, const std::string& task) {
  while (!pending.WaitFor(timeout + 2 * kCallSlack)) {
    spdlog::error("{}: a PS call is past its deadline and has not reported; still waiting", task);
  }
}

// A reply sink writing the one chunk a slot asked for into slot->dest.
template <typename Slot>
auto ExpectChunk(Slot* slot, const char* what) {
  slot->replies = 0;
  slot->reply_bytes = 0;
  return [slot, what](const pb::ChunkData& meta, const Pieces& pieces) -> absl::Status {
    if (++slot->replies > 1) {
      return absl::InternalError(
          absl::StrCat("ps:", slot->ps, " answered more than one chunk to a call for one"));
    }
    if (meta.chunk() != slot->chunk) {
      return absl::InternalError(absl::StrCat("ps:", slot->ps, " answered chunk ", meta.chunk(),
                                              " to a call for chunk ", slot->chunk));
    }
    for (const auto& p : pieces) slot->reply_bytes += static_cast<int64_t>(p.size());
    slot->read_step = meta.step();
    return DecodePayload(pieces, meta.wire_dtype(), slot->dest, what);
  };
}

}  // namespace

// Names the chunk in an error (built only on failure: this is the per-chunk hot path).
absl::Status ShardedVariables::InChunk(const absl::Status& s, const Slot& slot) {
  return absl::Status(s.code(),
                      absl::StrCat("chunk ", slot.chunk, " of ps:", slot.ps, ": ", s.message()));
}

ShardedVariables::ShardedVariables(const Placement& placement, int64_t chunk_bytes,
                                   std::vector<PsClient*> clients, std::string task)
    : clients_(std::move(clients)), task_(std::move(task)) {
  // Request ids: unique per task and process start, then sequential.
  next_request_ = Mix64(NameHash(task_) ^ static_cast<uint64_t>(absl::ToUnixNanos(absl::Now())));
  for (int p = 0; p < placement.num_ps(); ++p) {
    Shard shard;
    shard.variables = placement.shards[static_cast<size_t>(p)];
    std::vector<int64_t> elements;
    for (const auto& v : shard.variables) elements.push_back(v.num_elements);
    shard.chunks = PlanChunks(elements, chunk_bytes);
    for (size_t c = 0; c < shard.chunks.size(); ++c) {
      auto slot = std::make_unique<Slot>();
      slot->index = static_cast<int>(slots_.size());
      slot->ps = p;
      slot->chunk = static_cast<int>(c);
      slot->pull_request.set_task(task_);
      slot->pull_request.set_shard(p);  // a promoted replica serves it on another ps
      slot->pull_request.add_chunks(static_cast<int>(c));
      slot->push.header.set_task(task_);
      slot->push.header.set_shard(p);
      slot->push.chunks.emplace_back().meta.set_chunk(static_cast<int>(c));
      slots_.push_back(std::move(slot));
    }
    shards_.push_back(std::move(shard));
  }
}

ShardedVariables::~ShardedVariables() = default;

int ShardedVariables::num_chunks() const { return static_cast<int>(slots_.size()); }

template <typename T, typename Tensors>
std::vector<std::span<T>> ShardedVariables::Spans(int ps, int chunk, Tensors tensors) const {
  const Shard& shard = shards_[static_cast<size_t>(ps)];
  std::vector<std::span<T>> spans;
  for (const Segment& seg : shard.chunks[static_cast<size_t>(chunk)].segments) {
    const PlacedVariable& v = shard.variables[static_cast<size_t>(seg.variable)];
    auto& tensor = tensors[static_cast<size_t>(v.source)];
    spans.emplace_back(tensor.data() + v.element_offset + seg.offset,
                       static_cast<size_t>(seg.count));
  }
  return spans;
}

void ShardedVariables::set_wire_dtype(pb::WireDtype dtype) {
  wire_dtype_ = dtype;
  for (auto& slot : slots_) {
    slot->pull_request.set_reply_dtype(dtype);
    slot->push.header.set_reply_dtype(dtype);
  }
}

absl::Status ShardedVariables::PullAll(int64_t min_step, absl::Duration timeout,
                                       std::span<ops::Tensor> values, TransferResult* result) {
  *result = TransferResult();
  BlockingCounter pending(static_cast<int>(slots_.size()));
  for (auto& slot_ptr : slots_) {
    Slot* slot = slot_ptr.get();
    slot->pull_request.set_min_step(min_step);
    slot->pull_request.set_timeout_ms(absl::ToInt64Milliseconds(timeout));
    slot->dest = Spans<float>(slot->ps, slot->chunk, values);
    slot->pull_reply.sink = ExpectChunk(slot, "pulled values");
    clients_[static_cast<size_t>(slot->ps)]->PullAsync(
        &slot->pull_request, &slot->pull_reply, timeout + kCallSlack,
        [slot, &pending](absl::Status s) {
          if (s.ok() && slot->replies != 1) {
            s = absl::InternalError(absl::StrCat("ps:", slot->ps, " answered ", slot->replies,
                                                 " chunks to a pull of one"));
          }
          slot->status = s.ok() ? std::move(s) : InChunk(s, *slot);
          pending.DecrementCount();
        });
  }
  AwaitAll(pending, timeout, task_);
  result->global_step = std::numeric_limits<int64_t>::max();
  for (const auto& slot : slots_) {
    if (!slot->status.ok()) return slot->status;
    const pb::PullResponse& r = slot->pull_reply.header;
    result->global_step = std::min(result->global_step, r.chunks(0).step());
    result->stopped = result->stopped || r.stopped();
    result->bytes_received += slot->reply_bytes;
    result->max_wait_us = std::max(result->max_wait_us, r.wait_us());
  }
  if (slots_.empty()) result->global_step = 0;
  return absl::OkStatus();
}

absl::Status ShardedVariables::PushPullAll(int64_t step, int64_t min_step,
                                           std::span<const ops::Tensor> grads,
                                           std::span<ops::Tensor> values, absl::Duration timeout,
                                           TransferResult* result) {
  *result = TransferResult();
  for (auto& slot : slots_) EncodePushPull(*slot, step, min_step, timeout, grads);
  // Up to two rounds: the second re-sends (same request ids) what failed in transport.
  std::vector<Slot*> todo;
  for (auto& slot : slots_) todo.push_back(slot.get());
  for (int round = 0; round < 2 && !todo.empty(); ++round) {
    BlockingCounter pending(static_cast<int>(todo.size()));
    for (Slot* slot : todo) {
      SendPushPull(slot, values, timeout, [slot, &pending](absl::Status s) {
        slot->status = std::move(s);
        pending.DecrementCount();
      });
    }
    AwaitAll(pending, timeout, task_);
    std::vector<Slot*> retry;
    for (Slot* slot : todo) {
      if (Retryable(slot->status) && round == 0) retry.push_back(slot);
    }
    result->retries += static_cast<int>(retry.size());
    todo = std::move(retry);
  }
  result->global_step = std::numeric_limits<int64_t>::max();
  for (const auto& slot : slots_) {
    if (!slot->status.ok()) return slot->status;
    AddChunkResult(slot->index, result);
  }
  if (slots_.empty()) result->global_step = 0;
  return absl::OkStatus();
}

void ShardedVariables::EncodePushPull(Slot& slot, int64_t step, int64_t min_step,
                                      absl::Duration timeout, std::span<const ops::Tensor> grads,
                                      bool with_values) {
  pb::PushRequest& req = slot.push.header;
  if (next_request_ == 0) ++next_request_;  // 0 means "no dedup" to the PS
  req.set_request_id(next_request_++);
  req.set_step(step);
  req.set_min_step(min_step);
  req.set_no_values(!with_values);
  req.set_timeout_ms(absl::ToInt64Milliseconds(timeout));
  OutChunk& g = slot.push.chunks[0];
  g.meta.set_step(slot.read_step >= 0 ? slot.read_step : step);
  const auto spans = Spans<const float>(slot.ps, slot.chunk, grads);
  if (wire_dtype_ == pb::WIRE_F32) {
    BorrowPayload(spans, &g);  // the gradients stay unchanged until the call has ended
  } else {
    CopyPayload(spans, wire_dtype_, &g);
  }
  slot.status = absl::OkStatus();
}

void ShardedVariables::SendPushPull(Slot* slot, std::span<ops::Tensor> values,
                                    absl::Duration timeout, PsClient::Done done) {
  slot->dest = Spans<float>(slot->ps, slot->chunk, values);
  slot->push_reply.sink = ExpectChunk(slot, "returned values");
  clients_[static_cast<size_t>(slot->ps)]->PushPullAsync(
      &slot->push, &slot->push_reply, timeout + kCallSlack,
      [slot, done = std::move(done)](absl::Status s) {
        const int expected = slot->push.header.no_values() ? 0 : 1;
        if (s.ok() && slot->replies != expected) {
          s = absl::InternalError(absl::StrCat("ps:", slot->ps, " answered ", slot->replies,
                                               " chunks to a push-pull of ", expected));
        }
        done(s.ok() ? std::move(s) : InChunk(s, *slot));
      });
}

int ShardedVariables::chunk_ps(int index) const { return slots_[static_cast<size_t>(index)]->ps; }

std::vector<int> ShardedVariables::ChunkSources(int index) const {
  const Slot& slot = *slots_[static_cast<size_t>(index)];
  const Shard& shard = shards_[static_cast<size_t>(slot.ps)];
  std::vector<int> sources;
  for (const Segment& seg : shard.chunks[static_cast<size_t>(slot.chunk)].segments) {
    sources.push_back(shard.variables[static_cast<size_t>(seg.variable)].source);
  }
  std::sort(sources.begin(), sources.end());
  sources.erase(std::unique(sources.begin(), sources.end()), sources.end());
  return sources;
}

void ShardedVariables::StartChunkPushPull(int index, int64_t step, int64_t min_step,
                                          std::span<const ops::Tensor> grads,
                                          std::span<ops::Tensor> values, absl::Duration timeout,
                                          PsClient::Done done, bool with_values) {
  Slot* slot = slots_[static_cast<size_t>(index)].get();
  EncodePushPull(*slot, step, min_step, timeout, grads, with_values);
  SendPushPull(slot, values, timeout, std::move(done));
}

void ShardedVariables::StartChunkPull(int index, std::span<ops::Tensor> values,
                                      absl::Duration timeout, PsClient::Done done) {
  Slot* slot = slots_[static_cast<size_t>(index)].get();
  slot->pull_request.set_min_step(0);
  slot->pull_request.set_timeout_ms(absl::ToInt64Milliseconds(timeout));
  slot->dest = Spans<float>(slot->ps, slot->chunk, values);
  slot->pull_reply.sink = ExpectChunk(slot, "pulled values");
  clients_[static_cast<size_t>(slot->ps)]->PullAsync(
      &slot->pull_request, &slot->pull_reply, timeout + kCallSlack,
      [slot, done = std::move(done)](absl::Status s) {
        if (s.ok() && slot->replies != 1) {
          s = absl::InternalError(absl::StrCat("ps:", slot->ps, " answered ", slot->replies,
                                               " chunks to a pull of one"));
        }
        slot->pull_stopped = s.ok() && slot->pull_reply.header.stopped();
        done(s.ok() ? std::move(s) : InChunk(s, *slot));
      });
}

void ShardedVariables::ResendChunkPushPull(int index, std::span<ops::Tensor> values,
                                           absl::Duration timeout, PsClient::Done done) {
  SendPushPull(slots_[static_cast<size_t>(index)].get(), values, timeout, std::move(done));
}

void ShardedVariables::AddChunkResult(int index, TransferResult* result) const {
  const Slot& slot = *slots_[static_cast<size_t>(index)];
  const pb::PushResponse& r = slot.push_reply.header;
  // Without values (no_values) the step of the chunk's pull that followed the push (the
  // exchange ends only once it is in); the shard's own step would be the least of its chunks'.
  result->global_step =
      std::min(result->global_step, r.values_size() > 0 ? r.values(0).step() : slot.read_step);
  result->stopped = result->stopped || r.stopped() || (r.values_size() == 0 && slot.pull_stopped);
  result->applied += r.applied();
  result->dropped += r.dropped();
  result->duplicates += r.duplicate() ? 1 : 0;
  result->bytes_sent += static_cast<int64_t>(slot.push.chunks[0].bytes);
  result->bytes_received += slot.reply_bytes;
  result->max_wait_us = std::max(result->max_wait_us, r.wait_us());
  result->staleness = std::max(result->staleness, r.staleness());
}

bool ShardedVariables::Retryable(const absl::Status& s) { return absl::IsUnavailable(s); }

}  // namespace fulcrum::runtime
