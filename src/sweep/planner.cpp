#include "sweep/planner.h"

#include <re2/re2.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <unordered_map>

#include "cluster/cluster.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/text.h"
#include "core/text_table.h"

namespace dlscale::sweep {
namespace {

struct Piece {
  std::string literal;
  std::string reference;   // ${name}
  std::string expression;  // $( expr )
};

std::vector<Piece> split_template(const std::string& text) {
  std::vector<Piece> pieces;
  std::string literal;
  for (std::size_t i = 0; i < text.size();) {
    if (text.compare(i, 2, "${") == 0) {
      const std::size_t end = text.find('}', i);
      DLSCALE_CHECK(end != std::string::npos, "'{}': '${{' at position {} has no closing '}}'", text, i + 1);
      if (!literal.empty()) pieces.push_back({literal, "", ""});
      literal.clear();
      pieces.push_back({"", text.substr(i + 2, end - i - 2), ""});
      i = end + 1;
    } else if (text.compare(i, 2, "$(") == 0) {
      const std::size_t end = closing_paren(text, i + 1);
      DLSCALE_CHECK(end != std::string::npos, "'{}': '$(' at position {} has no closing ')'", text, i + 1);
      if (!literal.empty()) pieces.push_back({literal, "", ""});
      literal.clear();
      pieces.push_back({"", "", text.substr(i + 2, end - i - 2)});
      i = end + 1;
    } else {
      literal += text[i++];
    }
  }
  if (!literal.empty()) pieces.push_back({literal, "", ""});
  return pieces;
}

bool is_whole(const Value& v) { return v.is_number() && std::floor(v.number()) == v.number(); }

/// Resolves every raw parameter of one run in dependency order.
class Resolver {
 public:
  explicit Resolver(const std::map<std::string, RawValue>& raw) : raw_(raw) {}

  Params resolve_all() {
    for (const auto& [name, unused] : raw_) {
      if (name != "command") get(name);  // the command is expanded by the runner
    }
    if (const auto it = raw_.find("command"); it != raw_.end()) {
      done_["command"] = it->second.is_template ? Value(it->second.text) : it->second.literal;
    }
    return done_;
  }

  Value evaluate(const RawValue& v, const std::string& owner) {
    if (!v.is_template) return v.literal;
    try {
      return expand_template(v.text, [&](const std::string& ref) { return get(ref); });
    } catch (const Error& e) {
      const std::string msg = e.what();
      if (msg.rfind("parameter '", 0) == 0) throw;  // already names the parameter
      throw Error(fmt::format("parameter '{}': {}", owner, msg));
    }
  }

 private:
  Value get(const std::string& name) {
    if (const auto it = done_.find(name); it != done_.end()) return it->second;
    const auto raw = raw_.find(name);
    if (raw == raw_.end()) {
      std::string known;
      for (const auto& [n, unused] : raw_) known += (known.empty() ? "" : ", ") + n;
      const std::string owner = stack_.empty() ? name : stack_.back();
      throw Error(fmt::format("parameter '{}': unknown name '{}' in ${{{}}} (parameters: {})", owner, name, name, known));
    }
    if (const auto in = std::find(stack_.begin(), stack_.end(), name); in != stack_.end()) {
      std::string chain;
      for (auto it = in; it != stack_.end(); ++it) chain += *it + " -> ";
      throw Error(fmt::format("parameter '{}' depends on itself: {}{}", name, chain, name));
    }
    stack_.push_back(name);
    Value v = evaluate(raw->second, name);
    stack_.pop_back();
    done_[name] = v;
    return v;
  }

  const std::map<std::string, RawValue>& raw_;
  Params done_;
  std::vector<std::string> stack_;
};

bool matches(const Extension& e, const Params& params, Resolver& resolver) {
  if (e.has_when_expression) {
    return resolver.evaluate(e.when_expression, fmt::format("extension {} 'when'", e.index)).truthy();
  }
  for (const auto& [name, allowed] : e.when) {
    const auto it = params.find(name);
    DLSCALE_CHECK(it != params.end(), "extension {}: 'when' names '{}', which is not a parameter of the sweep",
                  e.index, name);
    if (std::find(allowed.begin(), allowed.end(), it->second) == allowed.end()) return false;
  }
  return true;
}

Value require_choice(const Params& p, const std::string& name, const std::vector<std::string>& allowed,
                     const std::string& fallback) {
  const Value v = param_or(p, name, Value(fallback));
  const std::string s = v.to_string();
  if (std::find(allowed.begin(), allowed.end(), s) == allowed.end()) {
    throw Error(fmt::format("parameter '{}' is '{}'; allowed: {}", name, s, join(allowed, ", ")));
  }
  return Value(s);
}

/// The whole number in [1, `max`] that `name` is (docs/errors.md, "Limits").
long long require_positive(const Params& p, const std::string& name, long long fallback, long long max) {
  const Value v = param_or(p, name, Value(fallback));
  DLSCALE_CHECK(is_whole(v) && v.number() >= 1 && v.number() <= static_cast<double>(max),
                "parameter '{}' must be a whole number in [1, {}] (got '{}')", name, max, v.to_string());
  return static_cast<long long>(v.number());
}

/// Checks that every parameter passed to `dlscale COMMAND` is one of its
/// options (`known`; empty = not checked) and a single value.
void check_command_options(const Params& p, const std::string& command,
                           const std::set<std::string>& known) {
  for (const auto& [name, value] : p) {
    if (!is_train_option(name)) continue;
    DLSCALE_CHECK(name != "json", "parameter 'json' cannot be set: the sweep keeps each run's record itself");
    DLSCALE_CHECK(known.empty() || known.count(name),
                  "parameter '{}' is not a 'dlscale {}' option (see 'dlscale {} --help'; names starting "
                  "with '_' are free for your own values)",
                  name, command, command);
    DLSCALE_CHECK(!value.is_list(), "parameter '{}' is a list; lists belong under 'variables'", name);
  }
}

/// A launcher-cluster parameter of Mbit/s: 0 (unshaped) or in [1, 100000].
Value mbit_param(const Params& p, const char* name) {
  const Value v = param_or(p, name, Value(0));
  DLSCALE_CHECK(v.is_number() && (v.number() == 0 || (v.number() >= 1 && v.number() <= 1e5)),
                "parameter '{}' must be 0 (unshaped) or Mbit/s in [1, 100000] (got '{}')", name,
                v.to_string());
  return v;
}

/// The racks of a shared fabric: `rack-hosts` (0 = one switch) and
/// `uplink-mbit`; returns the cluster name's suffix ("" without racks).
std::string complete_rack_params(Params& p, long long hosts) {
  const Value racks = param_or(p, "rack-hosts", Value(0));
  DLSCALE_CHECK(
      is_whole(racks) && racks.number() >= 0 && racks.number() < static_cast<double>(hosts),
      "parameter 'rack-hosts' must be 0 (one switch) or a whole number in [1, hosts - 1 = {}] (got "
      "'{}')",
      hosts - 1, racks.to_string());
  const Value uplink = mbit_param(p, "uplink-mbit");
  DLSCALE_CHECK(racks.number() > 0 || uplink.number() == 0,
                "parameter 'uplink-mbit' needs 'rack-hosts'");
  p["rack-hosts"] = racks;
  p["uplink-mbit"] = uplink;
  if (racks.number() == 0) return "";
  return uplink.number() > 0
             ? fmt::format("r{}u{}", std::llround(racks.number()), std::llround(uplink.number()))
             : fmt::format("r{}uu", std::llround(racks.number()));
}

/// `tcp-cc`, the hosts' congestion control (cluster::kDefaultTcpCc when
/// unset); returns it.
std::string complete_tcp_cc_param(Params& p) {
  const Value cc = param_or(p, "tcp-cc", Value(std::string(cluster::kDefaultTcpCc)));
  DLSCALE_CHECK(cc.is_string(), "parameter 'tcp-cc' must be a congestion control's name (got '{}')",
                cc.to_string());
  try {
    cluster::check_tcp_cc(cc.string());
  } catch (const Error& e) {
    throw Error(fmt::format("parameter 'tcp-cc': {}", e.what()));
  }
  p["tcp-cc"] = cc;
  return cc.string();
}

/// launcher: cluster — the emulated cluster of `hosts` hosts with links of
/// `link-mbit` (0 = unshaped), racks of `rack-hosts` with uplinks of
/// `uplink-mbit`, named after its topology so that runs with the same
/// network share it; workers = hosts x workers-per-host.
void complete_cluster_params(Params& p) {
  DLSCALE_CHECK(!p.count("cluster"),
                "parameter 'cluster' is set, but launcher cluster names the cluster itself "
                "(from hosts and link-mbit)");
  const long long hosts = require_positive(p, "hosts", 2, cluster::kMaxHosts);
  const long long per_host = require_positive(p, "workers-per-host", 1, 1024);
  const Value link = mbit_param(p, "link-mbit");
  const std::string racks = complete_rack_params(p, hosts);
  DLSCALE_CHECK(!p.count("workers") || (is_whole(p["workers"]) && p["workers"].number() == hosts * per_host),
                "parameter 'workers' is {} but launcher cluster runs hosts x workers-per-host = {}: "
                "drop 'workers'",
                p.count("workers") ? p["workers"].to_string() : "", hosts * per_host);
  p["cluster-launcher"] = require_choice(p, "cluster-launcher", {"dlscale", "mpirun"}, "dlscale");
  DLSCALE_CHECK(!p.count("launcher-args") || p["cluster-launcher"].string() == "mpirun",
                "parameter 'launcher-args' is for mpirun; with launcher cluster it needs "
                "cluster-launcher: mpirun");
  p["hosts"] = Value(hosts);
  p["workers-per-host"] = Value(per_host);
  p["link-mbit"] = link;
  p["workers"] = Value(hosts * per_host);
  const std::string cc = complete_tcp_cc_param(p);
  std::string name = (link.number() > 0 ? fmt::format("s{}l{}", hosts, std::llround(link.number()))
                                        : fmt::format("s{}lu", hosts)) +
                     racks + (cc == cluster::kDefaultTcpCc ? "" : "c" + cc);
  if (name.size() > 12) {  // a cluster name's limit: 'f' and 11 hex digits of the topology's hash
    name = fmt::format("f{:011x}", fnv1a(name.data(), name.size()) & 0xfffffffffffULL);
  }
  p["cluster"] = Value(name);
}

/// launcher slurm or local: `hosts` nodes with `workers-per-host` workers
/// each make `workers` (slurm: one batch job per repeat on that many nodes,
/// 0 = Slurm chooses; local: as many workers on this machine, so that the
/// same file runs the same plan either way).
void complete_node_params(Params& p, const std::string& launcher) {
  const bool slurm = launcher == "slurm";
  const long long nodes = p.count("hosts") ? require_positive(p, "hosts", 1, 100000) : 0;
  DLSCALE_CHECK(!slurm || !p.count("workers-per-host") || nodes > 0,
                "parameter 'workers-per-host' needs 'hosts' (the nodes) with launcher slurm");
  if (p.count("workers-per-host") && nodes > 0) {
    const long long per_node = require_positive(p, "workers-per-host", 1, 1024);
    DLSCALE_CHECK(!p.count("workers") || (is_whole(p["workers"]) && p["workers"].number() == nodes * per_node),
                  "parameter 'workers' is {} but hosts x workers-per-host = {}: drop 'workers'",
                  p.count("workers") ? p["workers"].to_string() : "", nodes * per_node);
    p["workers-per-host"] = Value(per_node);
    p["workers"] = Value(nodes * per_node);
  }
  if (nodes > 0) p["hosts"] = Value(nodes);
  // A local sweep ignores what only other launchers use (a file may vary
  // the launcher); max-jobs means nothing to it either: it runs one run at
  // a time.
  if (!slurm) return;
  for (const char* only :
       {"link-mbit", "rack-hosts", "uplink-mbit", "cluster-launcher", "tcp-cc"}) {
    DLSCALE_CHECK(!p.count(only), "parameter '{}' is for launcher cluster, not slurm", only);
  }
  p["max-jobs"] = Value(require_positive(p, "max-jobs", 4, 10000));
}

/// Checks and completes the sweep's own parameters, derives the batches.
/// Returns a skip reason, or "".
std::string complete_params(Params& p, const PlanOptions& options) {
  const std::string kind =
      require_choice(p, "kind", {"dlscale", "external", "commbench"}, "dlscale").string();
  p["kind"] = kind;
  p["launcher"] = require_choice(p, "launcher", {"local", "mpirun", "srun", "cluster", "slurm"}, "local");
  p["scaling"] = require_choice(p, "scaling", {"weak", "strong"}, "weak");
  p["repeats"] = Value(require_positive(p, "repeats", 1, 1000));
  const Value timeout = param_or(p, "timeout", Value(600));
  DLSCALE_CHECK(timeout.is_number() && timeout.number() > 0 && timeout.number() <= 1e7,
                "parameter 'timeout' must be seconds in (0, 1e7] (got '{}')", timeout.to_string());
  p["timeout"] = timeout;
  if (p["launcher"].string() == "cluster") complete_cluster_params(p);
  if (p["launcher"].string() == "slurm" || p["launcher"].string() == "local") {
    complete_node_params(p, p["launcher"].string());
  }
  const long long workers = require_positive(p, "workers", 1, 1024);
  p["workers"] = Value(workers);
  if (kind == "commbench") {
    DLSCALE_CHECK(!p.count("batch") && !p.count("global-batch"),
                  "parameter '{}' is set but kind is commbench, which has no batch",
                  p.count("batch") ? "batch" : "global-batch");
    check_command_options(p, "commbench", options.commbench_options);
    return "";
  }
  DLSCALE_CHECK(p.count("batch"), "parameter 'batch' is not set (per-worker batch for weak scaling, global batch "
                                  "for strong scaling)");
  const long long batch = require_positive(p, "batch", 1, 1LL << 30);
  // --accumulate K: a step's global batch holds K micro-batches per worker.
  const long long micro = p.count("accumulate") ? require_positive(p, "accumulate", 1, 1 << 16) : 1;
  if (p["scaling"].string() == "weak") {
    DLSCALE_CHECK(!p.count("global-batch"),
                  "parameter 'global-batch' is set but scaling is weak (set scaling: strong, or drop it)");
    p["global-batch"] = Value(batch * workers * micro);
  } else {
    const long long global = p.count("global-batch") ? require_positive(p, "global-batch", 1, 1LL << 30) : batch;
    p["global-batch"] = Value(global);
    p["batch"] = Value(global / (workers * micro));
    if (global % (workers * micro) != 0) {
      p["batch"] = Value(global / static_cast<double>(workers * micro));
      return micro == 1
                 ? fmt::format("strong scaling: global batch {} is not divisible by {} workers",
                               global, workers)
                 : fmt::format(
                       "strong scaling: global batch {} is not divisible by {} workers x "
                       "accumulate {}",
                       global, workers, micro);
    }
  }
  if (kind == "external") {
    DLSCALE_CHECK(p.count("command") && p["command"].is_string() && !p["command"].string().empty(),
                  "parameter 'command' (the program to run) is required when kind is external");
    check_throughput_pattern(param_text(p, "throughput-pattern", kDefaultThroughputPattern));
    return "";
  }
  check_command_options(p, "train", options.train_options);
  return "";
}

}  // namespace

namespace {

std::unique_ptr<re2::RE2> compile_throughput_pattern(const std::string& pattern) {
  re2::RE2::Options options;
  options.set_log_errors(false);
  auto re = std::make_unique<re2::RE2>(pattern, options);
  DLSCALE_CHECK(re->ok(), "parameter 'throughput-pattern' '{}' is not a valid regular expression (RE2 syntax): {}",
                pattern, re->error());
  DLSCALE_CHECK(re->NumberOfCapturingGroups() >= 1,
                "parameter 'throughput-pattern' '{}' needs one (group) around the number", pattern);
  return re;
}

}  // namespace

void check_throughput_pattern(const std::string& pattern) { compile_throughput_pattern(pattern); }

std::string last_throughput_match(const std::string& pattern, const std::string& text) {
  const std::unique_ptr<re2::RE2> re = compile_throughput_pattern(pattern);
  re2::StringPiece input(text);
  std::string group, last;
  while (!input.empty()) {
    const char* before = input.data();
    if (!re2::RE2::FindAndConsume(&input, *re, &group)) break;
    last = group;
    if (input.data() == before) input.remove_prefix(1);  // an empty match: step past it
  }
  return last;
}

std::size_t closing_paren(const std::string& text, std::size_t open) {
  int depth = 0;
  char quote = 0;
  for (std::size_t i = open; i < text.size(); ++i) {
    const char c = text[i];
    if (quote) {
      if (c == quote) quote = 0;
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == '(') {
      ++depth;
    } else if (c == ')' && --depth == 0) {
      return i;
    }
  }
  return std::string::npos;
}

Value expand_template(const std::string& text, const Lookup& lookup) {
  const std::vector<Piece> pieces = split_template(text);
  auto value_of = [&](const Piece& piece) -> Value {
    if (!piece.reference.empty()) return lookup(piece.reference);
    if (!piece.expression.empty()) return Expression::parse(piece.expression).evaluate(lookup);
    return Value(piece.literal);
  };
  if (pieces.size() == 1) return value_of(pieces[0]);
  // Templates that reference each other can double the text at every step.
  constexpr size_t kMaxExpanded = 1 << 20;
  std::string out;
  for (const Piece& piece : pieces) {
    out += value_of(piece).to_string();
    DLSCALE_CHECK(out.size() <= kMaxExpanded, "'{}' expands to more than 1 MiB of text",
                  text.substr(0, 60));
  }
  return Value(out);
}

std::vector<PlannedRun> plan_sweep(const SweepSpec& spec, const PlanOptions& options) {
  std::map<std::string, RawValue> base;
  for (const auto& [name, value] : spec.parameters) base[name] = value;

  // Odometer over the variables: the first one varies slowest.
  std::vector<std::size_t> at(spec.variables.size(), 0);
  std::size_t total = 1;
  for (const auto& [name, values] : spec.variables) {
    // Checked at every factor: the product of many lists overflows.
    DLSCALE_CHECK(values.size() <= 100000 / total, "{}: the variables give more than 100000 runs",
                  spec.path);
    total *= values.size();
  }

  std::vector<PlannedRun> plan;
  std::unordered_map<std::string, int> first_with_key;  // key → index of the first run that runs
  for (std::size_t n = 0; n < total; ++n) {
    std::map<std::string, RawValue> raw = base;
    for (std::size_t v = 0; v < spec.variables.size(); ++v) {
      raw[spec.variables[v].first] = spec.variables[v].second[at[v]];
    }
    PlannedRun run;
    run.index = static_cast<int>(n) + 1;
    Params params = Resolver(raw).resolve_all();
    for (const Extension& e : spec.extensions) {
      Resolver resolver(raw);
      if (!matches(e, params, resolver)) continue;
      if (e.skip) {
        run.skip_reason = fmt::format("extension {} ({})", e.index, e.description);
        break;
      }
      for (const auto& [name, value] : e.set) raw[name] = value;
      params = Resolver(raw).resolve_all();
    }
    const std::string reason = complete_params(params, options);
    if (run.skip_reason.empty()) run.skip_reason = reason;
    run.params = std::move(params);
    run.key = run_key(run.params);
    // Extensions can make two combinations identical; the second would only
    // overwrite the first one's results.
    if (run.skip_reason.empty()) {
      const auto [it, first] = first_with_key.emplace(run.key, run.index);
      if (!first) run.skip_reason = fmt::format("same parameters as run {}", it->second);
    }
    plan.push_back(std::move(run));
    for (std::size_t v = spec.variables.size(); v-- > 0;) {
      if (++at[v] < spec.variables[v].second.size()) break;
      at[v] = 0;
    }
  }
  return plan;
}

void print_plan(std::ostream& out, const std::vector<PlannedRun>& plan) {
  // Always-shown columns first, then whatever else varies between runs.
  std::vector<std::string> columns = {"kind", "model", "scaling", "workers", "batch", "global-batch"};
  std::set<std::string> exclude(columns.begin(), columns.end());
  // repeats has its own column, set by an extension or not.
  exclude.insert({"command", "throughput-pattern", "launcher-args", "repeats"});
  std::vector<const Params*> params;
  for (const PlannedRun& r : plan) params.push_back(&r.params);
  for (const std::string& name : varying_params(params, exclude)) columns.push_back(name);
  std::vector<std::string> headers = {"#"};
  std::vector<Align> align = {Align::kRight};
  for (const std::string& c : columns) {
    headers.push_back(c);
    align.push_back(Align::kLeft);
  }
  headers.push_back("repeats");
  align.push_back(Align::kRight);
  headers.push_back("note");
  align.push_back(Align::kLeft);
  TextTable table(headers, align);
  int to_run = 0;
  for (const PlannedRun& r : plan) {
    std::vector<std::string> row = {std::to_string(r.index)};
    for (const std::string& c : columns) row.push_back(param_text(r.params, c, "-"));
    row.push_back(param_text(r.params, "repeats", "1"));
    row.push_back(r.skipped() ? "skip: " + r.skip_reason : "");
    table.add_row(row);
    to_run += r.skipped() ? 0 : 1;
  }
  table.print(out);
  out << fmt::format("{} run(s) planned, {} to run, {} skipped\n", plan.size(), to_run, plan.size() - to_run);
}

}  // namespace dlscale::sweep
