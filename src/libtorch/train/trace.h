#pragma once
// Chrome-trace (chrome://tracing, Perfetto) recording: complete events on
// per-rank tracks ("compute", "comm"). Thread-safe.
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace dlscale::train {

class Tracer {
 public:
  /// `origin` is the monotonic time (seconds) that becomes t = 0.
  Tracer(int rank, double origin) : rank_(rank), origin_(origin) {}
  /// Records [start, end] (monotonic seconds) named `name` on `track`.
  void add(const std::string& name, const std::string& track, double start, double end,
           nlohmann::json args = nlohmann::json::object());
  /// This rank's events as a JSON array (trace-event format, pid = rank).
  nlohmann::json events() const;

 private:
  int track_id(const std::string& track);  // with mu_ held

  int rank_;
  double origin_;
  mutable std::mutex mu_;
  std::vector<std::string> tracks_;
  nlohmann::json events_ = nlohmann::json::array();
};

/// A whole trace file from the per-rank event arrays.
nlohmann::json make_trace(const std::vector<nlohmann::json>& rank_events);

}  // namespace dlscale::train
