#include "engine/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string_view>

#include "engine/error.h"

namespace glass {

namespace {

// Opens `p` just to fsync it (a file's data, or a directory's entries), throwing on failure.
void fsync_path(const std::string& p, int flags, const std::string& target, const char* what) {
  const int fd = ::open(p.c_str(), flags | O_CLOEXEC);
  if (fd < 0)
    fail("write_file_atomic {}: cannot open {} to sync it: {}", target, p, std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0)
    fail("write_file_atomic {}: fsync of {} failed: {}", target, what, std::strerror(err));
}

}  // namespace

void write_file_atomic(const std::string& path, const std::function<void(std::ostream&)>& writer) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  try {
    // 1. Write everything to the temp file and check that the stream saw no error.
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      if (!out) fail("write_file_atomic {}: cannot create {}: {}", path, tmp, std::strerror(errno));
      try {
        writer(out);
      } catch (const std::exception& e) {
        fail("write_file_atomic {}: the writer failed: {}", path, e.what());
      }
      out.flush();
      if (!out)
        fail("write_file_atomic {}: writing {} failed: {}", path, tmp, std::strerror(errno));
      out.close();
      if (out.fail())
        fail("write_file_atomic {}: closing {} failed: {}", path, tmp, std::strerror(errno));
    }
    // 2. Make the data durable before it becomes visible under the final name.
    fsync_path(tmp, O_WRONLY, path, "the temp file");
    // 3. Publish: rename is atomic, so readers see the old file or the new one, never a mix.
    if (std::rename(tmp.c_str(), path.c_str()) != 0)
      fail("write_file_atomic {}: rename from {} failed: {}", path, tmp, std::strerror(errno));
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  // 4. Make the rename durable: sync the directory that holds the entry.
  std::string dir = std::filesystem::path(path).parent_path().string();
  fsync_path(dir.empty() ? "." : dir, O_RDONLY | O_DIRECTORY, path, "its directory");
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  write_file_atomic(path, [&](std::ostream& out) {
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  });
}

void check_output_file(std::string_view flag, const std::string& path) {
  if (path.empty()) return;
  namespace fs = std::filesystem;
  std::error_code ec;
  GLASS_CHECK(!fs::is_directory(path, ec), "{} {} is a directory, not a file name", flag, path);
  const fs::path dir = fs::path(path).has_parent_path() ? fs::path(path).parent_path() : ".";
  GLASS_CHECK(fs::is_directory(dir, ec), "{} {}: directory '{}' does not exist", flag, path,
              dir.string());
  std::string probe = (dir / ".glass_probe_XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  const int err = errno;
  GLASS_CHECK(fd >= 0, "{} {}: cannot write in directory '{}': {}", flag, path, dir.string(),
              std::strerror(err));
  ::close(fd);
  ::unlink(probe.c_str());
}

}  // namespace glass
