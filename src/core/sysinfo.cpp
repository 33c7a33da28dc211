#include "core/sysinfo.h"

#include <dirent.h>
#include <link.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>

#include "core/build_info.h"
#include "core/record_keys.h"

namespace dlscale {

namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

std::string read_cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return trim(line.substr(colon + 1));
    }
  }
  return "unknown";
}

std::string classify_blas(const std::string& path) {
  if (path.find("openblas-pthread") != std::string::npos) return "openblas-pthread";
  if (path.find("openblas-openmp") != std::string::npos) return "openblas-openmp";
  if (path.find("openblas-serial") != std::string::npos) return "openblas-serial";
  if (path.find("openblas") != std::string::npos) return "openblas";
  if (path.find("libmkl") != std::string::npos) return "mkl";
  if (path.find("blis") != std::string::npos) return "blis";
  if (path.find("atlas") != std::string::npos) return "atlas";
  if (path.find("/blas/") != std::string::npos) return "reference-blas (slow)";
  return "blas";
}

/// Where set_for_load keeps NAME's value from before the load: "-" when it
/// had none, "=VALUE" otherwise (VALUE may be empty).
std::string saved_name(const char* name) { return std::string(kEnvSavedPrefix) + name; }

/// Sets NAME to VALUE for dlscale-torch's load and keeps its old value for
/// restore_after_load; returns false, changing nothing, when an outer front
/// already set it so.
bool set_for_load(const char* name, const std::string& value) {
  const std::string saved = saved_name(name);
  if (std::getenv(saved.c_str()) != nullptr) return false;
  const char* old = std::getenv(name);
  ::setenv(saved.c_str(), old == nullptr ? "-" : (std::string("=") + old).c_str(), 1);
  ::setenv(name, value.c_str(), 1);
  return true;
}

/// Gives NAME back the value set_for_load kept (or unsets it); returns
/// whether set_for_load had set it.
bool restore_after_load(const char* name) {
  const std::string saved_var = saved_name(name);
  const char* saved = std::getenv(saved_var.c_str());
  if (saved == nullptr) return false;
  if (saved[0] == '=') {
    ::setenv(name, saved + 1, 1);
  } else {
    ::unsetenv(name);
  }
  ::unsetenv(saved_var.c_str());
  return true;
}

}  // namespace

int available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  return ::sched_getaffinity(0, sizeof(set), &set) == 0 ? std::max(1, CPU_COUNT(&set)) : 1;
}

int64_t available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (in >> key >> kib) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return kib * 1024;
  }
  return -1;
}

std::string loaded_blas_library() {
  std::ifstream in("/proc/self/maps");
  std::string line;
  while (std::getline(in, line)) {
    const auto slash = line.find('/');
    if (slash == std::string::npos) continue;
    const std::string path = line.substr(slash);
    const std::string file = path.substr(path.rfind('/') + 1);
    const bool is_blas = file.rfind("libblas.so", 0) == 0 || file.rfind("libopenblas", 0) == 0 ||
                         file.rfind("libmkl_rt", 0) == 0 || file.rfind("libblis", 0) == 0;
    if (is_blas) return classify_blas(path) + " (" + path + ")";
  }
  return "unknown";
}

int loaded_object_count() {
  int count = 0;
  ::dl_iterate_phdr(
      [](dl_phdr_info*, size_t, void* n) {
        ++*static_cast<int*>(n);
        return 0;
      },
      &count);
  return count;
}

SystemInfo collect_system_info() {
  SystemInfo info;
  char host[256] = {};
  info.hostname = ::gethostname(host, sizeof(host) - 1) == 0 ? host : "unknown";
  struct utsname u {};
  info.os = ::uname(&u) == 0
                ? std::string(u.sysname) + " " + u.release + " " + u.machine
                : "unknown";
  info.cpu_model = read_cpu_model();
  info.logical_cores = available_cores();
  info.online_cores = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  info.blas = loaded_blas_library();
  for (const char* name : {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT"}) {
    if (const char* value = std::getenv(name)) {
      info.openmp_wait += (info.openmp_wait.empty() ? "" : " ") + std::string(name) + "=" + value;
    }
  }
  const BuildInfo& b = build_info();
  info.dlscale_version = b.version;
  info.git_revision = b.git_revision;
  info.build_type = b.build_type;
  info.compiler = b.compiler;
  return info;
}

nlohmann::json to_json(const SystemInfo& info) {
  return {{"hostname", info.hostname},
          {"os", info.os},
          {"cpu_model", info.cpu_model},
          {"logical_cores", info.logical_cores},
          {record::kOnlineCores, info.online_cores},
          {"blas", info.blas},
          {"openmp_wait", info.openmp_wait},
          {"dlscale_version", info.dlscale_version},
          {"git_revision", info.git_revision},
          {"build_type", info.build_type},
          {"compiler", info.compiler}};
}

void default_openmp_wait() {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  ::setenv("GOMP_SPINCOUNT", kDefaultGompSpincount, 0);
}

void defer_blas_pool() {
  for (const char* name : {"OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS"}) {
    if (std::getenv(name) != nullptr) return;
  }
  set_for_load("OPENBLAS_NUM_THREADS", "1");
}

int thread_count() {
  DIR* dir = ::opendir("/proc/self/task");
  if (dir == nullptr) return -1;
  int threads = 0;
  while (const dirent* e = ::readdir(dir)) {
    if (e->d_name[0] != '.') ++threads;
  }
  ::closedir(dir);
  return threads;
}

bool skip_unused_libraries(const std::string& torch_dir) {
  const std::string dir = torch_dir + "/" + kUnusedLibsDir;
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return false;
  const char* old = std::getenv("LD_LIBRARY_PATH");
  return set_for_load("LD_LIBRARY_PATH", old == nullptr || *old == '\0' ? dir : dir + ":" + old);
}

bool restore_library_path() { return restore_after_load("LD_LIBRARY_PATH"); }

bool restore_blas_environment() { return restore_after_load("OPENBLAS_NUM_THREADS"); }

}  // namespace dlscale
