#include "libtorch/dp/ps_shard.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/clock.h"
#include "core/error.h"
#include "libtorch/dp/grad_clip.h"
#include "libtorch/dp/optimizer_state.h"

namespace dlscale::dp {
namespace {
constexpr int kHistogramBins = 16;  // staleness 0..14, and 15 or more
}

PsShard::PsShard(PsShardConfig config)
    : config_(std::move(config)),
      workers_(static_cast<int>(config_.workers.size())),
      bounded_(config_.mode == PsMode::kAsync && config_.max_staleness >= 0) {
  DLSCALE_ASSERT(workers_ >= 1 && config_.steps >= 1 && config_.make_optimizer);
  const int64_t m = config_.plan.elements;
  values_ = torch::zeros({m}, torch::kFloat32);
  grad_ = torch::zeros({m}, torch::kFloat32);
  for (const PsBucket& b : config_.plan.buckets) {
    bucket_values_.push_back(values_.narrow(0, b.offset, b.length).set_requires_grad(true));
  }
  const size_t buckets = config_.plan.buckets.size();
  bucket_arrived_.assign(buckets, 0);
  bucket_rounds_.assign(buckets, 0);
  norm_parts_.assign(buckets, 0.0);
  weighted_parts_.assign(buckets, 0.0);
  own_weighted_parts_.assign(static_cast<size_t>(workers_), std::vector<double>(buckets, 0.0));
  for (int w = 0; w < workers_; ++w) {
    slots_.push_back(torch::zeros({m}, torch::kFloat32));
    if (config_.mode == PsMode::kAsync) snapshots_.push_back(torch::zeros({m}, torch::kFloat32));
  }
  base_.assign(workers_, 0);
  in_flight_.assign(workers_, false);
  report_.shard = config_.shard;
  report_.bytes = m * static_cast<int64_t>(values_.element_size());
  report_.staleness_histogram.assign(kHistogramBins, 0);
}

void PsShard::run() {
  {
    const PsEndpoint& w0 = config_.workers[0];
    try {
      w0.comm->recv(values_, w0.peer, kPsInitTag);
    } catch (const Error& e) {
      throw PeerFailure(fmt::format("ps shard {}: initial values from worker 0: {}",
                                    config_.shard, e.what()));
    }
  }
  for (const torch::Tensor& v : bucket_values_)
    optimizers_.push_back(config_.make_optimizer({v}, nullptr));
  std::vector<std::thread> links;
  for (int w = 0; w < workers_; ++w) links.emplace_back([this, w] { serve(w); });
  for (auto& t : links) t.join();
  if (!error_.empty()) throw PeerFailure(error_);
  const int64_t measured = std::max<int64_t>(1, config_.steps - config_.warmup);
  report_.busy_seconds_per_step /= measured;
  report_.bytes_in_per_step /= measured;
  report_.bytes_out_per_step /= measured;
  report_.staleness_mean = report_.updates > 0 && config_.mode == PsMode::kAsync
                               ? staleness_sum_ / report_.updates
                               : 0.0;
  const torch::Tensor data = encode(report_);
  const torch::Tensor size = torch::tensor({data.numel()}, torch::kInt64);
  const PsEndpoint& w0 = config_.workers[0];
  w0.comm->send(size, w0.peer, kPsReportTag);
  w0.comm->send(data, w0.peer, kPsReportTag);
}

void PsShard::fail(int w, const std::string& what) {
  std::lock_guard<std::mutex> lock(mu_);
  if (error_.empty()) {
    error_ = fmt::format("ps shard {}: link to worker {} failed: {}", config_.shard, w, what);
  }
  cv_.notify_all();
}

void PsShard::serve(int w) {
  try {
    if (config_.mode == PsMode::kSync) return serve_sync(w);
    // Each push's receives are posted before the values that the push
    // answers go out, so the "ready" notes travel ahead of bulk data
    // (docs/strategies.md, "Both directions of a link").
    std::vector<std::unique_ptr<comm::Request>> push = post_push(w);
    grant(w, false);  // steps >= 1: the first pull is never the last
    for (int64_t step = 0; step < config_.steps; ++step) {
      for (auto& r : push) r->wait();
      count_step_bytes(step);
      apply(w, step);
      const bool last = step + 1 == config_.steps;
      if (!last) push = post_push(w);
      grant(w, last);
    }
  } catch (const std::exception& e) {
    fail(w, e.what());
  }
}

void PsShard::serve_sync(int w) {
  // Bucket b's new values go out as soon as every worker's bucket b is in
  // and applied, while the later buckets' pushes still arrive: both
  // directions of the link carry data at once (docs/strategies.md). The
  // values of bucket b are not written again before this worker pushes
  // bucket b again, which it does only after this pull is in.
  const PsEndpoint& link = config_.workers[w];
  const auto send = [&](size_t b) {
    return link.comm->isend(bucket_values_[b].detach(), link.peer, ps_pull_tag(b));
  };
  std::vector<std::unique_ptr<comm::Request>> push = post_push(w), pulls;
  for (size_t b = 0; b < bucket_values_.size(); ++b)
    pulls.push_back(send(b));  // the initial values
  for (int64_t step = 0; step < config_.steps; ++step) {
    const bool last = step + 1 == config_.steps;
    for (size_t b = 0; b < push.size(); ++b) {
      push[b]->wait();
      apply_bucket(b, step);
      if (!last) push[b] = post_push_bucket(w, b);
      pulls[b]->wait();  // the previous step's (long done: this worker pushed again since)
      pulls[b] = send(b);
    }
    count_step_bytes(step);
    if (measures(step)) send_norm(w);
  }
  for (auto& r : pulls) r->wait();
}

void PsShard::wait(std::unique_lock<std::mutex>& lock, const std::function<bool()>& done,
                   const char* what) {
  // Other links wait on a failed or silent worker no longer than their own
  // receive would: the communicator's timeout.
  const auto timeout = config_.workers[0].comm->timeout();
  const bool ok = cv_.wait_for(lock, timeout, [&] { return done() || !error_.empty(); });
  if (!error_.empty()) throw PeerFailure("another link failed");
  if (!ok) {
    throw PeerFailure(fmt::format("waited {:.0f} s for {}",
                                  std::chrono::duration<double>(timeout).count(), what));
  }
}

bool PsShard::gate_open() const {
  int64_t worst = 0;
  int flying = 0;
  for (int u = 0; u < workers_; ++u) {
    if (!in_flight_[u]) continue;
    worst = std::max(worst, version_ - base_[u]);
    ++flying;
  }
  return worst + flying <= config_.max_staleness;
}

void PsShard::grant(int w, bool last) {  // async: a pull of the whole slice
  const PsEndpoint& link = config_.workers[w];
  if (bounded_) {
    torch::Tensor request = torch::zeros({1}, torch::kInt64);
    link.comm->recv(request, link.peer, kPsRequestTag);
  }
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (last) {
      wait(lock, [&] { return finished_ == workers_; }, "every worker's last gradient");
    } else if (bounded_) {
      wait(lock, [&] { return gate_open(); }, "the staleness bound to admit this worker");
    }
    base_[w] = version_;
    in_flight_[w] = !last;
    // Other links keep applying while this one sends: send a snapshot.
    snapshots_[w].copy_(values_);
  }
  link.comm->send(snapshots_[w], link.peer, kPsValuesTag);
}

std::unique_ptr<comm::Request> PsShard::post_push_bucket(int w, size_t b) {
  // slots_[w]'s bucket b is free here: a sync round sums it before its
  // link posts again, and async applies it on its own link before that.
  const PsEndpoint& link = config_.workers[w];
  const PsBucket& bucket = config_.plan.buckets[b];
  torch::Tensor part = slots_[w].narrow(0, bucket.offset, bucket.length);
  return link.comm->irecv(part, link.peer, static_cast<uint32_t>(b));
}

std::vector<std::unique_ptr<comm::Request>> PsShard::post_push(int w) {
  std::vector<std::unique_ptr<comm::Request>> requests;
  for (size_t b = 0; b < config_.plan.buckets.size(); ++b)
    requests.push_back(post_push_bucket(w, b));
  return requests;
}

void PsShard::count_step_bytes(int64_t step) {
  if (step >= config_.warmup) {
    std::lock_guard<std::mutex> lock(mu_);
    report_.bytes_in_per_step += static_cast<double>(report_.bytes);
    report_.bytes_out_per_step += static_cast<double>(report_.bytes);
  }
}

void PsShard::step_bucket(size_t b, const torch::Tensor& grad) {
  const PsBucket& bucket = config_.plan.buckets[b];
  bucket_values_[b].mutable_grad() = grad.narrow(0, bucket.offset, bucket.length);
  optimizers_[b]->step();
}

void PsShard::updated() {
  ++version_;
  ++report_.updates;
  if (config_.on_update) config_.on_update(version_);
}

void PsShard::apply(int w, int64_t step) {  // async: this worker's gradient alone
  std::unique_lock<std::mutex> lock(mu_);
  const int64_t stale = version_ - base_[w];
  DLSCALE_ASSERT(!bounded_ || stale <= config_.max_staleness);
  ++report_.staleness_histogram[std::min<int64_t>(stale, kHistogramBins - 1)];
  report_.staleness_max = std::max(report_.staleness_max, stale);
  staleness_sum_ += static_cast<double>(stale);
  in_flight_[w] = false;
  const double start = now_seconds();
  for (size_t b = 0; b < bucket_values_.size(); ++b) step_bucket(b, slots_[w]);
  updated();
  const double end = now_seconds();
  if (step >= config_.warmup) report_.busy_seconds_per_step += end - start;
  report_.apply_intervals.push_back(start);
  report_.apply_intervals.push_back(end);
  if (step + 1 == config_.steps) ++finished_;
  cv_.notify_all();
}

void PsShard::apply_bucket(size_t b, int64_t step) {
  std::unique_lock<std::mutex> lock(mu_);
  if (++bucket_arrived_[b] < workers_) {
    const int64_t round = bucket_rounds_[b];
    wait(
        lock, [&] { return bucket_rounds_[b] != round; }, "the other workers' gradients");
    return;
  }
  // The last worker's bucket b of the round: sum in worker order
  // (deterministic), average, apply.
  const double start = now_seconds();
  const PsBucket& bucket = config_.plan.buckets[b];
  torch::Tensor sum = grad_.narrow(0, bucket.offset, bucket.length);
  sum.copy_(slots_[0].narrow(0, bucket.offset, bucket.length));
  for (int u = 1; u < workers_; ++u) sum.add_(slots_[u].narrow(0, bucket.offset, bucket.length));
  sum.div_(workers_);
  if (measures(step)) measure_bucket(b, sum);
  step_bucket(b, grad_);
  bucket_arrived_[b] = 0;
  ++bucket_rounds_[b];
  if (++buckets_applied_ == bucket_values_.size()) {
    buckets_applied_ = 0;
    report_.staleness_histogram[0] += workers_;  // each worker's gradient, never stale
    updated();
  }
  const double end = now_seconds();
  if (step >= config_.warmup) report_.busy_seconds_per_step += end - start;
  report_.apply_intervals.push_back(start);
  report_.apply_intervals.push_back(end);
  cv_.notify_all();
}

bool PsShard::measures(int64_t step) const {
  return config_.mode == PsMode::kSync && measures_noise(step, config_.noise_every);
}

void PsShard::measure_bucket(size_t b, const torch::Tensor& sum) {
  torch::NoGradGuard no_grad;
  norm_parts_[b] = self_dot(sum).item<double>();
  // Adam's P^2 before this step's update (docs/convergence.md, "The noise
  // scale Adam sees"): the same weights as the workers' hooks take where
  // they hold the state.
  const std::vector<torch::Tensor> p2 =
      adam_preconditioner_squares(*optimizers_[b], {bucket_values_[b]});
  const auto weighted = [&](const torch::Tensor& g) {
    if (p2.empty()) return std::numeric_limits<double>::quiet_NaN();
    return g.square().mul_(p2[0]).sum(torch::kFloat64).item<double>();
  };
  weighted_parts_[b] = weighted(sum);
  const PsBucket& bucket = config_.plan.buckets[b];
  for (int u = 0; u < workers_; ++u)
    own_weighted_parts_[u][b] = weighted(slots_[u].narrow(0, bucket.offset, bucket.length));
}

void PsShard::send_norm(int w) {
  // The round's parts stay until every link has read them: the next round
  // writes part b only once every link, this one too, has reached bucket b
  // of the next step, which this link does after this send.
  std::vector<double> sums(kPsNormValues, 0.0);
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t b = 0; b < norm_parts_.size(); ++b) {
      sums[0] += norm_parts_[b];
      sums[1] += weighted_parts_[b];
      sums[2] += own_weighted_parts_[w][b];
    }
  }
  const torch::Tensor norm = torch::tensor(sums, torch::kFloat64);
  const PsEndpoint& link = config_.workers[w];
  link.comm->send(norm, link.peer, kPsNormTag);
}

torch::Tensor PsShard::encode(const ShardReport& r) {
  std::vector<double> v = {static_cast<double>(r.bytes),
                           r.busy_seconds_per_step,
                           r.bytes_in_per_step,
                           r.bytes_out_per_step,
                           static_cast<double>(r.updates),
                           r.staleness_mean,
                           static_cast<double>(r.staleness_max),
                           static_cast<double>(r.staleness_histogram.size())};
  for (int64_t h : r.staleness_histogram) v.push_back(static_cast<double>(h));
  v.insert(v.end(), r.apply_intervals.begin(), r.apply_intervals.end());
  return torch::tensor(v, torch::kFloat64);
}

ShardReport PsShard::decode(const torch::Tensor& data, int shard) {
  const auto* v = data.data_ptr<double>();
  const int64_t n = data.numel();
  DLSCALE_CHECK(n >= 8, "ps shard {} sent a malformed report ({} values)", shard, n);
  ShardReport r;
  r.shard = shard;
  r.bytes = static_cast<int64_t>(v[0]);
  r.busy_seconds_per_step = v[1];
  r.bytes_in_per_step = v[2];
  r.bytes_out_per_step = v[3];
  r.updates = static_cast<int64_t>(v[4]);
  r.staleness_mean = v[5];
  r.staleness_max = static_cast<int64_t>(v[6]);
  const auto bins = static_cast<int64_t>(v[7]);
  DLSCALE_CHECK(bins >= 0 && 8 + bins <= n && (n - 8 - bins) % 2 == 0,
                "ps shard {} sent a malformed report", shard);
  for (int64_t i = 0; i < bins; ++i) r.staleness_histogram.push_back(static_cast<int64_t>(v[8 + i]));
  r.apply_intervals.assign(v + 8 + bins, v + n);
  return r;
}

}  // namespace dlscale::dp
