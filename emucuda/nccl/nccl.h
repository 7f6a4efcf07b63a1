// The emulated NCCL: the part of <nccl.h> that comm/nccl_communicator.cpp calls, with the same
// names, signatures, enum values and result codes, answered on the host over MPI (nccl.cpp).
//
// A source compiled for emu includes it in place of the real header:
//   #if defined(GLASS_EMU)
//   #include "emucuda/nccl/nccl.h"
//   #else
//   #include <nccl.h>
//   #endif
// and the call site stays the one a GPU runs. Emu device memory is host memory, so the buffers go
// straight to MPI. The semantics are NCCL's:
// - a communicator is made by ncclCommInitRank with a unique id that rank 0 got from
//   ncclGetUniqueId and sent to the others (over MPI, as real NCCL programs do). Here every
//   process of MPI_COMM_WORLD must call ncclCommInitRank at the same time (it splits the world
//   by the id), and the ranks given must be 0..nranks-1;
// - arguments are checked as NCCL checks them, before anything moves: a null or destroyed
//   communicator, a null buffer with count > 0, an unknown datatype or op, a root outside
//   [0, nranks) is ncclInvalidArgument; a datatype this emulation does not carry is
//   ncclInvalidArgument too, which real NCCL would accept: 8-bit floats, and 16-bit floats in the
//   reductions (ncclBroadcast and ncclAllGather move them bit for bit);
// - ncclAvg is the sum divided by nranks; in-place operation when sendbuff == recvbuff;
// - ncclReduceScatter (recvcount elements per rank, sendbuff holds nranks * recvcount) and
//   ncclAllGather (sendcount per rank, recvbuff holds nranks * sendcount) are in place when the
//   rank's own chunk is the other buffer (reduce-scatter: recvbuff == sendbuff + rank * recvcount;
//   all-gather: sendbuff == recvbuff + rank * sendcount). Buffers that overlap in any other way
//   are ncclInvalidArgument here (real NCCL does not check them: the result is undefined). The
//   reduce-scatter sums with MPI_SUM as ncclAllReduce does, so with two ranks (where a sum is
//   order-free) each element gets the all-reduce's bits;
// - ncclGroupStart/End: calls in a group are checked at once and run, in order, at the
//   outermost ncclGroupEnd;
// - ncclCommAbort may be called from another thread while a collective waits for a peer that
//   will never come: the collective returns ncclRemoteError and ncclCommGetAsyncError reports it.
// Collectives are synchronous (the stream argument is accepted and ignored: on emu every stream is
// an in-order queue that is always drained).
#pragma once

#include <driver_types.h>  // cudaStream_t, from the CUDA headers as they are
#include <stddef.h>

// The entry points keep NCCL's names at the call site but link as glass_emu_*: a program that
// holds both devices links NVIDIA's libnccl too, and a static archive of the same C names would
// silently answer the cuda calls.
#define ncclGetVersion glass_emu_ncclGetVersion
#define ncclGetUniqueId glass_emu_ncclGetUniqueId
#define ncclCommInitRank glass_emu_ncclCommInitRank
#define ncclCommDestroy glass_emu_ncclCommDestroy
#define ncclCommAbort glass_emu_ncclCommAbort
#define ncclCommGetAsyncError glass_emu_ncclCommGetAsyncError
#define ncclCommCount glass_emu_ncclCommCount
#define ncclCommUserRank glass_emu_ncclCommUserRank
#define ncclGetErrorString glass_emu_ncclGetErrorString
#define ncclAllReduce glass_emu_ncclAllReduce
#define ncclBroadcast glass_emu_ncclBroadcast
#define ncclReduceScatter glass_emu_ncclReduceScatter
#define ncclAllGather glass_emu_ncclAllGather
#define ncclGroupStart glass_emu_ncclGroupStart
#define ncclGroupEnd glass_emu_ncclGroupEnd

extern "C" {

typedef struct ncclComm* ncclComm_t;
#define NCCL_COMM_NULL NULL

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclNumResults = 8
} ncclResult_t;

typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclNumOps = 5
} ncclRedOp_t;

typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclNumTypes = 10
} ncclDataType_t;

ncclResult_t ncclGetVersion(int* version);
ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId);
// ncclCommInitRank for `cuda` on the emulated CUDA runtime (comm/nccl_communicator.cpp): the
// communicator queues its collectives on the stream it is given, as NCCL does on a GPU (on a
// capturing stream the call is captured and runs at each replay of the graph, as NCCL 2.9 and
// later allow). A plain ncclCommInitRank's (the emu device's) run at the call.
ncclResult_t glass_emu_ncclCommInitRankStreamOrdered(ncclComm_t* comm, int nranks,
                                                     ncclUniqueId commId, int rank);
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank);
const char* ncclGetErrorString(ncclResult_t result);

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream);
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);

ncclResult_t ncclGroupStart();
ncclResult_t ncclGroupEnd();

}  // extern "C"
