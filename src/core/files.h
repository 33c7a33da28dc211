#pragma once
#include <string>
#include <utility>
#include <vector>

namespace dlscale {

/// Where an output path leads (docs/errors.md, "Output paths"):
///  - a regular file, or nothing yet: written atomically (a temporary in the
///    same directory, then renamed);
///  - a symbolic link: followed on purpose, so the file it points to is
///    replaced and the link stays (a dangling link creates its target);
///  - a character device or a pipe (/dev/null, /dev/stdout, a named FIFO
///    with a reader): written through in place, never replaced;
///  - a directory, socket or block device: refused.
struct OutputTarget {
  std::string path;     ///< the file to write: `path` with links resolved for files
  bool stream = false;  ///< written through in place (device or pipe)
};

/// Resolves `path` by the rules above; throws dlscale::Error naming it when
/// refused.
OutputTarget resolve_output_path(const std::string& path);

/// Throws dlscale::Error unless `path` can be written: for a file, its
/// directory exists and a file can really be created there (a probe file is
/// made and removed, so /proc or a read-only mount fail here, not after the
/// work); for a device or pipe, it is writable. Called before long work so
/// that results are never lost at the end. Returns where the path leads.
OutputTarget check_output_path(const std::string& path);

/// check_output_path() for each (flag, path) given a path, and no two
/// flags naming the same file (one would overwrite the other); a device or
/// pipe (/dev/null) may take several.
void check_output_paths(const std::vector<std::pair<std::string, std::string>>& outputs);

/// Writes `content` to `path`: atomically for files (a reader sees either
/// the old file or the whole new one; the temporary is removed on failure),
/// written through for devices and pipes. Throws dlscale::Error naming the
/// path on failure.
void write_file_atomic(const std::string& path, const std::string& content);

/// What `path` is when it is there but not a regular file (links
/// followed): "a directory", "a character device", "a block device", "a
/// named pipe" or "a socket"; "" for a regular file or nothing there.
std::string special_file_kind(const std::string& path);

/// Reads a whole file; throws dlscale::Error naming the path when unreadable.
std::string read_file(const std::string& path);

}  // namespace dlscale
