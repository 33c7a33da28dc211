#pragma once
// --stage-dir: copy a dataset's files to node-local storage before training
// (the seeds' advice for Lustre/GPFS). Torch-free.
#include <cstdint>
#include <string>
#include <vector>

#include "data/file_list.h"

namespace dlscale::data {

struct StageResult {
  std::string location;     ///< the staged copy of `root`
  double seconds = 0;       ///< wall time of the copy (or the wait for another worker's)
  int64_t bytes_copied = 0; ///< 0 when every file was already there
};

/// Copies each of `files` (all under `root`, a directory or one of the files)
/// to the same relative path under `stage_dir`, atomically per file. A file
/// already there with the same size and modification time is kept. Workers
/// of one node staging the same data take turns under a lock file, so each
/// file is copied once. Throws dlscale::Error naming the file that failed.
StageResult stage_files(const FileList& files, const std::string& root,
                        const std::string& stage_dir);

}  // namespace dlscale::data
