// profiler: what a task's profiler is told at start-up (runtime/config/flags.cc fills it from
// --profile, --profile_interval_ms and --metrics_port). Kept apart from profiler.h so the flag
// code needs no sampler, sink or Prometheus header.
// Thread-safety: a plain struct.
#pragma once

#include <string>

#include "absl/time/time.h"

namespace fulcrum::profiler {

struct ProfilerOptions {
  bool enabled = true;                                // --profile
  absl::Duration interval = absl::Milliseconds(500);  // --profile_interval_ms
  // --profile_flush_secs: how often the records so far are rewritten into the task's folder
  // (the files a killed task leaves); zero: only at Finish.
  absl::Duration flush_interval = absl::Seconds(5);
  int metrics_port = -1;  // < 0: no Prometheus endpoint
  // Where the endpoint listens: the task's own host (its cluster spec address), 127.0.0.1 in
  // single mode, or --metrics_bind. Never every interface unless asked for ("0.0.0.0").
  std::string metrics_bind = "127.0.0.1";
  // --metrics_linger_secs: at the end the endpoint stays up until scraped once more, at most
  // this long, so the scraper sees the final figures (0: it closes with the task).
  absl::Duration metrics_linger = absl::ZeroDuration();
  // A run's few-samples warning is logged once, by its chief (or a single-mode run): the
  // other tasks of a cluster keep it in their summary and log it at debug level.
  bool warn_few_samples = true;
  std::string job = "worker";  // worker, ps, chief
  int task_index = 0;
  std::string task_dir;  // the task's folder of the run directory; "" = write no files
};

}  // namespace fulcrum::profiler
