#include "libtorch/dp/ps_sync.h"

#include <numeric>
#include <thread>

#include "core/clock.h"
#include "core/error.h"
#include "dp/ps_plan.h"
#include "libtorch/comm/inproc/inproc_communicator.h"
#include "libtorch/dp/ps_shard.h"

namespace dlscale::dp {
namespace {

/// A parameter's memory as a flat vector (dense layouts: contiguous or
/// channels-last), the order shards store its elements in.
torch::Tensor flat(const torch::Tensor& t) {
  return t.detach().as_strided({t.numel()}, {1});
}

class PsSync : public GradientSync {
 public:
  PsSync(std::vector<torch::Tensor> params, const SyncOptions& options, const PsLayout& layout,
         const SyncContext& context);
  ~PsSync() override;
  const SyncInfo& info() const override { return info_; }
  void begin_step() override;
  void begin_backward() override;
  SyncStepStats end_backward() override;
  void apply_update(torch::optim::Optimizer& optimizer) override;
  /// The averaged gradient exists on the shards only (sync mode): each
  /// sends its part's squared norm on the steps measured, before the pull.
  double averaged_gradient_sq_norm(const std::vector<torch::Tensor>& /*params*/) override;
  /// Sent with the norm by the same shards.
  std::optional<ServedWeighted> served_weighted_sq() const override { return served_; }
  StrategyReport report() override;

 private:
  void start_local_shard(const SyncOptions& options, const PsLayout& layout, const SyncContext& context);
  void fill_info(const PsLayout& layout);
  void send_initial_values();
  void pull();
  void post_pull();
  /// Copies the pulled values of `pieces` (indices into plan_.pieces) into
  /// the parameters.
  void copy_out(const std::vector<size_t>& pieces);
  void plan_copy_out();
  void pack(size_t k, const torch::Tensor& grad);
  void push_bucket(int s, int b);
  /// Runs `fn` (a wait on shard `s`), naming the shard in a failure.
  template <typename Fn>
  void on_shard(int s, Fn&& fn);

  std::vector<torch::Tensor> params_;
  PsOptions options_;
  PsPlan plan_;
  std::vector<int64_t> shard_bytes_;
  SyncInfo info_;
  const bool overlap_;
  const bool bounded_;
  const bool sync_;  // pulls come bucket by bucket (async: whole)
  int worker_ = 0;
  std::vector<PsEndpoint> shards_;
  std::vector<int> shard_ranks_;
  std::vector<torch::Tensor> grads_;   // per shard: flat gradient buffer
  std::vector<torch::Tensor> values_;  // per shard: flat values buffer
  std::vector<std::vector<int>> pending_;  // [shard][bucket]: pieces still missing
  std::vector<bool> seen_;
  std::vector<unsigned> hook_handles_;
  std::vector<std::unique_ptr<comm::Request>> sends_;
  std::vector<BucketTiming> timings_;
  double step_bytes_ = 0;
  bool pulled_ = false;  // the first pull happened
  // Unbounded modes: the next pull's receives (per shard; sync: one per
  // bucket), posted as soon as the last pull was copied out (see pull()),
  // and the pulls still to come.
  std::vector<std::vector<std::unique_ptr<comm::Request>>> pull_recvs_;
  int64_t pulls_left_ = 0;
  // Each receive of a pull (shard, its index in pull_recvs_[shard]) and the
  // pieces it brings, in the order the shards send them: sync, bucket by
  // bucket; async, a shard's whole values.
  struct PullPart {
    int shard = 0;
    size_t recv = 0;
    std::vector<size_t> pieces;
  };
  std::vector<PullPart> pull_parts_;
  // --noise-every (sync): each shard's norm of the averaged gradient on a
  // measured step, received beside that step's pull (posted with it).
  const int64_t noise_every_;
  const int64_t steps_;
  std::vector<torch::Tensor> norms_;
  std::vector<std::unique_ptr<comm::Request>> norm_recvs_;
  std::optional<ServedWeighted> served_;  // the last measured step's

  // Colocated: this process's shard and the in-memory link to it.
  std::shared_ptr<comm::InProcGroup> local_group_;
  std::unique_ptr<comm::Communicator> local_worker_end_;
  std::unique_ptr<comm::Communicator> local_shard_end_;
  std::shared_ptr<PsShard> local_shard_;
  std::thread shard_thread_;
};

PsSync::PsSync(std::vector<torch::Tensor> params, const SyncOptions& options,
               const PsLayout& layout, const SyncContext& context)
    : params_(std::move(params)),
      options_(options.ps),
      overlap_(options.bucket_mb > 0),
      bounded_(options.ps.mode == PsMode::kAsync && options.ps.max_staleness >= 0),
      sync_(options.ps.mode == PsMode::kSync),
      shard_ranks_(layout.shard_ranks),
      pulls_left_(context.steps + 1),
      noise_every_(options.ps.mode == PsMode::kSync ? context.noise_every : 0),
      steps_(context.steps) {
  for (const auto& p : params_) {
    DLSCALE_CHECK(p.scalar_type() == torch::kFloat32 && p.device().is_cpu() &&
                      p.is_non_overlapping_and_dense(),
                  "--strategy ps supports dense float32 CPU parameters (got {} on {})",
                  c10::toString(p.scalar_type()), p.device().str());
  }
  plan_ = plan_ps(param_numels(params_), options.ps.shards, options.ps.assign,
                  options.ps.partition_mb, options.bucket_mb, options.first_bucket_mb,
                  params_.empty() ? 4 : static_cast<int64_t>(params_.front().element_size()));
  DLSCALE_ASSERT(static_cast<int>(layout.shard_ranks.size()) == options.ps.shards);
  if (layout.comm != nullptr) {
    const auto& wr = layout.worker_ranks;
    worker_ = static_cast<int>(std::find(wr.begin(), wr.end(), layout.comm->rank()) - wr.begin());
    DLSCALE_ASSERT(worker_ < static_cast<int>(wr.size()));
  }
  if (layout.local_shard >= 0) start_local_shard(options, layout, context);
  for (int s = 0; s < options.ps.shards; ++s) {
    if (s == layout.local_shard) {
      shards_.push_back({local_worker_end_.get(), 1});
    } else {
      shards_.push_back({layout.comm, layout.shard_ranks[s]});
    }
    const PsShardPlan& sp = plan_.shards[s];
    grads_.push_back(torch::zeros({sp.elements}, torch::kFloat32));
    values_.push_back(torch::zeros({sp.elements}, torch::kFloat32));
    pending_.emplace_back(sp.buckets.size(), 0);
  }
  fill_info(layout);
  plan_copy_out();
  seen_.assign(params_.size(), false);
  if (overlap_) {
    for (size_t k = 0; k < params_.size(); ++k) {
      hook_handles_.push_back(params_[k].register_hook([this, k](const torch::Tensor& grad) {
        if (local_backward()) return;  // --accumulate: autograd sums it in .grad
        DLSCALE_ASSERT(!seen_[k]);  // a parameter used twice per step is not supported
        pack(k, grad);
      }));
    }
  }
  if (worker_ == 0) send_initial_values();
  // With a staleness bound the first pull waits its turn at the gate, in the
  // first step: here every worker must get through (the trainer's start
  // barrier follows).
  if (!bounded_) pull();
}

void PsSync::begin_step() {
  if (!pulled_) pull();
}

void PsSync::fill_info(const PsLayout& layout) {
  info_.strategy = "ps";
  info_.layout = overlap_ ? "bucketed" : "flat";
  info_.exchange = "pushes";
  info_.exchanges_alone = true;  // one worker still pushes to and pulls from its shards
  for (const PsShardPlan& sp : plan_.shards) {
    for (const PsBucket& b : sp.buckets) info_.bucket_bytes.push_back(b.length * plan_.element_bytes);
    shard_bytes_.push_back(sp.elements * plan_.element_bytes);
  }
  info_.header = {ps_header_line(options_, shard_bytes_, plan_.imbalance())};
  // What this process sends over the network per step: its pushes to other
  // processes' shards, plus the pulls its own shard (colocated) serves to the
  // other workers; its own worker and shard talk through memory.
  const double s_bytes = static_cast<double>(
      std::accumulate(shard_bytes_.begin(), shard_bytes_.end(), int64_t{0}));
  const int n = std::max<int>(1, static_cast<int>(layout.worker_ranks.size()));
  const double local = layout.local_shard >= 0
                           ? static_cast<double>(plan_.shards[layout.local_shard].elements * plan_.element_bytes)
                           : 0.0;
  info_.formula_bytes_sent = s_bytes - local + (n - 1) * local;
  info_.formula = layout.local_shard >= 0 ? "S + (N-2) x S_k (pushes to the other shards, pulls "
                                            "served by its shard k)"
                                          : "S (pushes; the pulls bring S back)";
}

void PsSync::start_local_shard(const SyncOptions& options, const PsLayout& layout,
                               const SyncContext& context) {
  const auto timeout = layout.comm != nullptr ? layout.comm->timeout() : context.timeout;
  local_group_ = std::make_shared<comm::InProcGroup>(2);
  local_worker_end_ = std::make_unique<comm::InProcCommunicator>(local_group_, 0, timeout);
  local_shard_end_ = std::make_unique<comm::InProcCommunicator>(local_group_, 1, timeout);
  PsShardConfig config;
  config.shard = layout.local_shard;
  config.plan = plan_.shards[layout.local_shard];
  for (size_t u = 0; u < std::max<size_t>(1, layout.worker_ranks.size()); ++u) {
    if (static_cast<int>(u) == worker_) {
      config.workers.push_back({local_shard_end_.get(), 0});
    } else {
      config.workers.push_back({layout.comm, layout.worker_ranks[u]});
    }
  }
  config.steps = context.steps;
  config.warmup = context.warmup;
  config.mode = options.ps.mode;
  config.max_staleness = options.ps.max_staleness;
  config.noise_every = context.noise_every;
  config.make_optimizer = context.make_optimizer;
  local_shard_ = std::make_shared<PsShard>(std::move(config));
  // A failed shard breaks the in-memory link: this process's worker then
  // fails at its next exchange with the shard (and exits 5), which closes
  // the process's connections so that every peer fails fast too.
  shard_thread_ = std::thread([shard = local_shard_, group = local_group_] {
    try {
      shard->run();
    } catch (const std::exception& e) {
      group->abort(e.what());
    }
  });
}

PsSync::~PsSync() {
  for (size_t k = 0; k < hook_handles_.size(); ++k) params_[k].remove_hook(hook_handles_[k]);
  // After a failure the shard may still wait on its links: leave it to the
  // ending process rather than wait out the timeout here.
  if (shard_thread_.joinable()) shard_thread_.detach();
}

template <typename Fn>
void PsSync::on_shard(int s, Fn&& fn) {
  try {
    fn();
  } catch (const PeerFailure& e) {
    throw PeerFailure(fmt::format("ps shard {} (rank {}): {}", s, shard_ranks_[s], e.what()));
  }
}

void PsSync::send_initial_values() {
  torch::NoGradGuard no_grad;
  for (const PsPiece& piece : plan_.pieces) {
    values_[piece.shard]
        .narrow(0, piece.shard_offset, piece.length)
        .copy_(flat(params_[piece.param]).narrow(0, piece.offset, piece.length));
  }
  for (size_t s = 0; s < shards_.size(); ++s) {
    on_shard(static_cast<int>(s),
             [&] { shards_[s].comm->send(values_[s], shards_[s].peer, kPsInitTag); });
  }
}

void PsSync::post_pull() {
  // The pull that comes after step `steps - pulls_left_` (-1: the initial
  // values); a measured step's shards send its norm before it.
  const bool norm = measures_noise(steps_ - pulls_left_, noise_every_);
  norms_.reserve(shards_.size());  // irecv's tensors stay where they are
  for (size_t s = 0; s < shards_.size(); ++s) {
    on_shard(static_cast<int>(s), [&] {
      auto& recvs = pull_recvs_.emplace_back();
      const PsEndpoint& shard = shards_[s];
      if (sync_) {
        const std::vector<PsBucket>& buckets = plan_.shards[s].buckets;
        for (size_t b = 0; b < buckets.size(); ++b) {
          torch::Tensor part = values_[s].narrow(0, buckets[b].offset, buckets[b].length);
          recvs.push_back(shard.comm->irecv(part, shard.peer, ps_pull_tag(b)));
        }
      } else {
        recvs.push_back(shard.comm->irecv(values_[s], shard.peer, kPsValuesTag));
      }
      if (!norm) return;
      norms_.push_back(torch::zeros({kPsNormValues}, torch::kFloat64));
      norm_recvs_.push_back(shards_[s].comm->irecv(norms_.back(), shards_[s].peer, kPsNormTag));
    });
  }
}

void PsSync::pull() {
  const int k = static_cast<int>(shards_.size());
  if (bounded_) {
    // One shard at a time, in index order: the staleness gates of several
    // shards then cannot deadlock (docs/strategies.md).
    const torch::Tensor request = torch::zeros({1}, torch::kInt64);
    for (int s = 0; s < k; ++s) {
      on_shard(s, [&] {
        shards_[s].comm->send(request, shards_[s].peer, kPsRequestTag);
        shards_[s].comm->recv(values_[s], shards_[s].peer, kPsValuesTag);
      });
      copy_out(pull_parts_[s].pieces);  // async: a part a shard, in shard order
    }
  } else {
    // Each bucket's values go into the parameters as they arrive, while
    // later buckets are still being applied and sent: only the last
    // bucket's copy is left after the last pull (bench/README.md).
    if (pull_recvs_.empty()) post_pull();
    for (const PullPart& part : pull_parts_) {
      on_shard(part.shard, [&] { pull_recvs_[part.shard][part.recv]->wait(); });
      copy_out(part.pieces);
    }
    pull_recvs_.clear();
  }
  pulled_ = true;
  --pulls_left_;
  // Post the next pull now, while this worker computes: a receive posted
  // late tells its shard "ready" behind whatever bulk data this process is
  // then sending on the same connection (its pushes, the pulls its own shard
  // serves), so that shard's pull would wait for the other direction's
  // traffic and the link would carry one direction at a time
  // (docs/strategies.md, "Both directions of a link").
  if (!bounded_ && pulls_left_ > 0) post_pull();
}

void PsSync::plan_copy_out() {
  size_t most = 1;
  for (const PsShardPlan& sp : plan_.shards) most = std::max(most, sp.buckets.size());
  for (size_t b = 0; b < (sync_ ? most : 1); ++b) {
    for (size_t s = 0; s < plan_.shards.size(); ++s) {
      if (sync_ && b >= plan_.shards[s].buckets.size()) continue;
      PullPart part{static_cast<int>(s), b, {}};
      for (size_t i = 0; i < plan_.pieces.size(); ++i) {
        const PsPiece& piece = plan_.pieces[i];
        if (piece.shard == part.shard && (!sync_ || static_cast<size_t>(piece.bucket) == b))
          part.pieces.push_back(i);
      }
      pull_parts_.push_back(std::move(part));
    }
  }
}

void PsSync::copy_out(const std::vector<size_t>& pieces) {
  torch::NoGradGuard no_grad;
  for (size_t i : pieces) {
    const PsPiece& piece = plan_.pieces[i];
    flat(params_[piece.param])
        .narrow(0, piece.offset, piece.length)
        .copy_(values_[piece.shard].narrow(0, piece.shard_offset, piece.length));
  }
}

void PsSync::begin_backward() {
  seen_.assign(params_.size(), false);
  sends_.clear();
  timings_.clear();
  step_bytes_ = 0;
  for (size_t s = 0; s < pending_.size(); ++s) {
    std::fill(pending_[s].begin(), pending_[s].end(), 0);
  }
  for (const PsPiece& piece : plan_.pieces) ++pending_[piece.shard][piece.bucket];
}

void PsSync::pack(size_t k, const torch::Tensor& grad) {
  torch::NoGradGuard no_grad;
  seen_[k] = true;
  const torch::Tensor& p = params_[k];
  torch::Tensor g = grad;
  if (g.strides() != p.strides() || !g.is_non_overlapping_and_dense()) {
    g = torch::empty_strided(p.sizes(), p.strides(), p.options());
    g.copy_(grad);
  }
  const torch::Tensor gf = flat(g);
  for (size_t i : plan_.pieces_of_param[k]) {
    const PsPiece& piece = plan_.pieces[i];
    grads_[piece.shard]
        .narrow(0, piece.shard_offset, piece.length)
        .copy_(gf.narrow(0, piece.offset, piece.length));
    if (--pending_[piece.shard][piece.bucket] == 0) push_bucket(piece.shard, piece.bucket);
  }
}

void PsSync::push_bucket(int s, int b) {
  const PsBucket& bucket = plan_.shards[s].buckets[b];
  BucketTiming timing;
  timing.bucket = static_cast<int>(timings_.size());
  timing.start = now_seconds();
  timings_.push_back(timing);
  on_shard(s, [&] {
    sends_.push_back(shards_[s].comm->isend(grads_[s].narrow(0, bucket.offset, bucket.length),
                                            shards_[s].peer, static_cast<uint32_t>(b)));
  });
  step_bytes_ += static_cast<double>(bucket.length * plan_.element_bytes);
}

SyncStepStats PsSync::end_backward() {
  const double start = now_seconds();
  for (size_t k = 0; k < params_.size(); ++k) {
    if (seen_[k]) continue;
    const torch::Tensor& g = params_[k].grad();
    pack(k, g.defined() ? g : torch::zeros_like(params_[k]));
  }
  for (size_t i = 0; i < sends_.size(); ++i) {
    // The shard of a send is not kept; name the failure by its order.
    sends_[i]->wait();
    timings_[i].end = now_seconds();
  }
  SyncStepStats stats;
  stats.exposed_seconds = now_seconds() - start;
  stats.bytes = static_cast<int64_t>(step_bytes_);
  for (const auto& t : timings_) stats.busy_seconds += t.end - t.start;
  stats.buckets = timings_;
  return stats;
}

void PsSync::apply_update(torch::optim::Optimizer& /*optimizer: the shards own the update*/) {
  pull();
}

double PsSync::averaged_gradient_sq_norm(const std::vector<torch::Tensor>& /*params*/) {
  DLSCALE_ASSERT(norm_recvs_.size() == shards_.size());  // a measured step (trainer/noise_scale.h)
  double sum = 0;
  served_ = ServedWeighted{};
  for (size_t s = 0; s < shards_.size(); ++s) {
    on_shard(static_cast<int>(s), [&] { norm_recvs_[s]->wait(); });
    const auto* v = norms_[s].data_ptr<double>();
    sum += v[0];
    served_->averaged += v[1];
    served_->own += v[2];
  }
  norm_recvs_.clear();
  norms_.clear();
  return sum;
}

StrategyReport PsSync::report() {
  std::vector<ShardReport> reports;
  if (worker_ == 0) {
    for (size_t s = 0; s < shards_.size(); ++s) {
      on_shard(static_cast<int>(s), [&] {
        torch::Tensor size = torch::zeros({1}, torch::kInt64);
        shards_[s].comm->recv(size, shards_[s].peer, kPsReportTag);
        torch::Tensor data = torch::zeros({size.item<int64_t>()}, torch::kFloat64);
        shards_[s].comm->recv(data, shards_[s].peer, kPsReportTag);
        reports.push_back(PsShard::decode(data, static_cast<int>(s)));
      });
    }
  }
  if (shard_thread_.joinable()) shard_thread_.join();
  StrategyReport r;
  r.key = "ps";
  r.section = ps_section(options_, shard_bytes_, plan_.imbalance(), reports);
  r.summary = ps_summary_lines(options_, shard_bytes_, plan_.imbalance(), reports);
  for (const ShardReport& shard : reports) {
    const std::string track = fmt::format("ps shard {}", shard.shard);
    for (size_t i = 0; i + 1 < shard.apply_intervals.size(); i += 2) {
      r.spans.push_back({"apply", track, shard.apply_intervals[i], shard.apply_intervals[i + 1]});
    }
  }
  return r;
}

}  // namespace

std::vector<int64_t> param_numels(const std::vector<torch::Tensor>& params) {
  std::vector<int64_t> n;
  for (const auto& p : params) n.push_back(p.numel());
  return n;
}

std::unique_ptr<GradientSync> make_ps_sync(std::vector<torch::Tensor> params,
                                           const SyncOptions& options, const PsLayout& layout,
                                           const SyncContext& context) {
  return std::make_unique<PsSync>(std::move(params), options, layout, context);
}

}  // namespace dlscale::dp
