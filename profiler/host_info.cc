#include "profiler/host_info.h"

#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <system_error>

namespace fulcrum::profiler {

std::string HostName() {
  namespace fs = std::filesystem;
  // A named network namespace (ip netns, /run/netns/NAME) is an emulated host: the same
  // inode as /proc/self/ns/net means this process runs inside it.
  struct stat self {};
  std::error_code ec;
  if (::stat("/proc/self/ns/net", &self) == 0 && fs::is_directory("/run/netns", ec)) {
    for (const auto& entry : fs::directory_iterator("/run/netns", ec)) {
      struct stat ns {};
      if (::stat(entry.path().c_str(), &ns) == 0 && ns.st_ino == self.st_ino &&
          ns.st_dev == self.st_dev) {
        return entry.path().filename().string();
      }
    }
  }
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) return "unknown";
  return host;
}

nlohmann::json SystemInformation() {
  nlohmann::json j;
  struct utsname u {};
  if (::uname(&u) == 0) {
    j["System"] = u.sysname;
    j["Node Name"] = u.nodename;
    j["Release"] = u.release;
    j["Version"] = u.version;
    j["Machine"] = u.machine;
  }
  // uname -p is "unknown" on most Linux systems; the CPU's model name says what it is.
  std::string processor = j.value("Machine", "");
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      const size_t value =
          colon == std::string::npos ? colon : line.find_first_not_of(' ', colon + 1);
      if (value != std::string::npos) processor = line.substr(value);
      break;
    }
  }
  j["Processor"] = processor;
  return j;
}

}  // namespace fulcrum::profiler
