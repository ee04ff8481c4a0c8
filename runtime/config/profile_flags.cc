// runtime: the profiler's flags (--profile, its interval and flush period, the Prometheus
// endpoint), defined beside the code that reads them, and each task's profiler options.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>

#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "base/enum_flag.h"
#include "base/status_macros.h"
#include "runtime/config/flags.h"
#include "runtime/config/flags_internal.h"

// Profiler flags.
ABSL_FLAG(fulcrum::OnOff, profile, fulcrum::OnOff::kOn,
          "on: sample CPU, memory and network and write steps.csv, samples.csv, trace.json and "
          "TensorBoard events into the task's folder; off: only summary.json's run figures.");
ABSL_FLAG(int64_t, profile_interval_ms, 500, "Milliseconds between two profiler samples.");
ABSL_FLAG(double, metrics_linger_secs, 0,
          "With --metrics_port: at the end the endpoint stays up until Prometheus scrapes it once "
          "more (at most this many seconds), so the final figures are recorded (0: it closes with "
          "the task).");
ABSL_FLAG(double, profile_flush_secs, 5,
          "Seconds between two rewrites of the task's records (steps.csv, samples.csv, "
          "trace.json and a partial summary.json), so that a task killed or crashed leaves them "
          "up to then (0: written only at the end).");
ABSL_FLAG(std::string, metrics_bind, "",
          "Address the Prometheus endpoint listens on: empty = the task's own host from the "
          "cluster spec (127.0.0.1 in single mode); 0.0.0.0 = every interface.");
ABSL_FLAG(int32_t, metrics_port, -1,
          "Prometheus endpoint (/metrics): -1 = none, 0 = any free port, P = P plus the task's "
          "position in the cluster spec (chief, ps..., worker...).");

namespace fulcrum::runtime {

using flags_internal::Positive;
using flags_internal::Seconds;
using flags_internal::SecurityFlagsFromFlags;

absl::StatusOr<ProfileFlags> ProfileFlagsFromFlags() {
  ProfileFlags f;
  f.enabled = absl::GetFlag(FLAGS_profile) == OnOff::kOn;
  const int64_t ms = absl::GetFlag(FLAGS_profile_interval_ms);
  if (ms < 10 || ms > 3600000) {
    return absl::InvalidArgumentError(
        absl::StrCat("--profile_interval_ms=", ms, ": must be between 10 and 3600000"));
  }
  f.interval = absl::Milliseconds(ms);
  const double flush = absl::GetFlag(FLAGS_profile_flush_secs);
  if (!(flush >= 0 && flush <= 86400)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--profile_flush_secs=", flush, ": must be in [0, 86400]"));
  }
  f.flush_interval = absl::Seconds(flush);
  const double linger = absl::GetFlag(FLAGS_metrics_linger_secs);
  if (!(linger >= 0 && linger <= 3600)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics_linger_secs=", linger, ": must be in [0, 3600]"));
  }
  f.metrics_linger = absl::Seconds(linger);
  f.metrics_port = absl::GetFlag(FLAGS_metrics_port);
  f.metrics_bind = absl::GetFlag(FLAGS_metrics_bind);
  if (!f.metrics_bind.empty()) {
    // The endpoint has no credentials of its own: beyond loopback only when the task has some
    // (the operator secured the cluster) or --insecure. Without TLS files the check reads none.
    const SecurityFlags security = SecurityFlagsFromFlags();
    const bool credentials = !security.tls_cert.empty() || !security.auth_token_file.empty();
    if (!credentials && !security.insecure) {
      FULCRUM_RETURN_IF_ERROR(
          TransportSecurity().CheckReachableOnlyLocally("--metrics_bind", f.metrics_bind));
    }
  }
  if (f.metrics_port < -1 || f.metrics_port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--metrics_port=", f.metrics_port, ": must be -1 (off), 0 (any) or a port 1-65535"));
  }
  return f;
}

namespace {

// `host` as a numeric IPv4 address for the HTTP server to bind (a spec may name hosts): the
// first address getaddrinfo gives, or `host` itself when it is numeric or does not resolve
// (the exporter then fails naming it).
std::string NumericHost(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || found == nullptr) return host;
  char text[INET_ADDRSTRLEN] = {};
  const auto* in = reinterpret_cast<const sockaddr_in*>(found->ai_addr);
  const bool ok = inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text)) != nullptr;
  freeaddrinfo(found);
  return ok ? std::string(text) : host;
}

}  // namespace

profiler::ProfilerOptions ProfilerOptionsFor(const ProfileFlags& flags, const ClusterSpec* cluster,
                                             const std::string& job, int task_index,
                                             const std::string& task_dir) {
  profiler::ProfilerOptions o;
  o.enabled = flags.enabled;
  o.interval = flags.interval;
  o.flush_interval = flags.flush_interval;
  o.metrics_linger = flags.metrics_linger;
  o.job = job;
  o.task_index = task_index;
  o.task_dir = task_dir;
  o.warn_few_samples = cluster == nullptr || job == kChiefJob;
  o.metrics_port = flags.metrics_port;
  o.metrics_bind = flags.metrics_bind;
  if (o.metrics_bind.empty() && cluster != nullptr) {
    // The task's own host from the spec (its address without the port).
    if (task_index >= 0 && task_index < cluster->num_tasks(job)) {
      const std::string& address = cluster->address(job, task_index);
      o.metrics_bind = NumericHost(address.substr(0, address.rfind(':')));
    }
  }
  if (o.metrics_bind.empty()) o.metrics_bind = "127.0.0.1";
  if (flags.metrics_port > 0 && cluster != nullptr) {
    int position = 0;
    for (const char* j : {kChiefJob, kPsJob, kWorkerJob}) {
      if (job == j) {
        position += task_index;
        break;
      }
      position += cluster->num_tasks(j);
    }
    o.metrics_port = flags.metrics_port + position;
  }
  return o;
}

}  // namespace fulcrum::runtime
