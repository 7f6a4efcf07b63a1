// The MPI runtime that both distributed transports stand on: the `mpi` communicator (comm/) and
// the emulated NCCL (emucuda/nccl). MPI starts the processes (mpirun) and moves the bytes; glass
// only initialises it once, asks who is who, and waits for requests in a way that can be aborted.
//
// Every wait polls a non-blocking request instead of blocking in MPI: a collective whose peer
// died or hangs would otherwise block forever, and a time-out (comm/) could not take it back.
#pragma once

#include <mpi.h>

#include <atomic>

namespace glass::mpi {

// MPI_Init_thread once per process, asking for MPI_THREAD_MULTIPLE (collectives run on a stream's
// worker thread while the main thread lives on); MPI_Finalize runs at exit. Throws glass::Error
// when the library offers less than MPI_THREAD_SERIALIZED.
void ensure_initialized();
bool initialized();

int world_rank();
int world_size();
// The rank among the processes on this host (MPI_Comm_split_type SHARED): picks the local GPU.
int local_rank();

// Polls `request` until it completes (true) or `stop` becomes true (false: the request is left
// behind; the process is expected to abort). Throws glass::Error naming `what` on an MPI error.
bool wait(MPI_Request& request, const std::atomic<bool>& stop, const char* what);

// Ends every process of the job (MPI_Abort) when MPI runs with more than one rank; otherwise does
// nothing. The way out after an error that the other ranks cannot know about.
void abort_job(int exit_code);

}  // namespace glass::mpi
