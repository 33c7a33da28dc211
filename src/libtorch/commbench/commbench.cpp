#include "libtorch/commbench/commbench.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <memory>

#include "libtorch/comm/agreement.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/record_keys.h"
#include "core/stats.h"
#include "libtorch/dp/bucket_collective.h"

namespace dlscale::commbench {
namespace {

torch::ScalarType scalar_type(const std::string& dtype) {
  if (dtype == "float16") return torch::kFloat16;
  if (dtype == "bfloat16") return torch::kBFloat16;
  return torch::kFloat32;
}

/// The three values rank r's known input repeats: element i is ((i + r) mod
/// 3). Sums over up to 128 ranks stay below 256, so they are exact in
/// float16 and bfloat16 too.
using Period = std::array<float, 3>;
Period pattern_period(int rank) {
  return {static_cast<float>(rank % 3), static_cast<float>((rank + 1) % 3),
          static_cast<float>((rank + 2) % 3)};
}

/// `count` elements repeating `period`, made directly in `dtype`: one
/// buffer of the message's size, no wider temporaries (set-up stays
/// proportionate to the timed work at 2 GB too).
torch::Tensor periodic(const Period& period, int64_t count, torch::ScalarType dtype) {
  const torch::Tensor base = torch::tensor({period[0], period[1], period[2]}).to(dtype);
  return base.repeat({(count + 2) / 3}).narrow(0, 0, count);
}

torch::Tensor pattern(int rank, int64_t count, torch::ScalarType dtype) {
  return periodic(pattern_period(rank), count, dtype);
}

/// Elements of `got` (any type, any device) that differ from `period`
/// repeated, compared a chunk at a time so the check needs no second copy
/// of the message.
int64_t count_wrong(const torch::Tensor& got, const Period& period) {
  const torch::Tensor flat = got.reshape(-1);
  const torch::Tensor base = torch::tensor({period[0], period[1], period[2]});
  constexpr int64_t kChunk = int64_t{3} << 21;  // a multiple of 3: chunks start in phase
  const int64_t n = flat.numel();
  int64_t wrong = 0;
  for (int64_t at = 0; at < n; at += kChunk) {
    const torch::Tensor c = flat.narrow(0, at, std::min(kChunk, n - at)).cpu().to(torch::kFloat32);
    const int64_t whole = c.numel() / 3 * 3;
    wrong += c.narrow(0, 0, whole).view({-1, 3}).ne(base).sum().item<int64_t>();
    for (int64_t i = whole; i < c.numel(); ++i) {
      wrong += c[i].item<float>() != period[static_cast<size_t>(i - whole)] ? 1 : 0;
    }
  }
  return wrong;
}

/// The sum over ranks of each rank's pattern, element by element.
Period summed_period(int ranks) {
  Period sum{0, 0, 0};
  for (int r = 0; r < ranks; ++r) {
    const Period p = pattern_period(r);
    for (size_t k = 0; k < 3; ++k) sum[k] += p[k];
  }
  return sum;
}

/// One operation of the benchmark, nccl-tests style: set up buffers for a
/// size, restore them before each iteration (untimed), run, check. Most
/// operations restore `output_` from `input_` and compare it with the
/// periodic answer `expected_`.
class Operation {
 public:
  Operation(comm::Communicator& comm, torch::ScalarType dtype) : comm_(comm), dtype_(dtype) {}
  virtual ~Operation() = default;
  virtual void prepare(int64_t count) = 0;
  virtual void reset() { output_.copy_(input_); }
  virtual void run() = 0;
  virtual int64_t wrong() { return count_wrong(output_, expected_); }

 protected:
  comm::Communicator& comm_;
  torch::ScalarType dtype_;
  torch::Tensor input_, output_;
  Period expected_{};
};

/// allreduce, tree, hierarchical: the bucket collectives of the strategies.
class SumOperation : public Operation {
 public:
  SumOperation(std::unique_ptr<dp::BucketCollective> coll, comm::Communicator& comm,
               torch::ScalarType dtype)
      : Operation(comm, dtype), coll_(std::move(coll)) {}
  void prepare(int64_t count) override {
    input_ = pattern(comm_.rank(), count, dtype_).to(comm_.device());
    output_ = torch::empty_like(input_);
    expected_ = summed_period(comm_.size());
  }
  void run() override { coll_->sum(output_, 0); }

 private:
  std::unique_ptr<dp::BucketCollective> coll_;
};

class BroadcastOperation : public Operation {
 public:
  using Operation::Operation;
  void prepare(int64_t count) override {
    input_ = pattern(comm_.rank(), count, dtype_).to(comm_.device());
    output_ = torch::empty_like(input_);
    expected_ = pattern_period(0);
  }
  void run() override { comm_.broadcast(output_, 0); }
};

/// `count` is the gathered total; each rank contributes count / ranks into
/// its chunk of one flat buffer (the sharded strategies' form).
class AllgatherOperation : public Operation {
 public:
  using Operation::Operation;
  void prepare(int64_t count) override {
    const int64_t chunk = std::max<int64_t>(1, count / comm_.size());
    input_ = pattern(comm_.rank(), chunk, dtype_).to(comm_.device());
    output_ = torch::empty({chunk * comm_.size()}, input_.options());
  }
  void reset() override {}
  void run() override { comm_.allgather_into(input_, output_); }
  int64_t wrong() override {
    const int64_t chunk = input_.numel();
    int64_t wrong = 0;
    for (int r = 0; r < comm_.size(); ++r) {
      wrong += count_wrong(output_.narrow(0, r * chunk, chunk), pattern_period(r));
    }
    return wrong;
  }
};

/// `count` is each rank's input; each rank ends with the sum of its chunk
/// of count / ranks elements.
class ReduceScatterOperation : public Operation {
 public:
  using Operation::Operation;
  void prepare(int64_t count) override {
    const int64_t chunk = std::max<int64_t>(1, count / comm_.size());
    input_ = pattern(comm_.rank(), chunk * comm_.size(), dtype_).to(comm_.device());
    output_ = torch::empty({chunk}, input_.options());
    // This rank's chunk starts at element rank * chunk of the periodic sum.
    const Period sum = summed_period(comm_.size());
    const int64_t phase = comm_.rank() * chunk % 3;
    for (size_t k = 0; k < 3; ++k) expected_[k] = sum[(k + static_cast<size_t>(phase)) % 3];
  }
  void reset() override {}
  void run() override { comm_.reduce_scatter(input_, output_, comm::ReduceOp::kSum); }
};

/// Ping-pong between ranks 0 and 1 (others idle); one op = one way, so the
/// timed round trip is halved. Rank 0 must get its own input back.
class SendRecvOperation : public Operation {
 public:
  using Operation::Operation;
  void prepare(int64_t count) override {
    input_ = pattern(comm_.rank(), count, dtype_).to(comm_.device());
    output_ = torch::empty_like(input_);
    expected_ = pattern_period(comm_.rank());
  }
  void reset() override { output_.zero_(); }
  void run() override {
    if (comm_.rank() == 0) {
      comm_.send(input_, 1, 1);
      comm_.recv(output_, 1, 2);
    } else if (comm_.rank() == 1) {
      comm_.recv(output_, 0, 1);
      comm_.send(output_, 0, 2);
    }
  }
  int64_t wrong() override { return comm_.rank() == 0 ? Operation::wrong() : 0; }
};

std::unique_ptr<Operation> make_operation(const std::string& op, const CommbenchOptions& o,
                                          comm::Communicator& comm, const std::string& node_name) {
  const torch::ScalarType dtype = scalar_type(o.dtype);
  if (op == "broadcast") return std::make_unique<BroadcastOperation>(comm, dtype);
  if (op == "allgather") return std::make_unique<AllgatherOperation>(comm, dtype);
  if (op == "reduce_scatter") return std::make_unique<ReduceScatterOperation>(comm, dtype);
  if (op == "sendrecv") return std::make_unique<SendRecvOperation>(comm, dtype);
  return std::make_unique<SumOperation>(
      dp::make_bucket_collective(op, comm, o.ranks_per_node, node_name), comm, dtype);
}

using Progress = std::function<void(const std::string&)>;

/// Times one size: warm-up, then `iters` timed runs; the mean is taken per
/// rank and the slowest rank's reported, with the wrong counts of all ranks.
/// `progress` hears each stage and iteration: one large message may take
/// longer than the launcher's silence limit as a whole, never per iteration.
CommRow measure(Operation& op, const std::string& name, int64_t count, int64_t element_bytes,
                const CommbenchOptions& o, comm::Communicator& comm, const Progress& progress) {
  const std::string what = fmt::format("commbench {} {} B", name, count * element_bytes);
  auto report = [&](const std::string& stage) {
    if (progress) progress(what + ": " + stage);
  };
  report("set-up");
  op.prepare(count);
  for (int i = 0; i < o.warmup; ++i) {
    report(fmt::format("warm-up {}/{}", i + 1, o.warmup));
    op.reset();
    op.run();
  }
  comm.barrier();
  double total = 0;
  for (int i = 0; i < o.iters; ++i) {
    report(fmt::format("iteration {}/{}", i + 1, o.iters));
    op.reset();
    const double start = now_seconds();
    op.run();
    total += now_seconds() - start;
  }
  report("check");
  const double mine = total / o.iters / (name == "sendrecv" ? 2.0 : 1.0);
  const torch::Tensor all =
      comm.allgather(torch::tensor({mine, static_cast<double>(op.wrong())}, torch::kFloat64));
  CommRow row;
  row.op = name;
  row.count = count;
  row.bytes = count * element_bytes;
  row.time_us = all.select(1, 0).max().item<double>() * 1e6;
  row.wrong = static_cast<int64_t>(all.select(1, 1).sum().item<double>());
  row.algbw_gbps = row.time_us > 0 ? static_cast<double>(row.bytes) / (row.time_us * 1e3) : 0;
  row.busbw_gbps = row.algbw_gbps * bus_factor(name, comm.size());
  return row;
}

void print_table_header(std::ostream& out, const CommbenchOptions& o, const comm::Communicator& c) {
  fmt::print(out,
             "# dlscale commbench: {} rank(s), backend {}, {}, {} warm-up + {} timed iterations\n",
             c.size(), c.backend(), o.dtype, o.warmup, o.iters);
  fmt::print(out, "# {:>12} {:>12} {:>12} {:>9} {:>12} {:>11} {:>11} {:>7}\n", "op", "size(B)",
             "count", "type", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong");
  out.flush();
}

void print_row(std::ostream& out, const CommRow& r, const std::string& dtype) {
  fmt::print(out, "  {:>12} {:>12} {:>12} {:>9} {:>12.2f} {:>11.4f} {:>11.4f} {:>7}\n", r.op,
             r.bytes, r.count, dtype, r.time_us, r.algbw_gbps, r.busbw_gbps, r.wrong);
  out.flush();
}

}  // namespace

int64_t parse_size(const std::string& text, const std::string& flag) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  std::string suffix = text.substr(used);
  double scale = 1;
  if (suffix == "K" || suffix == "k") scale = 1024.0;
  if (suffix == "M" || suffix == "m") scale = 1024.0 * 1024;
  if (suffix == "G" || suffix == "g") scale = 1024.0 * 1024 * 1024;
  const bool known = suffix.empty() || scale > 1;
  DLSCALE_CHECK(used > 0 && known && value > 0 && value * scale < 9.0e18,
                "{} '{}' is not a size; use bytes with an optional K, M or G suffix (powers of "
                "1024), e.g. 4, 64K, 256M",
                flag, text);
  return static_cast<int64_t>(std::llround(value * scale));
}

CommbenchOptions resolve_commbench_options(CommbenchOptions o) {
  const std::vector<std::string> all = commbench_operations();
  std::vector<std::string> ops;
  for (const std::string& op : o.ops) {
    if (op == "all") {
      ops = all;
      break;
    }
    DLSCALE_CHECK(std::find(all.begin(), all.end(), op) != all.end(),
                  "unknown --op '{}'; allowed: {}, all", op,
                  fmt::format("{}", fmt::join(all, ", ")));
    if (std::find(ops.begin(), ops.end(), op) == ops.end()) ops.push_back(op);
  }
  DLSCALE_CHECK(!ops.empty(), "--op needs at least one operation");
  o.ops = ops;
  if (o.dtype == "f32") o.dtype = "float32";
  if (o.dtype == "f16" || o.dtype == "fp16") o.dtype = "float16";
  if (o.dtype == "bf16") o.dtype = "bfloat16";
  DLSCALE_CHECK(o.dtype == "float32" || o.dtype == "float16" || o.dtype == "bfloat16",
                "unknown --dtype '{}'; allowed: float32, float16, bfloat16 (f32, f16, bf16)",
                o.dtype);
  DLSCALE_CHECK(o.min_bytes >= 1 && o.min_bytes <= o.max_bytes,
                "--min-bytes ({}) must be >= 1 and <= --max-bytes ({})", o.min_bytes, o.max_bytes);
  DLSCALE_CHECK(o.max_bytes <= (int64_t{16} << 30), "--max-bytes {} is over the 16G limit",
                o.max_bytes);
  DLSCALE_CHECK(o.factor > 1, "--factor must be > 1 (got {})", o.factor);
  const double steps =
      std::log(static_cast<double>(o.max_bytes) / o.min_bytes) / std::log(o.factor);
  DLSCALE_CHECK(steps <= 1000, "--factor {} gives {:.0f} sizes from {} to {} bytes; at most 1000",
                o.factor, steps + 1, o.min_bytes, o.max_bytes);
  DLSCALE_CHECK(o.warmup >= 0, "--warmup must be >= 0 (got {})", o.warmup);
  DLSCALE_CHECK(o.iters >= 1, "--iters must be >= 1 (got {})", o.iters);
  DLSCALE_CHECK(o.ranks_per_node >= 0, "--ranks-per-node must be >= 0 (got {})", o.ranks_per_node);
  return o;
}

int64_t bytes_per_rank(const CommbenchOptions& o) {
  constexpr int64_t kWorkingSet = int64_t{64} << 20;  // check chunks, collective scratch
  return 2 * o.max_bytes + kWorkingSet;
}

void check_memory(const CommbenchOptions& o, int local_ranks, int64_t available_bytes) {
  if (available_bytes < 0) return;
  const double need = static_cast<double>(bytes_per_rank(o)) * local_ranks;
  constexpr double kGiB = 1024.0 * 1024 * 1024;
  DLSCALE_CHECK(need <= static_cast<double>(available_bytes),
                "--max-bytes {} needs about {:.1f} GiB on this node ({} rank(s) x the message and "
                "its output), more than the {:.1f} GiB available: use a smaller --max-bytes or "
                "fewer ranks per node",
                o.max_bytes, need / kGiB, local_ranks, static_cast<double>(available_bytes) / kGiB);
}

std::vector<int64_t> message_sizes(const CommbenchOptions& o, int64_t element_bytes) {
  std::vector<int64_t> sizes;
  auto add = [&](double bytes) {
    const int64_t rounded =
        std::max<int64_t>(1, static_cast<int64_t>(bytes) / element_bytes) * element_bytes;
    if (sizes.empty() || rounded > sizes.back()) sizes.push_back(rounded);
  };
  for (double b = static_cast<double>(o.min_bytes); b < static_cast<double>(o.max_bytes);
       b *= o.factor)
    add(b);
  add(static_cast<double>(o.max_bytes));
  return sizes;
}

double bus_factor(const std::string& op, int ranks) {
  if (ranks <= 1) return op == "sendrecv" || op == "broadcast" ? 1.0 : 0.0;
  if (op == "allgather" || op == "reduce_scatter") return static_cast<double>(ranks - 1) / ranks;
  if (op == "broadcast" || op == "sendrecv") return 1.0;
  return 2.0 * (ranks - 1) / ranks;  // allreduce, and the strategies' equivalents
}

AlphaBeta fit_alpha_beta(const std::vector<double>& bytes, const std::vector<double>& seconds) {
  // Robust two-part fit (a shared machine's noise spikes mostly at small
  // sizes, where one spike would tilt a plain least-squares line): the slope
  // 1/B by least squares over the larger half of the sizes, where bandwidth
  // dominates; alpha as the median of t - x/B over the smaller half, where
  // latency dominates, clamped at 0. Exact for points on a line.
  std::vector<std::pair<double, double>> pts;
  for (size_t i = 0; i < bytes.size() && i < seconds.size(); ++i)
    pts.emplace_back(bytes[i], seconds[i]);
  std::sort(pts.begin(), pts.end());
  AlphaBeta f;
  f.points = static_cast<int>(pts.size());
  if (pts.empty()) return f;
  const size_t half = pts.size() / 2;
  const size_t from = pts.size() >= 4 ? half : 0;  // few points: use them all for the slope
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t i = from; i < pts.size(); ++i) {
    n += 1;
    sx += pts[i].first;
    sy += pts[i].second;
    sxx += pts[i].first * pts[i].first;
    sxy += pts[i].first * pts[i].second;
  }
  const double det = n * sxx - sx * sx;
  double slope = det > 0 ? (n * sxy - sx * sy) / det : 0;
  if (slope <= 0 && sxx > 0) slope = sxy / sxx;  // through the origin
  std::vector<double> alphas;
  for (size_t i = 0; i < std::max<size_t>(half, 1); ++i) {
    alphas.push_back(pts[i].second - pts[i].first * std::max(slope, 0.0));
  }
  f.alpha_us = std::max(0.0, median(alphas)) * 1e6;
  f.bandwidth_gbps = slope > 0 ? 1.0 / slope / 1e9 : 0;
  return f;
}

CommbenchResult run_commbench(const CommbenchOptions& o, comm::Communicator& comm,
                              const std::string& node_name, std::ostream* out,
                              const std::function<void(const std::string&)>& progress) {
  CommbenchResult result;
  const int64_t element_bytes = o.dtype == "float32" ? 4 : 2;
  if (out) print_table_header(*out, o, comm);
  for (const std::string& name : o.ops) {
    DLSCALE_CHECK(name != "sendrecv" || comm.size() >= 2, "--op sendrecv needs at least 2 ranks");
    std::unique_ptr<Operation> op = make_operation(name, o, comm, node_name);
    std::vector<double> xs, ts;
    for (const int64_t bytes : message_sizes(o, element_bytes)) {
      int64_t count = bytes / element_bytes;
      if (name == "allgather") count = std::max<int64_t>(1, count / comm.size()) * comm.size();
      const CommRow row = measure(*op, name, count, element_bytes, o, comm, progress);
      if (out) print_row(*out, row, o.dtype);
      xs.push_back(static_cast<double>(row.bytes));
      ts.push_back(row.time_us * 1e-6);
      result.wrong += row.wrong;
      result.rows.push_back(row);
    }
    result.fits.emplace_back(name, fit_alpha_beta(xs, ts));
  }
  if (out) {
    fmt::print(*out,
               "# fit: time = alpha + bytes / B (B from the larger half of the sizes, alpha from "
               "the smaller)\n");
    for (const auto& [name, f] : result.fits) {
      fmt::print(*out, "#   {:>12}: alpha {:.2f} us, B {:.4f} GB/s ({} sizes)\n", name, f.alpha_us,
                 f.bandwidth_gbps, f.points);
    }
    fmt::print(*out, "# out of bounds values: {} {}\n", result.wrong,
               result.wrong == 0 ? "OK" : "WRONG");
  }
  return result;
}

nlohmann::json to_json(const CommbenchOptions& o, const CommbenchResult& r,
                       const comm::Communicator& comm, const std::vector<std::string>& argv) {
  using namespace record;
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& row : r.rows) {
    rows.push_back({{kRowOp, row.op},
                    {kRowBytes, row.bytes},
                    {"count", row.count},
                    {kRowTimeUs, row.time_us},
                    {kCommAlgbwGbps, row.algbw_gbps},
                    {kCommBusbwGbps, row.busbw_gbps},
                    {kWrong, row.wrong}});
  }
  nlohmann::json inputs = nlohmann::json::object();
  record_inputs(o, inputs);  // the flags' table: ops, factor, dtype, warmup, iters, ranks_per_node
  inputs["min_bytes"] = o.min_bytes;
  inputs["max_bytes"] = o.max_bytes;
  inputs[input::kWorldSize] = comm.size();
  inputs["backend"] = comm.backend();
  nlohmann::json fits = nlohmann::json::object();
  for (const auto& [name, f] : r.fits) {
    fits[name] = {{kFitAlphaUs, f.alpha_us}, {kFitBandwidthGbps, f.bandwidth_gbps}, {"points", f.points}};
  }
  return {{kSchema, kCommbenchSchema},
          {kKind, kKindCommbench},
          {kStatus, r.wrong == 0 ? kStatusOk : "wrong"},
          {"argv", argv},
          {kInputs, inputs},
          {kResults, {{kRows, rows}, {kFits, fits}, {kWrong, r.wrong}}}};
}

}  // namespace dlscale::commbench
