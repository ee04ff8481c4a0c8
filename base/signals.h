// base: SIGINT/SIGTERM as a request to stop cleanly. The first signal is recorded (and logged
// by whoever polls it); the task's loops see StopSignal() != 0, end as they would at their
// last step (summaries, report and records written), and main() exits with 128 + the signal.
// A second signal of either kind ends the process at once (the default action).
// Thread-safety: the handler only stores a lock-free atomic; the functions may be called from
// any thread.
#pragma once

#include <string>

namespace fulcrum {

// Installs the handlers for SIGINT and SIGTERM. Call once from main().
void InstallStopSignalHandlers();

// The signal that asked this process to stop (SIGINT or SIGTERM), or 0.
int StopSignal();

// "SIGINT" / "SIGTERM" / "signal N".
std::string SignalName(int signal);

// `exit_code`, or 128 + StopSignal() when a signal stopped an otherwise successful run (the
// shell's convention: 130 for Ctrl-C, 143 for SIGTERM).
int ExitCodeAfterStopSignal(int exit_code);

}  // namespace fulcrum
