#pragma once
// POSIX ustar archives, as `tar`, Python's tarfile and WebDataset shards use
// them: a writer for regular files, an indexer that lists members without
// reading their data, and WebDataset's grouping of members into samples.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/files.h"

namespace dlscale::data {

/// Writes a tar file atomically: members go to a temporary `PATH.tmp-XXXXXX`
/// in the same directory (streamed: memory does not grow with the archive),
/// renamed to PATH by finish(); destroying the writer without finish()
/// removes the temporary. Every member is a regular file with mode 0644,
/// mtime 0 and uid/gid 0. Not thread-safe.
class TarWriter {
 public:
  /// Creates the temporary; throws dlscale::Error naming `path` on failure.
  explicit TarWriter(std::string path);

  /// Appends a member; returns the byte offset of its data in the archive.
  /// `name` must be 1 to 100 bytes with no NUL byte (dlscale::Error
  /// otherwise); data is padded to a 512-byte block.
  uint64_t add(const std::string& name, std::string_view data);

  /// Writes the two zero blocks that end an archive, flushes and renames the
  /// temporary to the path. Nothing may be added afterwards.
  void finish();

 private:
  AtomicFileWriter file_;
};

/// One regular file in a tar archive.
struct TarMember {
  std::string name;     ///< path inside the archive (ustar prefix, GNU or pax long names applied)
  uint64_t offset = 0;  ///< byte offset of the member's data in the archive
  uint64_t size = 0;    ///< data size in bytes
};

/// Lists the regular-file members of a tar archive in order, reading only
/// headers. Directories, links and devices are skipped; GNU 'L' long names
/// and pax 'x' headers ("path", "size") apply to the member that follows;
/// pax 'g' and GNU 'K' headers are skipped. Each header's checksum is
/// verified and every member's data must lie within the file. The archive
/// ends at a zero block or at the end of the file. Errors throw
/// dlscale::Error "FILE: tar member K at byte OFF: <what>" (K counts members
/// as `tar tf` lists them, from 0; OFF is the header's offset).
std::vector<TarMember> list_tar(const std::string& path);

/// list_tar on an archive already in memory; `name` stands for the file in
/// messages.
std::vector<TarMember> list_tar_bytes(std::string_view bytes, const std::string& name);

/// One WebDataset sample: the members sharing a key.
struct WdsSample {
  std::string key;                         ///< e.g. "a/0001" for "a/0001.jpg"
  std::map<std::string, TarMember> parts;  ///< by extension, e.g. "jpg", "cls", "seg.png"
};

/// Groups members into WebDataset samples: a member's key is its name up to
/// the first dot of its basename (the directory kept) and its extension the
/// rest after that dot; consecutive members with the same key form one
/// sample. Members whose basename has no dot are skipped, as WebDataset does.
/// A key that repeats an extension throws dlscale::Error naming the member
/// (callers prefix the file name).
std::vector<WdsSample> group_wds(const std::vector<TarMember>& members);

}  // namespace dlscale::data
