#include "base/thread_name.h"

#include <pthread.h>

namespace fulcrum {

void SetCurrentThreadName(const std::string& name) {
  // TASK_COMM_LEN is 16 with the terminating NUL; a longer name is ERANGE.
  const std::string cut = name.substr(0, 15);
  (void)::pthread_setname_np(::pthread_self(), cut.c_str());
}

}  // namespace fulcrum
