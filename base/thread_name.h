// base: names the calling thread (pthread_setname_np), so per-thread figures (the profiler's
// thread_* columns, top -H, pidstat -t) can tell the runtime's threads apart.
// Thread-safety: affects only the calling thread.
#pragma once

#include <string>

namespace fulcrum {

// Names the calling thread `name`, cut to the kernel's 15 characters. Best effort: a name the
// kernel refuses leaves the old one (only figures are affected, never behaviour).
void SetCurrentThreadName(const std::string& name);

}  // namespace fulcrum
