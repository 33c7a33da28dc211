#include "libtorch/train/checkpoint.h"

#include <cstring>
#include <sstream>

#include "core/text.h"
#include "core/error.h"

namespace dlscale::train {

namespace {

std::string tensors_bytes(const std::vector<torch::Tensor>& tensors) {
  std::ostringstream out;
  torch::save(tensors, out);
  return out.str();
}

std::vector<torch::Tensor> bytes_tensors(const std::string& bytes) {
  std::vector<torch::Tensor> tensors;
  std::istringstream in(bytes);
  torch::load(tensors, in);
  return tensors;
}

}  // namespace

std::string encode_checkpoint(const CheckpointState& state) {
  return frame_checkpoint({dump_json(to_json(state.meta)), tensors_bytes(state.tensors),
                           state.optimizer, tensors_bytes(state.rng)});
}

CheckpointState decode_checkpoint(const std::string& bytes, const std::string& name) {
  const std::vector<std::string> parts = checkpoint_sections(bytes, name);
  nlohmann::json meta;
  try {
    meta = nlohmann::json::parse(parts[0]);
  } catch (const nlohmann::json::exception&) {
    throw Error(fmt::format("checkpoint {} is damaged: metadata is not JSON", name));
  }
  CheckpointState state;
  state.meta = parse_checkpoint_meta(meta, name);
  try {
    state.tensors = bytes_tensors(parts[1]);
    state.optimizer = parts[2];
    state.rng = bytes_tensors(parts[3]);
  } catch (const std::exception& e) {
    const std::string what = e.what();
    throw Error(fmt::format("checkpoint {} is damaged: its tensors cannot be read: {}", name,
                            what.substr(0, what.find('\n'))));
  }
  return state;
}

std::string save_optimizer(const torch::optim::Optimizer& optimizer) {
  torch::serialize::OutputArchive archive;
  optimizer.save(archive);
  std::ostringstream out;
  archive.save_to(out);
  return out.str();
}

void load_optimizer(torch::optim::Optimizer& optimizer, const std::string& bytes) {
  torch::serialize::InputArchive archive;
  std::istringstream in(bytes);
  archive.load_from(in);
  optimizer.load(archive);
}

std::string checkpoint_file(const std::string& pattern, int64_t step) {
  static const std::string kStep = "{step}";
  std::string out;
  size_t from = 0;
  for (size_t at = pattern.find(kStep); at != std::string::npos; at = pattern.find(kStep, from)) {
    out.append(pattern, from, at - from).append(std::to_string(step));
    from = at + kStep.size();
  }
  return out.append(pattern, from, std::string::npos);
}

}  // namespace dlscale::train
