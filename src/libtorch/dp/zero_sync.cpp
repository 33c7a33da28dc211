#include "libtorch/dp/zero_sync.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <utility>

#include "core/clock.h"
#include "core/error.h"
#include "libtorch/dp/bucketed_sync.h"
#include "libtorch/dp/zero_gatherer.h"

namespace dlscale::dp {

namespace {

class ZeroSync : public BucketedSync, public models::UnitObserver {
 public:
  ZeroSync(std::vector<torch::Tensor> params, comm::Communicator& comm, const SyncOptions& options,
           const SyncContext& context)
      : BucketedSync(params, comm, options,
                     options.zero_unit == ZeroUnit::kBlock
                         ? unit_layout(context.units, params.size(), comm.size())
                         : Layout{comm.size(), /*keep_buffers=*/options.zero_stage == 1, {},
                                  kAlignedSlot}),
        comm_(comm),
        stage_(options.zero_stage) {
    shard_parameters();
    held_.assign(flat_params_.size(), Held::kWhole);
    segments_.tensors = static_cast<int64_t>(this->params().size());
    segments_.sum_over_workers = [this](torch::Tensor& t) {
      comm_.allreduce(t, comm::ReduceOp::kSum);
    };
    optimizer_ = context.make_optimizer(segments_of_tensors_, &segments_);
    if (options.zero_unit == ZeroUnit::kBlock) by_units(context);
    describe(options);
  }
  ~ZeroSync() override {
    if (observe_) observe_(nullptr);
    stop_comm_thread();
    gatherer_.reset();
  }

  void apply_update(torch::optim::Optimizer& trainer_optimizer) override;
  /// The norm's square summed over this worker's pieces, then over the
  /// workers (two floats a worker in one small allreduce); each scales its
  /// own pieces.
  double clip_gradients(const std::vector<torch::Tensor>& /*params*/, double max_norm) override {
    std::vector<torch::Tensor> grads;
    for (const auto& piece : segments_of_tensors_) grads.push_back(piece.grad());
    return clip_grad_norm(grads, max_norm, [this](double local) {
      return sum_doubles_over_workers(local, comm_.rank(), comm_.size(), segments_.sum_over_workers);
    });
  }
  /// Over this worker's pieces of the averaged gradient, then the workers.
  double averaged_gradient_sq_norm(const std::vector<torch::Tensor>& /*params*/) override {
    std::vector<torch::Tensor> grads;
    for (const auto& piece : segments_of_tensors_) grads.push_back(piece.grad());
    return squared_norm(
        grads,
        [this](double local) {
          return sum_doubles_over_workers(local, comm_.rank(), comm_.size(),
                                          segments_.sum_over_workers);
        },
        false);
  }
  /// --zero-unit block: this step's forward gathers unit by unit.
  void begin_step() override { stepping_ = gatherer_ != nullptr; }
  /// Stage 3: gathers the parameters freed after the last backward (in a
  /// step unit by unit: only those outside the units now).
  void need_parameters() override;
  void before_unit(size_t unit) override;
  void after_unit(size_t unit, const torch::Tensor& output) override;
  HeldBytes held_bytes() const override;
  const torch::optim::Optimizer* own_optimizer() const override { return optimizer_.get(); }
  std::vector<torch::Tensor> own_parameters() const override { return segments_of_tensors_; }
  /// Each piece into its place in this rank's chunk of a bucket-sized buffer,
  /// all-gathered, each slot viewed as its parameter (the model's size, for now).
  std::vector<torch::Tensor> assemble_pieces(const std::vector<torch::Tensor>& pieces) override;
  StrategyReport report() override;

 protected:
  void reduce_bucket(Bucket& bucket, uint32_t tag) override;
  /// --zero-unit block: a unit's backward is done, its parameters go.
  void bucket_complete(Bucket& bucket) override;
  /// The full gradients were packed into buckets: autograd's copies go;
  /// stage 3 frees the whole parameters too.
  void finish_backward() override;

 private:
  /// --zero-unit block: one bucket per unit, the last unit's first (gradients
  /// arrive in about reverse order), then one of every other parameter.
  static Layout unit_layout(const std::vector<std::vector<size_t>>& units, size_t params, int p) {
    Layout layout{p, /*keep_buffers=*/false, {}, kAlignedSlot};
    std::vector<bool> in_unit(params, false);
    for (size_t u = units.size(); u-- > 0;) {
      if (units[u].empty()) continue;
      layout.groups.emplace_back(units[u].rbegin(), units[u].rend());
      for (size_t k : units[u]) in_unit[k] = true;
    }
    std::vector<size_t> rest;
    for (size_t k = params; k-- > 0;) {
      if (!in_unit[k]) rest.push_back(k);
    }
    if (!rest.empty()) layout.groups.push_back(std::move(rest));
    return layout;
  }

  /// Where a bucket's whole parameters are (stage 3).
  enum class Held { kFreed, kQueued, kWhole };
  /// --zero-unit block: maps the units to their buckets, starts the gatherer
  /// and listens to the model.
  void by_units(const SyncContext& context);
  /// Starts gathering bucket `b`'s parameters unless they are whole or on
  /// their way (on the gatherer, or here without one).
  void request(size_t b);
  /// Bucket `b`'s parameters, whole: gathered here, or waited for.
  void await(size_t b);
  /// Frees bucket `b`'s whole parameters (its shard stays).
  void release(size_t b);
  /// The bucket of the first unit from `unit` on (step +1) or back (-1)
  /// that has parameters; -1 if none.
  int next_unit_bucket(int64_t unit, int step) const;
  void before_unit_backward(size_t unit);

  int64_t chunk(const Bucket& bucket) const { return bucket.elements / comm_.size(); }
  /// The buckets' elements that belong to no parameter: the gaps that align
  /// each slot (kAlignedSlot) and each bucket's tail (a multiple of p).
  int64_t padding_elements() const {
    int64_t padding = 0;
    for (const Bucket& b : buckets()) {
      padding += b.elements;
      for (size_t k : b.params) padding -= params()[k].numel();
    }
    return padding;
  }
  void shard_parameters();
  /// The optimizer's pieces of bucket `index`'s tensors in this rank's chunk,
  /// whose values are `values` and reduced gradients `grads`.
  void add_segments(size_t index, const torch::Tensor& values, const torch::Tensor& grads);
  void describe(const SyncOptions& options);

  comm::Communicator& comm_;
  const int stage_;
  std::vector<torch::Tensor> flat_params_;  // per bucket: every parameter of it, padded
  // Per bucket, this rank's chunk: of flat_params_ (stages 1-2), or a
  // tensor of its own that outlives the freed flat_params_ (stage 3).
  std::vector<torch::Tensor> shards_;
  std::vector<torch::Tensor> shard_grads_;  // stages 2-3, per bucket: the reduced chunk
  std::vector<Held> held_;                  // per bucket (stages 1-2: always whole)
  // --zero-unit block:
  std::vector<int> bucket_of_unit_;          // per unit: its bucket; -1: it has no parameters
  std::vector<bool> unit_bucket_;            // per bucket: a unit's (freed after its backward)
  std::unique_ptr<Gatherer> gatherer_;
  std::function<void(models::UnitObserver*)> observe_;
  bool stepping_ = false;                    // inside a step: gather unit by unit
  double gather_wait_seconds_ = 0;           // exposed: waiting for the gatherer
  // The optimizer's parameters: the pieces of the model's tensors inside
  // this rank's chunks, and which tensor each is a piece of.
  std::vector<torch::Tensor> segments_of_tensors_;
  std::vector<std::pair<size_t, int64_t>> segment_places_;  // per piece: bucket, start in my chunk
  TensorSegments segments_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  double gather_seconds_ = 0;
  int64_t updates_ = 0;
};

void ZeroSync::shard_parameters() {
  torch::NoGradGuard no_grad;
  const int rank = comm_.rank();
  for (Bucket& bucket : buckets()) {
    const torch::Tensor& first = params()[bucket.params.front()];
    torch::Tensor flat = torch::zeros({bucket.elements}, first.options());
    for (size_t k : bucket.params) {
      const torch::Tensor& p = params()[k];
      // Same strides as the parameter (channels-last weights included).
      torch::Tensor slot =
          flat.narrow(0, slot_offset(k), p.numel()).as_strided(p.sizes(), p.strides());
      slot.copy_(p);
      p.set_data(slot);
    }
    const int64_t n = chunk(bucket);
    torch::Tensor grads;  // the chunk's reduced gradients
    if (stage_ == 1) {
      grads = bucket.buffer.narrow(0, rank * n, n);
    } else {
      shard_grads_.push_back(torch::zeros({n}, flat.options()));
      grads = shard_grads_.back();
    }
    torch::Tensor shard = flat.narrow(0, rank * n, n);
    if (stage_ == 3) shard = shard.clone();
    add_segments(flat_params_.size(), shard, grads);
    flat_params_.push_back(flat);
    shards_.push_back(shard);
  }
}

void ZeroSync::add_segments(size_t index, const torch::Tensor& values, const torch::Tensor& grads) {
  const Bucket& bucket = buckets()[index];
  const int64_t n = chunk(bucket);
  const int64_t lo = comm_.rank() * n, hi = lo + n;
  for (size_t k : bucket.params) {
    const torch::Tensor& p = params()[k];
    const int64_t a = std::max(lo, slot_offset(k)), b = std::min(hi, slot_offset(k) + p.numel());
    if (a >= b) continue;
    // A weight's piece is [1, len], a bias's [len]: the optimizer's
    // bias-and-norm group (tensors of at most one dimension) stays right.
    const std::vector<int64_t> shape =
        p.dim() >= 2 ? std::vector<int64_t>{1, b - a} : std::vector<int64_t>{b - a};
    torch::Tensor segment = values.narrow(0, a - lo, b - a).detach().view(shape);
    segment.mutable_grad() = grads.narrow(0, a - lo, b - a).view(shape);
    segments_of_tensors_.push_back(segment);
    segments_.tensor_of.push_back(static_cast<int64_t>(k));
    segment_places_.push_back({index, a - lo});
  }
}

std::vector<torch::Tensor> ZeroSync::assemble_pieces(const std::vector<torch::Tensor>& pieces) {
  DLSCALE_ASSERT(pieces.size() == segments_of_tensors_.size());
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> flats;  // per bucket, this rank's pieces in its chunk
  for (size_t b = 0; b < buckets().size(); ++b)
    flats.push_back(torch::zeros({buckets()[b].elements}, flat_params_[b].options()));
  for (size_t i = 0; i < pieces.size(); ++i) {
    const auto [b, start] = segment_places_[i];
    const int64_t at = comm_.rank() * chunk(buckets()[b]) + start;
    flats[b].narrow(0, at, pieces[i].numel()).copy_(pieces[i].reshape({-1}));
  }
  std::vector<torch::Tensor> whole(params().size());
  for (size_t b = 0; b < buckets().size(); ++b) {
    const int64_t n = chunk(buckets()[b]);
    comm_.allgather_into(flats[b].narrow(0, comm_.rank() * n, n), flats[b]);
    for (size_t k : buckets()[b].params) {
      const torch::Tensor& p = params()[k];
      whole[k] = flats[b].narrow(0, slot_offset(k), p.numel()).as_strided(p.sizes(), p.strides());
    }
  }
  return whole;
}

void ZeroSync::describe(const SyncOptions& options) {
  const int p = comm_.size();
  info_.strategy = "zero";
  info_.layout = options.bucket_mb > 0 ? "bucketed" : "flat";
  // Each bucket: a reduce-scatter of its gradients in the wire type, an
  // all-gather of its float32 parameters.
  // --zero-unit block gathers a unit's parameters twice a step (before its
  // forward and before its backward), the rest of the model once.
  for (size_t b = 0; b < buckets().size(); ++b) {
    const double params_bytes = static_cast<double>(flat_params_[b].numel()) * 4;
    const double gathers = !unit_bucket_.empty() && unit_bucket_[b] ? 2.0 : 1.0;
    info_.formula_bytes_sent +=
        (p - 1.0) / p * (static_cast<double>(info_.bucket_bytes[b]) + gathers * params_bytes);
  }
  info_.formula = unit_bucket_.empty() ? "(p-1)/p*S + (p-1)/p*S_params"
                                       : "(p-1)/p*S + (p-1)/p*(2*S_units + S_rest)";
  // The collectives timed during backward are the reduce-scatters.
  info_.bus_factor = (p - 1.0) / p;
  info_.header = {fmt::format(
      "zero: stage {}, {} bucket(s) split into {} shards ({} padding element(s): slots aligned to {} "
      "bytes, buckets to a multiple of {})",
      stage_, buckets().size(), p, padding_elements(), kAlignedSlot * 4, p)};
  if (!unit_bucket_.empty()) {
    const auto units = std::count(unit_bucket_.begin(), unit_bucket_.end(), true);
    info_.header.push_back(fmt::format(
        "zero: --zero-unit block: {} unit(s) gathered one at a time (the next prefetched), the rest "
        "of the model ({} bucket) for the whole step",
        units, static_cast<int64_t>(unit_bucket_.size()) - units));
  }
}

void ZeroSync::reduce_bucket(Bucket& bucket, uint32_t /*tag*/) {
  const size_t b = static_cast<size_t>(bucket.timing.bucket);
  const int64_t n = chunk(bucket);
  torch::Tensor input = bucket.buffer;
  if (wire_dtype() != torch::kFloat32) {
    // Stage 1 keeps a wire copy; stages 2-3 make one for this reduction only.
    input =
        bucket.wire.defined() ? bucket.wire.copy_(bucket.buffer) : bucket.buffer.to(wire_dtype());
  }
  torch::Tensor reduced = torch::empty({n}, input.options());
  comm_.reduce_scatter(input, reduced, comm::ReduceOp::kSum);
  if (stage_ == 1) {
    bucket.buffer.narrow(0, comm_.rank() * n, n).copy_(reduced);
  } else {
    shard_grads_[b].copy_(reduced);
    release_buffer(bucket);
  }
}

void ZeroSync::apply_update(torch::optim::Optimizer& trainer_optimizer) {
  // The trainer sets the rate on its own optimizer (schedules, warm-up).
  const double lr = trainer_optimizer.param_groups().front().options().get_lr();
  for (auto& group : optimizer_->param_groups()) group.options().set_lr(lr);
  optimizer_->step();
  ++updates_;
  if (stage_ == 3) return;  // gathered when next needed (need_parameters)
  const double start = now_seconds();
  for (size_t b = 0; b < flat_params_.size(); ++b)
    comm_.allgather_into(shards_[b], flat_params_[b]);
  gather_seconds_ += now_seconds() - start;
}

namespace {

/// Frees `t`'s memory while `t`, its views and autograd's saved references
/// keep pointing at its storage (FSDP's way); grow_storage() gives it
/// memory again, which they then all see.
void free_storage(const torch::Tensor& t) {
  const c10::Storage storage = t.storage();
  storage.set_data_ptr_noswap(storage.allocator()->allocate(0));
  storage.set_nbytes(0);
}

void grow_storage(const torch::Tensor& t) {
  const c10::Storage storage = t.storage();
  const size_t bytes = static_cast<size_t>(t.numel()) * t.element_size();
  storage.set_data_ptr_noswap(storage.allocator()->allocate(bytes));
  storage.set_nbytes(bytes);
}

}  // namespace

void ZeroSync::by_units(const SyncContext& context) {
  DLSCALE_ASSERT(stage_ == 3);  // check_sync_options refused any other stage
  DLSCALE_CHECK(std::any_of(context.units.begin(), context.units.end(),
                            [](const std::vector<size_t>& u) { return !u.empty(); }),
                "--zero-unit block needs a model that declares units (the ResNets' residual blocks, "
                "the Transformers' layers); this model has none: use --zero-unit model");
  DLSCALE_CHECK(context.observe_units != nullptr, "--zero-unit block: the model cannot report its units");
  // unit_layout() made one bucket of each unit with parameters.
  unit_bucket_.assign(buckets().size(), false);
  bucket_of_unit_.assign(context.units.size(), -1);
  for (size_t u = 0; u < context.units.size(); ++u) {
    if (context.units[u].empty()) continue;
    const size_t b = bucket_of(context.units[u].front());
    bucket_of_unit_[u] = static_cast<int>(b);
    unit_bucket_[b] = true;
  }
  gatherer_ = std::make_unique<Gatherer>(comm_.split(0, comm_.rank()),
                                         [this](comm::Communicator& c, size_t bucket) {
                                           c.allgather_into(shards_[bucket], flat_params_[bucket]);
                                         });
  observe_ = context.observe_units;
  observe_(this);
}

void ZeroSync::request(size_t b) {
  if (held_[b] != Held::kFreed) return;
  grow_storage(flat_params_[b]);
  if (gatherer_) {
    held_[b] = Held::kQueued;
    gatherer_->enqueue(b);
    return;
  }
  const double start = now_seconds();
  comm_.allgather_into(shards_[b], flat_params_[b]);
  gather_seconds_ += now_seconds() - start;
  held_[b] = Held::kWhole;
}

void ZeroSync::await(size_t b) {
  request(b);
  if (held_[b] != Held::kQueued) return;
  const double start = now_seconds();
  gatherer_->wait(b);
  gather_wait_seconds_ += now_seconds() - start;
  held_[b] = Held::kWhole;
}

void ZeroSync::release(size_t b) {
  if (held_[b] == Held::kQueued) await(b);  // a gather in flight writes into it
  if (held_[b] == Held::kWhole) free_storage(flat_params_[b]);
  held_[b] = Held::kFreed;
}

int ZeroSync::next_unit_bucket(int64_t unit, int step) const {
  for (int64_t u = unit; u >= 0 && u < static_cast<int64_t>(bucket_of_unit_.size()); u += step) {
    if (bucket_of_unit_[u] >= 0) return bucket_of_unit_[u];
  }
  return -1;
}

void ZeroSync::need_parameters() {
  if (stage_ != 3) return;
  if (stepping_) {
    // A step's forward: the parameters outside the units now, and the first
    // unit's on their way; the units gather themselves (before_unit).
    for (size_t b = 0; b < held_.size(); ++b) {
      if (!unit_bucket_[b]) request(b);
    }
    if (const int first = next_unit_bucket(0, +1); first >= 0) request(static_cast<size_t>(first));
    for (size_t b = 0; b < held_.size(); ++b) {
      if (!unit_bucket_[b]) await(b);
    }
    return;
  }
  for (size_t b = 0; b < held_.size(); ++b) request(b);
  for (size_t b = 0; b < held_.size(); ++b) await(b);
}

void ZeroSync::before_unit(size_t unit) {
  if (!stepping_) return;  // an evaluation or the end of the run: the model is whole
  const int b = bucket_of_unit_.at(unit);
  if (b < 0) return;
  await(static_cast<size_t>(b));
  if (const int next = next_unit_bucket(static_cast<int64_t>(unit) + 1, +1); next >= 0) {
    request(static_cast<size_t>(next));  // prefetch: gathered while this unit computes
  }
}

void ZeroSync::after_unit(size_t unit, const torch::Tensor& output) {
  if (!stepping_ || !torch::GradMode::is_enabled()) return;
  const int b = bucket_of_unit_.at(unit);
  if (b < 0) return;
  // Autograd keeps its references to the parameters; their memory goes
  // until the unit's backward, whose first gradient is the output's.
  release(static_cast<size_t>(b));
  if (output.requires_grad()) {
    output.register_hook([this, unit](const torch::Tensor&) { before_unit_backward(unit); });
  }
}

void ZeroSync::before_unit_backward(size_t unit) {
  await(static_cast<size_t>(bucket_of_unit_[unit]));
  if (const int previous = next_unit_bucket(static_cast<int64_t>(unit) - 1, -1); previous >= 0) {
    request(static_cast<size_t>(previous));
  }
}

void ZeroSync::bucket_complete(Bucket& bucket) {
  const size_t b = static_cast<size_t>(bucket.timing.bucket);
  if (stepping_ && unit_bucket_[b]) release(b);
}

void ZeroSync::finish_backward() {
  for (const auto& p : params()) p.mutable_grad() = torch::Tensor();
  stepping_ = false;
  if (stage_ != 3) return;
  for (size_t b = 0; b < held_.size(); ++b) release(b);
}

HeldBytes ZeroSync::held_bytes() const {
  HeldBytes held;
  held.params = 0;
  // Between steps: the whole buffers (stages 1-2) or this rank's chunks (3).
  for (const auto& f : stage_ == 3 ? shards_ : flat_params_) {
    held.params += f.numel() * static_cast<int64_t>(f.element_size());
  }
  if (stage_ == 1) {
    held.grads = BucketedSync::held_bytes().grads;
  } else {
    held.grads = 0;
    for (const auto& g : shard_grads_)
      held.grads += g.numel() * static_cast<int64_t>(g.element_size());
  }
  return held;
}

StrategyReport ZeroSync::report() {
  StrategyReport r;
  r.key = "zero";
  int64_t shard_elements = 0;
  for (const auto& s : shards_) shard_elements += s.numel();
  const double steps = static_cast<double>(std::max<int64_t>(updates_, 1));
  // Unit by unit, the gathers run on the gatherer's thread: their time, and
  // how long the step waited for them (the rest overlapped compute).
  const double busy = gatherer_ ? gatherer_->busy_seconds() : gather_seconds_;
  r.section = {{"stage", stage_},
               {"shards", comm_.size()},
               {"shard_elements", shard_elements},
               {"parameter_tensors", params().size()},
               {"padding_elements", padding_elements()},
               {"unit", gatherer_ ? "block" : "model"},
               {"allgather_seconds_per_step", busy / steps}};
  if (gatherer_) {
    r.section["units"] = std::count(unit_bucket_.begin(), unit_bucket_.end(), true);
    r.section["allgather_wait_seconds_per_step"] = gather_wait_seconds_ / steps;
  }
  r.summary = {fmt::format(
      "zero: stage {}, {} parameter element(s) per shard; all-gather {:.2f} ms per step{}",
      stage_, shard_elements, 1e3 * busy / steps,
      gatherer_ ? fmt::format(" on its own thread, of which the step waited {:.2f} ms",
                              1e3 * gather_wait_seconds_ / steps)
                : stage_ == 3 ? " (in the forward phase)" : " (in the optimizer phase)")};
  return r;
}

}  // namespace

std::unique_ptr<GradientSync> make_zero_sync(std::vector<torch::Tensor> params,
                                             comm::Communicator& comm, const SyncOptions& options,
                                             const SyncContext& context) {
  DLSCALE_CHECK(comm.size() >= 2, "--strategy zero shards over at least 2 workers (got {})",
                comm.size());
  return std::make_unique<ZeroSync>(std::move(params), comm, options, context);
}

}  // namespace dlscale::dp
