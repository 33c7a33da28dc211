#pragma once
// Resolving the train options into a run's configuration: checks against
// the zoo, the data and the devices, and the record's inputs. Defined in the
// LibTorch library (resolve.cpp); train/train_options.h, which the
// torch-free front end includes too, holds only the options and their names.
#include <functional>
#include <nlohmann/json.hpp>
#include <vector>

#include "train/train_options.h"

namespace dlscale::data {
struct OpenedData;
struct DatasetInfo;
}  // namespace dlscale::data

namespace dlscale::train {

/// Validates every field and fills defaults for a job of `world_size`
/// workers, `local_world_size` of them on this node. Throws dlscale::Error
/// with a one-line message naming the bad value and what is allowed. Also
/// checks that output paths can be written, so a long run never ends with a
/// lost result.
ResolvedTrainOptions resolve_train_options(const TrainOptions& options, int world_size = 1,
                                           int local_world_size = 0);

/// How a worker that opened only its own part of the shards learns the other
/// workers' parts: given its own (what it opened), returns every worker's, in
/// rank order. The trainer asks its communicator.
using ExchangeParts = std::function<std::vector<data::DatasetInfo>(const data::DatasetInfo& mine)>;

/// Opens (and stages) the training split and shapes `resolved` by it: the
/// data is opened in each worker, after the options were resolved. With
/// --data-order streaming over several workers, worker `rank` opens only its
/// own shards and `exchange` agrees the parts (classes, smallest part);
/// without `exchange` (a parameter server, which needs only the shapes)
/// every shard is opened.
data::OpenedData open_training_data(ResolvedTrainOptions& resolved, int rank = 0,
                                    const ExchangeParts& exchange = {});

/// With --epochs, sets the steps to epochs × `steps_per_epoch` (the data's
/// global batches per epoch) and re-checks them against --warmup.
void apply_epochs(ResolvedTrainOptions& resolved, int64_t steps_per_epoch);

/// The record's inputs (schema dlscale.train/1): every option of every table
/// under its key, the recipe under "recipe", and what follows from them.
nlohmann::json inputs_json(const ResolvedTrainOptions& config);
/// The inputs every worker must agree on (compared at start).
nlohmann::json agreed_inputs(const ResolvedTrainOptions& config);

}  // namespace dlscale::train
