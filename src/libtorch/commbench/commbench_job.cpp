#include "libtorch/commbench/commbench_job.h"

#include <memory>

#include "libtorch/comm/inproc/inproc_communicator.h"
#include "libtorch/comm/session.h"
#include "libtorch/compute/devices.h"
#include "libtorch/compute/threads.h"
#include "libtorch/compute/torch_compat.h"
#include "core/error.h"
#include "core/files.h"
#include "core/record_keys.h"
#include "core/sysinfo.h"
#include "core/text.h"

namespace dlscale::commbench {

void run_commbench_job(const CommbenchOptions& options, const launch::JobOptions& job,
                       const launch::LaunchEnv& env, const std::vector<std::string>& argv,
                       std::ostream& out) {
  launch::prepare_launcher(env);
  const CommbenchOptions o = resolve_commbench_options(options);
  if (!o.json_path.empty()) check_output_path(o.json_path);
  // Once per node, before any rank allocates: the starting process for
  // local workers, local rank 0 under mpirun/srun.
  if (!env.is_worker()) {
    check_memory(o, job.launch.cluster.empty() ? job.launch.workers : job.launch.workers_per_host,
                 available_memory_bytes());
  } else if (env.kind != launch::LaunchKind::kSpawned && env.local_rank == 0) {
    check_memory(o, env.local_world_size, available_memory_bytes());
  }
  launch::run_job(job, env, argv, [&](launch::WorkerSlot& slot) {
    set_compute_threads(job.threads_per_worker);
    // One process: a world of one rank, so every operation still runs; with
    // --backend nccl through NCCL itself (its single-GPU figures), else in
    // process.
    std::unique_ptr<comm::Communicator> alone;
    std::unique_ptr<comm::CommSession> solo;
    comm::Communicator* comm = slot.comm;
    if (comm == nullptr && job.launch.backend == "nccl") {
      comm::SessionOptions so;
      so.backend = "nccl";
      so.timeout = job.timeout();
      so.host_store = true;
      so.store_bind_addr = so.store_addr;  // loopback, a free port
      const torch::Device device = worker_device(job.device, 0, 1, false);
      so.cuda_device = device.is_cuda() ? device.index() : -1;
      solo = std::make_unique<comm::CommSession>(so);
      comm = &solo->world();
    }
    if (comm == nullptr) {
      alone = std::make_unique<comm::InProcCommunicator>(std::make_shared<comm::InProcGroup>(1), 0,
                                                         job.timeout());
      comm = alone.get();
    }
    slot.status.write("commbench");
    const CommbenchResult result =
        run_commbench(o, *comm, slot.node_name, slot.prints ? &out : nullptr,
                      [&](const std::string& status) { slot.status.write(status); });
    if (comm->rank() == 0 && !o.json_path.empty()) {
      nlohmann::json record = to_json(o, result, *comm, argv);
      record["inputs"]["mpi_collectives"] = option_json(job.launch.mpi_collectives);
      record["inputs"]["device"] = job.device;
      record[record::kInputs][record::input::kCluster] =
          env.cluster.to_json(job.launch.workers_per_host);
      record["inputs"]["slurm"] = env.slurm.to_json();
      record[record::kEnvironment] = dlscale::to_json(collect_system_info());
      record[record::kEnvironment]["torch_version"] = compat::torch_version();
      write_file_atomic(o.json_path, dump_json(record, 2) + "\n");
    }
    if (result.wrong > 0) {
      throw InternalError(
          fmt::format("commbench: {} element(s) differ from the known answer", result.wrong));
    }
  });
}

}  // namespace dlscale::commbench
