#pragma once
// The seam between dlscale's two executables (docs/architecture.md, "Two
// executables"). `dlscale` is torch-free and starts at once; the commands
// that train or benchmark need LibTorch and run in `dlscale-torch`, built
// beside it. `dlscale` parses every command line itself (so bad flags, --help
// and the sweep's check of parameters need no LibTorch), then hands a
// LibTorch command over to `dlscale-torch`: exec(2) with the same arguments,
// so the process, its pid, environment and descriptors stay (mpirun and srun
// see no difference).
//
// The functions below are that seam, defined twice: in torch_runs.cpp
// (linked into dlscale-torch) they do the work; in handoff.cpp (linked into
// dlscale) they replace the process with dlscale-torch. `models` is
// registered whole by each executable (dlscale's copy passes every argument
// through unparsed). `predict` runs in `dlscale` until it needs a zoo
// model's FLOP profile (zoo_backward_profile), which hands it over.
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "commbench/commbench_options.h"
#include "data/data_bench_options.h"
#include "launch/launch_options.h"
#include "launch/train_job_options.h"
#include "models/model_options.h"
#include "predict/workload.h"

namespace dlscale::cli {

/// The name of the LibTorch executable, found beside `dlscale`.
inline constexpr const char* kTorchExecutable = "dlscale-torch";

inline constexpr const char* kModelsAbout =
    "List the model zoo: family, parameters, forward GFLOPs per sample, default input, throughput unit.";

/// `dlscale commbench`'s flags.
struct CommbenchFlags {
  commbench::CommbenchOptions options;  ///< its flags come from its table
  int threads = 0;
  launch::JobOptions job;  ///< the launch flags, --device and --share-gpus
};

/// Runs `dlscale train` (`command` is its parsed subcommand, `argv` the
/// whole command line).
void run_train_command(const CLI::App& command, launch::TrainJobOptions& options,
                       const std::vector<std::string>& argv);
void run_commbench_command(const CLI::App& command, CommbenchFlags& flags, const std::vector<std::string>& argv);
void run_data_bench_command(const data::DataBenchOptions& options, const std::vector<std::string>& argv);

/// `dlscale predict`'s backward profile of zoo model `model` from the FLOPs
/// of its layers (libtorch/predict/zoo_profile.h), with its forward FLOPs per sample
/// in `flops`. dlscale hands the command (`argv`) over to dlscale-torch.
predict::BackwardProfile zoo_backward_profile(const std::string& model, const models::ModelOptions& options,
                                              double& flops, const std::vector<std::string>& argv);

}  // namespace dlscale::cli
