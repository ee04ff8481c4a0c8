// chief: the coordinator task (start, evaluate, stop, report).
// It accepts the same flag set as worker and chief so one command line can start every task.
// The distributed runtime is not implemented yet: this binary refuses to run rather than
// pretend to, and exits with the runtime-failure code.
#include <cstdio>

#include "base/exit_code.h"
#include "runtime/flags.h"

int main(int argc, char** argv) {
  fulcrum::runtime::ParseFlagsOrExit(argc, argv, "Fulcrum chief task of a training cluster.");
  std::fprintf(stderr,
               "chief: the distributed runtime (ClusterSpec, gRPC, sharding) is not built yet; "
               "use 'worker' without a cluster for single-process training\n");
  return fulcrum::kExitRuntimeFailure;
}
