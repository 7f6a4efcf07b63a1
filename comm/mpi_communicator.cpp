// The `mpi` backend: collectives over MPI on host memory, for the `cpu` device. Each one is a
// non-blocking MPI call polled on the communicator's stream, so that a time-out can abort it.
#include <mpi.h>

#include <atomic>
#include <cstring>

#include "comm/backends.h"
#include "engine/mpi_runtime.h"

namespace glass::comm {

namespace {

MPI_Datatype mpi_type(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return MPI_FLOAT;
    case DType::f64:
      return MPI_DOUBLE;
    case DType::bf16:
      return MPI_UINT16_T;  // moved, never reduced (check_tensor admits it for those only)
    default:
      return MPI_INT32_T;  // check_tensor admits f32, f64, i32 and bf16 only
  }
}

// avg = sum / N; only floating tensors are averaged (Communicator::all_reduce).
template <class T>
void divide(void* data, int64_t count, int n) {
  T* x = static_cast<T*>(data);
  for (int64_t i = 0; i < count; ++i) x[i] /= static_cast<T>(n);
}

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(Device device, const CommOptions& options)
      : Communicator(device, mpi::world_rank(), mpi::world_size(), mpi::local_rank(), options) {
    // A communicator of our own, so that glass's collectives never match someone else's.
    run_setup("MPI_Comm_idup", [this] {
      MPI_Request request;
      MPI_Comm_idup(MPI_COMM_WORLD, &comm_, &request);
      finish(request, "MPI_Comm_idup");
    });
  }
  ~MpiCommunicator() override {
    drain();
    if (comm_ != MPI_COMM_NULL && !aborted_ && mpi::initialized()) MPI_Comm_free(&comm_);
  }
  const char* backend() const override { return "mpi"; }

 private:
  void run_all_reduce(void* data, int64_t count, DType dtype, ReduceOp op) override {
    MPI_Request request;
    MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(count), mpi_type(dtype), MPI_SUM, comm_,
                   &request);
    finish(request, "MPI_Iallreduce");
    if (op == ReduceOp::avg) {
      if (dtype == DType::f32) divide<float>(data, count, size());
      if (dtype == DType::f64) divide<double>(data, count, size());
    }
  }

  void run_broadcast(void* data, int64_t count, DType dtype, int root) override {
    MPI_Request request;
    MPI_Ibcast(data, static_cast<int>(count), mpi_type(dtype), root, comm_, &request);
    finish(request, "MPI_Ibcast");
  }

  // MPI's in-place reduce-scatter leaves the result at the start of the buffer; the Communicator's
  // contract puts it in the rank's own chunk, so it moves there. The sum is MPI's, as in
  // MPI_Iallreduce; avg divides afterwards, element by element, as run_all_reduce does.
  void run_reduce_scatter(void* data, int64_t chunk, DType dtype, ReduceOp op) override {
    MPI_Request request;
    MPI_Ireduce_scatter_block(MPI_IN_PLACE, data, static_cast<int>(chunk), mpi_type(dtype), MPI_SUM,
                              comm_, &request);
    finish(request, "MPI_Ireduce_scatter_block");
    const size_t bytes = static_cast<size_t>(chunk) * dtype_size(dtype);
    char* mine = static_cast<char*>(data) + static_cast<size_t>(rank()) * bytes;
    if (rank() != 0) std::memmove(mine, data, bytes);
    if (op == ReduceOp::avg) {
      if (dtype == DType::f32) divide<float>(mine, chunk, size());
      if (dtype == DType::f64) divide<double>(mine, chunk, size());
    }
  }

  void run_all_gather(void* data, int64_t chunk, DType dtype) override {
    MPI_Request request;
    MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, static_cast<int>(chunk),
                   mpi_type(dtype), comm_, &request);
    finish(request, "MPI_Iallgather");
  }

  void abort() override { aborted_ = true; }

  void finish(MPI_Request& request, const char* what) {
    GLASS_CHECK(mpi::wait(request, aborted_, what), "{} aborted after the time-out", what);
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  std::atomic<bool> aborted_{false};
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator(Device device, const CommOptions& options) {
  return std::make_unique<MpiCommunicator>(device, options);
}

}  // namespace glass::comm
