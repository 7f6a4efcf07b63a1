#include "comm/data_parallel.h"

#include <set>

#include "autograd/ops.h"
#include "engine/launch.h"
#include "kernels/backend.h"

namespace glass::comm {

struct DataParallel::State {
  Communicator* comm;
  std::vector<Bucket> buckets;
  bool sync = true;
  bool sharded = false;

  // The slice of `b.flat` that holds parameter `i` of the bucket, shaped like it.
  Tensor slot(const Bucket& b, size_t i) const {
    const Shape& shape = b.params[i].shape();
    return b.flat.as_strided(shape, contiguous_strides(shape), b.offsets[i]);
  }

  // Copies the bucket's gradients in (zeros for missing ones) and starts its all-reduce.
  void launch(Bucket& b) {
    LaunchScope scope(b.name.c_str(), -1, Phase::comm);
    for (size_t i = 0; i < b.params.size(); ++i) {
      const Tensor g = b.params[i].grad();
      if (g.defined())
        kernels::backend(g).copy(g, slot(b, i));
      else
        kernels::backend(b.flat).fill(slot(b, i), 0.0);
    }
    if (sharded) {
      comm->reduce_scatter(b.flat, ReduceOp::avg);
    } else {
      comm->all_reduce(b.flat, ReduceOp::avg);
    }
    b.launched = true;
  }

  void on_grad_ready(size_t bucket) {
    if (!sync) return;
    Bucket& b = buckets[bucket];
    if (++b.ready == b.params.size()) launch(b);
  }
};

DataParallel::DataParallel(Communicator& comm, const NamedTensors& params, double bucket_mb,
                           bool sharded)
    : state_(std::make_shared<State>()) {
  GLASS_CHECK(bucket_mb > 0, "data parallel: the bucket size must be positive, not {} MiB",
              bucket_mb);
  state_->comm = &comm;
  state_->sharded = sharded;
  const double cap = bucket_mb * (1 << 20);
  std::set<const AutogradMeta*> seen;
  double bytes = 0;
  for (auto it = params.rbegin(); it != params.rend(); ++it) {
    const auto& [name, p] = *it;
    GLASS_CHECK(p.device() == comm.device() && (p.dtype() == DType::f32 || p.dtype() == DType::f64),
                "data parallel: parameter {} is {}; expected a floating tensor on {}", name,
                p.describe(), comm.device().str());
    GLASS_CHECK(p.dtype() == params.front().second.dtype(),
                "data parallel: parameter {} is {}, but {} is {}: one dtype for all", name,
                p.describe(), params.front().first, params.front().second.describe());
    if (!seen.insert(&p.autograd_meta()).second) continue;  // a tied weight, already in
    if (state_->buckets.empty() || bytes >= cap) {
      state_->buckets.emplace_back();
      state_->buckets.back().name = fmt::format("ddp_bucket_{}", state_->buckets.size() - 1);
      bytes = 0;
    }
    Bucket& b = state_->buckets.back();
    b.offsets.push_back(b.params.empty() ? 0 : b.offsets.back() + b.params.back().numel());
    b.params.push_back(p);
    bytes += static_cast<double>(p.nbytes());
    // The hook holds the state weakly: the state holds the parameter, whose meta holds the hook,
    // and a strong reference would keep all of them alive; once the DataParallel is gone the
    // hook does nothing.
    p.autograd_meta().grad_ready_hooks.push_back(
        [weak = std::weak_ptr<State>(state_), bucket = state_->buckets.size() - 1](const Tensor&) {
          if (const std::shared_ptr<State> state = weak.lock()) state->on_grad_ready(bucket);
        });
  }
  // Sharded: padded to N equal chunks; the padding is zero and stays so (launch() never writes
  // it, a reduce-scatter of zeros is zero, and the all-gather of the parameters carries zeros).
  const int64_t n = comm.size();
  for (Bucket& b : state_->buckets) {
    b.numel = b.offsets.back() + b.params.back().numel();
    b.chunk = sharded ? (b.numel + n - 1) / n : b.numel;
    b.flat = sharded ? zeros({b.chunk * n}, b.params[0].dtype(), comm.device())
                     : Tensor::empty({b.numel}, b.params[0].dtype(), comm.device());
  }
}

DataParallel::~DataParallel() = default;

void DataParallel::broadcast_parameters() {
  LaunchScope scope("ddp_broadcast_parameters", -1, Phase::comm);
  for (const Bucket& b : state_->buckets)
    for (const Tensor& p : b.params) state_->comm->broadcast(p, 0);
  state_->comm->synchronize();
}

void DataParallel::set_sync(bool on) { state_->sync = on; }
bool DataParallel::syncing() const { return state_->sync; }

void DataParallel::finish_gradient_sync() {
  State& s = *state_;
  for (Bucket& b : s.buckets)
    if (!b.launched) s.launch(b);
  // The copies back wait for the all-reduces. Eagerly the host waits, bounded by the time-out (a
  // rank that died ends the job here). In a CUDA graph capture the host cannot wait for captured
  // work: the current stream waits for the all-reduces' stream on the GPU (the join of the fork
  // that the all-reduces made, communicator.h), and the time-out guards the replay instead, where
  // the host reads the step's result (Communicator::wait_for_current_stream).
  if (capturing_graph())
    s.comm->join_calling_thread();
  else
    s.comm->synchronize();
  if (s.sharded) {
    for (Bucket& b : s.buckets) {
      b.ready = 0;
      b.launched = false;
    }
    return;
  }
  for (Bucket& b : s.buckets) {
    LaunchScope scope(b.name.c_str(), -1, Phase::comm);
    for (size_t i = 0; i < b.params.size(); ++i) {
      Tensor p = b.params[i];
      if (!p.grad().defined()) p.set_grad(Tensor::empty(p.shape(), p.dtype(), p.device()));
      kernels::backend(b.flat).copy(s.slot(b, i), p.grad());
    }
    b.ready = 0;
    b.launched = false;
  }
}

const std::vector<Bucket>& DataParallel::buckets() const { return state_->buckets; }
bool DataParallel::sharded() const { return state_->sharded; }
Communicator& DataParallel::communicator() const { return *state_->comm; }

namespace {
// FNV-1a: a stable 64-bit hash of the summary (std::hash may differ between builds).
uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}
}  // namespace

void check_same_on_all_ranks(Communicator& comm, const std::string& what,
                             const std::string& summary) {
  LaunchScope scope("check_same_on_all_ranks", -1, Phase::comm);
  const uint64_t h = fnv1a(summary);
  const std::vector<int32_t> halves{static_cast<int32_t>(h & 0xffffffffu),
                                    static_cast<int32_t>(h >> 32)};
  const Tensor root_hash = from_vector(halves, {2}, comm.device());
  comm.broadcast(root_hash, 0);
  comm.synchronize();
  const bool differs = to_vector<int32_t>(root_hash) != halves;
  const Tensor disagree = from_vector(std::vector<int32_t>{differs ? 1 : 0}, {1}, comm.device());
  comm.all_reduce(disagree, ReduceOp::sum);
  comm.synchronize();
  const int count = to_vector<int32_t>(disagree)[0];
  GLASS_CHECK(count == 0,
              "{} differs between ranks: {} of {} ranks disagree with rank 0 (rank {}{}: {})", what,
              count, comm.size(), comm.rank(), differs ? ", one of them" : "", summary);
}

}  // namespace glass::comm
