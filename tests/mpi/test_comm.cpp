// The MPI layer itself (halfscope/mpi/comm.hpp): collectives against values every rank can
// compute alone, variable-length gathers, and error agreement: a failure on one rank reaches
// every rank with its type and the failing rank's message, never a hang. (The pieces in which
// payloads past MPI's int counts travel are not exercised: that needs over 2 GiB per rank.)
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "halfscope/core/error.hpp"
#include "halfscope/mpi/comm.hpp"

namespace halfscope::mpi {
namespace {

TEST(MpiComm, ReductionsMatchClosedForms) {
  const Comm world = Comm::world();
  const std::int64_t r = world.rank(), p = world.size();
  EXPECT_EQ(world.sum(r), p * (p - 1) / 2);
  EXPECT_EQ(world.max(r), p - 1);
  EXPECT_EQ(world.min(r), 0);
  std::vector<double> v{1.0, static_cast<double>(r), 0.5};
  world.sum(std::span<double>(v));
  EXPECT_EQ(v[0], static_cast<double>(p));
  EXPECT_EQ(v[1], static_cast<double>(p * (p - 1) / 2));
  EXPECT_EQ(v[2], 0.5 * static_cast<double>(p));
}

TEST(MpiComm, BroadcastAndGatherKeepEveryByte) {
  const Comm world = Comm::world();
  const int root = world.size() - 1;
  std::vector<std::int32_t> values(1000);
  if (world.rank() == root) std::iota(values.begin(), values.end(), 7);
  world.broadcast(std::span<std::int32_t>(values), root);
  for (std::size_t i = 0; i < values.size(); ++i) ASSERT_EQ(values[i], static_cast<int>(i) + 7);
  EXPECT_EQ(world.broadcast_string(world.rank() == root ? "from the last rank" : "", root),
            "from the last rank");
  // Rank r sends r bytes of value r (rank 0 nothing): lengths and contents arrive in rank order.
  std::vector<std::byte> mine(static_cast<std::size_t>(world.rank()),
                              static_cast<std::byte>(world.rank()));
  const auto all = world.gather_bytes(mine, 0);
  if (world.rank() == 0) {
    ASSERT_EQ(all.size(), static_cast<std::size_t>(world.size()));
    for (int r = 0; r < world.size(); ++r) {
      ASSERT_EQ(all[static_cast<std::size_t>(r)].size(), static_cast<std::size_t>(r));
      for (std::byte b : all[static_cast<std::size_t>(r)]) EXPECT_EQ(b, static_cast<std::byte>(r));
    }
  } else {
    EXPECT_TRUE(all.empty());
  }
}

TEST(MpiComm, DeviceSharersCountTheRanksUsingEachDevice) {
  // The tests run every rank on one host: count the ranks that chose each device.
  const Comm world = Comm::world();
  const int device = rank_device(world);
  std::vector<std::int64_t> users(64, 0);
  if (device >= 0) users.at(static_cast<std::size_t>(device)) = 1;
  world.sum(std::span<std::int64_t>(users));
  EXPECT_EQ(device_sharers(world),
            device >= 0 ? users[static_cast<std::size_t>(device)] : std::int64_t{1});
}

TEST(MpiComm, SplitGroupsRanksByColour) {
  const Comm world = Comm::world();
  const Comm half = world.split(world.rank() % 2, world.rank());
  EXPECT_EQ(half.size(), (world.size() + 1 - world.rank() % 2) / 2);
  EXPECT_EQ(half.rank(), world.rank() / 2);
  EXPECT_EQ(half.sum(std::int64_t{1}), half.size());
}

TEST(MpiComm, AgreeRaisesTheLowestFailingRanksErrorEverywhere) {
  const Comm world = Comm::world();
  const int failing = world.size() / 2;  // rank 0 on one rank, else a rank in the middle
  try {
    agree(world, [&] {
      if (world.rank() >= failing)
        throw InvalidInput("input.npy: expected 3 dimensions, found " +
                           std::to_string(world.rank()));
    });
    FAIL() << "agree returned although rank " << failing << " failed";
  } catch (const InvalidInput& e) {
    EXPECT_EQ(std::string(e.what()), "MPI rank " + std::to_string(failing) +
                                         ": input.npy: expected 3 dimensions, found " +
                                         std::to_string(failing));
    EXPECT_TRUE(failure_was_agreed(e.what()));
    EXPECT_FALSE(failure_was_agreed("another error"));
  }
  // A failure of another kind keeps its kind; success passes on every rank.
  EXPECT_THROW(agree(world,
                     [&] {
                       if (world.rank() == world.size() - 1)
                         throw NotPositiveDefinite("tile (2, 2)");
                     }),
               NotPositiveDefinite);
  EXPECT_NO_THROW(agree(world, [] {}));
}

}  // namespace
}  // namespace halfscope::mpi
