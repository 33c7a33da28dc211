#include "libtorch/train/trace.h"

namespace dlscale::train {

int Tracer::track_id(const std::string& track) {
  for (size_t i = 0; i < tracks_.size(); ++i) {
    if (tracks_[i] == track) return static_cast<int>(i);
  }
  tracks_.push_back(track);
  const int id = static_cast<int>(tracks_.size() - 1);
  events_.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", rank_}, {"tid", id},
                     {"args", {{"name", track}}}});
  return id;
}

void Tracer::add(const std::string& name, const std::string& track, double start, double end,
                 nlohmann::json args) {
  std::lock_guard<std::mutex> lock(mu_);
  const int tid = track_id(track);
  events_.push_back({{"name", name},
                     {"cat", track},
                     {"ph", "X"},
                     {"pid", rank_},
                     {"tid", tid},
                     {"ts", (start - origin_) * 1e6},
                     {"dur", (end - start) * 1e6},
                     {"args", std::move(args)}});
}

nlohmann::json Tracer::events() const {
  std::lock_guard<std::mutex> lock(mu_);
  nlohmann::json out = events_;
  out.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", rank_},
                 {"args", {{"name", "rank " + std::to_string(rank_)}}}});
  return out;
}

nlohmann::json make_trace(const std::vector<nlohmann::json>& rank_events) {
  nlohmann::json all = nlohmann::json::array();
  for (const auto& events : rank_events) {
    for (const auto& e : events) all.push_back(e);
  }
  return {{"traceEvents", all}, {"displayTimeUnit", "ms"}};
}

}  // namespace dlscale::train
