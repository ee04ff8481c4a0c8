#include "bench/grpc_bench_options.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "runtime/cluster/chunk_plan.h"

#ifndef FULCRUM_PS_BINARY
#define FULCRUM_PS_BINARY "bin/ps"
#endif

ABSL_FLAG(std::string, role, "driver",
          "driver (runs the benchmarks); server and client are the child processes it starts");
ABSL_FLAG(std::string, benchmarks, "latency,bandwidth,ps_throughput,ps_path",
          "which benchmarks to run, comma-separated");
ABSL_FLAG(std::string, modes, "tcp,serialized,bytebuffer",
          "transports of latency, bandwidth and ps_throughput: tcp (plain sockets, the limit), "
          "serialized (protobuf bytes fields, generated stub), bytebuffer (grpc::ByteBuffer of "
          "slices, generic stub and service)");
ABSL_FLAG(std::string, sizes, "32,128,512,2K,8K,32K,128K,512K,2M,8M,16M",
          "message sizes of the size sweep (K = 1024, M = 1024^2)");
ABSL_FLAG(std::string, iovec, "1,8",
          "buffers per message of the size sweep: 1 = single-buffer, K > 1 = one message of K "
          "equal buffers (iovec-style)");
ABSL_FLAG(std::string, schemes, "uniform-small,uniform-medium,uniform-large,random,skew",
          "payload-scheme rows of latency and bandwidth (empty: none)");
ABSL_FLAG(int32_t, scheme_buffers, 16, "buffers per message of the payload schemes");
ABSL_FLAG(std::string, small_class, "8:1024:128",
          "small buffers MIN:MAX:UNIFORM bytes (UNIFORM = size under the uniform scheme)");
ABSL_FLAG(std::string, medium_class, "1K:1M:32K", "medium buffers MIN:MAX:UNIFORM bytes");
ABSL_FLAG(std::string, large_class, "1M:4M:2M", "large buffers MIN:MAX:UNIFORM bytes");
ABSL_FLAG(std::string, skew_weights, "60,30,10",
          "skew scheme: relative weights of small, medium and large buffers");
ABSL_FLAG(uint64_t, payload_seed, 1, "seed of the random and skew buffer sizes");
ABSL_FLAG(int32_t, round_ms, 200, "milliseconds per round of one mode");
ABSL_FLAG(int32_t, pairs, 3,
          "reported rounds per mode (modes alternate round by round, after one warm-up round)");
ABSL_FLAG(int32_t, min_iters, 3, "least round trips per round, however long they take");
ABSL_FLAG(int32_t, window, 16, "bandwidth: messages in flight");
ABSL_FLAG(std::string, ps_servers, "1,2", "ps_throughput: server processes (M), comma-separated");
ABSL_FLAG(std::string, ps_clients, "1,2", "ps_throughput: client processes (N), comma-separated");
ABSL_FLAG(std::string, ps_schemes, "skew,uniform-large",
          "ps_throughput: payload schemes of the parameter set");
ABSL_FLAG(std::string, ps_models, "logreg,syn1mb,syn4mb,syn16mb,syn64mb",
          "ps_path: models (logreg = 7850 floats; syn<N>mb = N MiB in 8 variables)");
ABSL_FLAG(int64_t, chunk_bytes, fulcrum::runtime::kDefaultChunkBytes,
          "ps_path: the PS's largest piece of a variable in one RPC, bytes");
ABSL_FLAG(double, rpc_timeout_s, 60, "deadline of every RPC, socket exchange and child reply");
ABSL_FLAG(std::string, json, "", "write every figure as JSON to this file");
ABSL_FLAG(std::string, csv, "", "write every figure as CSV to this file");
ABSL_FLAG(std::string, netns, "",
          "emulated hosts' prefix (scripts/netns_hosts.sh up 2 --prefix P): servers in P-h1, "
          "clients and this driver in P-h2; needs root");
ABSL_FLAG(bool, inside_netns, false, "(internal) this driver already runs in the client host");
ABSL_FLAG(std::string, bind_host, "127.0.0.1", "server role: the address to listen on");
ABSL_FLAG(std::string, ps_binary, FULCRUM_PS_BINARY,
          "server role: the ps binary whose process serves ps_path");
ABSL_FLAG(double, lifetime_s, 7200, "server and client roles: exit after this many seconds");
ABSL_FLAG(std::string, servers, "",
          "client role: HOST:TCP_PORT:GRPC_PORT of each server, comma-separated");
ABSL_FLAG(std::string, client_scheme, "skew", "client role: the parameter set's payload scheme");
ABSL_FLAG(int32_t, client_index, 0, "client role: this client's index");

namespace fulcrum::bench {
namespace {

constexpr char kProgram[] = "grpc_bench";
constexpr char kUsage[] =
    "grpc_bench: gRPC as a TensorFlow parameter server uses it (after TF-gRPC-Bench), beside\n"
    "raw TCP on the same path and the Fulcrum PS path (docs/transport.md).\n"
    "Example: grpc_bench --benchmarks=latency,ps_path --json=out.json --csv=out.csv\n";
const std::set<std::string> kBenchmarks = {"latency", "bandwidth", "ps_throughput", "ps_path"};
const std::set<std::string> kSchemes = {"uniform-small", "uniform-medium", "uniform-large",
                                        "random", "skew"};

[[noreturn]] void Fail(const std::string& message) {
  std::fprintf(stderr, "%s: %s\n%s: run with --help for the list of flags\n", kProgram,
               message.c_str(), kProgram);
  std::exit(2);
}

bool Ours(const absl::CommandLineFlag& flag) {
  return absl::EndsWith(flag.Filename(), "grpc_bench_options.cc");
}

[[noreturn]] void PrintHelp() {
  std::printf("%s\nFlags (--name=value; a bool flag is --name or --noname):\n", kUsage);
  std::map<std::string, const absl::CommandLineFlag*> flags;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (Ours(*flag)) flags[std::string(name)] = flag;
  }
  for (const auto& [name, flag] : flags) {
    std::printf("  --%s  %s\n      default: \"%s\"\n", name.c_str(), flag->Help().c_str(),
                flag->DefaultValue().c_str());
  }
  std::exit(0);
}

// One argv entry: sets the flag it names (taking the next entry as the value if needed).
void ParseOne(int argc, char** argv, int* i) {
  absl::string_view arg = argv[*i];
  if (!absl::ConsumePrefix(&arg, "--")) absl::ConsumePrefix(&arg, "-");
  if (arg.size() == std::string_view(argv[*i]).size() || arg.empty()) {
    Fail(absl::StrCat("unexpected argument '", argv[*i], "' (flags are --name=value)"));
  }
  const size_t eq = arg.find('=');
  std::string name(arg.substr(0, eq));
  std::optional<std::string> value;
  if (eq != absl::string_view::npos) value = std::string(arg.substr(eq + 1));
  if (name == "help" || name == "helpfull" || name == "helpshort") PrintHelp();
  absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
  if ((flag == nullptr || !Ours(*flag)) && absl::StartsWith(name, "no") && !value) {
    absl::CommandLineFlag* positive = absl::FindCommandLineFlag(name.substr(2));
    if (positive != nullptr && Ours(*positive) && positive->IsOfType<bool>()) {
      flag = positive;
      name = name.substr(2);
      value = "false";
    }
  }
  if (flag == nullptr || !Ours(*flag)) Fail(absl::StrCat("unknown flag --", name));
  if (!value) {
    if (flag->IsOfType<bool>()) {
      value = "true";
    } else if (*i + 1 < argc) {
      value = argv[++*i];
    } else {
      Fail(absl::StrCat("--", name, ": missing value"));
    }
  }
  std::string error;
  if (!flag->ParseFrom(*value, &error)) {
    Fail(absl::StrCat("--", name, "=", *value, ": ", error));
  }
}

std::vector<std::string> List(const std::string& text) {
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    out.emplace_back(absl::StripAsciiWhitespace(part));
  }
  return out;
}

// A comma-separated list of positive integers of flag `name`.
std::vector<int> PositiveInts(const char* name, const std::string& text) {
  std::vector<int> out;
  for (const std::string& part : List(text)) {
    int v = 0;
    if (!absl::SimpleAtoi(part, &v) || v < 1) {
      Fail(absl::StrCat("--", name, "=", text, ": expected positive integers, comma-separated"));
    }
    out.push_back(v);
  }
  if (out.empty()) Fail(absl::StrCat("--", name, " is empty"));
  return out;
}

std::vector<std::string> OneOf(const char* name, const std::string& text,
                               const std::set<std::string>& allowed, bool may_be_empty) {
  std::vector<std::string> out = List(text);
  for (const std::string& v : out) {
    if (allowed.count(v) == 0) {
      Fail(absl::StrCat("--", name, "=", text, ": '", v, "' is not one of ",
                        absl::StrJoin(allowed, ", ")));
    }
  }
  if (out.empty() && !may_be_empty) Fail(absl::StrCat("--", name, " is empty"));
  return out;
}

std::vector<Mode> Modes(const std::string& text) {
  std::vector<Mode> out;
  for (const std::string& m : OneOf("modes", text, {"tcp", "serialized", "bytebuffer"}, false)) {
    out.push_back(m == "tcp"          ? Mode::kTcp
                  : m == "serialized" ? Mode::kSerialized
                                      : Mode::kByteBuffer);
  }
  return out;
}

SizeClass Class(const char* name, const std::string& text) {
  const std::vector<std::string> parts = absl::StrSplit(text, ':');
  std::vector<int64_t> v;
  for (const std::string& p : parts) {
    auto b = ParseBytes(p);
    if (!b.ok()) v.clear();
    if (!b.ok()) break;
    v.push_back(*b);
  }
  if (v.size() != 3 || v[0] < 1 || v[0] > v[1] || v[2] < v[0] || v[2] > v[1]) {
    Fail(absl::StrCat("--", name, "=", text,
                      ": expected MIN:MAX:UNIFORM bytes with 1 <= MIN <= UNIFORM <= MAX"));
  }
  return {v[0], v[1], v[2]};
}

std::array<double, 3> Weights(const std::string& text) {
  const std::vector<std::string> parts = List(text);
  std::array<double, 3> w{};
  double sum = 0;
  for (size_t i = 0; i < parts.size() && i < 3; ++i) {
    if (!absl::SimpleAtod(parts[i], &w[i]) || !(w[i] >= 0) || !std::isfinite(w[i])) sum = -1;
    if (sum >= 0) sum += w[i];
  }
  if (parts.size() != 3 || !(sum > 0)) {
    Fail(absl::StrCat("--skew_weights=", text, ": expected three weights >= 0, not all 0"));
  }
  for (double& x : w) x /= sum;
  return w;
}

std::string ProgramPath(const char* argv0) {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(argv0) : self.string();
}

void ReadPayload(GrpcBenchOptions* o) {
  o->payload.classes = {Class("small_class", absl::GetFlag(FLAGS_small_class)),
                        Class("medium_class", absl::GetFlag(FLAGS_medium_class)),
                        Class("large_class", absl::GetFlag(FLAGS_large_class))};
  o->payload.skew_weights = Weights(absl::GetFlag(FLAGS_skew_weights));
  o->payload.scheme_buffers = absl::GetFlag(FLAGS_scheme_buffers);
  if (o->payload.scheme_buffers < 1 || o->payload.scheme_buffers > 4096) {
    Fail(absl::StrCat("--scheme_buffers=", o->payload.scheme_buffers, ": must be 1-4096"));
  }
  o->payload.seed = absl::GetFlag(FLAGS_payload_seed);
}

void ReadSweep(GrpcBenchOptions* o) {
  for (const std::string& s : List(absl::GetFlag(FLAGS_sizes))) {
    auto b = ParseBytes(s);
    if (!b.ok() || *b < 1 || *b > (int64_t{256} << 20) - 4096) {
      Fail(
          absl::StrCat("--sizes: '", s, "' is not a size of 1 byte to 255 MiB (e.g. 32, 4K, 16M)"));
    }
    o->sizes.push_back(*b);
  }
  o->iovec = PositiveInts("iovec", absl::GetFlag(FLAGS_iovec));
  for (int k : o->iovec) {
    if (k > 4096) Fail(absl::StrCat("--iovec: ", k, " buffers per message; at most 4096"));
  }
  o->schemes = OneOf("schemes", absl::GetFlag(FLAGS_schemes), kSchemes, true);
}

void ReadRounds(GrpcBenchOptions* o) {
  const int round_ms = absl::GetFlag(FLAGS_round_ms);
  if (round_ms < 1 || round_ms > 600000)
    Fail(absl::StrCat("--round_ms=", round_ms, ": must be 1-600000"));
  o->round = absl::Milliseconds(round_ms);
  o->pairs = absl::GetFlag(FLAGS_pairs);
  if (o->pairs < 1 || o->pairs > 1000) Fail(absl::StrCat("--pairs=", o->pairs, ": must be 1-1000"));
  o->min_iters = absl::GetFlag(FLAGS_min_iters);
  if (o->min_iters < 1) Fail(absl::StrCat("--min_iters=", o->min_iters, ": must be positive"));
  o->window = absl::GetFlag(FLAGS_window);
  if (o->window < 1 || o->window > 1024)
    Fail(absl::StrCat("--window=", o->window, ": must be 1-1024"));
  const double timeout = absl::GetFlag(FLAGS_rpc_timeout_s);
  if (!(timeout > 0) || timeout > 3600)
    Fail(absl::StrCat("--rpc_timeout_s=", timeout, ": must be in (0, 3600]"));
  o->rpc_timeout = absl::Seconds(timeout);
  const double lifetime = absl::GetFlag(FLAGS_lifetime_s);
  if (!(lifetime > 0) || lifetime > 86400)
    Fail(absl::StrCat("--lifetime_s=", lifetime, ": must be in (0, 86400]"));
  o->lifetime = absl::Seconds(lifetime);
}

void ReadPs(GrpcBenchOptions* o) {
  o->ps_servers = PositiveInts("ps_servers", absl::GetFlag(FLAGS_ps_servers));
  o->ps_clients = PositiveInts("ps_clients", absl::GetFlag(FLAGS_ps_clients));
  for (int n : o->ps_servers) {
    if (n > 64) Fail(absl::StrCat("--ps_servers: ", n, " servers; at most 64"));
  }
  for (int n : o->ps_clients) {
    if (n > 64) Fail(absl::StrCat("--ps_clients: ", n, " clients; at most 64"));
  }
  o->ps_schemes = OneOf("ps_schemes", absl::GetFlag(FLAGS_ps_schemes), kSchemes, false);
  o->ps_models = List(absl::GetFlag(FLAGS_ps_models));
  for (const std::string& m : o->ps_models) {
    const bool syn = absl::StartsWith(m, "syn") && absl::EndsWith(m, "mb") && m.size() > 5 &&
                     std::all_of(m.begin() + 3, m.end() - 2, absl::ascii_isdigit);
    if (!syn && m != "logreg" && m != "mlp" && m != "autoencoder") {
      Fail(absl::StrCat("--ps_models: '", m, "' is not logreg, mlp, autoencoder or syn<N>mb"));
    }
  }
  if (o->ps_models.empty()) Fail("--ps_models is empty");
  o->chunk_bytes = absl::GetFlag(FLAGS_chunk_bytes);
  if (o->chunk_bytes < 4 || o->chunk_bytes > (int64_t{64} << 20)) {
    Fail(absl::StrCat("--chunk_bytes=", o->chunk_bytes, ": must be 4 bytes to 64 MiB"));
  }
}

void ReadRoles(GrpcBenchOptions* o) {
  o->role = absl::GetFlag(FLAGS_role);
  if (o->role != "driver" && o->role != "server" && o->role != "client") {
    Fail(absl::StrCat("--role=", o->role, ": must be driver, server or client"));
  }
  o->json = absl::GetFlag(FLAGS_json);
  o->csv = absl::GetFlag(FLAGS_csv);
  o->netns = absl::GetFlag(FLAGS_netns);
  if (!o->netns.empty() && !(o->netns.size() <= 6 && absl::ascii_islower(o->netns[0]) &&
                             std::all_of(o->netns.begin(), o->netns.end(), [](char c) {
                               return absl::ascii_islower(c) || absl::ascii_isdigit(c);
                             }))) {
    Fail(absl::StrCat("--netns=", o->netns,
                      ": a scripts/netns_hosts.sh prefix (1-6 lowercase letters/digits)"));
  }
  o->inside_netns = absl::GetFlag(FLAGS_inside_netns);
  o->bind_host = absl::GetFlag(FLAGS_bind_host);
  o->ps_binary = absl::GetFlag(FLAGS_ps_binary);
  o->servers = List(absl::GetFlag(FLAGS_servers));
  for (const std::string& s : o->servers) {
    const std::vector<std::string> p = absl::StrSplit(s, ':');
    int port = 0;
    if (p.size() != 3 || !absl::SimpleAtoi(p[1], &port) || !absl::SimpleAtoi(p[2], &port)) {
      Fail(absl::StrCat("--servers: '", s, "' is not HOST:TCP_PORT:GRPC_PORT"));
    }
  }
  if (o->role == "client" && o->servers.empty()) Fail("--servers: the client role needs servers");
  o->client_scheme = absl::GetFlag(FLAGS_client_scheme);
  if (kSchemes.count(o->client_scheme) == 0) {
    Fail(absl::StrCat("--client_scheme=", o->client_scheme, ": not a payload scheme"));
  }
  o->client_index = absl::GetFlag(FLAGS_client_index);
}

}  // namespace

const char* ModeName(Mode mode) {
  switch (mode) {
    case Mode::kTcp:
      return "tcp";
    case Mode::kSerialized:
      return "serialized";
    case Mode::kByteBuffer:
      return "bytebuffer";
    case Mode::kFulcrumPs:
      return "fulcrum_ps";
    case Mode::kFulcrumPsTcp:
      return "fulcrum_ps_tcp";
  }
  return "?";
}

absl::StatusOr<int64_t> ParseBytes(const std::string& text) {
  std::string t(absl::StripAsciiWhitespace(text));
  int64_t mult = 1;
  for (const auto& [suffix, m] : std::vector<std::pair<std::string, int64_t>>{{"KiB", 1 << 10},
                                                                              {"MiB", 1 << 20},
                                                                              {"GiB", 1 << 30},
                                                                              {"K", 1 << 10},
                                                                              {"M", 1 << 20},
                                                                              {"G", 1 << 30},
                                                                              {"B", 1}}) {
    if (absl::EndsWith(t, suffix)) {
      t.resize(t.size() - suffix.size());
      mult = m;
      break;
    }
  }
  int64_t v = 0;
  if (!absl::SimpleAtoi(t, &v) || v < 0 || v > (int64_t{1} << 40) / mult) {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not a size"));
  }
  return v * mult;
}

std::string FormatBytes(int64_t bytes) {
  for (const auto& [unit, m] : std::vector<std::pair<const char*, int64_t>>{
           {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}}) {
    if (bytes >= m) {
      const double v = static_cast<double>(bytes) / static_cast<double>(m);
      return bytes % m == 0 ? absl::StrCat(bytes / m, " ", unit)
                            : absl::StrFormat("%.1f %s", v, unit);
    }
  }
  return absl::StrCat(bytes, " B");
}

std::vector<std::string> ChildFlags(const GrpcBenchOptions& o) {
  return {absl::StrCat("--small_class=", absl::GetFlag(FLAGS_small_class)),
          absl::StrCat("--medium_class=", absl::GetFlag(FLAGS_medium_class)),
          absl::StrCat("--large_class=", absl::GetFlag(FLAGS_large_class)),
          absl::StrCat("--skew_weights=", absl::GetFlag(FLAGS_skew_weights)),
          absl::StrCat("--scheme_buffers=", o.payload.scheme_buffers),
          absl::StrCat("--payload_seed=", o.payload.seed),
          absl::StrCat("--rpc_timeout_s=", absl::ToDoubleSeconds(o.rpc_timeout)),
          absl::StrCat("--lifetime_s=", absl::ToDoubleSeconds(o.lifetime)),
          absl::StrCat("--ps_binary=", o.ps_binary)};
}

GrpcBenchOptions ParseGrpcBenchOptions(int argc, char** argv) {
  GrpcBenchOptions o;
  for (int i = 0; i < argc; ++i) o.argv.push_back(argv[i]);
  for (int i = 1; i < argc; ++i) ParseOne(argc, argv, &i);
  o.program = ProgramPath(argv[0]);
  ReadRoles(&o);
  o.benchmarks = OneOf("benchmarks", absl::GetFlag(FLAGS_benchmarks), kBenchmarks, false);
  o.modes = Modes(absl::GetFlag(FLAGS_modes));
  ReadPayload(&o);
  ReadSweep(&o);
  ReadRounds(&o);
  ReadPs(&o);
  return o;
}

}  // namespace fulcrum::bench
