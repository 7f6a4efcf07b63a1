// Communicator: the collectives data parallelism needs (all-reduce with sum or average,
// broadcast, barrier; reduce-scatter and all-gather for ZeRO-1's sharded optimizer,
// comm/zero_adamw.h) over the processes of one job, one process per device.
//
// Backends: `local` (a world of one: nothing moves), `mpi` (host memory, used by `cpu`), `nccl`
// (device memory, used by `cuda` with NVIDIA's NCCL and by `emu` with the emulated NCCL of
// emucuda/nccl). make_communicator() picks one from the device and from how the process was
// started (mpirun or not).
//
// Every collective runs on the communicator's own side stream, in the order it was called (the
// same order on every rank, as MPI and NCCL require), and is a glass::launch with phase `comm`
// ("mpi_all_reduce", "nccl_broadcast", ...) so traces draw it on that stream's lane. Waiting for
// them is bounded: synchronize() gives up after CommOptions::timeout_s, aborts the communicator
// and throws glass::Error saying which collective never finished (a rank died or hangs).
#pragma once

#include <memory>
#include <string>

#include "engine/stream.h"
#include "engine/tensor.h"

namespace glass::comm {

enum class ReduceOp { sum, avg };

struct CommOptions {
  double timeout_s = 300;  // longest wait for a collective before giving up
  // "auto" (below), or one forced: "local" (every process alone, even under mpirun), "mpi",
  // "nccl" (these two work in a world of one too: a GPU check of NCCL with one process).
  std::string backend = "auto";
};

class Communicator {
 public:
  virtual ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }  // among the ranks on this host
  Device device() const { return device_; }
  virtual const char* backend() const = 0;  // "local", "mpi", "nccl"
  Stream& stream() { return *stream_; }

  // In place on a contiguous f32, f64 or i32 tensor on this communicator's device (broadcast and
  // all_gather, which add nothing, also bf16: ZeRO-1 gathers the bf16 weights). They return at
  // once; the work runs on stream(). The tensor must not change until synchronize().
  void all_reduce(const Tensor& t, ReduceOp op);
  void broadcast(const Tensor& t, int root);
  // ZeRO-1's pair, in place on a tensor of size() chunks of numel / size() elements (numel must
  // divide by size()); same dtypes, same queueing as all_reduce:
  // - reduce_scatter: chunk rank() becomes the sum (avg: the sum divided by size()) over the ranks
  //   of their chunk rank(); the other chunks are left undefined. Each element is reduced exactly
  //   as all_reduce reduces it (the backends' order, docs/distributed.md), so the two agree bit
  //   for bit where the backend's all-reduce is a reduce-scatter followed by an all-gather (NCCL's
  //   ring) or the sum is order-free (two ranks);
  // - all_gather: chunk r becomes rank r's chunk r, on every rank.
  void reduce_scatter(const Tensor& t, ReduceOp op);
  void all_gather(const Tensor& t);
  // Waits for every collective called so far, at most the time-out; rethrows their errors.
  void synchronize();
  // The time-out of the waits from now on (CommOptions::timeout_s; must be positive).
  void set_timeout(double seconds);

  // CUDA graphs (engine/cuda/graph.h; cuda only). While the calling thread captures a graph,
  // all_reduce and broadcast are captured rather than queued: stream()'s CUDA stream is forked
  // into the capture and the NCCL call is issued onto it at once (NCCL 2.9 and later capture
  // their collectives), so every replay of the graph runs the collective again, on the same
  // buffers. Every rank must capture the same collectives in the same order and replay its graph
  // as often as the others. The host cannot wait for a captured collective (synchronize() throws):
  // join_calling_thread() orders the work after it on the GPU instead.
  //
  // The calling thread's current stream waits for every collective called so far, on the GPU (no
  // host wait, no time-out). In a capture, the join that CUDA requires before the capture ends.
  void join_calling_thread();
  // Blocks until the GPU work queued so far on the calling thread's current stream has finished
  // (a replayed graph and the collectives in it), at most the time-out; after it, aborts the
  // communicator and throws naming this rank and `what`. The host wait a replayed collective gets
  // instead of synchronize()'s. On host devices it returns at once.
  void wait_for_current_stream(const std::string& what);
  // Every rank has reached it (a broadcast of one value, synchronized).
  void barrier();

 protected:
  Communicator(Device device, int rank, int size, int local_rank, const CommOptions& options);
  // Run on stream()'s worker (host devices) or issue onto stream().native() (cuda).
  virtual void run_all_reduce(void* data, int64_t count, DType dtype, ReduceOp op) = 0;
  virtual void run_broadcast(void* data, int64_t count, DType dtype, int root) = 0;
  // `data` holds size() chunks of `chunk` elements (reduce_scatter and all_gather above).
  virtual void run_reduce_scatter(void* data, int64_t chunk, DType dtype, ReduceOp op) = 0;
  virtual void run_all_gather(void* data, int64_t chunk, DType dtype) = 0;
  // Makes a collective stuck in run_* return (with an error); called after a time-out.
  virtual void abort() {}
  // Runs `setup` on stream() as a launch named `what` (a string literal) and waits for it like a
  // collective: the NCCL and MPI bootstrap.
  void run_setup(const char* what, std::function<void()> setup);
  // Lets the queued collectives finish (errors dropped): the first thing a backend's destructor
  // does, before it frees what they use.
  void drain() noexcept;

 private:
  // `moves_only`: broadcast and all_gather, which copy bytes and add nothing, also take bf16.
  void check_tensor(const Tensor& t, const char* what, bool moves_only = false) const;
  void check_chunks(const Tensor& t, const char* what, bool moves_only = false) const;
  // Queues `work` on stream() as a launch named `kernel` in the caller's op and node, phase
  // comm; `t` (may be undefined) is the tensor it works on, kept alive until it has run.
  void enqueue(const char* kernel, const Tensor& t, double bytes, double flops,
               std::function<void()> work);
  void wait_for_stream(const std::string& what);
  // After a time-out: aborts the communicator so that a collective waiting for a dead rank
  // returns, gives `finished` (whether the waited-for work finished within a timeout) 2 s to see
  // it end, and throws saying that `what` did not finish.
  [[noreturn]] void fail_after_time_out(
      const std::string& what, const std::function<bool(std::chrono::duration<double>)>& finished);

  Device device_;
  int rank_, size_, local_rank_;
  CommOptions options_;
  std::unique_ptr<Stream> stream_;
  std::string last_;    // the last collective called, for the time-out message
  bool stuck_ = false;  // a time-out left the stream's worker inside MPI
};

// The backend for `device` in this process. With backend "auto": `local` unless started by mpirun
// with more than one rank; then `mpi` for cpu and `nccl` for emu (and cuda). Throws glass::Error
// when the build has no such backend for the device.
std::unique_ptr<Communicator> make_communicator(Device device, const CommOptions& options = {});

// The device this process works on. Under mpirun with more than one rank, a `cuda` device given
// without an index becomes this rank's GPU on its host, cuda:(local rank mod GPUs there), so that
// N ranks on a host with N GPUs use one each; with `index_given` ("cuda:N") it is kept as it is.
// Every other device is returned unchanged. Call it before anything touches the device.
Device device_for_this_rank(Device device, bool index_given);

// After an error on one rank: ends the whole job (MPI_Abort) when it has more than one rank, so
// the others do not wait for this one until their time-out. Does nothing in a world of one.
void abort_job(int exit_code);

}  // namespace glass::comm
