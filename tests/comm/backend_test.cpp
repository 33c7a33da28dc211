// The backends named once (comm/backend.h) and the job options' checks that
// use them: torch-free, so this binary (no LibTorch) links them.
#include "comm/backend.h"

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "launch/launch_options.h"
#include "process_util.h"

namespace dlscale {
namespace {

using testing::error_of;

TEST(Backends, NamedOnceAndCheckedAgainstTheBuild) {
  EXPECT_EQ(error_of([] { comm::check_backend("gloo"); }), "");
  EXPECT_EQ(comm::backends().at(1).name, "mpi");
  EXPECT_EQ(comm::backend_names().rfind("gloo", 0), 0u) << comm::backend_names();
  EXPECT_EQ(comm::backend_built("mpi"), DLSCALE_WITH_MPI != 0);
  EXPECT_FALSE(comm::backend_built("tcp"));
  EXPECT_EQ(comm::backend_names().find("mpi") != std::string::npos, DLSCALE_WITH_MPI != 0);
  EXPECT_EQ(comm::backend_help(), "gloo | mpi (builds with MPI) | nccl (CUDA builds)");
  EXPECT_EQ(error_of([] { comm::check_backend("tcp"); }),
            "unknown --backend 'tcp'; allowed: " + comm::backend_names());
  if (!comm::backend_built("nccl")) {
    EXPECT_NE(error_of([] { comm::check_backend("nccl"); }).find("needs a CUDA build"),
              std::string::npos);
    EXPECT_EQ(comm::backend_names().find("nccl"), std::string::npos);
  }
  EXPECT_EQ(error_of([] {
              comm::add_backend_name({"gloo", "", true, ""});
            }),
            "backend 'gloo' is taken");
}

TEST(Backends, JobOptionsNameABadBackend) {
  launch::JobOptions j;
  EXPECT_EQ(error_of([&] { launch::check_job_options(j); }), "");  // the job chooses
  j.launch.backend = "gloo";
  EXPECT_EQ(error_of([&] { launch::check_job_options(j); }), "");
  j.launch.backend = "Gloo";
  EXPECT_NE(error_of([&] { launch::check_job_options(j); }).find("unknown --backend 'Gloo'"), std::string::npos);
  j.launch.backend = "nccl";
  const std::string nccl = error_of([&] { launch::check_job_options(j); });
  EXPECT_TRUE(nccl.find("--backend nccl needs --device cuda") != std::string::npos ||
              nccl.find("needs a CUDA build") != std::string::npos)
      << nccl;
}

}  // namespace
}  // namespace dlscale
