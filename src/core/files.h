#pragma once
#include <string>

namespace dlscale {

/// Throws dlscale::Error unless `path` can be created or replaced by the
/// calling process: its directory exists and is writable, and `path` is not a
/// directory. Called before long work so that results are never lost at the end.
void check_output_path(const std::string& path);

/// Writes `content` to `path` atomically: a temporary file in the same
/// directory is written, flushed to disk and renamed over `path`. A reader
/// sees either the old file or the whole new one, never a partial file.
/// Throws dlscale::Error naming the path on failure (the temporary is removed).
void write_file_atomic(const std::string& path, const std::string& content);

/// Reads a whole file; throws dlscale::Error naming the path when unreadable.
std::string read_file(const std::string& path);

}  // namespace dlscale
