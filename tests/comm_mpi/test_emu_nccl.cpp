// The emulated NCCL called directly, as comm/nccl_communicator.cpp calls it: bootstrap with an id
// broadcast over MPI, NCCL's answers to wrong arguments, groups, and ncclAvg.
#include <gtest/gtest.h>
#include <mpi.h>

#include <vector>

#include "engine/emu/nccl/nccl.h"
#include "engine/mpi_runtime.h"

namespace {

ncclComm_t make_comm() {
  glass::mpi::ensure_initialized();
  ncclUniqueId id;
  if (glass::mpi::world_rank() == 0) {
    EXPECT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  }
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t comm = nullptr;
  EXPECT_EQ(ncclCommInitRank(&comm, glass::mpi::world_size(), id, glass::mpi::world_rank()),
            ncclSuccess);
  return comm;
}

TEST(EmuNccl, WrongArgumentsGetNcclsResultCodes) {
  ncclComm_t comm = make_comm();
  int n = 0, rank = -1;
  ASSERT_EQ(ncclCommCount(comm, &n), ncclSuccess);
  ASSERT_EQ(ncclCommUserRank(comm, &rank), ncclSuccess);
  EXPECT_EQ(n, glass::mpi::world_size());
  EXPECT_EQ(rank, glass::mpi::world_rank());
  std::vector<float> x(5, 1.0f);
  EXPECT_EQ(ncclAllReduce(x.data(), x.data(), 5, ncclFloat32, ncclSum, nullptr, nullptr),
            ncclInvalidArgument);
  EXPECT_EQ(ncclAllReduce(nullptr, x.data(), 5, ncclFloat32, ncclSum, comm, nullptr),
            ncclInvalidArgument);
  EXPECT_EQ(ncclAllReduce(x.data(), x.data(), 5, ncclNumTypes, ncclSum, comm, nullptr),
            ncclInvalidArgument);
  EXPECT_EQ(ncclAllReduce(x.data(), x.data(), 5, ncclBfloat16, ncclSum, comm, nullptr),
            ncclInvalidArgument);  // not carried by this emulation (documented in nccl.h)
  EXPECT_EQ(ncclAllReduce(x.data(), x.data(), 5, ncclFloat32, ncclNumOps, comm, nullptr),
            ncclInvalidArgument);
  EXPECT_EQ(ncclBroadcast(x.data(), x.data(), 5, ncclFloat32, n, comm, nullptr),
            ncclInvalidArgument);
  EXPECT_EQ(ncclBroadcast(x.data(), x.data(), 5, ncclFloat32, -1, comm, nullptr),
            ncclInvalidArgument);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);  // no group open
  ncclUniqueId garbage{};
  ncclComm_t other = nullptr;
  EXPECT_EQ(ncclCommInitRank(&other, n, garbage, rank), ncclInvalidArgument);
  EXPECT_EQ(ncclCommInitRank(&other, n, garbage, n), ncclInvalidArgument);
  EXPECT_STREQ(ncclGetErrorString(ncclInvalidArgument),
               "invalid argument (run with NCCL_DEBUG=WARN for details)");
  ncclResult_t async = ncclInternalError;
  EXPECT_EQ(ncclCommGetAsyncError(comm, &async), ncclSuccess);
  EXPECT_EQ(async, ncclSuccess);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

TEST(EmuNccl, GroupedCallsRunAtGroupEndInOrder) {
  ncclComm_t comm = make_comm();
  const int n = glass::mpi::world_size(), rank = glass::mpi::world_rank();
  // out-of-place average of 3 + rank, in-place sum of rank, broadcast of rank 1's value
  std::vector<double> send{3.0 + rank}, avg{-1}, sum{static_cast<double>(rank)};
  std::vector<int32_t> b{rank * 10};
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclAllReduce(send.data(), avg.data(), 1, ncclFloat64, ncclAvg, comm, nullptr),
            ncclSuccess);
  ASSERT_EQ(ncclAllReduce(sum.data(), sum.data(), 1, ncclFloat64, ncclSum, comm, nullptr),
            ncclSuccess);
  ASSERT_EQ(ncclBroadcast(b.data(), b.data(), 1, ncclInt32, 1, comm, nullptr), ncclSuccess);
  EXPECT_EQ(avg[0], -1);  // deferred until the group ends
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  EXPECT_EQ(avg[0], 3.0 + (n - 1) / 2.0);
  EXPECT_EQ(sum[0], n * (n - 1) / 2.0);
  EXPECT_EQ(b[0], 10);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

}  // namespace
