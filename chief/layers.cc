#include "chief/layers.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "chief/json_fields.h"

namespace fulcrum::chief {
namespace {

// One TCP/IP header set per packet as the interfaces count it: IPv4 (20) + TCP (20) + the
// timestamps option Linux negotiates (12); IPv6's header is 20 longer. An external interface
// counts the Ethernet header (14) too; loopback does not. Measured: 52.0 per packet on lo
// (tests/profiler/wire_test.cc), 66 on a veth (tests/cluster/netns_cluster_test.cc).
constexpr double kTcpIpv4HeaderBytes = 52, kIpv6ExtraBytes = 20, kEthernetHeaderBytes = 14;

constexpr const char* kTcpFields[] = {"sockets",      "bytes_sent",  "bytes_received",
                                      "segs_out",     "segs_in",     "segs_out_ipv6",
                                      "segs_in_ipv6", "retransmits", "bytes_retransmitted"};
constexpr const char* kPaths[] = {"loopback", "external"};
constexpr const char* kDirections[] = {"sent", "received"};

// tcp / app - 1 and payload / tcp - 1, null where the divisor is 0.
void AddRatios(nlohmann::json* row) {
  const double app = Num(*row, "app_bytes"), tcp = Num(*row, "tcp_bytes");
  (*row)["protocol_overhead"] = app > 0 ? nlohmann::json(tcp / app - 1) : nlohmann::json();
  (*row)["interface_vs_tcp"] =
      tcp > 0 ? nlohmann::json(Num(*row, "interface_payload_bytes") / tcp - 1) : nlohmann::json();
}

// One path and direction of a host.
nlohmann::json LayerRow(const nlohmann::json& host, const char* path, const char* dir) {
  const bool loopback = std::string(path) == "loopback";
  const bool sent = std::string(dir) == "sent";
  const nlohmann::json& tcp = At(At(host, "tcp"), path);
  double packets = 0;
  const nlohmann::json& interfaces = At(host, "interfaces");
  for (const nlohmann::json& i : interfaces.is_array() ? interfaces : nlohmann::json::array()) {
    if (i.is_object() && i.value("loopback", false) == loopback) {
      packets += Num(i, sent ? "tx_packets" : "rx_packets");
    }
  }
  const double segs = Num(tcp, sent ? "segs_out" : "segs_in");
  const double ipv6_share = segs > 0 ? Num(tcp, sent ? "segs_out_ipv6" : "segs_in_ipv6") / segs : 0;
  const double header =
      kTcpIpv4HeaderBytes + kIpv6ExtraBytes * ipv6_share + (loopback ? 0 : kEthernetHeaderBytes);
  const double interface_bytes = Num(host, absl::StrCat(path, "_bytes_", dir));
  nlohmann::json row = {
      {"app_bytes", Num(At(At(host, "app"), path), dir)},
      {"tcp_bytes", Num(tcp, absl::StrCat("bytes_", dir))},
      {"interface_bytes", interface_bytes},
      {"interface_packets", packets},
      {"header_bytes_per_packet", header},
      {"interface_payload_bytes", std::max(0.0, interface_bytes - packets * header)}};
  AddRatios(&row);
  return row;
}

void AddTo(nlohmann::json* sum, const char* field, double x) {
  nlohmann::json& v = (*sum)[field];
  v = (v.is_number() ? v.get<double>() : 0.0) + x;
}

// A connection's end, as one process listed it.
struct End {
  std::string host;
  const nlohmann::json* figures;
};

// The key of an end: its endpoints, and for a loopback one its host too (127.0.0.1:port pairs
// repeat across machines).
std::string EndKey(const std::string& host, const nlohmann::json& c, bool reversed) {
  const std::string local = c.value("local", ""), remote = c.value("remote", "");
  const std::string scope = c.value("loopback", false) ? host : "";
  return absl::StrCat(scope, "|", reversed ? remote : local, "|", reversed ? local : remote);
}

// Adds end `e` to its host's path, each direction the greater of its count and its peer's.
void AddEnd(const nlohmann::json& e, const nlohmann::json* peer, nlohmann::json* path) {
  auto best = [&](const char* mine, const char* theirs) {
    return std::max(Num(e, mine), peer != nullptr ? Num(*peer, theirs) : 0.0);
  };
  const double out = best("segs_out", "segs_in"), in = best("segs_in", "segs_out");
  AddTo(path, "sockets", 1);
  AddTo(path, "bytes_sent", best("bytes_sent", "bytes_received"));
  AddTo(path, "bytes_received", best("bytes_received", "bytes_sent"));
  AddTo(path, "segs_out", out);
  AddTo(path, "segs_in", in);
  AddTo(path, "segs_out_ipv6", Num(e, "segs_out_ipv6") > 0 ? out : 0);
  AddTo(path, "segs_in_ipv6", Num(e, "segs_in_ipv6") > 0 ? in : 0);
  AddTo(path, "retransmits", Num(e, "retransmits"));
  AddTo(path, "bytes_retransmitted", Num(e, "bytes_retransmitted"));
}

// What `summary` counted on `path` beyond its listed connections.
void AddUnlisted(const nlohmann::json& summary, const char* path, nlohmann::json* sum) {
  const nlohmann::json& total = At(At(summary, "tcp_sockets"), path);
  for (const char* field : kTcpFields) {
    if (std::string(field) == "sockets") continue;
    double listed = 0;
    for (const nlohmann::json& c : At(summary, "tcp_connections")) {
      if (!c.is_object()) continue;
      if (c.value("loopback", false) == (std::string(path) == "loopback")) listed += Num(c, field);
    }
    AddTo(sum, field, std::max(0.0, Num(total, field) - listed));
  }
}

}  // namespace

std::map<std::string, nlohmann::json> AppByHost(const nlohmann::json& traffic,
                                                const std::map<std::string, std::string>& host_of) {
  std::map<std::string, nlohmann::json> hosts;
  for (const nlohmann::json& row : traffic) {
    if (!row.is_object()) continue;
    const double bytes =
        std::max(Num(row, "bytes_counted_by_sender"), Num(row, "bytes_counted_by_receiver"));
    auto from = host_of.find(row.value("from", "")), to = host_of.find(row.value("to", ""));
    if (from == host_of.end() || to == host_of.end()) continue;  // an unknown peer
    const char* path = from->second == to->second ? "loopback" : "external";
    AddTo(&hosts[from->second][path], "sent", bytes);
    AddTo(&hosts[to->second][path], "received", bytes);
  }
  return hosts;
}

std::map<std::string, nlohmann::json> TcpByHost(
    const std::vector<std::pair<std::string, const nlohmann::json*>>& processes) {
  std::map<std::string, End> ends;  // by EndKey
  std::map<std::string, nlohmann::json> hosts;
  for (const auto& [host, s] : processes) {
    if (!At(*s, "tcp_connections").is_array()) continue;
    for (const nlohmann::json& c : (*s)["tcp_connections"]) {
      if (c.is_object()) ends[EndKey(host, c, false)] = {host, &c};
    }
    for (const char* path : kPaths) AddUnlisted(*s, path, &hosts[host][path]);
  }
  for (const auto& [key, end] : ends) {
    const nlohmann::json& c = *end.figures;
    auto peer = ends.find(EndKey(end.host, c, true));
    AddEnd(c, peer != ends.end() ? peer->second.figures : nullptr,
           &hosts[end.host][c.value("loopback", false) ? "loopback" : "external"]);
  }
  return hosts;
}

nlohmann::json HostLayers(const nlohmann::json& host) {
  if (!host.contains("tcp") || !host["tcp"].is_object()) return nullptr;
  nlohmann::json layers;
  for (const char* path : kPaths) {
    for (const char* dir : kDirections) layers[path][dir] = LayerRow(host, path, dir);
    layers[path]["retransmits"] = Num(At(host["tcp"], path), "retransmits");
    layers[path]["connections"] = Num(At(host["tcp"], path), "sockets");
  }
  return layers;
}

nlohmann::json ClusterLayers(const nlohmann::json& hosts) {
  nlohmann::json sum;
  for (const nlohmann::json& h : hosts) {
    if (!h.contains("layers") || !h["layers"].is_object()) continue;
    for (const char* path : kPaths) {
      for (const char* dir : kDirections) {
        for (const char* key : {"app_bytes", "tcp_bytes", "interface_bytes", "interface_packets",
                                "interface_payload_bytes"}) {
          nlohmann::json& x = sum[path][dir][key];
          x = (x.is_number() ? x.get<double>() : 0.0) + Num(At(At(h["layers"], path), dir), key);
        }
      }
      for (const char* key : {"retransmits", "connections"}) {
        nlohmann::json& x = sum[path][key];
        x = (x.is_number() ? x.get<double>() : 0.0) + Num(At(h["layers"], path), key);
      }
    }
  }
  if (sum.is_null()) return nullptr;
  for (const char* path : kPaths) {
    for (const char* dir : kDirections) AddRatios(&sum[path][dir]);
  }
  return sum;
}

}  // namespace fulcrum::chief
