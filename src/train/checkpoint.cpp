#include "train/checkpoint.h"

#include <cstring>
#include <sstream>

#include "core/error.h"
#include "core/hash.h"

namespace dlscale::train {

namespace {

constexpr char kMagic[] = "DLSCALE-CHECKPOINT 1\n";
constexpr size_t kMagicSize = sizeof(kMagic) - 1;

void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t get_u64(const std::string& in, size_t at) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(in[at + i]);
  return v;
}

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

/// Splits a checkpoint into its four sections; throws when framing or checksum are wrong.
std::vector<std::string> sections(const std::string& bytes, const std::string& name) {
  DLSCALE_CHECK(bytes.size() >= kMagicSize + 8 && bytes.compare(0, kMagicSize, kMagic) == 0,
                "{} is not a dlscale checkpoint (no 'DLSCALE-CHECKPOINT 1' header)", name);
  const size_t body = bytes.size() - 8;
  DLSCALE_CHECK(fnv1a(bytes.data(), body) == get_u64(bytes, body),
                "checkpoint {} is damaged (checksum mismatch): it was truncated or altered", name);
  std::vector<std::string> parts;
  size_t at = kMagicSize;
  for (int i = 0; i < 4; ++i) {
    DLSCALE_CHECK(at + 8 <= body, "checkpoint {} is damaged (section {} missing)", name, i);
    const uint64_t n = get_u64(bytes, at);
    at += 8;
    DLSCALE_CHECK(n <= body - at, "checkpoint {} is damaged (section {} overruns the file)", name,
                  i);
    parts.push_back(bytes.substr(at, n));
    at += n;
  }
  DLSCALE_CHECK(at == body, "checkpoint {} is damaged (trailing bytes)", name);
  return parts;
}

}  // namespace

std::string encode_checkpoint(const CheckpointState& state) {
  std::string out(kMagic, kMagicSize);
  auto add = [&out](const std::string& part) {
    put_u64(out, part.size());
    out += part;
  };
  add(state.meta.dump());
  add(tensors_bytes(state.tensors));
  add(state.optimizer);
  add(tensors_bytes(state.rng));
  put_u64(out, fnv1a(out.data(), out.size()));
  return out;
}

CheckpointState decode_checkpoint(const std::string& bytes, const std::string& name) {
  const std::vector<std::string> parts = sections(bytes, name);
  CheckpointState state;
  try {
    state.meta = nlohmann::json::parse(parts[0]);
    state.tensors = bytes_tensors(parts[1]);
    state.optimizer = parts[2];
    state.rng = bytes_tensors(parts[3]);
  } catch (const std::exception& e) {
    throw Error(fmt::format("checkpoint {} is damaged: {}", name,
                            std::string(e.what()).substr(0, std::string(e.what()).find('\n'))));
  }
  DLSCALE_CHECK(state.meta.is_object(), "checkpoint {} is damaged (metadata is not an object)",
                name);
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
