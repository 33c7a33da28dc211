#include "dp/zero_sync.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/clock.h"
#include "core/error.h"
#include "dp/bucketed_sync.h"

namespace dlscale::dp {

namespace {

class ZeroSync : public BucketedSync {
 public:
  ZeroSync(std::vector<torch::Tensor> params, comm::Communicator& comm, const SyncOptions& options,
           const OptimizerFactory& make_optimizer)
      : BucketedSync(std::move(params), comm, options,
                     Layout{comm.size(), /*keep_buffers=*/options.zero_stage == 1}),
        comm_(comm),
        stage_(options.zero_stage) {
    shard_parameters();
    segments_.tensors = static_cast<int64_t>(this->params().size());
    segments_.sum_over_workers = [this](torch::Tensor& t) {
      comm_.allreduce(t, comm::ReduceOp::kSum);
    };
    optimizer_ = make_optimizer(segments_of_tensors_, &segments_);
    describe(options);
  }
  ~ZeroSync() override { stop_comm_thread(); }

  void apply_update(torch::optim::Optimizer& trainer_optimizer) override;
  /// Stage 3: gathers the parameters freed after the last backward.
  void need_parameters() override;
  HeldBytes held_bytes() const override;
  const torch::optim::Optimizer* own_optimizer() const override { return optimizer_.get(); }
  StrategyReport report() override;

 protected:
  void reduce_bucket(Bucket& bucket, uint32_t tag) override;
  /// The full gradients were packed into buckets: autograd's copies go;
  /// stage 3 frees the whole parameters too.
  void finish_backward() override;

 private:
  int64_t chunk(const Bucket& bucket) const { return bucket.elements / comm_.size(); }
  void shard_parameters();
  /// The optimizer's pieces of `bucket`'s tensors in this rank's chunk,
  /// whose values are `values` and reduced gradients `grads`.
  void add_segments(const Bucket& bucket, const torch::Tensor& values, const torch::Tensor& grads);
  void describe(const SyncOptions& options);

  comm::Communicator& comm_;
  const int stage_;
  std::vector<torch::Tensor> flat_params_;  // per bucket: every parameter of it, padded
  // Per bucket, this rank's chunk: of flat_params_ (stages 1-2), or a
  // tensor of its own that outlives the freed flat_params_ (stage 3).
  std::vector<torch::Tensor> shards_;
  std::vector<torch::Tensor> shard_grads_;  // stages 2-3, per bucket: the reduced chunk
  bool whole_ = true;                       // stage 3: flat_params_ hold the current parameters
  // The optimizer's parameters: the pieces of the model's tensors inside
  // this rank's chunks, and which tensor each is a piece of.
  std::vector<torch::Tensor> segments_of_tensors_;
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
    add_segments(bucket, shard, grads);
    flat_params_.push_back(flat);
    shards_.push_back(shard);
  }
}

void ZeroSync::add_segments(const Bucket& bucket, const torch::Tensor& values,
                            const torch::Tensor& grads) {
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
  }
}

void ZeroSync::describe(const SyncOptions& options) {
  const int p = comm_.size();
  info_.strategy = "zero";
  info_.layout = options.bucket_mb > 0 ? "bucketed" : "flat";
  // Each bucket: a reduce-scatter of its gradients in the wire type, an
  // all-gather of its float32 parameters.
  for (size_t b = 0; b < buckets().size(); ++b) {
    const double params_bytes = static_cast<double>(flat_params_[b].numel()) * 4;
    info_.formula_bytes_sent +=
        (p - 1.0) / p * (static_cast<double>(info_.bucket_bytes[b]) + params_bytes);
  }
  info_.formula = "(p-1)/p*S + (p-1)/p*S_params";
  // The collectives timed during backward are the reduce-scatters.
  info_.bus_factor = (p - 1.0) / p;
  int64_t padding = 0;
  for (const Bucket& b : buckets()) {
    int64_t used = 0;
    for (size_t k : b.params) used += params()[k].numel();
    padding += b.elements - used;
  }
  info_.header = {
      fmt::format("zero: stage {}, {} bucket(s) split into {} shards ({} padding element(s))",
                  stage_, buckets().size(), p, padding)};
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

void ZeroSync::need_parameters() {
  if (whole_) return;
  const double start = now_seconds();
  for (size_t b = 0; b < flat_params_.size(); ++b) {
    grow_storage(flat_params_[b]);
    comm_.allgather_into(shards_[b], flat_params_[b]);
  }
  gather_seconds_ += now_seconds() - start;
  whole_ = true;
}

void ZeroSync::finish_backward() {
  for (const auto& p : params()) p.mutable_grad() = torch::Tensor();
  if (stage_ != 3) return;
  for (const auto& flat : flat_params_) free_storage(flat);
  whole_ = false;
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
  r.section = {{"stage", stage_},
               {"shards", comm_.size()},
               {"shard_elements", shard_elements},
               {"allgather_seconds_per_step",
                updates_ > 0 ? gather_seconds_ / static_cast<double>(updates_) : 0.0}};
  r.summary = {
      fmt::format("zero: stage {}, {} parameter element(s) per shard; all-gather {:.2f} ms "
                  "per step (in the {} phase)",
                  stage_, shard_elements,
                  updates_ > 0 ? 1e3 * gather_seconds_ / static_cast<double>(updates_) : 0.0,
                  stage_ == 3 ? "forward" : "optimizer")};
  return r;
}

}  // namespace

std::unique_ptr<GradientSync> make_zero_sync(std::vector<torch::Tensor> params,
                                             comm::Communicator& comm, const SyncOptions& options,
                                             const OptimizerFactory& make_optimizer) {
  DLSCALE_CHECK(comm.size() >= 2, "--strategy zero shards over at least 2 workers (got {})",
                comm.size());
  return std::make_unique<ZeroSync>(std::move(params), comm, options, make_optimizer);
}

}  // namespace dlscale::dp
