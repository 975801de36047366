// The Comm seam's real side (real/rank_comm.h): every plan op as a c10d call on 3 Gloo ranks
// (threads over a TCPStore on loopback), on the world group and on a second named group, with
// the values each rank must end with, including the two Gloo lacks (AVG, reduce_scatter).
#include "real/rank_comm.h"

#include <gtest/gtest.h>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <exception>
#include <functional>
#include <thread>

namespace petrsim::real {
namespace {

constexpr uint32_t kWorld = 3;

Collective Step(Collective::Op op, Collective::ReduceOp reduce, uint64_t numel, Collective::Dtype dtype,
                const std::string& group = "default_pg") {
  Collective c;
  c.set_op(op);
  c.set_reduce_op(reduce);
  c.set_numel(numel);
  c.set_dtype(dtype);
  c.set_process_group(group);
  return c;
}

// Runs body(rank, comm) on kWorld ranks, each with its own RankComm over one TCPStore.
void OnRanks(const std::function<void(uint32_t, RankComm&)>& body) {
  c10d::TCPStoreOptions server;
  server.port = 0;
  server.isServer = true;
  server.numWorkers = kWorld;
  server.waitWorkers = false;
  server.timeout = std::chrono::seconds(30);
  auto store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", server);
  std::vector<std::exception_ptr> errors(kWorld);
  std::vector<std::thread> ranks;
  for (uint32_t rank = 0; rank < kWorld; ++rank) {
    ranks.emplace_back([&, rank] {
      try {
        c10d::TCPStoreOptions client;
        client.port = store->getPort();
        client.isServer = false;
        client.timeout = std::chrono::seconds(30);
        auto rank_store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", client);
        RankComm comm(rank_store, rank, kWorld, std::chrono::seconds(30), Comm::gloo, 0, "127.0.0.1", {"other"});
        body(rank, comm);
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

std::vector<double> Values(const at::Tensor& t) {
  const auto d = t.to(torch::kFloat64).contiguous();
  return std::vector<double>(d.data_ptr<double>(), d.data_ptr<double>() + d.numel());
}

TEST(RankComm, ReductionsSumAverageMaxMinAndProduct) {
  OnRanks([](uint32_t rank, RankComm& comm) {
    const auto input = torch::tensor({1.0 + rank, 2.0 * (rank + 1)});  // rank 0: 1 2, 1: 2 4, 2: 3 6
    const std::vector<std::pair<Collective::ReduceOp, std::vector<double>>> cases = {{Collective::sum, {6, 12}},
                                                                                     {Collective::avg, {2, 4}},
                                                                                     {Collective::max, {3, 6}},
                                                                                     {Collective::min, {1, 2}},
                                                                                     {Collective::product, {6, 48}}};
    for (const auto& [op, expected] : cases) {
      auto pending = comm.Launch(Step(Collective::allreduce, op, 2, Collective::float32), input);
      pending.Wait();
      EXPECT_EQ(Values(pending.result()), expected) << "rank " << rank << " op " << Collective::ReduceOp_Name(op);
    }
    // The caller's tensor is never reduced in place; a step's dtype converts the copy.
    auto as_int = comm.Launch(Step(Collective::allreduce, Collective::sum, 2, Collective::int64), input);
    as_int.Wait();
    EXPECT_EQ(as_int.result().scalar_type(), at::kLong);
    EXPECT_EQ(Values(as_int.result()), (std::vector<double>{6, 12}));
    EXPECT_EQ(Values(input), (std::vector<double>{1.0 + rank, 2.0 * (rank + 1)}));
  });
}

TEST(RankComm, BroadcastAndReduceUseRankZeroAsRoot) {
  OnRanks([](uint32_t rank, RankComm& comm) {
    auto broadcast = comm.Launch(Step(Collective::broadcast, Collective::sum, 3, Collective::int32),
                                 torch::full({3}, 10 + static_cast<int>(rank)));
    broadcast.Wait();
    EXPECT_EQ(Values(broadcast.result()), (std::vector<double>{10, 10, 10})) << "rank " << rank;
    auto reduce =
        comm.Launch(Step(Collective::reduce, Collective::max, 1, Collective::float64), torch::full({1}, 5.0 * rank));
    reduce.Wait();
    if (rank == 0) EXPECT_EQ(Values(reduce.result()), (std::vector<double>{10}));
  });
}

TEST(RankComm, GatherScatterAndAllToAll) {
  OnRanks([](uint32_t rank, RankComm& comm) {
    const double r = rank;
    auto gather =
        comm.Launch(Step(Collective::allgather, Collective::sum, 2, Collective::float32), torch::tensor({r, r + 0.5}));
    gather.Wait();
    EXPECT_EQ(Values(gather.result()), (std::vector<double>{0, 0.5, 1, 1.5, 2, 2.5})) << "rank " << rank;
    // reduce_scatter: every rank gives the same chunks scaled by rank + 1; rank r keeps chunk r
    // of the sum (6x the input), here of a 2-element input repeated per rank.
    auto scatter = comm.Launch(Step(Collective::reduce_scatter, Collective::sum, 2, Collective::float32),
                               torch::tensor({(r + 1) * 1.0, (r + 1) * 2.0}));
    scatter.Wait();
    EXPECT_EQ(Values(scatter.result()), (std::vector<double>{6, 12})) << "rank " << rank;
    auto all_to_all =
        comm.Launch(Step(Collective::alltoall, Collective::sum, 1, Collective::float32), torch::tensor({r}));
    all_to_all.Wait();
    EXPECT_EQ(Values(all_to_all.result()), (std::vector<double>{0, 1, 2})) << "rank " << rank;
    auto barrier = comm.Launch(Step(Collective::barrier, Collective::sum, 1, Collective::float32), torch::zeros({1}));
    barrier.Wait();
  });
}

TEST(RankComm, NamedGroupsAreSeparateProcessGroups) {
  OnRanks([](uint32_t rank, RankComm& comm) {
    // Issued in opposite orders on the two groups would deadlock one group; each group keeps its
    // own sequence: launch on "other" first, then the world group, and wait in reverse.
    auto on_other = comm.Launch(Step(Collective::allreduce, Collective::sum, 1, Collective::float32, "other"),
                                torch::full({1}, 1.0));
    auto on_world =
        comm.Launch(Step(Collective::allreduce, Collective::sum, 1, Collective::float32), torch::full({1}, 10.0));
    on_world.Wait();
    on_other.Wait();
    EXPECT_EQ(Values(on_world.result()), (std::vector<double>{30})) << "rank " << rank;
    EXPECT_EQ(Values(on_other.result()), (std::vector<double>{3})) << "rank " << rank;
  });
}

}  // namespace
}  // namespace petrsim::real
