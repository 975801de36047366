// The real backend's DataLoader (real/threaded_loader.h): in-order batches, batch k on worker
// k mod W, at most P * W batches in flight ahead, exceptions raised at their batch, W = 0 loads
// in the caller, a stuck worker times the consumer out.
#include "real/threaded_loader.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>

namespace petrsim::real {
namespace {

struct Loaded {
  uint64_t batch;
  int32_t worker;
};

TEST(ThreadedLoader, BatchesComeInOrderFromWorkerKModW) {
  for (const uint32_t workers : {1u, 2u, 4u}) {
    ThreadedLoader<Loaded> loader(workers, 2, 50, [](int32_t w, uint64_t b) {
      if (b % 7 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));  // out-of-order finishes
      return Loaded{b, w};
    });
    for (uint64_t k = 0; k < 50; ++k) {
      const auto batch = loader.Next();
      ASSERT_TRUE(batch.has_value());
      EXPECT_EQ(batch->batch, k);
      EXPECT_EQ(batch->worker, static_cast<int32_t>(k % workers));
    }
    EXPECT_FALSE(loader.Next().has_value());
  }
}

TEST(ThreadedLoader, AtMostPrefetchTimesWorkersAhead) {
  std::atomic<uint64_t> highest{0};
  ThreadedLoader<Loaded> loader(3, 2, 100, [&](int32_t w, uint64_t b) {
    uint64_t seen = highest.load();
    while (b > seen && !highest.compare_exchange_weak(seen, b)) {
    }
    return Loaded{b, w};
  });
  EXPECT_EQ(loader.dispatched(), 6u);  // batches 0..5 before anything is consumed
  for (uint64_t k = 0; k < 40; ++k) {
    ASSERT_TRUE(loader.Next().has_value());
    EXPECT_LE(loader.dispatched(), k + 1 + 6);
  }
  EXPECT_LE(highest.load(), 40u + 6u);
}

TEST(ThreadedLoader, AWorkersExceptionIsRaisedAtItsBatch) {
  ThreadedLoader<Loaded> loader(2, 2, 10, [](int32_t w, uint64_t b) {
    if (b == 3) throw std::runtime_error("bounded resample gave up");
    return Loaded{b, w};
  });
  for (uint64_t k = 0; k < 3; ++k) EXPECT_EQ(loader.Next()->batch, k);
  EXPECT_THROW(loader.Next(), std::runtime_error);
  EXPECT_EQ(loader.Next()->batch, 4u);  // the loader goes on, as PyTorch's does
}

TEST(ThreadedLoader, WithoutWorkersTheCallerLoads) {
  const auto caller = std::this_thread::get_id();
  ThreadedLoader<Loaded> loader(0, 2, 3, [&](int32_t w, uint64_t b) {
    EXPECT_EQ(std::this_thread::get_id(), caller);
    return Loaded{b, w};
  });
  EXPECT_EQ(loader.dispatched(), 0u);
  EXPECT_EQ(loader.Next()->worker, -1);
}

TEST(ThreadedLoader, AStuckWorkerTimesTheConsumerOut) {
  std::atomic<bool> release{false};
  auto loader = std::make_unique<ThreadedLoader<Loaded>>(2, 1, 4, [&](int32_t w, uint64_t b) {
    while (b == 1 && !release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return Loaded{b, w};
  });
  EXPECT_TRUE(loader->Next(std::chrono::milliseconds(1000)).has_value());
  EXPECT_FALSE(loader->Next(std::chrono::milliseconds(50)).has_value());
  EXPECT_TRUE(loader->timed_out());
  release = true;  // let the worker finish so the destructor can join it
  EXPECT_EQ(loader->Next(std::chrono::milliseconds(5000))->batch, 1u);
}

}  // namespace
}  // namespace petrsim::real
