#pragma once
// MLPerf Training-style logging (docs/mllog.md): one line per event,
//   :::MLLOG {"namespace": "", "time_ms": T, "event_type": "POINT", "key": K,
//             "value": V, "metadata": {...}}
// written by rank 0 only, each line whole and flushed as it happens, so a
// killed run leaves a log of every event up to its death.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>

namespace dlscale::train {

class Mllog {
 public:
  /// Creates (truncates) `path`; throws dlscale::Error when it cannot.
  explicit Mllog(const std::string& path);
  ~Mllog();
  Mllog(const Mllog&) = delete;
  Mllog& operator=(const Mllog&) = delete;

  void point(const std::string& key, const nlohmann::json& value,
             const nlohmann::json& metadata = nlohmann::json::object());
  /// `at_ms` ≥ 0: the event's time (ms since the Unix epoch) instead of now.
  void start(const std::string& key, const nlohmann::json& metadata = nlohmann::json::object(),
             int64_t at_ms = -1);
  void end(const std::string& key, const nlohmann::json& metadata = nlohmann::json::object());

  /// The text of one line (without the newline), for tests and docs.
  static std::string line(int64_t time_ms, const std::string& event_type, const std::string& key,
                          const nlohmann::json& value, const nlohmann::json& metadata);

 private:
  void write(const std::string& event_type, const std::string& key, const nlohmann::json& value,
             const nlohmann::json& metadata, int64_t at_ms = -1);
  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace dlscale::train
