#pragma once
// A small key-value store over TCP for rendezvous: the launcher (or rank 0)
// runs the server on the master; every worker connects a client. Gloo (and
// later NCCL) bootstrap through it, without MPI.
//
// Wire format, both directions, little-endian: u8 opcode/status, u32 key
// length, key, u32 value length, value.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace dlscale::comm {

/// Serves the store until destroyed. Thread-safe; one thread per connection.
class TcpStoreServer {
 public:
  /// Listens on `host`:`port` (port 0 picks a free port). Throws
  /// dlscale::Error naming the address when it cannot listen.
  TcpStoreServer(const std::string& host, uint16_t port);
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  uint16_t port() const { return port_; }

 private:
  void accept_loop();
  void serve(int fd);

  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread accept_thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> data_;
  std::vector<int> client_fds_;
  std::vector<std::thread> client_threads_;
};

/// A connection to a TcpStoreServer. Not thread-safe: one per thread.
class TcpStore {
 public:
  /// Connects, retrying until `timeout` (the master may start later).
  /// `timeout` also bounds every get/wait.
  TcpStore(const std::string& host, uint16_t port, std::chrono::milliseconds timeout);
  ~TcpStore();
  TcpStore(const TcpStore&) = delete;
  TcpStore& operator=(const TcpStore&) = delete;

  void set(const std::string& key, const std::string& value);
  /// Waits until `key` is set (up to the timeout) and returns its value;
  /// throws dlscale::Error naming the key on timeout.
  std::string get(const std::string& key);
  /// Atomically adds `delta` to the integer at `key` (0 if unset); returns the sum.
  int64_t add(const std::string& key, int64_t delta);
  /// Waits until every key is set; throws dlscale::Error naming the first missing key.
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);

  std::chrono::milliseconds timeout() const { return timeout_; }
  std::string address() const { return host_ + ":" + std::to_string(port_); }

 private:
  std::string request(uint8_t op, const std::string& key, const std::string& value,
                      bool* timed_out);

  std::string host_;
  uint16_t port_;
  std::chrono::milliseconds timeout_;
  int fd_ = -1;
};

}  // namespace dlscale::comm
