#pragma once
// The flags every job command shares (train, commbench): how many workers,
// where they meet, which backend, how long before a silent one fails the job.
#include <CLI/CLI.hpp>
#include <string>

#include "launch/job.h"
#include "train/train_options.h"

namespace dlscale::cli {

struct LaunchFlags {
  int workers = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string master_bind;
  std::string host_addr;
  std::string backend;
  std::string mpi_collectives = "blocking";
  std::string cluster;
  int workers_per_host = 1;
  double timeout_s = 60.0;
  bool bind_cores = false;
  bool verbose_ranks = false;
  bool share_gpus = false;
  std::string device = "cpu";  ///< commbench's --device (train registers its own)

  /// Stores the flags in train's options (which records them).
  void copy_into(train::TrainOptions& options) const;
  /// The job of these flags with `threads` per worker; checks the values.
  launch::JobOptions job(int threads) const;
};

/// Registers the launch flags on `cmd` in help group `group`.
void add_launch_flags(CLI::App* cmd, LaunchFlags& flags, const std::string& group);

}  // namespace dlscale::cli
