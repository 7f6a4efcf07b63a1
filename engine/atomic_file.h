// Atomic file writes: a reader of `path` sees either the old file or the complete new one.
//
// Checkpoints and weight files are written to `path.tmp.<pid>` next to the target, flushed and
// fsync'ed, renamed over `path` (atomic on POSIX file systems), and the directory is fsync'ed so
// that the rename itself survives a crash. On any failure the temp file is removed and `path` is
// left untouched.
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <string_view>

namespace glass {

// Calls writer(stream) on the temp file, then publishes it as `path`. Throws glass::Error naming
// the path and the reason (errno text, or the writer's own exception message).
void write_file_atomic(const std::string& path, const std::function<void(std::ostream&)>& writer);

// The same for a byte string already in memory.
void write_file_atomic(const std::string& path, std::string_view bytes);

// The file `path` that `flag` (a command-line flag, "--report") will write later: its directory
// must exist and take a new file. Probed with a temp file removed at once, so that a typo fails
// before the work whose results it would lose. Throws glass::Error naming the flag and the path;
// "" passes (nothing to write).
void check_output_file(std::string_view flag, const std::string& path);

}  // namespace glass
