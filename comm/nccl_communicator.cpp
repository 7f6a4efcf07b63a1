// The `nccl` backend: collectives with NCCL on device memory. One source, compiled twice, as
// kernels/cuda/*.cu are: with GLASS_EMU against the emulated NCCL (emucuda/nccl) for `emu`, and
// against NVIDIA's nccl.h for `cuda`. The call sites are the same; under emu only the library
// behind them changes.
//
// Bootstrap, as NCCL programs do it: rank 0 asks NCCL for a unique id, MPI broadcasts it, every
// rank calls ncclCommInitRank with it. On cuda each rank works on the GPU of its node-local rank
// (comm::device_for_this_rank), made current before the set-up.
#include <mpi.h>

#include "comm/backends.h"
#include "engine/mpi_runtime.h"

#if defined(GLASS_EMU)
#include "emucuda/nccl/nccl.h"
#define GLASS_NCCL_FACTORY make_nccl_communicator_emu
#else
#include <cuda_runtime.h>
#if defined(GLASS_CUDA_RUNTIME_EMU)  // cuda on the emulated CUDA runtime: the emulated NCCL
#include "emucuda/nccl/nccl.h"
#else
#include <nccl.h>
#endif

#include "engine/cuda/runtime.h"
#define GLASS_NCCL_FACTORY make_nccl_communicator_cuda
#endif

namespace glass::comm {

namespace {

void nccl_check(ncclResult_t r, const char* what) {
  GLASS_CHECK(r == ncclSuccess, "{} failed: {} (ncclResult_t {})", what, ncclGetErrorString(r),
              static_cast<int>(r));
}

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return ncclFloat32;
    case DType::f64:
      return ncclFloat64;
    case DType::bf16:
      return ncclBfloat16;  // broadcast and all-gather only (check_tensor)
    default:
      return ncclInt32;  // check_tensor admits f32, f64, i32 and bf16 only
  }
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(Device device, const CommOptions& options)
      : Communicator(device, mpi::world_rank(), mpi::world_size(), mpi::local_rank(), options) {
#if !defined(GLASS_EMU)
    // The rank's own GPU (comm::device_for_this_rank chose it), current for NCCL's set-up.
    cuda::require_device(device.index);
#endif
    run_setup("ncclCommInitRank", [this] {
      ncclUniqueId id;
      if (rank() == 0) nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
      MPI_Request request;
      MPI_Ibcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD, &request);
      GLASS_CHECK(mpi::wait(request, aborted_, "MPI_Ibcast of the NCCL id"),
                  "the NCCL id broadcast was aborted after the time-out");
      nccl_check(ncclCommInitRank(&comm_, size(), id, rank()), "ncclCommInitRank");
    });
  }
  ~NcclCommunicator() override {
    drain();
    if (comm_ != nullptr && !aborted_) ncclCommDestroy(comm_);
  }
  const char* backend() const override { return "nccl"; }

 private:
  cudaStream_t native_stream() { return static_cast<cudaStream_t>(stream().native()); }

  void run_all_reduce(void* data, int64_t count, DType dtype, ReduceOp op) override {
    nccl_check(ncclAllReduce(data, data, static_cast<size_t>(count), nccl_type(dtype),
                             op == ReduceOp::sum ? ncclSum : ncclAvg, comm_, native_stream()),
               "ncclAllReduce");
  }

  void run_broadcast(void* data, int64_t count, DType dtype, int root) override {
    nccl_check(ncclBroadcast(data, data, static_cast<size_t>(count), nccl_type(dtype), root, comm_,
                             native_stream()),
               "ncclBroadcast");
  }

  // In place as NCCL defines it: the rank's chunk is recvbuff for the reduce-scatter, and
  // sendbuff for the all-gather (sendbuff == recvbuff + rank * count).
  void run_reduce_scatter(void* data, int64_t chunk, DType dtype, ReduceOp op) override {
    void* mine = static_cast<char*>(data) +
                 static_cast<size_t>(rank()) * static_cast<size_t>(chunk) * dtype_size(dtype);
    nccl_check(ncclReduceScatter(data, mine, static_cast<size_t>(chunk), nccl_type(dtype),
                                 op == ReduceOp::sum ? ncclSum : ncclAvg, comm_, native_stream()),
               "ncclReduceScatter");
  }

  void run_all_gather(void* data, int64_t chunk, DType dtype) override {
    const void* mine = static_cast<const char*>(data) +
                       static_cast<size_t>(rank()) * static_cast<size_t>(chunk) * dtype_size(dtype);
    nccl_check(ncclAllGather(mine, data, static_cast<size_t>(chunk), nccl_type(dtype), comm_,
                             native_stream()),
               "ncclAllGather");
  }

  // ncclCommAbort may be called while a collective waits for a dead rank: NCCL makes it return.
  void abort() override {
    aborted_ = true;
    if (comm_ != nullptr) ncclCommAbort(comm_);
  }

  ncclComm_t comm_ = nullptr;
  std::atomic<bool> aborted_{false};
};

}  // namespace

std::unique_ptr<Communicator> GLASS_NCCL_FACTORY(Device device, const CommOptions& options) {
  return std::make_unique<NcclCommunicator>(device, options);
}

}  // namespace glass::comm
