#include "bench/grpc_bench_suites.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bench/grpc_bench_payload.h"
#include "bench/grpc_bench_stats.h"
#include "bench/ps_bench_model.h"
#include "nlohmann/json.hpp"
#include "ops/tensor.h"
#include "runtime/client/grpc_ps_client.h"
#include "runtime/client/sharded_variables.h"

namespace fulcrum::bench {
namespace {

// Bandwidth keeps at most this many payload bytes in flight (the window shrinks for big
// messages), so that 16 x 16 MiB copies do not crowd the machine's memory.
constexpr int64_t kMaxInFlightBytes = int64_t{64} << 20;
// How long a child may take to start and answer READY (beyond --rpc_timeout_s).
constexpr absl::Duration kStartSlack = absl::Seconds(30);

std::string ChildLog(DriverContext& ctx, const std::string& role) {
  return absl::StrCat(ctx.log_dir, "/", role, "-", ctx.next_child++, ".log");
}

std::string ModeList(const std::vector<Mode>& modes) {
  std::vector<std::string> names;
  for (Mode m : modes) names.push_back(ModeName(m));
  return absl::StrJoin(names, ",");
}

std::vector<PayloadSpec> SweepPayloads(const GrpcBenchOptions& o) {
  std::vector<PayloadSpec> out;
  for (int k : o.iovec) {
    for (int64_t s : o.sizes) out.push_back(SizePayload(s, k));
  }
  for (const std::string& scheme : o.schemes) {
    auto spec = SchemePayload(scheme, o.payload);
    if (spec.ok()) out.push_back(*std::move(spec));
  }
  return out;
}

Row BaseRow(const char* benchmark, Mode mode, const PayloadSpec& spec) {
  Row r;
  r.benchmark = benchmark;
  r.mode = ModeName(mode);
  r.payload = spec.name;
  r.scheme = spec.scheme;
  r.message_bytes = spec.bytes();
  r.buffers = spec.buffers();
  return r;
}

// The index of `mode` in `modes`, or -1.
int IndexOf(const std::vector<Mode>& modes, Mode mode) {
  const auto it = std::find(modes.begin(), modes.end(), mode);
  return it == modes.end() ? -1 : static_cast<int>(it - modes.begin());
}

// Rows of one item: Summarize each mode; `ratio` against TCP's rounds when TCP ran.
void AddRows(const char* benchmark, const std::vector<Mode>& modes, const PayloadSpec& spec,
             const std::vector<std::vector<RoundResult>>& rounds, const std::string& ratio,
             Row base_extra, std::vector<Row>* rows) {
  const int tcp = IndexOf(modes, Mode::kTcp);
  for (size_t m = 0; m < modes.size(); ++m) {
    Row r = BaseRow(benchmark, modes[m], spec);
    r.servers = base_extra.servers;
    r.clients = base_extra.clients;
    r.window = base_extra.window;
    Summarize(rounds[m], &r);
    if (tcp >= 0 && modes[m] != Mode::kTcp) {
      r.ratios[ratio] = PairRatio(rounds[m], rounds[static_cast<size_t>(tcp)],
                                  ratio == "time_vs_tcp" ? TimeOf : SpeedOf);
    }
    rows->push_back(std::move(r));
  }
}

// One mode's echo round: one untimed round trip whose echo is compared with what was sent,
// then timed round trips of `step` for --round_ms.
RoundFn EchoRound(const GrpcBenchOptions& o, EchoStep* step) {
  return [&o, step]() -> absl::StatusOr<RoundResult> {
    if (absl::Status s = step->Run(true); !s.ok()) return s;
    return TimedSteps(o.round, o.min_iters, [step](RoundResult* r) {
      if (absl::Status s = step->Run(false); !s.ok()) return s;
      r->calls += step->calls();
      r->sent += step->bytes_sent();
      r->received += step->bytes_received();
      return absl::OkStatus();
    });
  };
}

void Progress(const char* benchmark, const std::string& item, const std::vector<Row>& rows,
              size_t first) {
  std::string line = absl::StrCat(benchmark, " ", item, ":");
  for (size_t i = first; i < rows.size(); ++i) {
    absl::StrAppend(&line, " ", rows[i].mode, " p50 ", static_cast<int64_t>(rows[i].p50_us), " us ",
                    static_cast<int64_t>(rows[i].mb_per_s), " MB/s;");
  }
  std::fprintf(stderr, "%s\n", line.c_str());
}

}  // namespace

absl::StatusOr<ServerProcess> StartServer(DriverContext& ctx) {
  const GrpcBenchOptions& o = *ctx.options;
  std::vector<std::string> argv = {o.program, "--role=server", "--bind_host=" + ctx.server_host};
  for (std::string& f : ChildFlags(o)) argv.push_back(std::move(f));
  ServerProcess server;
  auto child = Child::Spawn(argv, ctx.server_netns, ChildLog(ctx, "server"));
  if (!child.ok()) return child.status();
  server.child = std::move(*child);
  auto line = server.child->ReadLine(absl::Now() + kStartSlack);
  if (!line.ok()) return line.status();
  const std::vector<std::string> f = absl::StrSplit(*line, ' ');
  server.address.host = ctx.server_host;
  if (f.size() != 4 || f[0] != "READY" || !absl::SimpleAtoi(f[1], &server.address.tcp_port) ||
      !absl::SimpleAtoi(f[2], &server.address.grpc_port) ||
      !absl::SimpleAtoi(f[3], &server.address.ps_port)) {
    return absl::InternalError(absl::StrCat("server said '", *line, "', not READY and its ports"));
  }
  return server;
}

absl::Status RunLatency(DriverContext& ctx, Peer* peer, std::vector<Row>* rows) {
  const GrpcBenchOptions& o = *ctx.options;
  for (const PayloadSpec& spec : SweepPayloads(o)) {
    const PayloadData data(spec);
    std::vector<std::unique_ptr<EchoStep>> steps;
    std::vector<RoundFn> fns;
    for (Mode mode : o.modes) {
      steps.push_back(std::make_unique<EchoStep>(mode, std::vector<Peer*>{peer}, &data,
                                                 OneMessage(data), o.rpc_timeout));
      fns.push_back(EchoRound(o, steps.back().get()));
    }
    auto rounds = AlternateRounds(o.pairs, fns);
    if (!rounds.ok()) return rounds.status();
    const size_t first = rows->size();
    AddRows("latency", o.modes, spec, *rounds, "time_vs_tcp", Row{}, rows);
    for (size_t i = first; i < rows->size(); ++i) {
      (*rows)[i].bytes_expected = 2 * (*rows)[i].calls * spec.bytes();
    }
    Progress("latency", spec.name, *rows, first);
  }
  return absl::OkStatus();
}

absl::Status RunBandwidth(DriverContext& ctx, Peer* peer, std::vector<Row>* rows) {
  const GrpcBenchOptions& o = *ctx.options;
  for (const PayloadSpec& spec : SweepPayloads(o)) {
    const PayloadData data(spec);
    Row extra;
    extra.window = static_cast<int>(
        std::clamp<int64_t>(kMaxInFlightBytes / std::max<int64_t>(1, spec.bytes()), 1, o.window));
    std::vector<RoundFn> fns;
    for (Mode mode : o.modes) {
      fns.push_back(
          [&o, &data, peer, mode, window = extra.window]() -> absl::StatusOr<RoundResult> {
            auto t = Stream(mode, peer, data, window, o.round, o.rpc_timeout);
            if (!t.ok()) return t.status();
            RoundResult r;
            r.steps = r.calls = t->messages;
            r.sent = t->bytes;
            r.seconds = t->seconds;
            return r;
          });
    }
    auto rounds = AlternateRounds(o.pairs, fns);
    if (!rounds.ok()) return rounds.status();
    const size_t first = rows->size();
    AddRows("bandwidth", o.modes, spec, *rounds, "speed_vs_tcp", extra, rows);
    for (size_t i = first; i < rows->size(); ++i) {
      (*rows)[i].bytes_expected = (*rows)[i].calls * spec.bytes();
    }
    Progress("bandwidth", spec.name, *rows, first);
  }
  return absl::OkStatus();
}

namespace {

// The N client processes of one ps_throughput layout, READY.
absl::StatusOr<std::vector<std::unique_ptr<Child>>> StartClients(
    DriverContext& ctx, const std::vector<ServerProcess>& servers, int m, int n,
    const std::string& scheme) {
  const GrpcBenchOptions& o = *ctx.options;
  std::vector<std::string> addresses;
  for (int i = 0; i < m; ++i) addresses.push_back(servers[static_cast<size_t>(i)].address.ToFlag());
  std::vector<std::unique_ptr<Child>> clients;
  for (int c = 0; c < n; ++c) {
    std::vector<std::string> argv = {o.program,
                                     "--role=client",
                                     "--servers=" + absl::StrJoin(addresses, ","),
                                     "--client_scheme=" + scheme,
                                     absl::StrCat("--client_index=", c),
                                     "--modes=" + ModeList(o.modes)};
    for (std::string& f : ChildFlags(o)) argv.push_back(std::move(f));
    auto child = Child::Spawn(argv, "", ChildLog(ctx, "client"));
    if (!child.ok()) return child.status();
    clients.push_back(std::move(*child));
  }
  for (auto& c : clients) {
    auto line = c->ReadLine(absl::Now() + o.rpc_timeout + kStartSlack);
    if (!line.ok()) return line.status();
    if (*line != "READY") return absl::InternalError(absl::StrCat("client said '", *line, "'"));
  }
  return clients;
}

// One round of every client at once: "run <mode> <ms>", then the sum of their replies.
absl::StatusOr<RoundResult> ClientsRound(const GrpcBenchOptions& o,
                                         std::vector<std::unique_ptr<Child>>& clients, Mode mode) {
  const std::string command =
      absl::StrCat("run ", ModeName(mode), " ", absl::ToInt64Milliseconds(o.round));
  for (auto& c : clients) {
    if (absl::Status s = c->Send(command); !s.ok()) return s;
  }
  RoundResult r;
  for (auto& c : clients) {
    auto line = c->ReadLine(absl::Now() + o.round + o.rpc_timeout + kStartSlack);
    if (!line.ok()) return line.status();
    const nlohmann::json j = nlohmann::json::parse(*line, nullptr, false);
    if (j.is_discarded() || j.contains("error") || !j.contains("steps")) {
      return absl::InternalError(absl::StrCat("client answered '", *line, "'"));
    }
    r.steps += j["steps"].get<int64_t>();
    r.calls += j["calls"].get<int64_t>();
    r.sent += j["sent"].get<int64_t>();
    r.received += j["received"].get<int64_t>();
    r.seconds = std::max(r.seconds, j["seconds"].get<double>());
    for (double us : j["us"]) r.us.push_back(us);
  }
  return r;
}

}  // namespace

absl::Status RunPsThroughput(DriverContext& ctx, std::vector<Row>* rows) {
  const GrpcBenchOptions& o = *ctx.options;
  std::vector<ServerProcess> servers;
  const int max_m = *std::max_element(o.ps_servers.begin(), o.ps_servers.end());
  for (int i = 0; i < max_m; ++i) {
    auto s = StartServer(ctx);
    if (!s.ok()) return s.status();
    servers.push_back(std::move(*s));
  }
  for (const std::string& scheme : o.ps_schemes) {
    auto spec = SchemePayload(scheme, o.payload);
    if (!spec.ok()) return spec.status();
    for (int m : o.ps_servers) {
      for (int n : o.ps_clients) {
        auto clients = StartClients(ctx, servers, m, n, scheme);
        if (!clients.ok()) return clients.status();
        std::vector<RoundFn> fns;
        for (Mode mode : o.modes) {
          fns.push_back([&o, &clients, mode] { return ClientsRound(o, *clients, mode); });
        }
        auto rounds = AlternateRounds(o.pairs, fns);
        if (!rounds.ok()) return rounds.status();
        Row extra;
        extra.servers = m;
        extra.clients = n;
        const size_t first = rows->size();
        AddRows("ps_throughput", o.modes, *spec, *rounds, "speed_vs_tcp", extra, rows);
        for (size_t i = first; i < rows->size(); ++i) {
          (*rows)[i].bytes_expected = 2 * (*rows)[i].steps * spec->bytes();
        }
        Progress("ps_throughput", absl::StrCat(scheme, " M=", m, " N=", n), *rows, first);
        for (auto& c : *clients) (void)c->Send("quit");
      }
    }
  }
  return absl::OkStatus();
}

namespace {

// The PS side of ps_path: one worker's view of a model held by the server's ps process.
struct PsSide {
  BenchModel model;
  runtime::Placement placement;
  std::unique_ptr<runtime::GrpcPsClient> client;
  std::unique_ptr<runtime::ShardedVariables> vars;
  std::vector<ops::Tensor> grads, values;
  int64_t step = 0;
};

// A worker for the model on the server's PS, on its gRPC data path or (tcp) its tcp data
// plane; with `create`, it first creates the variables there as a chief does.
absl::StatusOr<std::unique_ptr<PsSide>> ConnectPs(const BenchModel& model,
                                                  const ServerAddress& address,
                                                  const GrpcBenchOptions& o, bool tcp,
                                                  bool create) {
  auto ps = std::make_unique<PsSide>();
  ps->model = model;
  auto placement = Place(model, 1, runtime::PlacementStrategy::kRoundRobin);
  if (!placement.ok()) return placement.status();
  ps->placement = *std::move(placement);
  ps->client = std::make_unique<runtime::GrpcPsClient>("ps:0", address.GrpcTarget(address.ps_port));
  if (!ps->client->WaitUntilReady(o.rpc_timeout)) return absl::UnavailableError("ps:0 not ready");
  pb::CreateVariablesResponse response;
  if (absl::Status s =
          create ? ps->client->CreateVariables(
                       Definition(model, ps->placement, 0, ops::OptimizerKind::kSgd, o.chunk_bytes),
                       &response, o.rpc_timeout)
                 : absl::OkStatus();
      !s.ok()) {
    return s;
  }
  if (tcp) {
    ps->client->set_tcp_data_plane(true);
    if (absl::Status s = ps->client->OpenDataPlane("worker:0", o.rpc_timeout); !s.ok()) return s;
  }
  ps->vars = std::make_unique<runtime::ShardedVariables>(
      ps->placement, o.chunk_bytes, std::vector<runtime::PsClient*>{ps->client.get()}, "worker:0");
  for (const auto& v : model.variables) {
    ps->grads.push_back(ops::Tensor::Filled(v.shape, 1e-3f));
    ps->values.push_back(ops::Tensor::Zeros(v.shape));
  }
  if (absl::Status s = ps->client->Warm(o.chunk_bytes, 3, o.rpc_timeout); !s.ok()) return s;
  return ps;
}

absl::Status PsStep(PsSide& ps, absl::Duration timeout, RoundResult* r) {
  runtime::TransferResult result;
  if (absl::Status s = ps.vars->PushPullAll(ps.step, 0, ps.grads, ps.values, timeout, &result);
      !s.ok()) {
    return s;
  }
  if (result.duplicates != 0 || result.retries != 0 || result.bytes_sent != ps.model.bytes() ||
      result.bytes_received != ps.model.bytes()) {
    return absl::DataLossError(absl::StrCat(
        "PushPullAll moved ", result.bytes_sent, " / ", result.bytes_received, " bytes of ",
        ps.model.bytes(), " (", result.retries, " retries, ", result.duplicates, " duplicates)"));
  }
  ps.step = result.global_step;
  r->calls += ps.vars->num_chunks();
  r->sent += result.bytes_sent;
  r->received += result.bytes_received;
  return absl::OkStatus();
}

// A PS row's ratios against the raw modes of the same round (`mine`: its rounds).
void PsRatios(const std::vector<Mode>& modes, const std::vector<std::vector<RoundResult>>& rounds,
              const std::vector<RoundResult>& mine, Row* ps) {
  const std::vector<std::pair<Mode, std::pair<const char*, bool>>> wanted = {
      {Mode::kTcp, {"speed_vs_tcp", true}},
      {Mode::kSerialized, {"time_vs_serialized", false}},
      {Mode::kByteBuffer, {"time_vs_bytebuffer", false}}};
  for (const auto& [mode, what] : wanted) {
    const int i = IndexOf(modes, mode);
    if (i >= 0) {
      ps->ratios[what.first] =
          PairRatio(mine, rounds[static_cast<size_t>(i)], what.second ? SpeedOf : TimeOf);
    }
  }
}

}  // namespace

absl::Status RunPsPath(DriverContext& ctx, std::vector<Row>* rows) {
  const GrpcBenchOptions& o = *ctx.options;
  for (const std::string& name : o.ps_models) {
    auto model = MakeModel(name);
    if (!model.ok()) return model.status();
    auto server = StartServer(ctx);
    if (!server.ok()) return server.status();
    auto peer = ConnectPeer(server->address, o.rpc_timeout);
    if (!peer.ok()) return peer.status();
    auto ps = ConnectPs(*model, server->address, o, /*tcp=*/false, /*create=*/true);
    if (!ps.ok()) return ps.status();
    auto ps_tcp = ConnectPs(*model, server->address, o, /*tcp=*/true, /*create=*/false);
    if (!ps_tcp.ok()) return ps_tcp.status();
    PayloadSpec spec = SizePayload(model->bytes(), 1);
    spec.name = name;
    spec.scheme = "model";
    const PayloadData data(spec);
    std::vector<std::unique_ptr<EchoStep>> steps;
    std::vector<RoundFn> fns;
    for (Mode mode : o.modes) {
      steps.push_back(std::make_unique<EchoStep>(mode, std::vector<Peer*>{peer->get()}, &data,
                                                 OneMessage(data), o.rpc_timeout));
      fns.push_back(EchoRound(o, steps.back().get()));
    }
    for (PsSide* side : {ps->get(), ps_tcp->get()}) {
      fns.push_back([&o, side]() -> absl::StatusOr<RoundResult> {
        RoundResult untimed;  // one step first, as the raw modes' checked round trip
        if (absl::Status s = PsStep(*side, o.rpc_timeout, &untimed); !s.ok()) return s;
        return TimedSteps(o.round, o.min_iters,
                          [&o, side](RoundResult* r) { return PsStep(*side, o.rpc_timeout, r); });
      });
    }
    auto rounds = AlternateRounds(o.pairs, fns);
    if (!rounds.ok()) return rounds.status();
    const size_t first = rows->size();
    std::vector<Mode> modes = o.modes;
    AddRows("ps_path", modes, spec,
            std::vector<std::vector<RoundResult>>(rounds->begin(), rounds->end() - 2),
            "time_vs_tcp", Row{}, rows);
    // The two PS rows run last in each cycle: gRPC data path, then tcp data plane.
    const std::pair<Mode, size_t> ps_modes[] = {{Mode::kFulcrumPs, rounds->size() - 2},
                                                {Mode::kFulcrumPsTcp, rounds->size() - 1}};
    for (const auto& [mode, index] : ps_modes) {
      Row ps_row = BaseRow("ps_path", mode, spec);
      ps_row.buffers = (*ps)->vars->num_chunks();
      Summarize((*rounds)[index], &ps_row);
      PsRatios(modes, *rounds, (*rounds)[index], &ps_row);
      rows->push_back(std::move(ps_row));
    }
    for (size_t i = first; i < rows->size(); ++i) {
      (*rows)[i].bytes_expected = 2 * (*rows)[i].steps * spec.bytes();
    }
    Progress("ps_path", name, *rows, first);
  }
  return absl::OkStatus();
}

}  // namespace fulcrum::bench
