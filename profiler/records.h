// profiler: the records a task keeps while it runs (worker steps, ps progress, chief
// evaluations) and the warm-up rule every steady-state figure follows. Plain data, no
// behaviour: the worker's training loop, the summary builders and the sinks share them.
// Thread-safety: plain structs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace fulcrum::profiler {

// Steady-state figures (examples/sec, step-time percentiles, phase split) leave out a run's
// first kWarmupSteps local steps when it has more (docs/benchmarking.md: drop the first 20 steps).
// Figures named *_all_steps include them.
inline constexpr int64_t kWarmupSteps = 20;

// Index of the first steady-state step of a run of `num_steps` local steps: kWarmupSteps when
// the run has more, else 0 (a short run reports every step). The one place the rule lives.
inline size_t SteadyStateBegin(size_t num_steps) {
  const auto warmup = static_cast<size_t>(kWarmupSteps);
  return num_steps > warmup ? warmup : 0;
}

// One training step of a worker. The phases partition the step's wall time up to rounding:
// data (next batch), pull (an explicit pull; 0 when the values come back in the push's
// reply), forward, backward, push (the push RPCs, including the values coming back with
// them, less the PS's sync wait) and sync_wait (the longest time a PS held the request
// waiting for the step's aggregation, as the PS measured it).
// With the overlapped schedule (--overlap) the step runs data, forward, push, backward: pull
// is the forward pass's waits for values (between its layers, at the moments in
// value_waits), forward the forward computation alone, push the wait for the previous
// step's push-pull to end (its last replies) before the backward pass, backward the backward
// pass with the sending of each chunk as its gradients become final; sync_wait is 0 (the PS's
// wait happens while the worker computes).
struct StepRecord {
  struct Span {
    double begin_ms = 0.0;  // after the step's begin
    double ms = 0.0;
  };
  int64_t step = 0;         // local step, from 1
  int64_t global_step = 0;  // after the step
  int64_t examples = 0;
  double loss = 0.0;
  int64_t begin_unix_us = 0;
  double wall_ms = 0.0;
  double data_ms = 0.0;
  double pull_ms = 0.0;
  double forward_ms = 0.0;
  double backward_ms = 0.0;
  double push_ms = 0.0;
  double sync_wait_ms = 0.0;
  // Communication as measured (cluster workers; all 0 in single mode). comm_wait: the time
  // the training thread was blocked on the ps tasks during the step (pull + push +
  // sync_wait). inflight: the step's push-pull, from its first chunk sent (inflight_begin,
  // after the step's begin) to its last chunk's values in; sequential, the push phase;
  // overlapped, from the backward pass into the next step's forward pass.
  double comm_wait_ms = 0.0;
  double inflight_begin_ms = 0.0;
  double inflight_ms = 0.0;
  bool overlap = false;           // the step ran the overlapped schedule
  // Copies between the host and the compute device during the step (a GPU, the arena: all 0
  // on the CPU), and the device's allocations: the copy accounting (issue 28).
  int64_t h2d_bytes = 0;
  int64_t h2d_calls = 0;
  int64_t d2h_bytes = 0;
  int64_t d2h_calls = 0;
  int64_t device_allocs = 0;
  std::vector<Span> value_waits;  // overlapped: the forward pass's waits (pull_ms in all)
};

// Progress of a ps task so far (cumulative), taken once per sample.
struct PsRecord {
  int64_t unix_us = 0;
  int64_t global_step = 0;
  int64_t pushes_received = 0;
  int64_t pushes_applied = 0;
  int64_t pushes_dropped = 0;
  int64_t pulls = 0;
  int64_t bytes_pushed = 0;
  int64_t bytes_pulled = 0;
  double apply_ms = 0.0;  // time spent applying gradients (optimizer), all threads
  double wait_ms = 0.0;   // time requests waited for a sync step, all requests
  // sync: the worker that holds the steps back now (ps/straggler.h), -1 none, and by how much.
  int straggler_worker = -1;
  double straggler_held_back_ms = 0.0;
};

// One evaluation by the chief.
struct EvalRecord {
  int64_t unix_us = 0;
  int64_t global_step = 0;
  double accuracy = -1.0;  // < 0: the model has no accuracy (autoencoder)
  double loss = 0.0;
};

}  // namespace fulcrum::profiler
