#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
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

/// One output of a command, for check_output_paths().
struct OutputPath {
  OutputPath(std::string flag_, std::string path_, std::function<bool(int64_t)> step_written_ = {})
      : flag(std::move(flag_)), path(std::move(path_)), step_written(std::move(step_written_)) {}
  std::string flag;  ///< "--json"
  std::string path;  ///< "" = not given
  /// Set for a pattern: `path` holds "{step}", each replaced by the same
  /// step number n (no leading zeros) for every n this accepts.
  std::function<bool(int64_t)> step_written;
};

/// One input file of a command that no output may overwrite.
struct InputPath {
  std::string flag;  ///< "--resume"
  std::string path;  ///< "" = not given
  /// The output flag that may name this very file (a checkpoint that
  /// continues the file it resumed from); "" = none.
  std::string rewritten_by;
};

/// check_output_path() for each output given a path, and no two outputs
/// naming the same file (one would overwrite the other), with every file a
/// pattern expands to counted; no output naming an input (links and other
/// spellings of a path resolved). A device or pipe (/dev/null) may take
/// several outputs. Throws dlscale::Error naming both flags.
void check_output_paths(const std::vector<OutputPath>& outputs,
                        const std::vector<InputPath>& inputs = {});

/// Writes `content` to `path`: atomically for files (a reader sees either
/// the old file or the whole new one; the temporary is removed on failure),
/// written through for devices and pipes. Throws dlscale::Error naming the
/// path on failure. Temporaries of `path` that killed writers left behind
/// (PATH.tmp.PID and PATH.probe.PID whose process is gone) are removed first.
void write_file_atomic(const std::string& path, const std::string& content);

/// A file written piece by piece through a temporary beside it
/// (PATH.tmp-XXXXXX, mode 0644) that commit() renames to PATH: memory stays
/// bounded however large the file grows, and no reader sees it half
/// written. Destroyed uncommitted, it removes the temporary. Errors throw
/// dlscale::Error (IoError when the disk is full) naming PATH.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(std::string path);
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  ~AtomicFileWriter();

  void write(std::string_view bytes);
  /// Bytes written so far: the offset the next write lands at.
  uint64_t size() const { return size_; }
  /// Flushes to the device and renames the temporary to the path; nothing
  /// may be written afterwards.
  void commit();

 private:
  std::string path_;
  std::string tmp_;
  int fd_ = -1;
  uint64_t size_ = 0;
  bool committed_ = false;
};

/// Whether `name` (a file name) is an AtomicFileWriter's temporary
/// (NAME.tmp-XXXXXX): a file being written, or left by a writer killed
/// mid-write, which readers of a directory must not take for data.
bool is_atomic_temporary(const std::string& name);

/// Removes PATH.tmp.PID and PATH.probe.PID files of `path` whose process
/// no longer exists; returns how many it removed.
int remove_stale_temporaries(const std::string& path);

/// What `path` is when it is there but not a regular file (links
/// followed): "a directory", "a character device", "a block device", "a
/// named pipe" or "a socket"; "" for a regular file or nothing there.
std::string special_file_kind(const std::string& path);

/// Removes `path` and, when it is a directory, everything under it; links
/// are removed, never followed. Nothing there is fine. Best effort: returns
/// whether `path` is gone. The project's one way to remove a tree, instead of
/// std::filesystem::remove_all: a CUDA PyTorch's libtorch.so exports its own
/// copy of std::filesystem's functions, built by another toolchain, and the
/// dynamic linker binds a program's calls to it. Its remove_all jumped to
/// address 0 on a non-empty directory (PyTorch 2.11.0+cu130, an H200 machine,
/// 2026-11-30). Layers.NoIncludeRunsUp refuses remove_all in the tree.
bool remove_tree(const std::string& path);

/// Reads a whole file; throws dlscale::Error naming the path when unreadable.
std::string read_file(const std::string& path);

/// Throws the dlscale::Error read_file would ("cannot read 'PATH': why")
/// unless `path` can be opened for reading: an input checked before any
/// work (before workers are spawned) fails the same way as when it is read.
void check_readable(const std::string& path);

}  // namespace dlscale
