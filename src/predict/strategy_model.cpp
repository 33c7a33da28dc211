#include "predict/strategy_model.h"

#include <cmath>
#include <set>
#include <cstdlib>

#include "core/error.h"

namespace dlscale::predict {
namespace {

constexpr const char* kAllowed =
    "allreduce | allreduce-hd | tree | hierarchical | ps[:K|:node] | zero[:1|2|3], then +flat, "
    "+fp16, +bf16 and for ps "
    "+dedicated, +async, +node-aggregate, +greedy, +partition:MB, +update-then-pull";

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == sep) {
      parts.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  return parts;
}

/// A whole number in [lo, hi], or an error naming `text`.
int whole(const std::string& word, const std::string& text, int lo, int hi) {
  char* end = nullptr;
  const long v = word.empty() ? 0 : std::strtol(word.c_str(), &end, 10);
  DLSCALE_CHECK(!word.empty() && *end == '\0' && v >= lo && v <= hi, "strategy '{}': '{}' must be a whole number in "
                "{}..{}", text, word, lo, hi);
  return static_cast<int>(v);
}

/// A number > 0, or an error naming `text`.
double positive(const std::string& word, const std::string& text) {
  char* end = nullptr;
  const double v = word.empty() ? 0 : std::strtod(word.c_str(), &end);
  DLSCALE_CHECK(!word.empty() && *end == '\0' && v > 0 && std::isfinite(v), "strategy '{}': '{}' must be a number of "
                "MiB > 0", text, word);
  return v;
}

void apply_modifier(StrategySpec& s, const std::string& m, const std::string& text) {
  const bool ps = s.algorithm == Algorithm::kPs;
  if (m == "flat") {
    s.flat = true;
  } else if (m == "fp16" || m == "bf16") {
    DLSCALE_CHECK(s.algorithm != Algorithm::kZero, "strategy '{}': zero does not compress its exchanges", text);
    s.compress = m;
  } else if (ps && m == "dedicated") {
    s.ps_dedicated = true;
  } else if (ps && m == "async") {
    s.ps_async = true;
  } else if (ps && m == "node-aggregate") {
    s.node_aggregate = true;
  } else if (ps && m == "greedy") {
    s.ps_greedy = true;
  } else if (ps && m == "update-then-pull") {
    s.ps_update_then_pull = true;
  } else if (ps && m.rfind("partition:", 0) == 0) {
    s.ps_partition_mb = positive(m.substr(10), text);
  } else {
    throw Error(fmt::format("strategy '{}': unknown modifier '+{}'; allowed: {}", text, m, kAllowed));
  }
}

}  // namespace

StrategySpec parse_strategy(const std::string& text) {
  const std::vector<std::string> parts = split(text, '+');
  const std::vector<std::string> head = split(parts[0], ':');
  StrategySpec s;
  s.label = text;
  const std::string& name = head[0];
  DLSCALE_CHECK(head.size() <= 2, "strategy '{}': one ':' at most; allowed: {}", text, kAllowed);
  if (name == "allreduce") {
    s.algorithm = Algorithm::kRing;
  } else if (name == "allreduce-hd") {
    s.algorithm = Algorithm::kHalvingDoubling;
  } else if (name == "tree") {
    s.algorithm = Algorithm::kTree;
  } else if (name == "hierarchical") {
    s.algorithm = Algorithm::kHierarchical;
  } else if (name == "ps") {
    s.algorithm = Algorithm::kPs;
    if (head.size() == 2) s.ps_shards = head[1] == "node" ? 0 : whole(head[1], text, 1, 1 << 20);
  } else if (name == "zero") {
    s.algorithm = Algorithm::kZero;
    if (head.size() == 2) s.zero_stage = whole(head[1], text, 1, 3);
  } else {
    throw Error(fmt::format("unknown strategy '{}'; allowed: {}", text, kAllowed));
  }
  DLSCALE_CHECK(head.size() == 1 || name == "ps" || name == "zero", "strategy '{}': only ps and zero take ':'", text);
  std::set<std::string> given;  // each modifier once; one compression
  for (size_t i = 1; i < parts.size(); ++i) {
    const std::string key = parts[i].substr(0, parts[i].find(':'));
    DLSCALE_CHECK(given.insert(key == "bf16" ? "fp16" : key).second,
                  key == "fp16" || key == "bf16" ? "strategy '{}': one compression at most (+fp16 or +bf16)"
                                                 : "strategy '{}': '+{}' is given twice",
                  text, key);
    apply_modifier(s, parts[i], text);
  }
  DLSCALE_CHECK(!(s.ps_dedicated && s.node_aggregate), "strategy '{}': +node-aggregate places shards on the workers' "
                "nodes; it cannot be +dedicated", text);
  DLSCALE_CHECK(!(s.ps_async && s.ps_update_then_pull),
                "strategy '{}': +update-then-pull is the synchronous ps's "
                "order; +async has no common update",
                text);
  return s;
}

std::vector<std::string> default_strategies(int workers_per_node) {
  if (workers_per_node < 2) return {"allreduce", "allreduce+flat", "tree", "ps:1", "allreduce+fp16"};
  return {"allreduce", "allreduce+flat", "tree", "hierarchical", "ps:1", "allreduce+fp16"};
}

}  // namespace dlscale::predict
