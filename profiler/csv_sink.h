// profiler: the CSV files of a task's folder, built from the profiler's records:
//   samples.csv  one row per sampler sample (CPU, per-core CPU, memory, per-interface network)
//   steps.csv    worker: one row per step (phases)
//   progress.csv ps: one row per progress record
//   evals.csv    chief: one row per evaluation
// (one name per schema: the three used to share the name steps.csv)
// Columns are listed in docs/profiler.md. The *Csv functions are pure (text in memory);
// WriteCsvFiles writes samples.csv and the job's records file atomically.
// Thread-safety: functions without shared state; safe from any thread.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "profiler/records.h"
#include "profiler/sampler.h"

namespace fulcrum::profiler {

// samples.csv's text: a header, then one row per sample. Interfaces can appear mid-run, so
// the interface columns are every interface seen, in first-seen order; a sample without one
// leaves its cells empty. Non-finite figures are empty cells.
std::string SamplesCsv(absl::Span<const SystemSample> samples);

// steps.csv's text for a worker (one row per step, with examples/sec of the step).
std::string WorkerStepsCsv(absl::Span<const StepRecord> steps);
// progress.csv's text for a ps (one row per progress record, cumulative figures).
std::string PsStepsCsv(absl::Span<const PsRecord> records);
// evals.csv's text for the chief (one row per evaluation; no accuracy: empty cell).
std::string EvalStepsCsv(absl::Span<const EvalRecord> evals);

// The records file of `job`: "steps.csv" (worker), "progress.csv" (ps), "evals.csv" (otherwise:
// the chief).
const char* RecordsCsvName(const std::string& job);

// Writes `dir`/samples.csv and `dir`/RecordsCsvName(job) (each atomically; `dir` exists):
// WorkerStepsCsv for job "worker", PsStepsCsv for "ps", EvalStepsCsv otherwise (the chief).
// The error of the first write that fails, naming its file.
absl::Status WriteCsvFiles(const std::string& dir, const std::string& job,
                           absl::Span<const SystemSample> samples,
                           absl::Span<const StepRecord> steps,
                           absl::Span<const PsRecord> ps_records,
                           absl::Span<const EvalRecord> evals);

}  // namespace fulcrum::profiler
