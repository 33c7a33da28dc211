#pragma once
// A small key-value store over TCP for rendezvous: the launcher (or rank 0)
// runs the server on the master; every worker connects a client. Gloo (and
// later NCCL) bootstrap through it, without MPI.
//
// Wire format, both directions, little-endian: u8 opcode/status, u32 key
// length, key, u32 value length, value. A client's first message is HELLO
// with the job's secret; the server answers every request once.
//
// The server trusts nobody: a connection without the job's secret is
// refused; a malformed request (unknown opcode, a number that is not one, a
// key over 4 KiB, a value over 1 MiB, a store over 64 MiB) is answered with
// an error and the connection dropped, with one log line (rate-limited); a
// connection that does not say hello within 10 s is dropped; at most 1024
// connections are served at once. The job goes on in every case.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace dlscale::comm {

/// Serves the store until destroyed. Thread-safe; one thread per connection.
class TcpStoreServer {
 public:
  /// Listens on `host`:`port` (port 0 picks a free port; host "0.0.0.0" =
  /// every interface). Only clients that present `secret` are served (an
  /// empty secret admits every client). Throws dlscale::Error naming the
  /// address when it cannot listen.
  /// With `serve_now` false it listens but accepts nobody until serve():
  /// until then this process has no thread of its own (to fork safely),
  /// and clients wait in the listen queue.
  TcpStoreServer(const std::string& host, uint16_t port, std::string secret = "",
                 bool serve_now = true);
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  uint16_t port() const { return port_; }
  /// Starts serving, once (see the constructor).
  void serve();

 private:
  struct Client {
    int fd = -1;
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  void accept_loop();
  void admit(int fd);
  void reap_finished();                 // with mu_ held
  void warn(const std::string& what);  // with mu_ held
  void serve(int fd);
  /// Executes one request; returns false (with `reply` the reason) for a bad one.
  bool execute(uint8_t op, const std::string& key, const std::string& value, uint8_t* status,
               std::string* reply);

  const std::string secret_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread accept_thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> data_;
  size_t data_bytes_ = 0;
  std::vector<Client> clients_;
  int64_t refused_ = 0;  // bad clients refused or dropped so far
};

/// A connection to a TcpStoreServer. Not thread-safe: one per thread.
class TcpStore {
 public:
  /// Connects, retrying until `timeout` (the master may start later), and
  /// presents `secret`. `timeout` also bounds every get/wait. Throws
  /// dlscale::Error when the store refuses the secret.
  TcpStore(const std::string& host, uint16_t port, std::chrono::milliseconds timeout,
           const std::string& secret = "");
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
