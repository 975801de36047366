// The Backend seam's one typed suite (plan/backend.h): every implementation runs the same tests on
// 3 ranks (threads), on the world group and on a second named group: the simulated rendezvous,
// the fake, Gloo over a TCPStore on loopback, and c10d's NCCL where the build has it and a GPU is
// there; the NCCL backend on the toolkit's NCCL (real/nccl_backend.h) runs the cases one rank can
// run on one rank (NCCL refuses two ranks on one GPU), where the build has it and a GPU is there.
// Then what only some of them do: a desync (rendezvous), a killed rank (rendezvous), a dropped
// rank and an injected failure (fake), Gloo's error mapping.
#include "plan/backend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <functional>
#include <latch>
#include <thread>

#include "comm/fake_backend.h"
#include "comm/rendezvous_backend.h"
#ifdef PETRSIM_HAVE_REAL
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "real/c10d_backend.h"
#endif
#ifdef PETRSIM_HAVE_NCCL_DIRECT
#include "real/nccl_backend.h"
#include "tests/map_store.h"
#endif

namespace petrsim::comm {
namespace {

constexpr uint32_t kWorld = 3;
using Body = std::function<void(uint32_t rank, Backend& comm)>;

// What a case expects on the suite's 3 ranks, or on the one rank an implementation may have.
template <class T>
T PerWorld(uint32_t world, T three_ranks, T one_rank) {
  EXPECT_TRUE(world == 3 || world == 1) << world;
  return world == 1 ? one_rank : three_ranks;
}

Collective Call(Collective::Op op, Collective::ReduceOp reduce, uint64_t numel, Collective::Dtype dtype,
                const std::string& group = "default_pg") {
  Collective c;
  c.set_op(op);
  c.set_reduce_op(reduce);
  c.set_numel(numel);
  c.set_dtype(dtype);
  c.set_process_group(group);
  return c;
}

// Runs body on `world` threads, one Backend each from `join`, and rethrows the first failure.
void OnThreads(const std::function<std::unique_ptr<Backend>(uint32_t)>& join, const Body& body,
               uint32_t world = kWorld) {
  std::vector<std::exception_ptr> errors(world);
  std::vector<std::thread> ranks;
  for (uint32_t rank = 0; rank < world; ++rank) {
    ranks.emplace_back([&, rank] {
      try {
        auto comm = join(rank);
        body(rank, *comm);
      } catch (...) {
        errors[rank] = std::current_exception();
      }
    });
  }
  for (auto& thread : ranks) thread.join();
  for (const auto& error : errors) {
    if (error) std::rethrow_exception(error);
  }
}

struct RendezvousImpl {
  static constexpr const char* kName = "SimulatedRendezvous";
  static constexpr uint32_t kRanks = kWorld;
  static void Run(std::chrono::milliseconds timeout, const Body& body) {
    sim::RendezvousWorld world(kWorld, timeout);
    OnThreads([&](uint32_t rank) { return world.Join(rank); }, body);
  }
};

struct FakeImpl {
  static constexpr const char* kName = "Fake";
  static constexpr uint32_t kRanks = kWorld;
  static void Run(std::chrono::milliseconds timeout, const Body& body) {
    FakeWorld world(kWorld, timeout);
    OnThreads([&](uint32_t rank) { return world.Join(rank); }, body);
  }
};

#ifdef PETRSIM_HAVE_REAL
template <petrsim::Comm::Backend kBackend>
struct C10dImpl {
  static constexpr const char* kName = kBackend == petrsim::Comm::gloo ? "Gloo" : "C10dNccl";
  static constexpr uint32_t kRanks = kWorld;
  static void Run(std::chrono::milliseconds timeout, const Body& body) {
    if (const auto why = real::C10dUnavailable(kBackend)) GTEST_SKIP() << *why;
    c10d::TCPStoreOptions server;
    server.port = 0;
    server.isServer = true;
    server.numWorkers = kWorld;
    server.waitWorkers = false;
    server.timeout = std::chrono::seconds(30);
    auto store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", server);
    OnThreads(
        [&](uint32_t rank) -> std::unique_ptr<Backend> {
          c10d::TCPStoreOptions client;
          client.port = store->getPort();
          client.isServer = false;
          client.timeout = std::chrono::seconds(30);
          auto rank_store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", client);
          return std::make_unique<real::C10dBackend>(rank_store, rank, kWorld, timeout, kBackend,
                                                     static_cast<int32_t>(rank), "127.0.0.1",
                                                     std::vector<std::string>{"other"});
        },
        body);
  }
};
#endif

#ifdef PETRSIM_HAVE_NCCL_DIRECT
// The NCCL backend on one rank (NCCL refuses two ranks on one GPU): skipped without a GPU.
struct NcclDirectImpl {
  static constexpr const char* kName = "Nccl";
  static constexpr uint32_t kRanks = 1;
  static void Run(std::chrono::milliseconds timeout, const Body& body) {
    if (const auto why = real::NcclUnavailable()) GTEST_SKIP() << *why;
    real::MapStore store;
    OnThreads(
        [&](uint32_t rank) -> std::unique_ptr<Backend> {
          real::NcclOptions options;
          options.rank = rank;
          options.world_size = kRanks;
          options.timeout = timeout;
          options.process_group_names = {"default_pg", "other"};
          return std::make_unique<real::NcclBackend>(store, options);
        },
        body, kRanks);
  }
};
#endif

template <class Impl>
class BackendContract : public ::testing::Test {
 protected:
  static void Run(const Body& body) { Impl::Run(std::chrono::seconds(30), body); }
  // The implementation's ranks: the suite's 3, or 1 for the NCCL backend.
  static constexpr uint32_t kRanks = Impl::kRanks;
};

// A case that needs a second rank (one that does not arrive, or arrives later) on an
// implementation with one.
#define PETRSIM_NEEDS_SECOND_RANK()                                                                            \
  if (TypeParam::kRanks < 2) {                                                                                 \
    GTEST_SKIP() << TypeParam::kName << " runs on one rank here (NCCL refuses two ranks on one GPU); its own " \
                 << "watchdog and init timeout tests are in tests/nccl_backend_test.cc";                       \
  }

using Implementations = ::testing::Types<RendezvousImpl, FakeImpl
#ifdef PETRSIM_HAVE_REAL
                                         ,
                                         C10dImpl<petrsim::Comm::gloo>, C10dImpl<petrsim::Comm::nccl>
#endif
#ifdef PETRSIM_HAVE_NCCL_DIRECT
                                         ,
                                         NcclDirectImpl
#endif
                                         >;
struct ImplementationName {
  template <class Impl>
  static std::string GetName(int) {
    return Impl::kName;
  }
};
TYPED_TEST_SUITE(BackendContract, Implementations, ImplementationName);

std::vector<double> Done(Work& work) {
  work.Wait();
  EXPECT_TRUE(work.IsCompleted());
  return work.Result();
}

TYPED_TEST(BackendContract, ReductionsSumAverageMaxMinAndProduct) {
  const uint32_t world = this->kRanks;
  this->Run([world](uint32_t rank, Backend& comm) {
    using Values = std::vector<double>;
    EXPECT_EQ(comm.rank(), rank);
    EXPECT_EQ(comm.world_size(), world);
    const Values input = {1.0 + rank, 2.0 * (rank + 1)};  // rank 0: 1 2, 1: 2 4, 2: 3 6
    const std::vector<std::pair<Collective::ReduceOp, Values>> cases = {
        {Collective::sum, PerWorld<Values>(world, {6, 12}, {1, 2})},
        {Collective::avg, PerWorld<Values>(world, {2, 4}, {1, 2})},
        {Collective::max, PerWorld<Values>(world, {3, 6}, {1, 2})},
        {Collective::min, {1, 2}},
        {Collective::product, PerWorld<Values>(world, {6, 48}, {1, 2})}};
    for (const auto& [op, expected] : cases) {
      auto work = comm.Issue(Call(Collective::allreduce, op, 2, Collective::float32), input);
      EXPECT_EQ(Done(*work), expected) << "rank " << rank << " op " << Collective::ReduceOp_Name(op);
    }
    // The dtype converts the values first: int64 truncates 0.5 + rank to rank.
    auto as_int =
        comm.Issue(Call(Collective::allreduce, Collective::sum, 1, Collective::int64), std::vector<double>{0.5 + rank});
    EXPECT_EQ(Done(*as_int), PerWorld<Values>(world, {3}, {0}));
    // Missing values are zeros; extra ones are not sent.
    auto padded =
        comm.Issue(Call(Collective::allreduce, Collective::sum, 3, Collective::float64), std::vector<double>{1.0});
    EXPECT_EQ(Done(*padded), PerWorld<Values>(world, {3, 0, 0}, {1, 0, 0}));
  });
}

TYPED_TEST(BackendContract, BroadcastAndReduceUseRankZeroAsRoot) {
  const uint32_t world = this->kRanks;
  this->Run([world](uint32_t rank, Backend& comm) {
    auto broadcast = comm.Issue(Call(Collective::broadcast, Collective::sum, 3, Collective::int32),
                                std::vector<double>(3, 10.0 + rank));
    EXPECT_EQ(Done(*broadcast), (std::vector<double>{10, 10, 10})) << "rank " << rank;
    auto reduce =
        comm.Issue(Call(Collective::reduce, Collective::max, 1, Collective::float64), std::vector<double>{5.0 * rank});
    const auto reduced = Done(*reduce);
    if (rank == 0) {
      EXPECT_EQ(reduced, PerWorld<std::vector<double>>(world, {10}, {0}));
    }
  });
}

TYPED_TEST(BackendContract, GatherScatterAllToAllAndBarrier) {
  const uint32_t world = this->kRanks;
  this->Run([world](uint32_t rank, Backend& comm) {
    using Values = std::vector<double>;
    const double r = rank;
    auto gather = comm.Issue(Call(Collective::allgather, Collective::sum, 2, Collective::float32),
                             std::vector<double>{r, r + 0.5});
    EXPECT_EQ(Done(*gather), PerWorld<Values>(world, {0, 0.5, 1, 1.5, 2, 2.5}, {0, 0.5})) << "rank " << rank;
    auto scatter = comm.Issue(Call(Collective::reduce_scatter, Collective::sum, 2, Collective::float32),
                              std::vector<double>{(r + 1) * 1.0, (r + 1) * 2.0});
    EXPECT_EQ(Done(*scatter), PerWorld<Values>(world, {6, 12}, {1, 2})) << "rank " << rank;
    auto all_to_all =
        comm.Issue(Call(Collective::alltoall, Collective::sum, 1, Collective::float32), std::vector<double>{r});
    EXPECT_EQ(Done(*all_to_all), PerWorld<Values>(world, {0, 1, 2}, {0})) << "rank " << rank;
    auto barrier = comm.Issue(Call(Collective::barrier, Collective::sum, 1, Collective::float32), {});
    EXPECT_TRUE(Done(*barrier).empty());
  });
}

TYPED_TEST(BackendContract, NamedGroupsKeepTheirOwnSequence) {
  const uint32_t world = this->kRanks;
  this->Run([world](uint32_t rank, Backend& comm) {
    // Issued on "other" first, then on the world group, and waited for in reverse: each group
    // pairs its own calls.
    auto on_other = comm.Issue(Call(Collective::allreduce, Collective::sum, 1, Collective::float32, "other"),
                               std::vector<double>{1.0});
    auto on_world =
        comm.Issue(Call(Collective::allreduce, Collective::sum, 1, Collective::float32), std::vector<double>{10.0});
    EXPECT_EQ(Done(*on_world), (std::vector<double>{10.0 * world})) << "rank " << rank;
    EXPECT_EQ(Done(*on_other), (std::vector<double>{1.0 * world})) << "rank " << rank;
  });
}

// A large collective given only its head (a scenario-sized gradient bucket: the real gradients, then padding): the
// rest is zeros, and ResultHead is Result's head, however many values are asked for.
TYPED_TEST(BackendContract, AHeadOfALargeCollectiveIsPaddedWithZeros) {
  const uint32_t world = this->kRanks;
  this->Run([world](uint32_t rank, Backend& comm) {
    using Values = std::vector<double>;
    const uint64_t numel = 300'000;  // 1.2 MB as float32: large enough for C10dBackend to reuse its memory
    const Collective call = Call(Collective::allreduce, Collective::sum, numel, Collective::float32);
    auto work = comm.Issue(call, std::vector<double>{1.0 + rank, 0.5});
    work->Wait();
    EXPECT_EQ(work->ResultHead(3), PerWorld<Values>(world, {6, 1.5, 0}, {1, 0.5, 0})) << "rank " << rank;
    EXPECT_EQ(work->ResultHead(0), (std::vector<double>{}));
    const std::vector<double>& all = work->Result();
    ASSERT_EQ(all.size(), numel);
    EXPECT_EQ(std::count(all.begin(), all.end(), 0.0), static_cast<std::ptrdiff_t>(numel - 2));
    EXPECT_EQ(work->ResultHead(2), PerWorld<Values>(world, {6, 1.5}, {1, 0.5}));
    EXPECT_EQ(work->ResultHead(numel + 5).size(), numel);
    // The same size again, once the first is released (a real comm may reuse its memory): zeros
    // past the input again, not the first one's sums.
    work.reset();
    auto again = comm.Issue(call, std::vector<double>{2.0});
    again->Wait();
    EXPECT_EQ(again->ResultHead(3), PerWorld<Values>(world, {6, 0, 0}, {2, 0, 0})) << "rank " << rank;
    again.reset();
    auto empty = comm.Issue(call, {});
    empty->Wait();
    EXPECT_EQ(empty->ResultHead(4), (std::vector<double>(4, 0.0))) << "rank " << rank;
  });
}

TYPED_TEST(BackendContract, AWorkCompletesOnlyOnceEveryRankIssuedIt) {
  PETRSIM_NEEDS_SECOND_RANK();
  std::latch rank0_checked(kWorld);
  this->Run([&](uint32_t rank, Backend& comm) {
    const Collective sum = Call(Collective::allreduce, Collective::sum, 1, Collective::float32);
    if (rank == 0) {
      auto work = comm.Issue(sum, std::vector<double>{1.0});
      // Nobody else has issued it yet: it cannot have completed.
      EXPECT_FALSE(work->IsCompleted());
      rank0_checked.arrive_and_wait();
      EXPECT_EQ(Done(*work), (std::vector<double>{3}));
    } else {
      rank0_checked.arrive_and_wait();
      auto work = comm.Issue(sum, std::vector<double>{1.0});
      EXPECT_EQ(Done(*work), (std::vector<double>{3}));
    }
  });
}

TYPED_TEST(BackendContract, AWaitForARankThatNeverIssuesFailsWithTheTimeout) {
  PETRSIM_NEEDS_SECOND_RANK();
  // Every rank that waits fails; at least one with the timeout. Gloo closes its connections
  // when its own wait times out, so a peer may see that first (kPeerGone), as in a real job.
  std::latch others_done(kWorld);
  std::atomic<int> timeouts{0};
  TypeParam::Run(std::chrono::milliseconds(500), [&](uint32_t rank, Backend& comm) {
    if (rank != 2) {
      auto work =
          comm.Issue(Call(Collective::allreduce, Collective::sum, 1, Collective::float32), std::vector<double>{1.0});
      try {
        work->Wait();
        ADD_FAILURE() << "rank " << rank << ": the collective completed without rank 2";
      } catch (const CommError& error) {
        timeouts += error.kind() == CommError::Kind::kTimeout;
        EXPECT_TRUE(error.kind() == CommError::Kind::kTimeout || error.kind() == CommError::Kind::kPeerGone)
            << error.what();
      }
    }
    // Rank 2 stays until the others gave up, as a hung rank would.
    others_done.arrive_and_wait();
  });
  if (!::testing::Test::IsSkipped()) {
    EXPECT_GE(timeouts.load(), 1);
  }
}

// Waits (bounded) for a callback that another thread may still be running.
bool Eventually(const std::atomic<int>& calls) {
  for (int i = 0; i < 2000 && calls.load() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return calls.load() > 0;
}

TYPED_TEST(BackendContract, WaitForPollsAPendingWorkAndOnCompletionCallsBackOnce) {
  PETRSIM_NEEDS_SECOND_RANK();
  std::latch rank0_polled(kWorld);
  std::atomic<int> calls{0};
  this->Run([&](uint32_t rank, Backend& comm) {
    const Collective sum = Call(Collective::allreduce, Collective::sum, 1, Collective::float32);
    if (rank != 0) {
      rank0_polled.arrive_and_wait();
      auto work = comm.Issue(sum, std::vector<double>{1.0});
      EXPECT_TRUE(work->WaitFor(30'000));
      EXPECT_EQ(work->Result(), (std::vector<double>{3}));
    } else {
      auto work = comm.Issue(sum, std::vector<double>{1.0});
      // Nobody else has issued it: a poll and a short wait both find it pending, and it stays valid.
      EXPECT_FALSE(work->WaitFor(0));
      EXPECT_FALSE(work->WaitFor(20));
      work->OnCompletion([&] { ++calls; });
      EXPECT_EQ(calls.load(), 0);
      rank0_polled.arrive_and_wait();
      EXPECT_TRUE(Eventually(calls)) << "the callback never ran";
      EXPECT_TRUE(work->WaitFor(0));
      EXPECT_EQ(Done(*work), (std::vector<double>{3}));
    }
    // On a work that is already over, the callback runs at once, on this thread.
    auto again = comm.Issue(sum, std::vector<double>{1.0});
    again->Wait();
    int at_once = 0;
    again->OnCompletion([&] { ++at_once; });
    EXPECT_EQ(at_once, 1);
  });
  if (!::testing::Test::IsSkipped()) {
    EXPECT_EQ(calls.load(), 1);
  }
}

TYPED_TEST(BackendContract, OnCompletionCallsBackWhenTheWorkFails) {
  PETRSIM_NEEDS_SECOND_RANK();
  std::latch others_done(kWorld);
  TypeParam::Run(std::chrono::milliseconds(500), [&](uint32_t rank, Backend& comm) {
    if (rank == 0) {
      std::atomic<int> calls{0};
      auto work =
          comm.Issue(Call(Collective::allreduce, Collective::sum, 1, Collective::float32), std::vector<double>{1.0});
      work->OnCompletion([&] { ++calls; });
      EXPECT_TRUE(Eventually(calls)) << "no callback for a collective rank 1 and 2 never issue";
      EXPECT_THROW(work->WaitFor(0), CommError);
    }
    // Ranks 1 and 2 stay until rank 0 gave up, as hung ranks would.
    others_done.arrive_and_wait();
  });
}

TYPED_TEST(BackendContract, OnAllCompletedCallsBackOnceAfterTheLastWork) {
  PETRSIM_NEEDS_SECOND_RANK();
  std::latch rank0_waiting(kWorld);
  std::atomic<int> calls{0};
  this->Run([&](uint32_t rank, Backend& comm) {
    const Collective sum = Call(Collective::allreduce, Collective::sum, 1, Collective::float32);
    const Collective other = Call(Collective::allreduce, Collective::max, 2, Collective::float32, "other");
    std::vector<std::unique_ptr<Work>> works;
    if (rank != 0) {
      // Only the first is issued before rank 0 waits: the second keeps it waiting.
      works.push_back(comm.Issue(sum, std::vector<double>{1.0}));
      rank0_waiting.arrive_and_wait();
      works.push_back(comm.Issue(other, std::vector<double>{2.0, 3.0}));
    } else {
      works.push_back(comm.Issue(sum, std::vector<double>{1.0}));
      works.push_back(comm.Issue(other, std::vector<double>{2.0, 3.0}));
      comm.OnAllCompleted(works, [&] { ++calls; });
      EXPECT_FALSE(works[1]->IsCompleted()) << "ranks 1 and 2 have not issued it";
      EXPECT_EQ(calls.load(), 0);
      rank0_waiting.arrive_and_wait();
      EXPECT_TRUE(Eventually(calls)) << "the callback never ran";
    }
    for (const auto& work : works) work->Wait();
    EXPECT_EQ(works[0]->Result(), (std::vector<double>{3}));
    EXPECT_EQ(works[1]->Result(), (std::vector<double>{2, 3}));
    // Every one of them over (or none given): at once, on this thread.
    int at_once = 0;
    std::vector<std::unique_ptr<Work>> done;
    done.push_back(comm.Issue(sum, std::vector<double>{1.0}));
    done.back()->Wait();
    comm.OnAllCompleted(done, [&] { ++at_once; });
    comm.OnAllCompleted({}, [&] { ++at_once; });
    EXPECT_EQ(at_once, 2);
  });
  if (!::testing::Test::IsSkipped()) {
    EXPECT_EQ(calls.load(), 1);
  }
}

TEST(CollectiveOutput, ConvertsToTheDtypeAndReducesInIt) {
  // The values real torch 1.13 gives for torch.tensor(v, dtype=float64).to(dtype).
  EXPECT_EQ(ToDtype(Collective::float16, 1.0 + 1.0 / 4096), 1.0);              // below half precision's step
  EXPECT_EQ(ToDtype(Collective::float16, 1.0 + 3.0 / 2048), 1.0 + 1.0 / 512);  // a tie goes to even
  EXPECT_EQ(ToDtype(Collective::float16, 65504.0), 65504.0);                   // the largest half
  EXPECT_EQ(ToDtype(Collective::float16, 1e-8), 0.0);                          // below half the least subnormal
  EXPECT_EQ(ToDtype(Collective::float16, 7e-8), 5.9604644775390625e-08);       // the least subnormal
  EXPECT_EQ(ToDtype(Collective::float16, -2049.0), -2048.0);                   // 11 bits: a tie to even
  EXPECT_EQ(ToDtype(Collective::bfloat16, 1.0 + 1.0 / 256), 1.0);
  EXPECT_EQ(ToDtype(Collective::bfloat16, 1.0 + 3.0 / 256), 1.0 + 1.0 / 64);  // tie to even
  EXPECT_EQ(ToDtype(Collective::int32, -2.7), -2.0);
  EXPECT_EQ(ToDtype(Collective::uint8, 257.0), 1.0);
  EXPECT_EQ(ToDtype(Collective::float32, 0.1), static_cast<double>(0.1f));
  // float16 sums saturate to infinity where float32 would not.
  const Collective half = Call(Collective::allreduce, Collective::sum, 1, Collective::float16);
  EXPECT_TRUE(std::isinf(CollectiveOutput(half, {{60000}, {60000}}, 0)[0]));
}

TEST(RendezvousBackend, ADesyncFailsEveryMemberWithAMismatch) {
  sim::RendezvousWorld world(kWorld, std::chrono::seconds(30));
  std::latch issued(kWorld);
  OnThreads([&](uint32_t rank) { return world.Join(rank); },
            [&](uint32_t rank, Backend& comm) {
              // Rank 1 issues 4 elements where the others issue 2, one after the other.
              if (rank == 1) issued.arrive_and_wait();
              auto work =
                  comm.Issue(Call(Collective::allreduce, Collective::sum, rank == 1 ? 4 : 2, Collective::float32),
                             std::vector<double>{1.0});
              if (rank != 1) issued.arrive_and_wait();
              try {
                work->Wait();
                ADD_FAILURE() << "rank " << rank << " completed a desynced collective";
              } catch (const CommError& error) {
                EXPECT_EQ(error.kind(), CommError::Kind::kMismatch) << error.what();
                EXPECT_NE(std::string(error.what()).find("x 4"), std::string::npos) << error.what();
              }
            });
}

TEST(RendezvousBackend, AKilledRankFailsItsPeersWithPeerGone) {
  sim::RendezvousWorld world(kWorld, std::chrono::seconds(30));
  OnThreads([&](uint32_t rank) { return world.Join(rank); },
            [&](uint32_t rank, Backend& comm) {
              if (rank == 2) {
                world.Kill(2);
                return;
              }
              auto work = comm.Issue(Call(Collective::allreduce, Collective::sum, 1, Collective::float32),
                                     std::vector<double>{1.0});
              try {
                work->Wait();
                ADD_FAILURE() << "rank " << rank << " completed without rank 2";
              } catch (const CommError& error) {
                EXPECT_EQ(error.kind(), CommError::Kind::kPeerGone) << error.what();
              }
            });
}

TEST(FakeBackend, RecordsCallsDropsASilencedRankAndInjectsFailures) {
  FakeWorld world(2, std::chrono::milliseconds(200));
  auto rank0 = world.Join(0);
  auto rank1 = world.Join(1);
  const Collective sum = Call(Collective::allreduce, Collective::sum, 1, Collective::float32);
  auto a = rank0->Issue(sum, std::vector<double>{1});
  auto b = rank1->Issue(sum, std::vector<double>{2});
  EXPECT_EQ(Done(*a), (std::vector<double>{3}));
  EXPECT_EQ(Done(*b), (std::vector<double>{3}));
  ASSERT_EQ(world.calls().size(), 2u);
  EXPECT_EQ(world.calls()[1], (std::pair<uint32_t, std::string>{1, "allreduce(sum) float32 x 1 on default_pg"}));

  world.FailNextCall(1, CommError(CommError::Kind::kPeerGone, "injected"));
  auto failed = rank1->Issue(sum, std::vector<double>{2});
  EXPECT_TRUE(failed->IsCompleted());
  EXPECT_THROW(failed->Wait(), CommError);

  world.Silence(1);
  auto lonely = rank0->Issue(sum, std::vector<double>{1});
  auto dropped = rank1->Issue(sum, std::vector<double>{2});
  try {
    lonely->Wait();
    ADD_FAILURE() << "completed without rank 1";
  } catch (const CommError& error) {
    EXPECT_EQ(error.kind(), CommError::Kind::kTimeout);
    EXPECT_NE(std::string(error.what()).find("ranks 1 never issued it"), std::string::npos) << error.what();
  }
}

#ifdef PETRSIM_HAVE_REAL
TEST(C10dBackend, SortsC10dErrorsByKind) {
  EXPECT_EQ(real::CommErrorFromC10d("[gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 1000ms for recv "
                                    "operation to complete")
                .kind(),
            CommError::Kind::kTimeout);
  EXPECT_EQ(
      real::CommErrorFromC10d("[gloo/transport/tcp/pair.cc:598] Connection closed by peer [127.0.0.1]:3456").kind(),
      CommError::Kind::kPeerGone);
  EXPECT_EQ(real::CommErrorFromC10d("something else").kind(), CommError::Kind::kBackend);
}
#endif

}  // namespace
}  // namespace petrsim::comm
