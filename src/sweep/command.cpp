#include "sweep/command.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "core/error.h"

namespace dlscale::sweep {

std::vector<std::string> split_command(const std::string& text) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quote) {
      if (c == quote) {
        quote = 0;
      } else if (c == '\\' && quote == '"' && i + 1 < text.size()) {
        word += text[++i];
      } else {
        word += c;
      }
    } else if (c == '$' && i + 1 < text.size() && text[i + 1] == '(') {
      // A $( expression ) stays one piece of the word, spaces and all.
      const std::size_t j = closing_paren(text, i + 1);
      DLSCALE_CHECK(j != std::string::npos, "command '{}': '$(' at position {} has no closing ')'", text, i + 1);
      word += text.substr(i, j - i + 1);
      i = j;
      in_word = true;
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == '\\' && i + 1 < text.size()) {
      word += text[++i];
      in_word = true;
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      if (in_word) words.push_back(word);
      word.clear();
      in_word = false;
    } else {
      word += c;
      in_word = true;
    }
  }
  DLSCALE_CHECK(!quote, "command '{}': unbalanced {} quote", text, quote);
  if (in_word) words.push_back(word);
  DLSCALE_CHECK(!words.empty(), "parameter 'command' is empty");
  return words;
}

namespace {
constexpr long long kRepeatSeedStride = 1000;
constexpr std::array<const char*, 4> kEvaluating = {"target-accuracy", "epochs", "eval-every",
                                                    "eval-every-steps"};
}  // namespace

Params repeat_params(const Params& p, int repeat) {
  const bool evaluates = std::any_of(kEvaluating.begin(), kEvaluating.end(),
                                     [&](const char* name) { return p.count(name) > 0; });
  if (repeat <= 1 || param_text(p, "kind", "dlscale") != "dlscale" || !evaluates) return p;
  Params out = p;
  const long long seed = p.count("seed") ? param_int(p, "seed") : kDefaultSeed;
  out["seed"] = Value(seed + kRepeatSeedStride * (repeat - 1));
  return out;
}

std::vector<std::string> build_command(const Params& p, const std::string& dlscale_binary,
                                       const std::string& record_path) {
  const std::string launcher = param_text(p, "launcher", "local");
  const long long workers = param_int(p, "workers");
  std::vector<std::string> argv;
  if (launcher == "mpirun") argv = {"mpirun", "-np", std::to_string(workers)};
  if (launcher == "srun") argv = {"srun", "-n", std::to_string(workers)};
  // Inside the batch job: srun takes its nodes and tasks from the allocation.
  const bool slurm = launcher == "slurm";
  if (slurm) argv = {"srun"};
  // launcher cluster with cluster-launcher mpirun: mpirun across the hosts
  // (dlscale cluster mpirun), the ranks told nothing of the cluster.
  const bool cluster_mpirun = launcher == "cluster" && param_text(p, "cluster-launcher", "dlscale") == "mpirun";
  if (cluster_mpirun) {
    argv = {dlscale_binary, "cluster", "mpirun", "--name", param_text(p, "cluster"), "--workers-per-host",
            param_text(p, "workers-per-host")};
  }
  if (const auto it = p.find("launcher-args"); it != p.end() && launcher != "local") {
    if (cluster_mpirun) argv.insert(argv.end(), {"--mpirun-args", it->second.to_string()});
    if (!cluster_mpirun) {
      for (const std::string& w : split_command(it->second.to_string())) argv.push_back(w);
    }
  }
  if (cluster_mpirun) argv.push_back("--");
  if (param_text(p, "kind") == "external") {
    const Lookup lookup = [&](const std::string& name) -> Value {
      const auto found = p.find(name);
      DLSCALE_CHECK(found != p.end(), "parameter 'command': unknown name '{}' in ${{{}}}", name, name);
      return found->second;
    };
    for (const std::string& word : split_command(param_text(p, "command"))) {
      argv.push_back(expand_template(word, lookup).to_string());
    }
    return argv;
  }
  const bool commbench = param_text(p, "kind") == "commbench";
  argv.push_back(dlscale_binary);
  argv.push_back(commbench ? "commbench" : "train");
  for (const auto& [name, value] : p) {
    if (!is_train_option(name)) continue;
    // Only dlscale's cluster launcher takes --workers-per-host; the others
    // place the workers themselves.
    if (name == "workers-per-host" && (launcher != "cluster" || cluster_mpirun)) continue;
    if (cluster_mpirun && name == "cluster") continue;
    if (value.is_bool()) {
      if (value.boolean()) argv.push_back("--" + name);
      continue;
    }
    argv.push_back("--" + name);
    argv.push_back(value.to_string());
  }
  if (commbench) {
    // no batch
  } else if (param_text(p, "scaling") == "strong") {
    argv.insert(argv.end(), {"--global-batch", param_text(p, "global-batch")});
  } else {
    argv.insert(argv.end(), {"--batch", param_text(p, "batch")});
  }
  if (const auto it = p.find("train-timeout"); it != p.end()) {
    argv.insert(argv.end(), {"--timeout", it->second.to_string()});
  }
  if (launcher == "local") argv.insert(argv.end(), {"--workers", std::to_string(workers)});
  argv.insert(argv.end(), {"--json", record_path});
  return argv;
}

}  // namespace dlscale::sweep
