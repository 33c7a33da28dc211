#include "core/job_env.h"

#include <fmt/format.h>

#include <random>

namespace dlscale {

std::string random_job_secret() {
  std::random_device rd;
  std::string secret;
  for (int i = 0; i < 4; ++i) secret += fmt::format("{:08x}", rd());
  return secret;
}

}  // namespace dlscale
