// chief: one host's (and the cluster's) bytes at the three layers a byte crosses: the
// application's (the RPC payload the runtime counted), TCP's (each connection's own kernel
// counters, profiler/socket_stats.h) and the interfaces' (net/dev). Between the first two lies
// the protocol's overhead (gRPC and HTTP/2 framing, TLS); between the last two the TCP/IP
// (and Ethernet) headers of every packet, which are taken off the interface's bytes so the
// two agree when nothing else uses the host's network (docs/profiler.md, "Bytes at three
// layers"). Thread-safety: pure functions.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "nlohmann/json.hpp"

namespace fulcrum::chief {

// Each host's TCP figures per path ({"loopback": {...}, "external": {...}}, the keys of a
// summary's tcp_sockets) from `processes` (host, summary; each process once). A connection whose
// other end is another listed process's counts each direction by the greater of the sender's
// and the receiver's reading: a connection closed between two samples of one end keeps its
// last bytes at the other end, which read it later. What a process counted without listing the
// connection (closed ones beyond profiler::SocketTrack::kMaxClosedListed) counts as it read it.
// Hosts none of whose processes read their connections are absent.
std::map<std::string, nlohmann::json> TcpByHost(
    const std::vector<std::pair<std::string, const nlohmann::json*>>& processes);

// Each host's application bytes per path and direction ({"loopback": {"sent": B, "received":
// B}, ...}) from report.json's traffic rows (from, to, bytes_counted_by_sender,
// bytes_counted_by_receiver): each directed pair counted by the greater of its two ends' counts
// (a ps keeps no count of the warm-up Pings it serves, its workers do), over loopback when both
// tasks are on one host. `host_of`: task name ("ps-0") -> host.
std::map<std::string, nlohmann::json> AppByHost(const nlohmann::json& traffic,
                                                const std::map<std::string, std::string>& host_of);

// The layers of a host row of report.json (with its "app" and "tcp" sums, "interfaces" and the
// loopback_/external_ byte keys): per path ("loopback", "external") and direction
// ("sent", "received"): app_bytes, tcp_bytes, interface_bytes, interface_packets,
// header_bytes_per_packet, interface_payload_bytes, protocol_overhead (tcp / app - 1) and
// interface_vs_tcp (interface payload / tcp - 1; null without TCP bytes), and the path's
// retransmits and connections. Null when no task of the host read its connections.
nlohmann::json HostLayers(const nlohmann::json& host);

// The hosts' layers added up, with the same ratios; null when no host has layers.
nlohmann::json ClusterLayers(const nlohmann::json& hosts);

}  // namespace fulcrum::chief
