#include "engine/mpi_runtime.h"

#include <chrono>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "engine/error.h"

namespace glass::mpi {

namespace {

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

std::string error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  return std::string(text, static_cast<size_t>(len));
}

int checked(int code, const char* what) {
  GLASS_CHECK(code == MPI_SUCCESS, "{}: MPI error {}", what, error_text(code));
  return code;
}

}  // namespace

void ensure_initialized() {
  static std::once_flag once;
  std::call_once(once, [] {
    int already = 0;
    MPI_Initialized(&already);
    if (already) return;
    int provided = 0;
    checked(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
    GLASS_CHECK(provided >= MPI_THREAD_SERIALIZED,
                "MPI offers thread level {}, but glass runs collectives on a worker thread and "
                "needs MPI_THREAD_SERIALIZED ({}) or more",
                provided, MPI_THREAD_SERIALIZED);
    // Errors come back as codes (and become glass::Error) instead of aborting inside MPI.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    std::atexit(finalize_at_exit);
  });
}

bool initialized() {
  int init = 0, finalized = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&finalized);
  return init && !finalized;
}

int world_rank() {
  ensure_initialized();
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int world_size() {
  ensure_initialized();
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

int local_rank() {
  ensure_initialized();
  static const int rank = [] {
    MPI_Comm node;
    checked(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank(), MPI_INFO_NULL,
                                &node),
            "MPI_Comm_split_type");
    int r = 0;
    MPI_Comm_rank(node, &r);
    MPI_Comm_free(&node);
    return r;
  }();
  return rank;
}

bool wait(MPI_Request& request, const std::atomic<bool>& stop, const char* what) {
  // Spin briefly (a collective among live peers is usually quick), then back off to 100 µs naps
  // so that a waiting rank does not steal a core from the ones still computing.
  for (int polls = 0;; ++polls) {
    int done = 0;
    checked(MPI_Test(&request, &done, MPI_STATUS_IGNORE), what);
    if (done) return true;
    if (stop.load(std::memory_order_relaxed)) return false;
    if (polls > 1000) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

void abort_job(int exit_code) {
  if (initialized() && world_size() > 1) MPI_Abort(MPI_COMM_WORLD, exit_code);
}

}  // namespace glass::mpi
