// base: the network helpers that tests and benchmarks share (no gRPC here).
// Thread-safety: thread-safe (the picker's memory of handed-out ports is locked).
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace fulcrum {

// A TCP port on 127.0.0.1 that was free a moment ago, for a child process that must be told
// its port before it starts (a server in this process binds "127.0.0.1:0" and reads its
// port back instead). Drawn at random below the kernel's ephemeral range (32768 and up), so
// an outgoing connection of another process cannot take it between this check and the
// child's bind, and never the same port twice in one process. Unavailable when no port in
// [20000, 32000) could be bound.
absl::StatusOr<int> PickFreePort();

// True when `host` ("127.0.0.1", "[::1]", "localhost", a name) reaches only this machine's
// loopback: a numeric address in 127.0.0.0/8, ::1 or ::ffff:127.0.0.0/104, or a name every
// address of which (getaddrinfo) is one. False for anything else, "0.0.0.0" (every interface)
// and a name that does not resolve.
bool IsLoopbackHost(const std::string& host);
// The same for a numeric address only ("127.0.0.1", "::1", "[::1]"); false for a name.
// Resolves nothing, so it is cheap enough for every call a server takes.
bool IsLoopbackLiteral(const std::string& host);

// "host" of "host:port" / "[v6]:port" (brackets kept off); the whole string when no port.
std::string HostOf(const std::string& address);

// HostOf's inverse: "host:port", an IPv6 host in brackets ("[::1]:80").
std::string JoinHostPort(const std::string& host, int port);

}  // namespace fulcrum
