// The emulated NCCL (nccl.h): NCCL's argument checks and semantics, with the bytes moved by MPI
// between processes. Emu device memory is host memory, so buffers go to MPI as they are.
//
// Nothing here knows about glass tensors: like the real library it sees raw pointers, counts,
// datatypes and a communicator.
#include "emucuda/nccl/nccl.h"

#include <atomic>
#include <climits>
#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <new>
#include <random>
#include <vector>

#include "emucuda/runtime/runtime.h"
#include "engine/mpi_runtime.h"

struct ncclComm {
  MPI_Comm mpi = MPI_COMM_NULL;  // the ranks of this communicator, ordered by NCCL rank
  int rank = 0, nranks = 1;
  std::atomic<bool> aborted{false};
  std::mutex busy;  // held while a collective runs; ncclCommAbort waits for it to let go
  std::atomic<ncclResult_t> async_error{ncclSuccess};
  bool stream_ordered = false;  // collectives queued on the emulated CUDA runtime's streams
};

namespace {

// The id: a marker, so that garbage is refused, and the MPI color that the ranks split by.
constexpr char kIdMagic[] = "glass-emu-nccl";
struct IdLayout {
  char magic[sizeof(kIdMagic)];
  int32_t color;
};
static_assert(sizeof(IdLayout) <= NCCL_UNIQUE_ID_BYTES);

// NCCL datatypes that MPI carries natively (16-bit and 8-bit floats have no MPI type).
MPI_Datatype mpi_type(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
      return MPI_INT8_T;
    case ncclUint8:
      return MPI_UINT8_T;
    case ncclInt32:
      return MPI_INT32_T;
    case ncclUint32:
      return MPI_UINT32_T;
    case ncclInt64:
      return MPI_INT64_T;
    case ncclUint64:
      return MPI_UINT64_T;
    case ncclFloat32:
      return MPI_FLOAT;
    case ncclFloat64:
      return MPI_DOUBLE;
    default:
      return MPI_DATATYPE_NULL;
  }
}

// What carries a datatype in a collective that only moves it (broadcast, all-gather): the 16-bit
// floats travel as 16-bit words, which MPI copies bit for bit. A reduction of them is refused
// (mpi_type has none): this emulation adds only what MPI adds natively.
MPI_Datatype mpi_carrier(ncclDataType_t t) {
  return t == ncclFloat16 || t == ncclBfloat16 ? MPI_UINT16_T : mpi_type(t);
}

MPI_Op mpi_op(ncclRedOp_t op) {
  switch (op) {
    case ncclSum:
    case ncclAvg:  // the sum, divided afterwards
      return MPI_SUM;
    case ncclProd:
      return MPI_PROD;
    case ncclMax:
      return MPI_MAX;
    case ncclMin:
      return MPI_MIN;
    default:
      return MPI_OP_NULL;
  }
}

template <class T>
void divide(void* data, size_t count, int n) {
  T* x = static_cast<T*>(data);
  for (size_t i = 0; i < count; ++i) x[i] = static_cast<T>(x[i] / static_cast<T>(n));
}

void divide_by(void* data, size_t count, ncclDataType_t t, int n) {
  switch (t) {
    case ncclInt8:
      return divide<int8_t>(data, count, n);
    case ncclUint8:
      return divide<uint8_t>(data, count, n);
    case ncclInt32:
      return divide<int32_t>(data, count, n);
    case ncclUint32:
      return divide<uint32_t>(data, count, n);
    case ncclInt64:
      return divide<int64_t>(data, count, n);
    case ncclUint64:
      return divide<uint64_t>(data, count, n);
    case ncclFloat32:
      return divide<float>(data, count, n);
    case ncclFloat64:
      return divide<double>(data, count, n);
    default:
      return;
  }
}

size_t type_size(ncclDataType_t t) {
  int bytes = 0;
  MPI_Type_size(mpi_carrier(t), &bytes);
  return static_cast<size_t>(bytes);
}

bool usable(const ncclComm* comm) { return comm != nullptr && comm->mpi != MPI_COMM_NULL; }

// What every collective checks before anything moves. `moves_only`: broadcast and all-gather,
// which also carry the 16-bit floats (mpi_carrier).
ncclResult_t check_buffers(const void* sendbuff, const void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclComm_t comm, bool moves_only = false) {
  if (!usable(comm)) return ncclInvalidArgument;
  if ((moves_only ? mpi_carrier(datatype) : mpi_type(datatype)) == MPI_DATATYPE_NULL)
    return ncclInvalidArgument;
  if (count > static_cast<size_t>(INT_MAX)) return ncclInvalidArgument;  // MPI counts are int
  if (count > 0 && (sendbuff == nullptr || recvbuff == nullptr)) return ncclInvalidArgument;
  return ncclSuccess;
}

// The in-place rule of ncclReduceScatter and ncclAllGather: `whole` holds nranks chunks of
// `chunk_bytes`, `part` one chunk. In place when `part` is the rank's own chunk of `whole`;
// distinct buffers must not overlap (real NCCL leaves that undefined; here it is refused).
enum class Placement { in_place, separate, overlapping };
Placement placement(const void* whole, const void* part, size_t chunk_bytes, const ncclComm* comm) {
  const auto w = reinterpret_cast<uintptr_t>(whole), p = reinterpret_cast<uintptr_t>(part);
  if (p == w + static_cast<uintptr_t>(comm->rank) * chunk_bytes) return Placement::in_place;
  const uintptr_t w_end = w + chunk_bytes * static_cast<uintptr_t>(comm->nranks);
  return p + chunk_bytes <= w || p >= w_end ? Placement::separate : Placement::overlapping;
}

// Runs a started MPI request to completion unless the communicator is aborted meanwhile.
ncclResult_t finish(ncclComm* comm, MPI_Request& request, int started, const char* what) {
  if (started != MPI_SUCCESS) return ncclSystemError;
  try {
    if (glass::mpi::wait(request, comm->aborted, what)) return ncclSuccess;
  } catch (const std::exception&) {
    return ncclSystemError;
  }
  comm->async_error = ncclRemoteError;
  return ncclRemoteError;
}

// Calls between ncclGroupStart and the outermost ncclGroupEnd, per thread, as NCCL keeps them.
thread_local int group_depth = 0;
thread_local std::vector<std::function<ncclResult_t()>> group_calls;

ncclResult_t run_or_defer(std::function<ncclResult_t()> call) {
  if (group_depth > 0) {
    group_calls.push_back(std::move(call));
    return ncclSuccess;
  }
  return call();
}

// A collective on `comm`: one at a time, and none after an abort.
ncclResult_t run_collective(ncclComm* comm, const std::function<ncclResult_t()>& body) {
  std::lock_guard lock(comm->busy);
  if (comm->aborted) return ncclRemoteError;
  return body();
}

// On a stream-ordered communicator the collective is queued on `stream` of the emulated CUDA
// runtime and runs in order with the kernels there, as NCCL's kernels do; its failure is the
// communicator's asynchronous error (ncclCommGetAsyncError). Otherwise it runs now.
ncclResult_t run_on_stream(ncclComm* comm, cudaStream_t stream, const char* what,
                           std::vector<glass::emu::runtime::Access> accesses,
                           std::function<ncclResult_t()> collective) {
  if (!comm->stream_ordered) return collective();
  const cudaError_t queued =
      glass::emu::runtime::enqueue(stream, what, std::move(accesses), [comm, collective] {
        const ncclResult_t r = collective();
        if (r != ncclSuccess) comm->async_error = r;
      });
  return queued == cudaSuccess ? ncclSuccess : ncclUnhandledCudaError;
}

}  // namespace

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  if (version == nullptr) return ncclInvalidArgument;
  *version = 22800;  // the NCCL API this emulates: 2.28
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  if (uniqueId == nullptr) return ncclInvalidArgument;
  IdLayout id{};
  std::memcpy(id.magic, kIdMagic, sizeof(kIdMagic));
  id.color = static_cast<int32_t>(std::random_device{}() & 0x7fffffff);
  std::memset(uniqueId->internal, 0, NCCL_UNIQUE_ID_BYTES);
  std::memcpy(uniqueId->internal, &id, sizeof(id));
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  if (comm == nullptr || nranks < 1 || rank < 0 || rank >= nranks) return ncclInvalidArgument;
  IdLayout id;
  std::memcpy(&id, commId.internal, sizeof(id));
  if (std::memcmp(id.magic, kIdMagic, sizeof(kIdMagic)) != 0 || id.color < 0)
    return ncclInvalidArgument;
  try {
    glass::mpi::ensure_initialized();
  } catch (const std::exception&) {
    return ncclSystemError;
  }
  MPI_Comm split = MPI_COMM_NULL;
  if (MPI_Comm_split(MPI_COMM_WORLD, id.color, rank, &split) != MPI_SUCCESS) return ncclSystemError;
  int size = 0, my_rank = 0;
  MPI_Comm_size(split, &size);
  MPI_Comm_rank(split, &my_rank);
  if (size != nranks || my_rank != rank) {  // ranks missing, duplicated or not 0..nranks-1
    MPI_Comm_free(&split);
    return ncclInvalidUsage;
  }
  MPI_Comm_set_errhandler(split, MPI_ERRORS_RETURN);
  ncclComm* c = new (std::nothrow) ncclComm;
  if (c == nullptr) {
    MPI_Comm_free(&split);
    return ncclSystemError;
  }
  c->mpi = split;
  c->rank = rank;
  c->nranks = nranks;
  *comm = c;
  return ncclSuccess;
}

ncclResult_t glass_emu_ncclCommInitRankStreamOrdered(ncclComm_t* comm, int nranks,
                                                     ncclUniqueId commId, int rank) {
  const ncclResult_t r = ncclCommInitRank(comm, nranks, commId, rank);
  if (r == ncclSuccess) (*comm)->stream_ordered = true;
  return r;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) return ncclInvalidArgument;
  {
    std::lock_guard lock(comm->busy);
    // After MPI_Finalize (a communicator destroyed at exit) only our own state is left to free.
    if (comm->mpi != MPI_COMM_NULL && glass::mpi::initialized()) MPI_Comm_free(&comm->mpi);
  }
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm == nullptr) return ncclInvalidArgument;
  comm->aborted = true;
  // Wait for a collective in flight to notice. Its MPI request is abandoned, and so is the MPI
  // communicator: freeing it is collective, and the peers may be gone.
  std::lock_guard lock(comm->busy);
  comm->mpi = MPI_COMM_NULL;
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  if (comm == nullptr || asyncError == nullptr) return ncclInvalidArgument;
  *asyncError = comm->async_error;
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  if (comm == nullptr || count == nullptr) return ncclInvalidArgument;
  *count = comm->nranks;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  if (comm == nullptr || rank == nullptr) return ncclInvalidArgument;
  *rank = comm->rank;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError:
      return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
      return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument:
      return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage:
      return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    case ncclInProgress:
      return "NCCL operation in progress";
    default:
      return "unknown result code";
  }
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  if (const ncclResult_t r = check_buffers(sendbuff, recvbuff, count, datatype, comm); r) return r;
  if (mpi_op(op) == MPI_OP_NULL) return ncclInvalidArgument;
  return run_or_defer([=] {
    return run_on_stream(comm, stream, "ncclAllReduce", {{sendbuff, false}, {recvbuff, true}}, [=] {
      return run_collective(comm, [&] {
        MPI_Request request;
        const void* send = sendbuff == recvbuff ? MPI_IN_PLACE : sendbuff;
        const int started = MPI_Iallreduce(send, recvbuff, static_cast<int>(count),
                                           mpi_type(datatype), mpi_op(op), comm->mpi, &request);
        const ncclResult_t r = finish(comm, request, started, "ncclAllReduce");
        if (r == ncclSuccess && op == ncclAvg) divide_by(recvbuff, count, datatype, comm->nranks);
        return r;
      });
    });
  });
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  // Only the root reads sendbuff; the others may pass null.
  const void* send = usable(comm) && comm->rank == root ? sendbuff : recvbuff;
  if (const ncclResult_t r = check_buffers(send, recvbuff, count, datatype, comm, true); r)
    return r;
  if (root < 0 || root >= comm->nranks) return ncclInvalidArgument;
  return run_or_defer([=] {
    return run_on_stream(comm, stream, "ncclBroadcast", {{send, false}, {recvbuff, true}}, [=] {
      return run_collective(comm, [&] {
        if (send != recvbuff && count > 0) std::memcpy(recvbuff, send, count * type_size(datatype));
        MPI_Request request;
        const int started = MPI_Ibcast(recvbuff, static_cast<int>(count), mpi_carrier(datatype),
                                       root, comm->mpi, &request);
        return finish(comm, request, started, "ncclBroadcast");
      });
    });
  });
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  if (const ncclResult_t r = check_buffers(sendbuff, recvbuff, recvcount, datatype, comm); r)
    return r;
  if (mpi_op(op) == MPI_OP_NULL) return ncclInvalidArgument;
  if (recvcount * static_cast<size_t>(comm->nranks) > static_cast<size_t>(INT_MAX))
    return ncclInvalidArgument;  // MPI counts are int
  const size_t chunk_bytes = recvcount * type_size(datatype);
  const Placement where = placement(sendbuff, recvbuff, chunk_bytes, comm);
  if (recvcount > 0 && where == Placement::overlapping) return ncclInvalidArgument;
  return run_or_defer([=] {
    return run_on_stream(
        comm, stream, "ncclReduceScatter", {{sendbuff, false}, {recvbuff, true}}, [=] {
          return run_collective(comm, [&] {
            // In place, the own chunk is both input and output, which MPI may not alias: the
            // result goes through a buffer of one chunk (the send buffer's other chunks stay as
            // they were, as NCCL leaves them).
            std::vector<char> staged(where == Placement::in_place ? chunk_bytes : 0);
            void* out = where == Placement::in_place ? staged.data() : recvbuff;
            MPI_Request request;
            const int started =
                MPI_Ireduce_scatter_block(sendbuff, out, static_cast<int>(recvcount),
                                          mpi_type(datatype), mpi_op(op), comm->mpi, &request);
            const ncclResult_t r = finish(comm, request, started, "ncclReduceScatter");
            if (r != ncclSuccess) return r;
            if (out != recvbuff && chunk_bytes > 0) std::memcpy(recvbuff, out, chunk_bytes);
            if (op == ncclAvg) divide_by(recvbuff, recvcount, datatype, comm->nranks);
            return r;
          });
        });
  });
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  if (const ncclResult_t r = check_buffers(sendbuff, recvbuff, sendcount, datatype, comm, true); r)
    return r;
  if (sendcount * static_cast<size_t>(comm->nranks) > static_cast<size_t>(INT_MAX))
    return ncclInvalidArgument;
  const size_t chunk_bytes = sendcount * type_size(datatype);
  const Placement where = placement(recvbuff, sendbuff, chunk_bytes, comm);
  if (sendcount > 0 && where == Placement::overlapping) return ncclInvalidArgument;
  return run_or_defer([=] {
    return run_on_stream(comm, stream, "ncclAllGather", {{sendbuff, false}, {recvbuff, true}}, [=] {
      return run_collective(comm, [&] {
        MPI_Request request;
        const void* send = where == Placement::in_place ? MPI_IN_PLACE : sendbuff;
        const int started =
            MPI_Iallgather(send, static_cast<int>(sendcount), mpi_carrier(datatype), recvbuff,
                           static_cast<int>(sendcount), mpi_carrier(datatype), comm->mpi, &request);
        return finish(comm, request, started, "ncclAllGather");
      });
    });
  });
}

ncclResult_t ncclGroupStart() {
  ++group_depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (group_depth == 0) return ncclInvalidUsage;
  if (--group_depth > 0) return ncclSuccess;
  std::vector<std::function<ncclResult_t()>> calls;
  calls.swap(group_calls);
  ncclResult_t first_error = ncclSuccess;
  for (auto& call : calls) {
    const ncclResult_t r = call();
    if (first_error == ncclSuccess) first_error = r;
  }
  return first_error;
}

}  // extern "C"
