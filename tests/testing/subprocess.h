// tests: running the real Fulcrum binaries as child processes, and scratch folders for them.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"

namespace fulcrum::testing {

struct RunResult {
  int exit_code = -1;  // -1 if the child did not exit normally
  std::string output;  // stdout and stderr together
};

// Runs a shell command line (already shell-safe) under `timeout`, so a hung child fails the
// test instead of the whole suite; stdout and stderr together.
inline RunResult RunShell(const std::string& line, int timeout_seconds = 600) {
  const std::string cmd = absl::StrCat("timeout ", timeout_seconds, " ", line, " 2>&1");
  RunResult r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), pipe)) r.output.append(buf, n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// Runs build/bin/<binary> with the flags (each already shell-safe), see RunShell.
inline RunResult RunBinary(const std::string& binary, const std::vector<std::string>& flags,
                           int timeout_seconds = 600) {
  return RunShell(absl::StrCat(FULCRUM_BIN_DIR, "/", binary, " ", absl::StrJoin(flags, " ")),
                  timeout_seconds);
}

// An empty folder under the test temp dir, unique to this process.
inline std::filesystem::path FreshDir(const std::string& name) {
  std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / absl::StrCat("fulcrum_", name, "_", ::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace fulcrum::testing
