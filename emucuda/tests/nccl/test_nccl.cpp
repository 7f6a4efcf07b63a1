// The emulated NCCL called directly, as comm/nccl_communicator.cpp calls it: bootstrap with an id
// broadcast over MPI, NCCL's answers to wrong arguments, groups, and ncclAvg; ncclReduceScatter and
// ncclAllGather: their argument checks, in-place and out-of-place results, and (on the emulated
// CUDA runtime) their order on a stream. Runs as both ranks of `mpirun -np 2` (main.cpp).
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <vector>

#if defined(GLASS_CUDA_RUNTIME_EMU)
#include <cuda_runtime_api.h>
#endif

#include "emucuda/nccl/nccl.h"
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

TEST(EmuNccl, ReduceScatterAndAllGatherCheckTheirArgumentsAsNcclDoes) {
  ncclComm_t comm = make_comm();
  const int n = glass::mpi::world_size(), rank = glass::mpi::world_rank();
  std::vector<float> x(static_cast<size_t>(3 * n), 1.0f), y(3, 0.0f);
  float* mine = x.data() + 3 * rank;
  EXPECT_EQ(ncclReduceScatter(x.data(), y.data(), 3, ncclFloat32, ncclSum, nullptr, nullptr),
            ncclInvalidArgument);
  EXPECT_EQ(ncclReduceScatter(nullptr, y.data(), 3, ncclFloat32, ncclSum, comm, nullptr),
            ncclInvalidArgument);
  EXPECT_EQ(ncclReduceScatter(x.data(), nullptr, 3, ncclFloat32, ncclSum, comm, nullptr),
            ncclInvalidArgument);
  EXPECT_EQ(ncclReduceScatter(x.data(), y.data(), 3, ncclNumTypes, ncclSum, comm, nullptr),
            ncclInvalidArgument);
  EXPECT_EQ(ncclReduceScatter(x.data(), y.data(), 3, ncclFloat32, ncclNumOps, comm, nullptr),
            ncclInvalidArgument);
  // 16-bit floats are moved (ZeRO-1 gathers bf16 weights) but not reduced by this emulation.
  EXPECT_EQ(ncclReduceScatter(x.data(), y.data(), 3, ncclBfloat16, ncclSum, comm, nullptr),
            ncclInvalidArgument);
  EXPECT_EQ(ncclAllGather(nullptr, x.data(), 3, ncclFloat32, comm, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclAllGather(y.data(), x.data(), 3, ncclFloat32, nullptr, nullptr),
            ncclInvalidArgument);
  // Overlapping buffers other than the in-place layout (the rank's own chunk): refused.
  float* not_mine = x.data() + 3 * ((rank + 1) % n) + 1;
  EXPECT_EQ(ncclReduceScatter(x.data(), not_mine, 3, ncclFloat32, ncclSum, comm, nullptr),
            ncclInvalidArgument);
  EXPECT_EQ(ncclAllGather(not_mine, x.data(), 3, ncclFloat32, comm, nullptr), ncclInvalidArgument);
  // Count 0 moves nothing and is fine, as in NCCL; the in-place layouts are accepted.
  EXPECT_EQ(ncclReduceScatter(x.data(), y.data(), 0, ncclFloat32, ncclSum, comm, nullptr),
            ncclSuccess);
  EXPECT_EQ(ncclReduceScatter(x.data(), mine, 3, ncclFloat32, ncclSum, comm, nullptr), ncclSuccess);
  EXPECT_EQ(ncclAllGather(mine, x.data(), 3, ncclFloat32, comm, nullptr), ncclSuccess);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

// bf16 (and f16) travel as 16-bit words: every rank gets each rank's bits, NaN patterns included.
TEST(EmuNccl, AllGatherAndBroadcastMove16BitFloatsBitForBit) {
  ncclComm_t comm = make_comm();
  const int n = glass::mpi::world_size(), rank = glass::mpi::world_rank();
  auto word = [](int r, int i) { return static_cast<uint16_t>(0x7FC1 + 0x100 * r + i); };
  std::vector<uint16_t> x(static_cast<size_t>(3 * n), 0);
  for (int i = 0; i < 3; ++i) x[static_cast<size_t>(3 * rank + i)] = word(rank, i);
  ASSERT_EQ(ncclAllGather(x.data() + 3 * rank, x.data(), 3, ncclBfloat16, comm, nullptr),
            ncclSuccess);
  for (int r = 0; r < n; ++r)
    for (int i = 0; i < 3; ++i) EXPECT_EQ(x[static_cast<size_t>(3 * r + i)], word(r, i));
  std::vector<uint16_t> b(2, rank == 0 ? 0xBEEF : 0);
  ASSERT_EQ(ncclBroadcast(b.data(), b.data(), 2, ncclFloat16, 0, comm, nullptr), ncclSuccess);
  EXPECT_EQ(b, std::vector<uint16_t>(2, 0xBEEF));
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

TEST(EmuNccl, ReduceScatterAndAllGatherInPlaceAndOutOfPlace) {
  ncclComm_t comm = make_comm();
  const int n = glass::mpi::world_size(), rank = glass::mpi::world_rank();
  const size_t chunk = 5, total = chunk * static_cast<size_t>(n);
  // Rank r sends x[i] = 100 r + i: the sum of element i over the ranks is exact.
  std::vector<double> x(total);
  for (size_t i = 0; i < total; ++i) x[i] = 100.0 * rank + static_cast<double>(i);
  auto sum_of = [&](size_t i) { return 100.0 * n * (n - 1) / 2 + n * static_cast<double>(i); };
  // Out of place, average: recvbuff gets this rank's chunk; sendbuff is untouched.
  std::vector<double> out(chunk, -1), in_place = x;
  ASSERT_EQ(ncclReduceScatter(x.data(), out.data(), chunk, ncclFloat64, ncclAvg, comm, nullptr),
            ncclSuccess);
  for (size_t i = 0; i < chunk; ++i) EXPECT_EQ(out[i], sum_of(rank * chunk + i) / n);
  for (size_t i = 0; i < total; ++i) EXPECT_EQ(x[i], 100.0 * rank + static_cast<double>(i));
  // In place, sum: the own chunk becomes the sum; the other chunks stay as they were.
  ASSERT_EQ(ncclReduceScatter(in_place.data(), in_place.data() + rank * chunk, chunk, ncclFloat64,
                              ncclSum, comm, nullptr),
            ncclSuccess);
  for (size_t i = 0; i < total; ++i) {
    const bool own = i / chunk == static_cast<size_t>(rank);
    EXPECT_EQ(in_place[i], own ? sum_of(i) : x[i]) << "element " << i;
  }
  // All-gather, out of place and in place: chunk r of the result is rank r's chunk.
  std::vector<double> gathered(total, -1), own(chunk);
  for (size_t i = 0; i < chunk; ++i) own[i] = 10.0 * rank + static_cast<double>(i);
  ASSERT_EQ(ncclAllGather(own.data(), gathered.data(), chunk, ncclFloat64, comm, nullptr),
            ncclSuccess);
  std::vector<double> want(total);
  for (size_t i = 0; i < total; ++i) want[i] = 10.0 * static_cast<double>(i / chunk) + i % chunk;
  EXPECT_EQ(gathered, want);
  std::vector<double> again(total, -1);
  std::copy(own.begin(), own.end(), again.begin() + rank * chunk);
  ASSERT_EQ(
      ncclAllGather(again.data() + rank * chunk, again.data(), chunk, ncclFloat64, comm, nullptr),
      ncclSuccess);
  EXPECT_EQ(again, want);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

#if defined(GLASS_CUDA_RUNTIME_EMU)
// On a stream-ordered communicator (the one `cuda` on the emulated runtime uses) the collectives
// are queued on the stream: they return at once, and run after the copy queued before them and
// before the copy queued after them.
TEST(EmuNccl, ReduceScatterAndAllGatherRunInStreamOrder) {
  glass::mpi::ensure_initialized();
  ncclUniqueId id;
  if (glass::mpi::world_rank() == 0) {
    ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  }
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  const int n = glass::mpi::world_size(), rank = glass::mpi::world_rank();
  ncclComm_t comm = nullptr;
  ASSERT_EQ(glass_emu_ncclCommInitRankStreamOrdered(&comm, n, id, rank), ncclSuccess);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  const size_t chunk = 4, total = chunk * static_cast<size_t>(n);
  void* memory = nullptr;
  ASSERT_EQ(cudaMalloc(&memory, total * sizeof(float)), cudaSuccess);
  float* buf = static_cast<float*>(memory);
  std::vector<float> host(total, 1.0f + static_cast<float>(rank)), back(total, -1);
  ASSERT_EQ(
      cudaMemcpyAsync(buf, host.data(), total * sizeof(float), cudaMemcpyHostToDevice, stream),
      cudaSuccess);
  ASSERT_EQ(ncclReduceScatter(buf, buf + rank * chunk, chunk, ncclFloat32, ncclSum, comm, stream),
            ncclSuccess);
  ASSERT_EQ(ncclAllGather(buf + rank * chunk, buf, chunk, ncclFloat32, comm, stream), ncclSuccess);
  ASSERT_EQ(
      cudaMemcpyAsync(back.data(), buf, total * sizeof(float), cudaMemcpyDeviceToHost, stream),
      cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  // Every element is the sum over ranks of 1 + r.
  EXPECT_EQ(back, std::vector<float>(total, static_cast<float>(n * (n + 1) / 2)));
  ncclResult_t async = ncclInternalError;
  EXPECT_EQ(ncclCommGetAsyncError(comm, &async), ncclSuccess);
  EXPECT_EQ(async, ncclSuccess);
  EXPECT_EQ(cudaFree(buf), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}
#endif

}  // namespace
