// The NCCL backend (real/nccl_backend.h) beyond the typed suite of tests/backend_test.cc: the
// bytes its values are staged as (any machine), the unique id's way through the store and what it
// says without a GPU (where the build found the toolkit), and on a GPU its watchdog (a collective
// held past the timeout: the release's lines, the work failed, the communicator aborted, the other
// groups unharmed) and a communicator whose second rank never joins.
#include <gtest/gtest.h>

#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <mutex>
#include <regex>
#include <thread>

#include "plan/backend.h"
#include "real/staged_values.h"
#ifdef PETRSIM_HAVE_NCCL_DIRECT
#include "real/nccl_backend.h"
#include "tests/map_store.h"
#endif

namespace petrsim::real {
namespace {

std::vector<std::byte> Encoded(Collective::Dtype dtype, std::vector<double> values) {
  std::vector<std::byte> bytes(values.size() * DtypeBytes(dtype));
  EncodeValues(dtype, values, bytes);
  return bytes;
}

template <class T>
T As(const std::vector<std::byte>& bytes, size_t i = 0) {
  T value;
  std::memcpy(&value, bytes.data() + i * sizeof(T), sizeof(T));
  return value;
}

TEST(StagedValues, EncodesEachDtypeAsTheGpuLaysItOut) {
  // IEEE binary16: 1 = 0x3C00, -2 = 0xC000, the largest half 0x7BFF, the least subnormal 0x0001.
  const auto half = Encoded(Collective::float16, {1.0, -2.0, 65504.0, 5.9604644775390625e-08, 0.0, 1e6});
  EXPECT_EQ(As<uint16_t>(half, 0), 0x3C00);
  EXPECT_EQ(As<uint16_t>(half, 1), 0xC000);
  EXPECT_EQ(As<uint16_t>(half, 2), 0x7BFF);
  EXPECT_EQ(As<uint16_t>(half, 3), 0x0001);
  EXPECT_EQ(As<uint16_t>(half, 4), 0x0000);
  EXPECT_EQ(As<uint16_t>(half, 5), 0x7C00);  // beyond the largest half: infinity, as c10d converts
  // bfloat16: the top half of the float32, rounded to nearest even first.
  const auto brain = Encoded(Collective::bfloat16, {1.0, 1.0 + 3.0 / 256});
  EXPECT_EQ(As<uint16_t>(brain, 0), 0x3F80);
  EXPECT_EQ(As<uint16_t>(brain, 1), 0x3F82);
  EXPECT_EQ(As<float>(Encoded(Collective::float32, {0.1})), 0.1f);
  EXPECT_EQ(As<double>(Encoded(Collective::float64, {0.1})), 0.1);
  EXPECT_EQ(As<int32_t>(Encoded(Collective::int32, {-2.7})), -2);
  EXPECT_EQ(As<int64_t>(Encoded(Collective::int64, {9007199254740992.0})), int64_t{9007199254740992});
  EXPECT_EQ(As<uint8_t>(Encoded(Collective::uint8, {257.0})), 1);
  EXPECT_EQ(DtypeBytes(Collective::uint8), 1u);
  EXPECT_EQ(DtypeBytes(Collective::bfloat16), 2u);
  EXPECT_EQ(DtypeBytes(Collective::int64), 8u);
}

TEST(StagedValues, DecodingGivesBackTheValuesInTheDtype) {
  const std::vector<double> values = {0.0,  -0.0,    1.0, -1.5,    0.1,   3.14159, 65504.0, 1e-8,
                                      7e-8, -2049.0, 1e6, -123.75, 255.0, 256.5,   1e300};
  for (const auto dtype : {Collective::float32, Collective::float16, Collective::bfloat16, Collective::float64,
                           Collective::int32, Collective::int64, Collective::uint8}) {
    const std::vector<double> decoded = DecodeValues(dtype, Encoded(dtype, values));
    ASSERT_EQ(decoded.size(), values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      const double expected = comm::ToDtype(dtype, values[i]);
      EXPECT_EQ(decoded[i], expected) << Collective::Dtype_Name(dtype) << " of " << values[i];
      // The sign of a zero only in the float types.
      const bool floating = dtype != Collective::int32 && dtype != Collective::int64 && dtype != Collective::uint8;
      if (floating) {
        EXPECT_EQ(std::signbit(decoded[i]), std::signbit(expected))
            << Collective::Dtype_Name(dtype) << " of " << values[i];
      }
    }
  }
  // Every half is its own value again: all 65536 bit patterns but the NaNs.
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    std::vector<std::byte> one(2);
    const uint16_t half = static_cast<uint16_t>(bits);
    std::memcpy(one.data(), &half, 2);
    const double value = DecodeValues(Collective::float16, one)[0];
    if (std::isnan(value)) continue;
    EXPECT_EQ(As<uint16_t>(Encoded(Collective::float16, {value})), half) << "bits " << bits;
  }
}

#ifdef PETRSIM_HAVE_NCCL_DIRECT

TEST(NcclUniqueId, RankZeroMakesItAndTheOthersReadItFromTheStore) {
  MapStore store;
  std::atomic<int> made{0};
  std::vector<std::vector<uint8_t>> ids(4);
  std::vector<std::thread> ranks;
  for (uint32_t rank = 0; rank < 4; ++rank) {
    ranks.emplace_back([&, rank] {
      ids[rank] = ShareUniqueId(store, UniqueIdKey("other"), rank, 3, [&] {
        ++made;
        return std::vector<uint8_t>{7, 8, 9};
      });
    });
  }
  for (auto& thread : ranks) thread.join();
  EXPECT_EQ(made.load(), 1);
  for (const auto& id : ids) EXPECT_EQ(id, (std::vector<uint8_t>{7, 8, 9}));
  EXPECT_EQ(UniqueIdKey("other"), "petrsim_nccl/other/unique_id");
  // Something else under the key: said, not handed to NCCL.
  store.Set("wrong", {1, 2});
  try {
    ShareUniqueId(store, "wrong", 1, 128, [] { return std::vector<uint8_t>(128); });
    ADD_FAILURE() << "a 2-byte id was taken";
  } catch (const comm::CommError& error) {
    EXPECT_EQ(error.kind(), comm::CommError::Kind::kBackend);
    EXPECT_NE(std::string(error.what()).find("has 2 bytes where NCCL's has 128"), std::string::npos) << error.what();
  }
}

TEST(NcclBackend, SaysWhyItCannotRunWithoutAGpu) {
  EXPECT_TRUE(std::regex_match(NcclVersion(), std::regex(R"(2\.\d+\.\d+)"))) << NcclVersion();
  const auto why = NcclUnavailable();
  if (!why) GTEST_SKIP() << "this machine has a GPU (the GPU tests below run instead)";
  EXPECT_NE(why->find("no GPU the NCCL backend can use (cudaGetDeviceCount"), std::string::npos) << *why;
  MapStore store;
  try {
    NcclBackend backend(store, NcclOptions{});
    ADD_FAILURE() << "an NCCL backend without a GPU";
  } catch (const ScenarioError& error) {
    EXPECT_NE(std::string(error.what()).find(*why), std::string::npos) << error.what();
  }
}

Collective Sum(const std::string& group = "default_pg") {
  Collective c;
  c.set_op(Collective::allreduce);
  c.set_reduce_op(Collective::sum);
  c.set_numel(4);
  c.set_dtype(Collective::float32);
  c.set_process_group(group);
  return c;
}

TEST(NcclBackend, TheWatchdogPrintsTheReleasesLinesFailsTheWorkAndAbortsItsGroup) {
  if (const auto why = NcclUnavailable()) GTEST_SKIP() << *why;
  MapStore store;
  NcclOptions options;
  options.timeout = std::chrono::milliseconds(500);
  options.process_group_names = {"default_pg", "other"};
  options.version = *ParseTorchVersion("2.4");
  std::mutex mutex;
  std::vector<std::string> lines;
  options.watchdog_lines = [&](const std::vector<std::string>& printed) {
    std::lock_guard<std::mutex> lock(mutex);
    lines = printed;
  };
  NcclBackend backend(store, options);
  // A first collective completes; the second is held on its stream for 4 s, past the 0.5 s timeout.
  auto first = backend.Issue(Sum(), std::vector<double>{1, 2});
  first->Wait();
  EXPECT_EQ(first->Result(), (std::vector<double>{1, 2, 0, 0}));
  backend.DelayNextCollectiveForTesting(std::chrono::seconds(4));
  const auto start = std::chrono::steady_clock::now();
  auto held = backend.Issue(Sum(), std::vector<double>{1});
  try {
    held->Wait();
    ADD_FAILURE() << "a collective held past its timeout completed";
  } catch (const comm::CommError& error) {
    EXPECT_EQ(error.kind(), comm::CommError::Kind::kTimeout) << error.what();
    EXPECT_NE(std::string(error.what()).find("seq 2 timed out"), std::string::npos) << error.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3)) << "failed only after the hold";
  {
    std::lock_guard<std::mutex> lock(mutex);
    std::string all;
    for (const auto& line : lines) all += line + "\n";
    EXPECT_NE(all.find("Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2, OpType=ALLREDUCE"),
              std::string::npos)
        << all;
    EXPECT_NE(all.find("Timeout(ms)=500"), std::string::npos) << all;
  }
  // The group's communicator is gone; the other group's still works.
  EXPECT_THROW(backend.Issue(Sum(), std::vector<double>{1}), comm::CommError);
  auto other = backend.Issue(Sum("other"), std::vector<double>{3});
  other->Wait();
  EXPECT_EQ(other->ResultHead(1), (std::vector<double>{3}));
}

TEST(NcclBackend, ACommunicatorWhoseOtherRankNeverJoinsTimesOut) {
  if (const auto why = NcclUnavailable()) GTEST_SKIP() << *why;
  MapStore store;
  NcclOptions options;
  options.world_size = 2;  // rank 1 never comes
  options.timeout = std::chrono::milliseconds(1000);
  const auto start = std::chrono::steady_clock::now();
  try {
    NcclBackend backend(store, options);
    ADD_FAILURE() << "a communicator of 2 ranks with one";
  } catch (const comm::CommError& error) {
    EXPECT_EQ(error.kind(), comm::CommError::Kind::kTimeout) << error.what();
    EXPECT_NE(std::string(error.what()).find("waiting for all 2 ranks to join"), std::string::npos) << error.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20)) << "the abort hung";
}

#endif

}  // namespace
}  // namespace petrsim::real
