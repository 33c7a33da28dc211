#pragma once
// What the drills of the emulated cluster share (cluster_drills_test.cpp,
// slurm_drills_test.cpp): whether clusters can be built here, the processes
// in a host, and a dlscale job in the background.
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cluster/cluster.h"
#include "core/files.h"
#include "core/subprocess.h"
#include "process_util.h"

namespace dlscale::testing {

/// Why clusters cannot be built here, or "".
inline std::string why_no_clusters() {
  if (::geteuid() != 0) return "needs root (CAP_NET_ADMIN) for network namespaces";
  std::string out;
  if (run_captured({"ip", "-V"}, &out) != 0 || run_captured({"tc", "-V"}, &out) != 0) {
    return "needs ip and tc (iproute2)";
  }
  const std::string probe = "dlsprobe" + std::to_string(::getpid());
  if (run_captured({"ip", "netns", "add", probe}, &out) != 0) {
    return "cannot create a network namespace: " + out.substr(0, out.find('\n'));
  }
  run_captured({"ip", "netns", "delete", probe}, &out);
  return "";
}

inline std::vector<pid_t> pids_in(const std::string& ns) {
  std::string out;
  std::vector<pid_t> pids;
  if (run_captured({"ip", "netns", "pids", ns}, &out) != 0) return pids;
  std::istringstream in(out);
  for (pid_t p; in >> p;) pids.push_back(p);
  return pids;
}

inline bool has_env(pid_t pid, const std::string& var) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ");
  std::string env((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return env.find(var + "=") != std::string::npos;
}

/// Worker processes or launchers on one host. A worker's parent is its
/// host's launcher; the launcher's is the cluster launcher, outside the
/// host. (Forked workers carry their rank in an environment that
/// /proc/PID/environ does not show: it shows the one they were executed with.)
inline std::vector<pid_t> processes(const std::string& name, int host, bool workers) {
  const std::vector<pid_t> all = pids_in(cluster::host_namespace(name, host));
  std::vector<pid_t> out;
  for (pid_t p : all) {
    const std::optional<ProcState> state = proc_state(p);
    const bool parent_here = state && std::find(all.begin(), all.end(), state->ppid) != all.end();
    if (parent_here == workers) out.push_back(p);
  }
  return out;
}

/// Waits until every host of cluster `name` runs `per_host` workers; false after 30 s.
inline bool wait_for_workers(const std::string& name, int hosts, int per_host) {
  for (int i = 0; i < 1500; ++i) {
    bool all = true;
    for (int h = 0; h < hosts; ++h) {
      all = all && static_cast<int>(processes(name, h, true).size()) == per_host;
    }
    if (all) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

inline void expect_no_process_left(const std::string& name, int hosts) {
  for (int h = 0; h < hosts; ++h) {
    EXPECT_TRUE(pids_in(cluster::host_namespace(name, h)).empty()) << "a process was left on host " << h;
  }
}

inline std::string train_args(const std::string& name, long long steps, double timeout_s) {
  return fmt::format("train --cluster {} --model tinycnn --batch 16 --steps {} --display-every 0 --timeout {}",
                     name, steps, timeout_s);
}

/// A dlscale job in the background, its output in files.
struct Job {
  pid_t pid = -1;
  std::string out_path = testing::temp_path("out");
  std::string err_path = testing::temp_path("err");
  std::chrono::steady_clock::time_point started;

  explicit Job(const std::string& args) {
    started = std::chrono::steady_clock::now();
    pid = ::fork();
    if (pid == 0) {
      ::setpgid(0, 0);
      const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(out, 1);
      ::dup2(err, 2);
      const std::string cmd = std::string("exec ") + DLSCALE_BINARY + " " + args;
      ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    // Also here: a kill(-pid) right after fork must reach the child's group.
    if (pid > 0) ::setpgid(pid, pid);
  }
  ~Job() {
    if (pid > 0) {
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    std::filesystem::remove(out_path);
    std::filesystem::remove(err_path);
  }
  /// The exit code, or -1 when it ran past `bound_s` (a hang: it is killed).
  int wait(double bound_s, double* took = nullptr) {
    return wait_until(started + std::chrono::milliseconds(static_cast<int>(bound_s * 1000)), took);
  }
  /// The exit code, or -1 when it is still running `seconds` from now (after
  /// something was done to it).
  int wait_within(double seconds) {
    return wait_until(std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int>(seconds * 1000)),
                      nullptr);
  }
  int wait_until(std::chrono::steady_clock::time_point deadline, double* took) {
    int status = 0;
    while (::waitpid(pid, &status, WNOHANG) != pid) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(-pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
        pid = -1;
        return -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    pid = -1;
    if (took != nullptr) {
      *took = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  /// What it wrote so far ("" before the child has created the file).
  std::string err() const { return std::filesystem::exists(err_path) ? read_file(err_path) : ""; }
  std::string out() const { return std::filesystem::exists(out_path) ? read_file(out_path) : ""; }
};

/// The last line of `text` that starts with "dlscale: error: ".
inline std::string last_error(const std::string& text) {
  std::string last;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("dlscale: error: ", 0) == 0) last = line;
  }
  return last;
}

}  // namespace dlscale::testing
