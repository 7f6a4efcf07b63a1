// The `nccl` backend: collectives with NCCL on device memory. One source, compiled as
// kernels/cuda/*.cu are: against the emulated NCCL (emucuda/nccl) for `emu`, and against NVIDIA's
// nccl.h for `cuda` (GLASS_NVIDIA_NCCL). On the emulated CUDA runtime the emulated NCCL serves
// `cuda` too, from the same compile: its communicators for `cuda` queue their collectives on the
// runtime's streams (ncclCommInitRank's stream-ordered twin), those for `emu` run them at the call.
// The call sites are the same; only the library behind them changes.
//
// Bootstrap, as NCCL programs do it: rank 0 asks NCCL for a unique id, MPI broadcasts it, every
// rank calls ncclCommInitRank with it. On cuda each rank works on the GPU of its node-local rank
// (comm::device_for_this_rank), made current before the set-up.
#include <mpi.h>

#include "comm/backends.h"
#include "engine/mpi_runtime.h"

#if defined(GLASS_NVIDIA_NCCL)
#include <cuda_runtime.h>
#include <nccl.h>
#else
#include "emucuda/nccl/nccl.h"
#endif
#if defined(GLASS_HAS_CUDA)
#include "engine/cuda/runtime.h"
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

// ncclCommInitRank for a communicator on `device`. The emulated NCCL serves `cuda` on the emulated
// CUDA runtime with communicators that queue on its streams, as NCCL does on a GPU.
ncclResult_t init_rank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank,
                       [[maybe_unused]] Device device) {
#if !defined(GLASS_NVIDIA_NCCL) && defined(GLASS_CUDA_RUNTIME_EMU)
  if (device.kind == DeviceKind::cuda)
    return glass_emu_ncclCommInitRankStreamOrdered(comm, nranks, id, rank);
#endif
  return ncclCommInitRank(comm, nranks, id, rank);
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(Device device, const CommOptions& options)
      : Communicator(device, mpi::world_rank(), mpi::world_size(), mpi::local_rank(), options) {
#if defined(GLASS_HAS_CUDA)
    // The rank's own GPU (comm::device_for_this_rank chose it), current for NCCL's set-up.
    if (device.kind == DeviceKind::cuda) cuda::require_device(device.index);
#endif
    run_setup("ncclCommInitRank", [this] {
      ncclUniqueId id;
      if (rank() == 0) nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
      MPI_Request request;
      MPI_Ibcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD, &request);
      GLASS_CHECK(mpi::wait(request, aborted_, "MPI_Ibcast of the NCCL id"),
                  "the NCCL id broadcast was aborted after the time-out");
      nccl_check(init_rank(&comm_, size(), id, rank(), this->device()), "ncclCommInitRank");
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

#if !defined(GLASS_NVIDIA_NCCL)
std::unique_ptr<Communicator> make_nccl_communicator_emu(Device device,
                                                         const CommOptions& options) {
  return std::make_unique<NcclCommunicator>(device, options);
}
#endif
#if defined(GLASS_NVIDIA_NCCL) || defined(GLASS_CUDA_RUNTIME_EMU)
std::unique_ptr<Communicator> make_nccl_communicator_cuda(Device device,
                                                          const CommOptions& options) {
  return std::make_unique<NcclCommunicator>(device, options);
}
#endif

}  // namespace glass::comm
