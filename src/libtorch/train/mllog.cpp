#include "libtorch/train/mllog.h"

#include <cerrno>
#include <cstring>

#include "core/text.h"
#include "core/clock.h"
#include "core/error.h"

namespace dlscale::train {

Mllog::Mllog(const std::string& path) : path_(path) {
  file_ = std::fopen(path.c_str(), "w");
  DLSCALE_CHECK(file_ != nullptr, "cannot write --mllog {}: {}", path, std::strerror(errno));
}

Mllog::~Mllog() {
  if (file_ != nullptr) std::fclose(file_);
}

std::string Mllog::line(int64_t time_ms, const std::string& event_type, const std::string& key,
                        const nlohmann::json& value, const nlohmann::json& metadata) {
  nlohmann::ordered_json j;
  j["namespace"] = "";
  j["time_ms"] = time_ms;
  j["event_type"] = event_type;
  j["key"] = key;
  j["value"] = value;
  j["metadata"] = metadata;
  return ":::MLLOG " + dump_json(j);
}

void Mllog::write(const std::string& event_type, const std::string& key,
                  const nlohmann::json& value, const nlohmann::json& metadata, int64_t at_ms) {
  const std::string text =
      line(at_ms >= 0 ? at_ms : wall_ms_at(), event_type, key, value, metadata) + "\n";
  const bool ok = std::fwrite(text.data(), 1, text.size(), file_) == text.size() &&
                  std::fflush(file_) == 0;
  if (!ok) throw_write_error(path_, errno);
}

void Mllog::point(const std::string& key, const nlohmann::json& value,
                  const nlohmann::json& metadata) {
  write("POINT", key, value, metadata);
}

void Mllog::start(const std::string& key, const nlohmann::json& metadata, int64_t at_ms) {
  write("INTERVAL_START", key, nullptr, metadata, at_ms);
}

void Mllog::end(const std::string& key, const nlohmann::json& metadata) {
  write("INTERVAL_END", key, nullptr, metadata);
}

}  // namespace dlscale::train
