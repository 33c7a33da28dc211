// Every backend that runs in one process (inproc, gloo over loopback), with
// 1-4 ranks as threads: exact results for known inputs.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <thread>

#include "comm/tcp_store.h"
#include "comm_test_util.h"
#include "core/clock.h"
#include "core/error.h"
#include "libtorch/comm/agreement.h"
#include "libtorch/comm/session.h"

namespace dlscale::comm {
namespace {

using testing::run_ranks;

struct Case {
  std::string backend;
  int size;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.backend << " x" << c.size; }

class CommTest : public ::testing::TestWithParam<Case> {};

std::string case_name(const ::testing::TestParamInfo<Case>& p) {
  return p.param.backend + std::to_string(p.param.size);
}

// Rank r contributes (r + 1) * (i + 1) at index i: the sum is a known
// integer, exact in float32, float16 and bfloat16 for these sizes.
torch::Tensor contribution(int rank, int64_t n, torch::ScalarType dtype) {
  return (torch::arange(1, n + 1, torch::kFloat32) * (rank + 1)).to(dtype);
}

TEST_P(CommTest, AllreduceSumsExactlyForEveryDtypeAndSize) {
  const int size = GetParam().size;
  run_ranks(GetParam().backend, size, [&](Communicator& comm) {
    for (const auto dtype : {torch::kFloat32, torch::kFloat16, torch::kBFloat16}) {
      for (const int64_t n : {1, 7, 100, 1001}) {
        const int64_t m = dtype == torch::kFloat32 ? n : std::min<int64_t>(n, 20);
        torch::Tensor t = contribution(comm.rank(), m, dtype);
        comm.allreduce(t, ReduceOp::kSum);
        const double ranks_sum = size * (size + 1) / 2.0;
        const torch::Tensor expected = torch::arange(1, m + 1, torch::kFloat32) * ranks_sum;
        ASSERT_TRUE(torch::equal(t.to(torch::kFloat32), expected))
            << c10::toString(dtype) << " n=" << m << " rank " << comm.rank();
      }
    }
  });
}

TEST_P(CommTest, AllreduceAverage) {
  const int size = GetParam().size;
  run_ranks(GetParam().backend, size, [&](Communicator& comm) {
    torch::Tensor t = torch::full({5}, static_cast<float>(comm.rank() * 2));
    comm.allreduce(t, ReduceOp::kAverage);
    EXPECT_TRUE(torch::equal(t, torch::full({5}, static_cast<float>(size - 1))));
  });
}

TEST_P(CommTest, BroadcastAllgatherBarrier) {
  const int size = GetParam().size;
  run_ranks(GetParam().backend, size, [&](Communicator& comm) {
    const int root = size - 1;
    torch::Tensor t = torch::full({3, 4}, static_cast<float>(comm.rank()));
    comm.broadcast(t, root);
    EXPECT_TRUE(torch::equal(t, torch::full({3, 4}, static_cast<float>(root))));
    torch::Tensor ints = torch::tensor({comm.rank(), 10 * comm.rank()}, torch::kInt64);
    const torch::Tensor all = comm.allgather(ints);
    ASSERT_EQ(all.sizes(), (std::vector<int64_t>{size, 2}));
    for (int r = 0; r < size; ++r) {
      EXPECT_EQ(all[r][0].item<int64_t>(), r);
      EXPECT_EQ(all[r][1].item<int64_t>(), 10 * r);
    }
    comm.barrier();
  });
}

TEST_P(CommTest, ReduceScatterSumsEachRanksChunkExactly) {
  const int size = GetParam().size;
  run_ranks(GetParam().backend, size, [&](Communicator& comm) {
    for (const auto dtype : {torch::kFloat32, torch::kFloat16, torch::kBFloat16}) {
      for (const int64_t chunk : {1, 5, 40, 301}) {
        const int64_t m = dtype == torch::kFloat32 ? chunk : std::min<int64_t>(chunk, 5);
        const torch::Tensor in = contribution(comm.rank(), m * size, dtype);
        torch::Tensor out = torch::full({m}, -1.0f).to(dtype);
        comm.reduce_scatter(in, out, ReduceOp::kSum);
        // Element i of chunk r is (r*m + i + 1) * (1 + 2 + ... + size).
        const double ranks_sum = size * (size + 1) / 2.0;
        const torch::Tensor expected =
            torch::arange(comm.rank() * m + 1, comm.rank() * m + m + 1, torch::kFloat32) * ranks_sum;
        ASSERT_TRUE(torch::equal(out.to(torch::kFloat32), expected))
            << c10::toString(dtype) << " chunk=" << m << " rank " << comm.rank();
        // The input is left as it was.
        ASSERT_TRUE(torch::equal(in, contribution(comm.rank(), m * size, dtype)));
      }
    }
    torch::Tensor in = torch::full({2 * size}, static_cast<float>(comm.rank() * 2));
    torch::Tensor out = torch::empty({2});
    comm.reduce_scatter(in, out, ReduceOp::kAverage);
    EXPECT_TRUE(torch::equal(out, torch::full({2}, static_cast<float>(size - 1))));
  });
}

TEST_P(CommTest, AllgatherIntoGathersEqualShardsInAndOutOfPlace) {
  const int size = GetParam().size;
  run_ranks(GetParam().backend, size, [&](Communicator& comm) {
    const int64_t chunk = 37;
    const torch::Tensor expected = torch::arange(0, chunk * size, torch::kFloat32);
    const torch::Tensor mine = expected.narrow(0, comm.rank() * chunk, chunk).clone();
    torch::Tensor out = torch::full({chunk * size}, -1.0f);
    comm.allgather_into(mine, out);
    EXPECT_TRUE(torch::equal(out, expected)) << "out of place, rank " << comm.rank();
    // In place: only this rank's chunk of the output holds data beforehand.
    torch::Tensor whole = torch::full({chunk * size}, -1.0f);
    torch::Tensor own = whole.narrow(0, comm.rank() * chunk, chunk);
    own.copy_(mine);
    comm.allgather_into(own, whole);
    EXPECT_TRUE(torch::equal(whole, expected)) << "in place, rank " << comm.rank();
    // Any dtype moves as bytes.
    const torch::Tensor ids = torch::full({3}, static_cast<int64_t>(comm.rank()), torch::kInt64);
    torch::Tensor all_ids = torch::empty({3 * size}, torch::kInt64);
    comm.allgather_into(ids, all_ids);
    for (int r = 0; r < size; ++r) EXPECT_EQ(all_ids[3 * r + 2].item<int64_t>(), r);
  });
}

TEST_P(CommTest, ShardedCollectivesRefuseMismatchedChunks) {
  const int size = GetParam().size;
  run_ranks(GetParam().backend, size, [&](Communicator& comm) {
    torch::Tensor out = torch::empty({3});
    EXPECT_THROW(comm.reduce_scatter(torch::ones({3 * size + 1}), out, ReduceOp::kSum), Error);
    torch::Tensor wrong_type = torch::empty({3}, torch::kFloat16);
    EXPECT_THROW(comm.reduce_scatter(torch::ones({3 * size}), wrong_type, ReduceOp::kSum), Error);
    torch::Tensor ints = torch::empty({3}, torch::kInt32);
    EXPECT_THROW(comm.reduce_scatter(torch::ones({3 * size}, torch::kInt32), ints, ReduceOp::kSum),
                 Error);
    torch::Tensor small = torch::empty({3 * size - 1});
    EXPECT_THROW(comm.allgather_into(torch::ones({3}), small), Error);
  });
}

// Tests that need at least two ranks.
class CommMultiRankTest : public CommTest {};

TEST_P(CommMultiRankTest, SendRecvRing) {
  const int size = GetParam().size;
  run_ranks(GetParam().backend, size, [&](Communicator& comm) {
    const int next = (comm.rank() + 1) % size;
    const int prev = (comm.rank() + size - 1) % size;
    torch::Tensor out = torch::full({6}, static_cast<float>(comm.rank()));
    torch::Tensor in = torch::empty({6});
    if (comm.rank() % 2 == 0) {
      comm.send(out, next, 7);
      comm.recv(in, prev, 7);
    } else {
      comm.recv(in, prev, 7);
      comm.send(out, next, 7);
    }
    EXPECT_TRUE(torch::equal(in, torch::full({6}, static_cast<float>(prev))));
  });
}

// Every rank posts its receive and its send before waiting on either: no
// ordering between ranks is needed, and messages on one tag stay in order.
TEST_P(CommMultiRankTest, NonBlockingExchangeInOrder) {
  const int size = GetParam().size;
  run_ranks(GetParam().backend, size, [&](Communicator& comm) {
    const int next = (comm.rank() + 1) % size;
    const int prev = (comm.rank() + size - 1) % size;
    for (int round = 0; round < 3; ++round) {
      torch::Tensor out = torch::full({1000}, static_cast<float>(10 * comm.rank() + round));
      torch::Tensor in = torch::empty({1000});
      auto recv = comm.irecv(in, prev, 3);
      auto send = comm.isend(out, next, 3);
      recv->wait();
      send->wait();
      EXPECT_TRUE(torch::equal(in, torch::full({1000}, static_cast<float>(10 * prev + round))));
    }
  });
}

// Colour = rank parity, key = -rank: each group is ranked in reverse, its
// collectives see only its members; a negative colour gets no communicator.
TEST_P(CommMultiRankTest, SplitGroupsByColourAndKey) {
  const int size = GetParam().size;
  run_ranks(GetParam().backend, size, [&](Communicator& comm) {
    const int r = comm.rank();
    std::unique_ptr<Communicator> group = comm.split(r % 2, -r);
    std::vector<int> members;
    for (int m = size - 1; m >= 0; --m) {
      if (m % 2 == r % 2) members.push_back(m);
    }
    ASSERT_NE(group, nullptr);
    EXPECT_EQ(group->backend(), comm.backend());
    EXPECT_EQ(group->size(), static_cast<int>(members.size()));
    EXPECT_EQ(members[static_cast<size_t>(group->rank())], r);
    torch::Tensor t = torch::full({3}, static_cast<float>(r));
    group->allreduce(t, ReduceOp::kSum);
    float expected = 0;
    for (int m : members) expected += static_cast<float>(m);
    EXPECT_TRUE(torch::equal(t, torch::full({3}, expected)));
    std::unique_ptr<Communicator> others = comm.split(r == 0 ? -1 : 0, r);
    EXPECT_EQ(others == nullptr, r == 0);
    if (others) {
      EXPECT_EQ(others->size(), size - 1);
    }
  });
}

TEST_P(CommTest, StringsAndConfigAgreement) {
  const int size = GetParam().size;
  run_ranks(GetParam().backend, size, [&](Communicator& comm) {
    const auto all = allgather_strings(comm, std::string(comm.rank() * 3, 'x'));
    ASSERT_EQ(static_cast<int>(all.size()), size);
    for (int r = 0; r < size; ++r) EXPECT_EQ(all[r], std::string(r * 3, 'x'));
    check_same_config(comm, {{"model", "lenet"}, {"batch", 32}});
  });
}

TEST_P(CommMultiRankTest, DisagreementNamesRankAndField) {
  const int size = GetParam().size;
  std::vector<std::string> messages(size);
  run_ranks(GetParam().backend, size, [&](Communicator& comm) {
    try {
      check_same_config(comm, {{"model", "lenet"}, {"batch", comm.rank() == size - 1 ? 64 : 32}});
    } catch (const Error& e) {
      messages[comm.rank()] = e.what();
    }
  });
  for (const auto& m : messages) {
    EXPECT_EQ(m, fmt::format("workers disagree on the run config: rank {} has batch=64, rank 0 "
                             "has batch=32",
                             size - 1));
  }
}

TEST_P(CommTest, RejectsUnsupportedTensors) {
  run_ranks(GetParam().backend, GetParam().size, [&](Communicator& comm) {
    torch::Tensor ints = torch::ones({3}, torch::kInt32);
    EXPECT_THROW(comm.allreduce(ints, ReduceOp::kSum), Error);
    torch::Tensor strided = torch::ones({4, 4}).t();
    EXPECT_THROW(comm.allreduce(strided, ReduceOp::kSum), Error);
  });
}

INSTANTIATE_TEST_SUITE_P(Backends, CommTest,
                         ::testing::Values(Case{"inproc", 1}, Case{"inproc", 2}, Case{"inproc", 3},
                                           Case{"inproc", 4}, Case{"gloo", 1}, Case{"gloo", 2},
                                           Case{"gloo", 3}, Case{"gloo", 4}),
                         case_name);
INSTANTIATE_TEST_SUITE_P(Backends, CommMultiRankTest,
                         ::testing::Values(Case{"inproc", 2}, Case{"inproc", 4}, Case{"gloo", 2},
                                           Case{"gloo", 3}),
                         case_name);

// A rank that stays alive but never joins makes the others fail within the
// timeout with a PeerFailure naming the operation. The silent rank keeps its
// connections open until then, so it is the timeout that fires, not a
// closed connection.
TEST(CommTimeout, FiresForEveryBackend) {
  for (const std::string backend : {"inproc", "gloo"}) {
    SCOPED_TRACE(backend);
    std::string error;
    std::atomic<bool> done{false};
    const double start = now_seconds();
    run_ranks(
        backend, 2,
        [&](Communicator& comm) {
          comm.barrier();  // both connected
          if (comm.rank() == 1) {  // "stalls": alive, never calls allreduce
            while (!done) std::this_thread::sleep_for(std::chrono::milliseconds(10));
            return;
          }
          torch::Tensor t = torch::ones({4});
          try {
            comm.allreduce(t, ReduceOp::kSum);
          } catch (const PeerFailure& e) {
            error = e.what();
          }
          done = true;
        },
        std::chrono::milliseconds(1500));
    const double took = now_seconds() - start;
    EXPECT_GT(took, 1.4);
    EXPECT_LT(took, 15.0);
    EXPECT_NE(error.find("rank 0"), std::string::npos) << error;
    EXPECT_NE(error.find("allreduce"), std::string::npos) << error;
    EXPECT_NE(error.find("imed out"), std::string::npos) << error;  // "Timed out" / "timed out"
  }
}

// The in-process link (a colocated PS shard and its worker): a receive
// posted first gets its message straight from the sender; one posted late
// takes it from the mailbox; messages keep their order either way; a size
// mismatch is named; a receive dropped unwaited takes nothing from the next.
TEST(InProcLink, PostedReceivesGetTheirMessagesInOrderWhateverCameFirst) {
  const auto group = std::make_shared<InProcGroup>(2);
  InProcCommunicator a(group, 0, std::chrono::milliseconds(2000));
  InProcCommunicator b(group, 1, std::chrono::milliseconds(2000));
  const auto values = [](float first) { return torch::arange(first, first + 4, torch::kFloat32); };
  torch::Tensor early1 = torch::zeros({4}), early2 = torch::zeros({4}), late = torch::zeros({4});
  auto r1 = b.irecv(early1, 0, 7);  // posted before the sends
  auto r2 = b.irecv(early2, 0, 7);
  a.isend(values(1), 1, 7)->wait();
  a.isend(values(5), 1, 7)->wait();
  a.isend(values(9), 1, 8)->wait();  // before its receive
  auto r3 = b.irecv(late, 0, 8);
  r2->wait();
  r1->wait();
  r3->wait();
  EXPECT_TRUE(torch::equal(early1, values(1)));
  EXPECT_TRUE(torch::equal(early2, values(5)));
  EXPECT_TRUE(torch::equal(late, values(9)));

  torch::Tensor small = torch::zeros({2});
  auto mismatched = b.irecv(small, 0, 9);
  a.isend(values(1), 1, 9)->wait();
  std::string error;
  try {
    mismatched->wait();
  } catch (const Error& e) {
    error = e.what();
  }
  EXPECT_EQ(error, "rank 1: recv from rank 0 got 16 bytes, expected 8");

  torch::Tensor dropped = torch::zeros({4}), kept = torch::zeros({4});
  b.irecv(dropped, 0, 10).reset();  // never waited
  auto taken = b.irecv(kept, 0, 10);
  a.isend(values(3), 1, 10)->wait();
  taken->wait();
  EXPECT_TRUE(torch::equal(kept, values(3)));
  EXPECT_TRUE(torch::equal(dropped, torch::zeros({4})));
}

// A rank writing to a peer that died must fail with an error it can
// report, not die of SIGPIPE: Gloo writes without MSG_NOSIGNAL, and a rank
// killed by SIGPIPE was named as the job's failure in place of the rank
// that died (a cluster drill saw it). Without the session's SIG_IGN this
// test process dies at the write.
TEST(CommSession, AWriteToADeadPeerFailsWithEpipeNotSigpipe) {
  SessionOptions o;
  o.backend = "gloo";
  o.rank = 0;
  o.size = 1;
  o.host_store = true;
  o.store_bind_addr = "127.0.0.1";
  o.timeout = std::chrono::milliseconds(5000);
  const CommSession session(o);
  int fds[2] = {-1, -1};
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  ::close(fds[1]);  // the peer is gone
  const char byte = 'x';
  errno = 0;
  EXPECT_EQ(::write(fds[0], &byte, 1), -1);
  EXPECT_EQ(errno, EPIPE);
  ::close(fds[0]);
}

TEST(TcpStore, SetGetAddAndTimeout) {
  TcpStoreServer server("127.0.0.1", 0);
  TcpStore a("127.0.0.1", server.port(), std::chrono::milliseconds(500));
  TcpStore b("127.0.0.1", server.port(), std::chrono::milliseconds(500));
  a.set("k", std::string("v\0w", 3));
  EXPECT_EQ(b.get("k"), std::string("v\0w", 3));
  EXPECT_EQ(a.add("n", 2), 2);
  EXPECT_EQ(b.add("n", 3), 5);
  try {
    b.get("missing");
    FAIL() << "expected a timeout";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'missing'"), std::string::npos) << e.what();
  }
}

TEST(TcpStore, UnreachableMasterIsNamed) {
  uint16_t port = 0;
  {
    TcpStoreServer probe("127.0.0.1", 0);  // a port that was free and is now closed
    port = probe.port();
  }
  try {
    TcpStore s("127.0.0.1", port, std::chrono::milliseconds(300));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot reach the rendezvous store"), std::string::npos);
  }
}

}  // namespace
}  // namespace dlscale::comm
