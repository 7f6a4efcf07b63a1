#include "comm/communicator.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <functional>
#include <memory>
#include <thread>

#include "autograd/ops.h"
#include "comm/backends.h"
#include "engine/device_runtime.h"
#include "engine/launch.h"

#if GLASS_HAS_MPI
#include "engine/mpi_runtime.h"
#endif

namespace glass::comm {

namespace {

// A world of one: every collective leaves the data as it is (the sum or average over one rank,
// or a broadcast from oneself). Still a launch, so a trace looks the same with one process.
class LocalCommunicator final : public Communicator {
 public:
  LocalCommunicator(Device device, const CommOptions& options)
      : Communicator(device, 0, 1, 0, options) {}
  const char* backend() const override { return "local"; }

 private:
  void run_all_reduce(void*, int64_t, DType, ReduceOp) override {}
  void run_broadcast(void*, int64_t, DType, int) override {}
  void run_reduce_scatter(void*, int64_t, DType, ReduceOp) override {}
  void run_all_gather(void*, int64_t, DType) override {}
};

// mpirun and the PMI/PMIx launchers set these in every process they start.
bool launched_by_mpirun() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "MPI_LOCALNRANKS"})
    if (std::getenv(var) != nullptr) return true;
  return false;
}

// Launch names per backend and collective ("mpi_all_reduce", "nccl_all_gather", ...): string
// literals, as LaunchInfo::kernel must be.
enum class Collective { all_reduce, broadcast, reduce_scatter, all_gather };

const char* kernel_name(const char* backend, Collective c) {
  static constexpr const char* kNames[3][4] = {
      {"mpi_all_reduce", "mpi_broadcast", "mpi_reduce_scatter", "mpi_all_gather"},
      {"nccl_all_reduce", "nccl_broadcast", "nccl_reduce_scatter", "nccl_all_gather"},
      {"local_all_reduce", "local_broadcast", "local_reduce_scatter", "local_all_gather"}};
  const std::string b = backend;
  return kNames[b == "mpi" ? 0 : b == "nccl" ? 1 : 2][static_cast<int>(c)];
}

}  // namespace

Communicator::Communicator(Device device, int rank, int size, int local_rank,
                           const CommOptions& options)
    : device_(device),
      rank_(rank),
      size_(size),
      local_rank_(local_rank),
      options_(options),
      stream_(std::make_unique<Stream>(device)) {
  set_timeout(options.timeout_s);
}

void Communicator::set_timeout(double seconds) {
  GLASS_CHECK(seconds > 0, "communicator: the time-out must be positive, not {} s", seconds);
  options_.timeout_s = seconds;
}

Communicator::~Communicator() {
  // A stream whose worker is still stuck in a collective after a time-out cannot be joined: it is
  // left behind, the process is on its way out (abort_job).
  if (stuck_) (void)stream_.release();
}

void Communicator::check_tensor(const Tensor& t, const char* what, bool moves_only) const {
  GLASS_CHECK(t.device() == device_, "{}: tensor {} is not on the communicator's device {}", what,
              t.describe(), device_.str());
  GLASS_CHECK(t.is_contiguous(), "{}: tensor {} is not contiguous", what, t.describe());
  const bool reducible =
      t.dtype() == DType::f32 || t.dtype() == DType::f64 || t.dtype() == DType::i32;
  GLASS_CHECK(reducible || (moves_only && t.dtype() == DType::bf16),
              "{}: tensor {} has dtype {}; {} take f32, f64 or i32{}", what, t.describe(),
              dtype_name(t.dtype()), moves_only ? "broadcast and all_gather" : "reductions",
              moves_only ? " or bf16" : "");
  GLASS_CHECK(t.numel() <= INT_MAX, "{}: tensor {} has more than {} elements", what, t.describe(),
              INT_MAX);
}

void Communicator::enqueue(const char* kernel, const Tensor& t, double bytes, double flops,
                           std::function<void()> work) {
  const LaunchContext ctx = current_launch_context();
  last_ = t.defined() ? fmt::format("{} of {} (op '{}')", kernel, t.describe(), ctx.op) : kernel;
  LaunchInfo info;
  info.kernel = kernel;
  info.device = device_;
  info.stream = stream_->id();
  info.native_stream = stream_->native();
  info.bytes = bytes;
  info.flops = flops;
  if (capturing_graph()) {
    // Captured now, from this thread, on stream() forked into the capture (communicator.h): after
    // the captured kernels that wrote `t`. `t` is the caller's to keep alive as long as the graph.
    stream_->issue_in_capture([&] { launch(info, work); });
    return;
  }
  // On cuda the collective must not start before the kernels that wrote `t` (still queued on the
  // compute stream) have run.
  stream_->wait_for_calling_thread();
  // `t` rides along so that its memory lives until the collective has run.
  stream_->enqueue([info, op = ctx.op, node = ctx.node_id, t, work = std::move(work)] {
    LaunchScope scope(op, node, Phase::comm);
    launch(info, work);
  });
}

void Communicator::all_reduce(const Tensor& t, ReduceOp op) {
  check_tensor(t, "all_reduce");
  GLASS_CHECK(op == ReduceOp::sum || t.dtype() != DType::i32,
              "all_reduce: the average of {} would round; average floating tensors only",
              t.describe());
  // Ring all-reduce, the bandwidth-optimal algorithm NCCL and MPI use for large messages: each
  // rank sends and receives 2 (N-1)/N of the buffer and adds (N-1)/N of it; avg divides once more.
  const double n = size_, count = static_cast<double>(t.numel());
  const double bytes = 2.0 * (n - 1) / n * static_cast<double>(t.nbytes());
  const double flops = (n - 1) / n * count + (op == ReduceOp::avg ? count : 0);
  void* data = t.raw_data();
  const int64_t numel = t.numel();
  const DType dtype = t.dtype();
  enqueue(kernel_name(backend(), Collective::all_reduce), t, bytes, flops,
          [this, data, numel, dtype, op] { run_all_reduce(data, numel, dtype, op); });
}

void Communicator::broadcast(const Tensor& t, int root) {
  check_tensor(t, "broadcast", true);
  GLASS_CHECK(root >= 0 && root < size_, "broadcast: root {} is not a rank of a world of {}", root,
              size_);
  void* data = t.raw_data();
  const int64_t numel = t.numel();
  const DType dtype = t.dtype();
  enqueue(kernel_name(backend(), Collective::broadcast), t,
          size_ > 1 ? static_cast<double>(t.nbytes()) : 0, 0,
          [this, data, numel, dtype, root] { run_broadcast(data, numel, dtype, root); });
}

void Communicator::check_chunks(const Tensor& t, const char* what, bool moves_only) const {
  check_tensor(t, what, moves_only);
  GLASS_CHECK(t.numel() % size_ == 0,
              "{}: tensor {} has {} elements, not a multiple of the world size {} (one equal chunk "
              "per rank)",
              what, t.describe(), t.numel(), size_);
}

void Communicator::reduce_scatter(const Tensor& t, ReduceOp op) {
  check_chunks(t, "reduce_scatter");
  GLASS_CHECK(op == ReduceOp::sum || t.dtype() != DType::i32,
              "reduce_scatter: the average of {} would round; average floating tensors only",
              t.describe());
  // Ring reduce-scatter: each rank sends and receives (N-1)/N of the buffer and adds (N-1)/N of
  // its own chunk's worth per peer: half an all-reduce's traffic.
  const double n = size_, chunk = static_cast<double>(t.numel()) / n;
  const double bytes = (n - 1) / n * static_cast<double>(t.nbytes());
  const double flops = (n - 1) * chunk + (op == ReduceOp::avg ? chunk : 0);
  void* data = t.raw_data();
  const int64_t count = t.numel() / size_;
  const DType dtype = t.dtype();
  enqueue(kernel_name(backend(), Collective::reduce_scatter), t, bytes, flops,
          [this, data, count, dtype, op] { run_reduce_scatter(data, count, dtype, op); });
}

void Communicator::all_gather(const Tensor& t) {
  check_chunks(t, "all_gather", true);
  const double n = size_;
  const double bytes = (n - 1) / n * static_cast<double>(t.nbytes());
  void* data = t.raw_data();
  const int64_t count = t.numel() / size_;
  const DType dtype = t.dtype();
  enqueue(kernel_name(backend(), Collective::all_gather), t, bytes, 0,
          [this, data, count, dtype] { run_all_gather(data, count, dtype); });
}

void Communicator::wait_for_stream(const std::string& what) {
  Event done;
  done.record(*stream_);
  const std::chrono::duration<double> timeout(options_.timeout_s);
  if (done.wait_for(timeout)) return;
  fail_after_time_out(what, [&](std::chrono::duration<double> t) { return done.wait_for(t); });
}

void Communicator::fail_after_time_out(
    const std::string& what, const std::function<bool(std::chrono::duration<double>)>& finished) {
  // Unblock the collective that waits for a rank that will never come, then report it.
  abort();
  try {
    if (!finished(std::chrono::seconds(2))) stuck_ = true;
  } catch (const std::exception&) {
    // the aborted collective's own error: the time-out below is what happened
  }
  fail("{} backend, rank {} of {}: {} did not finish within {} s: another rank died or is stuck",
       backend(), rank_, size_, what, options_.timeout_s);
}

void Communicator::join_calling_thread() { stream_->join_calling_thread(); }

void Communicator::wait_for_current_stream(const std::string& what) {
  // Only where the device has streams of its own: elsewhere the calling thread's work has
  // finished when its launches returned.
  const DeviceRuntime& runtime = runtime_for(device_);
  if (!runtime.capabilities().native_streams) return;
  const std::unique_ptr<void, std::function<void(void*)>> done(
      runtime.record_event(runtime.current_stream()),
      [&runtime](void* event) { runtime.release_event(event); });
  // Polls the event, sleeping between looks (at most 1 ms), until it completes or time runs out.
  auto finished = [&](std::chrono::duration<double> timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    auto nap = std::chrono::microseconds(20);
    while (!runtime.event_done(done.get())) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(nap);
      nap = std::min(nap * 2, std::chrono::microseconds(1000));
    }
    return true;
  };
  if (finished(std::chrono::duration<double>(options_.timeout_s))) return;
  fail_after_time_out(what, finished);
}

void Communicator::synchronize() {
  refuse_host_wait_in_graph_capture(device_, "Communicator::synchronize");
  wait_for_stream(last_.empty() ? "nothing" : last_);
}

void Communicator::drain() noexcept {
  if (stuck_) return;
  try {
    wait_for_stream("the collectives queued before destruction");
  } catch (const std::exception&) {
    // errors of queued collectives were reported to whoever synchronized; none is left to tell
  }
}

void Communicator::run_setup(const char* what, std::function<void()> setup) {
  LaunchScope scope("comm_setup", -1, Phase::comm);
  enqueue(what, Tensor(), 0, 0, std::move(setup));
  wait_for_stream(what);
}

void Communicator::barrier() {
  const Tensor flag = zeros({1}, DType::i32, device_);
  LaunchScope scope("barrier", -1, Phase::comm);
  all_reduce(flag, ReduceOp::sum);
  synchronize();
}

std::unique_ptr<Communicator> make_communicator(Device device, const CommOptions& options) {
  const std::string& want = options.backend;
  GLASS_CHECK(want == "auto" || want == "local" || want == "mpi" || want == "nccl",
              "communicator: unknown backend '{}' (auto, local, mpi or nccl)", want);
  if (want == "local" || (want == "auto" && !launched_by_mpirun()))
    return std::make_unique<LocalCommunicator>(device, options);
#if GLASS_HAS_MPI
  if (want == "auto" && mpi::world_size() == 1)
    return std::make_unique<LocalCommunicator>(device, options);
  // mpi moves host memory: cpu's, and emu's (host memory behind device pointers). auto picks it
  // for devices that do not run the CUDA kernels (cpu), and NCCL for those that do.
  const Capabilities& can = capabilities(device);
  if (want == "mpi" || (want == "auto" && !can.cuda_kernels)) {
    GLASS_CHECK(can.host_memory,
                "communicator: the mpi backend moves host memory; device {} has none",
                device.str());
    return make_mpi_communicator(device, options);
  }
#if GLASS_HAS_EMU_NCCL
  if (device.kind == DeviceKind::emu) return make_nccl_communicator_emu(device, options);
#endif
#if GLASS_HAS_NCCL
  if (device.kind == DeviceKind::cuda) return make_nccl_communicator_cuda(device, options);
#endif
  fail(
      "communicator: no nccl backend for device {} in this build (the emulated NCCL serves emu; "
      "NVIDIA's serves cuda)",
      device.str());
#else
  GLASS_CHECK(want != "mpi" && want != "nccl",
              "communicator: glass was built without MPI, so without the {} backend", want);
  fail("started by mpirun, but glass was built without MPI (install libopenmpi-dev and rebuild)");
#endif
}

Device device_for_this_rank(Device device, bool index_given) {
#if GLASS_HAS_MPI
  // One device of several per rank: the rank's place on its host modulo the devices there.
  const DeviceRuntime& runtime = runtime_for(device);
  if (runtime.capabilities().several_devices && !index_given && launched_by_mpirun() &&
      mpi::world_size() > 1) {
    const int devices = runtime.device_count();
    if (devices > 0) return {device.kind, mpi::local_rank() % devices};
  }
#else
  (void)index_given;
#endif
  return device;
}

void abort_job(int exit_code) {
#if GLASS_HAS_MPI
  mpi::abort_job(exit_code);
#else
  (void)exit_code;
#endif
}

}  // namespace glass::comm
