#pragma once
// The environment variable that every process of a job shares, whichever
// layer starts it (dlscale's launcher, the cluster's mpirun, a user's srun):
// the rendezvous store's secret (docs/launch.md, "The rendezvous store").

#include <string>

namespace dlscale {

inline constexpr const char* kEnvJobSecret = "DLSCALE_JOB_SECRET";

/// 128 random bits as 32 hex digits: a fresh job's secret.
std::string random_job_secret();

}  // namespace dlscale
