#include "launch/train_job_options.h"

#include "train/train_checks.h"

namespace dlscale::launch {

JobOptions job_of(const TrainJobOptions& options, int threads, int servers) {
  JobOptions job;
  job.launch = options.launch;
  job.device = options.train.compute.device;
  job.share_gpus = options.train.compute.share_gpus;
  job.threads_per_worker = threads;
  job.servers = servers;
  return job;
}

void check_train_job(const TrainJobOptions& options) {
  // Dedicated servers are the strategy's: dlscale-torch counts them.
  check_job_options(job_of(options, options.train.compute.threads, 0));
  train::check_train_options(options.train);
  train::check_train_outputs(options.train);
}

}  // namespace dlscale::launch
