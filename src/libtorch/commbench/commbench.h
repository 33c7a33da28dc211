#pragma once
// `dlscale commbench`: times the collectives as the strategies use them
// (nccl-tests' method and metrics, docs/metrics.md), checks every result
// against the known answer, and fits time = alpha + bytes / bandwidth per
// operation for the prediction model.
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "libtorch/comm/communicator.h"
#include "commbench/commbench_options.h"

namespace dlscale::commbench {

/// Parses "4", "64K", "1M", "2G" (powers of 1024); throws dlscale::Error
/// naming `flag` on anything else.
int64_t parse_size(const std::string& text, const std::string& flag);

/// Validates and normalizes (expands "all", canonical dtype names); throws
/// dlscale::Error with a one-line message.
CommbenchOptions resolve_commbench_options(CommbenchOptions options);

/// Bytes one rank holds at the largest size: the message and its output
/// buffer, and the check's working chunk.
int64_t bytes_per_rank(const CommbenchOptions& options);
/// Throws dlscale::Error when `local_ranks` ranks on one node would need
/// more than `available_bytes` (unknown when < 0) at --max-bytes: refused
/// at once, instead of swapping or dying mid-run.
void check_memory(const CommbenchOptions& options, int local_ranks, int64_t available_bytes);

/// Message sizes from min to max by factor, rounded to whole elements of
/// `element_bytes`; max_bytes is always the last.
std::vector<int64_t> message_sizes(const CommbenchOptions& options, int64_t element_bytes);

/// One measured point.
struct CommRow {
  std::string op;
  int64_t bytes = 0;      ///< message size (allgather: the gathered total; reduce_scatter: each rank's input)
  int64_t count = 0;      ///< elements
  double time_us = 0;     ///< mean time of one operation, max over ranks
  double algbw_gbps = 0;  ///< bytes / time
  double busbw_gbps = 0;  ///< algbw × the operation's bus factor
  int64_t wrong = 0;      ///< elements that differ from the known answer, all ranks
};

/// Fit of time = alpha + bytes / bandwidth: the bandwidth by least squares
/// over the larger half of the sizes, alpha as the median residual over the
/// smaller half (clamped at 0); robust to noise spikes at small sizes.
struct AlphaBeta {
  double alpha_us = 0;        ///< latency
  double bandwidth_gbps = 0;  ///< asymptotic bytes / s / 1e9; 0 = time did not grow with size
  int points = 0;
};
AlphaBeta fit_alpha_beta(const std::vector<double>& bytes, const std::vector<double>& seconds);

/// nccl-tests' bus factor of `op` over `ranks` ranks (busbw = algbw × factor).
double bus_factor(const std::string& op, int ranks);

struct CommbenchResult {
  std::vector<CommRow> rows;
  std::vector<std::pair<std::string, AlphaBeta>> fits;  ///< per operation, in run order
  int64_t wrong = 0;
};

/// Runs every operation and size over `comm` (collective: every rank calls
/// it with the same options). `node_name` groups ranks for hierarchical.
/// Rank 0 prints the table to `out` as rows complete, and the fits.
/// `progress` (optional) hears "allreduce 1048576 B" before each size: a
/// launcher's watchdog must see a slow link make progress.
CommbenchResult run_commbench(const CommbenchOptions& options, comm::Communicator& comm,
                              const std::string& node_name, std::ostream* out,
                              const std::function<void(const std::string&)>& progress = {});

/// The record (schema "dlscale.commbench/1").
nlohmann::json to_json(const CommbenchOptions& options, const CommbenchResult& result,
                       const comm::Communicator& comm, const std::vector<std::string>& argv);

}  // namespace dlscale::commbench
