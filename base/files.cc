#include "base/files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace fulcrum {
namespace {

absl::Status OsError(const std::string& path, const char* what, int err) {
  return absl::UnavailableError(absl::StrCat(path, ": ", what, ": ", std::strerror(err)));
}

// Writes all of `text` to `fd`, retrying short writes and EINTR; errno on failure.
int WriteAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : EIO;
    done += static_cast<size_t>(n);
  }
  return 0;
}

// Makes the rename durable: without it a crash may forget the new directory entry.
void SyncFolder(const std::filesystem::path& path) {
  const std::filesystem::path parent = path.parent_path();
  const std::string dir = parent.empty() ? "." : parent.string();
  if (const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::fsync(dfd);  // best effort: some file systems refuse fsync on a folder
    ::close(dfd);
  }
}

}  // namespace

absl::Status WriteFileAtomically(const std::filesystem::path& path, const std::string& text) {
  const std::string tmp = path.string() + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return OsError(tmp, "cannot create", errno);
  if (const int err = WriteAll(fd, text); err != 0) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return OsError(tmp, "write failed", err);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return OsError(tmp, "fsync failed", err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return OsError(path.string(), "rename failed", err);
  }
  SyncFolder(path);
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFileToString(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
      return absl::NotFoundError(absl::StrCat(path.string(), ": no such file"));
    }
    return OsError(path.string(), "cannot open", err);
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return OsError(path.string(), "read failed", errno);
  return buffer.str();
}

absl::Status MakeDirs(const std::filesystem::path& dir, const std::string& what) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, "=", dir.string(), ": cannot create: ", ec.message()));
  }
  return absl::OkStatus();
}

}  // namespace fulcrum
