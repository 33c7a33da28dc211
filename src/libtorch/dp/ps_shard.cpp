#include "libtorch/dp/ps_shard.h"

#include <algorithm>

#include "core/clock.h"
#include "core/error.h"
#include "libtorch/dp/grad_clip.h"

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
  values_ = torch::zeros({m}, torch::kFloat32).set_requires_grad(true);
  grad_ = torch::zeros({m}, torch::kFloat32);
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
    torch::NoGradGuard no_grad;
    torch::Tensor init = values_.detach();
    const PsEndpoint& w0 = config_.workers[0];
    try {
      w0.comm->recv(init, w0.peer, kPsInitTag);
    } catch (const Error& e) {
      throw PeerFailure(fmt::format("ps shard {}: initial values from worker 0: {}",
                                    config_.shard, e.what()));
    }
  }
  optimizer_ = config_.make_optimizer({values_}, nullptr);
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
    // Each push's receives are posted before the values that the push
    // answers go out, so the "ready" notes travel ahead of bulk data
    // (docs/strategies.md, "Both directions of a link").
    std::vector<std::unique_ptr<comm::Request>> push = post_push(w);
    grant(w, false);  // steps >= 1: the first pull is never the last
    for (int64_t step = 0; step < config_.steps; ++step) {
      receive_push(step, push);
      apply(w, step);
      if (measures(step)) send_norm(w);
      const bool last = step + 1 == config_.steps;
      if (!last) push = post_push(w);
      grant(w, last);
    }
  } catch (const std::exception& e) {
    fail(w, e.what());
  }
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

void PsShard::grant(int w, bool last) {
  const PsEndpoint& link = config_.workers[w];
  if (bounded_) {
    torch::Tensor request = torch::zeros({1}, torch::kInt64);
    link.comm->recv(request, link.peer, kPsRequestTag);
  }
  torch::Tensor out = values_.detach();
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (last) {
      wait(lock, [&] { return finished_ == workers_; }, "every worker's last gradient");
    } else if (bounded_) {
      wait(lock, [&] { return gate_open(); }, "the staleness bound to admit this worker");
    }
    base_[w] = version_;
    in_flight_[w] = !last;
    if (config_.mode == PsMode::kAsync) {
      // Other links keep applying while this one sends: send a snapshot.
      snapshots_[w].copy_(out);
      out = snapshots_[w];
    }
  }
  // Sync: nothing writes the values until every worker, this one included,
  // has received them and pushed again.
  link.comm->send(out, link.peer, kPsValuesTag);
}

std::vector<std::unique_ptr<comm::Request>> PsShard::post_push(int w) {
  // slots_[w] is free here: sync rounds sum it before any link's grant, and
  // async applies it on its own link before that link's grant.
  const PsEndpoint& link = config_.workers[w];
  std::vector<std::unique_ptr<comm::Request>> requests;
  for (size_t b = 0; b < config_.plan.buckets.size(); ++b) {
    const PsBucket& bucket = config_.plan.buckets[b];
    torch::Tensor part = slots_[w].narrow(0, bucket.offset, bucket.length);
    requests.push_back(link.comm->irecv(part, link.peer, static_cast<uint32_t>(b)));
  }
  return requests;
}

void PsShard::receive_push(int64_t step, std::vector<std::unique_ptr<comm::Request>>& push) {
  for (auto& r : push) r->wait();
  push.clear();
  if (step >= config_.warmup) {
    std::lock_guard<std::mutex> lock(mu_);
    report_.bytes_in_per_step += static_cast<double>(report_.bytes);
    report_.bytes_out_per_step += static_cast<double>(report_.bytes);
  }
}

void PsShard::step_optimizer(const torch::Tensor& grad) {
  values_.mutable_grad() = grad;
  optimizer_->step();
  ++version_;
  ++report_.updates;
  if (config_.on_update) config_.on_update(version_);
}

void PsShard::apply(int w, int64_t step) {
  std::unique_lock<std::mutex> lock(mu_);
  const int64_t stale = version_ - base_[w];
  DLSCALE_ASSERT(!bounded_ || stale <= config_.max_staleness);
  ++report_.staleness_histogram[std::min<int64_t>(stale, kHistogramBins - 1)];
  report_.staleness_max = std::max(report_.staleness_max, stale);
  staleness_sum_ += static_cast<double>(stale);
  in_flight_[w] = false;
  if (config_.mode == PsMode::kAsync || ++arrived_ == workers_) {
    const double start = now_seconds();
    if (config_.mode == PsMode::kSync) {
      // The last gradient of the round: sum in worker order (deterministic),
      // average, apply once.
      grad_.copy_(slots_[0]);
      for (int u = 1; u < workers_; ++u) grad_.add_(slots_[u]);
      grad_.div_(workers_);
      if (measures(step)) norm_sq_ = self_dot(grad_).item<double>();
      arrived_ = 0;
      ++round_;
    }
    step_optimizer(config_.mode == PsMode::kSync ? grad_ : slots_[w]);
    const double end = now_seconds();
    if (step >= config_.warmup) report_.busy_seconds_per_step += end - start;
    report_.apply_intervals.push_back(start);
    report_.apply_intervals.push_back(end);
  } else {
    const int64_t round = round_;
    wait(lock, [&] { return round_ != round; }, "the other workers' gradients");
  }
  if (step + 1 == config_.steps) ++finished_;
  cv_.notify_all();
}

bool PsShard::measures(int64_t step) const {
  return config_.mode == PsMode::kSync && measures_noise(step, config_.noise_every);
}

void PsShard::send_norm(int w) {
  // The round's norm stays until every link sent it: the next round needs
  // every worker's push, which follows this link's pull.
  torch::Tensor norm;
  {
    std::lock_guard<std::mutex> lock(mu_);
    norm = torch::tensor({norm_sq_}, torch::kFloat64);
  }
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
