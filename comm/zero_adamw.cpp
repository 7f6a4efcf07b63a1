#include "comm/zero_adamw.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "engine/launch.h"
#include "kernels/backend.h"

namespace glass::comm {

namespace {

// Elements [offset, offset + length) of contiguous `t`'s storage order, as a 1-D view.
Tensor flat_part(const Tensor& t, int64_t offset, int64_t length) {
  return t.as_strided({length}, {1}, t.offset() + offset);
}

}  // namespace

ZeroAdamW::ZeroAdamW(NamedTensors params, const AdamWOptions& options, DataParallel& ddp)
    : AdamW(std::move(params), options, WithoutBuffers{}), ddp_(&ddp) {
  GLASS_CHECK(ddp.sharded(), "ZeroAdamW: the data-parallel buckets must be sharded");
  const std::vector<Bucket>& buckets = ddp.buckets();
  Communicator& comm = ddp.communicator();
  const int64_t rank = comm.rank();
  // Where each parameter sits in the buckets.
  std::map<const TensorImpl*, std::pair<size_t, int64_t>> where;
  for (size_t b = 0; b < buckets.size(); ++b)
    for (size_t i = 0; i < buckets[b].params.size(); ++i)
      where[buckets[b].params[i].unsafe_impl()] = {b, buckets[b].offsets[i]};
  for (const auto& [name, p] : this->params()) {
    const auto it = where.find(p.unsafe_impl());
    GLASS_CHECK(it != where.end(), "ZeroAdamW: parameter '{}' is in no data-parallel bucket", name);
    place_.push_back(it->second);
  }
  // This rank's chunk of each bucket, and the segments of parameters inside it (params() order
  // within a bucket: any fixed order serves, the update is elementwise).
  int64_t start = 0;
  for (size_t b = 0; b < buckets.size(); ++b) {
    chunk_start_.push_back(start);
    const int64_t c0 = rank * buckets[b].chunk, c1 = c0 + buckets[b].chunk;
    for (size_t i = 0; i < this->params().size(); ++i) {
      if (place_[i].first != b) continue;
      const int64_t o = place_[i].second, n = this->params()[i].second.numel();
      const int64_t lo = std::max(o, c0), hi = std::min(o + n, c1);
      if (lo < hi) segments_.push_back({i, b, lo - o, hi - lo, lo - c0});
    }
    start += buckets[b].chunk;
  }
  m_ = zeros({start}, DType::f32, comm.device());
  v_ = zeros({start}, DType::f32, comm.device());
}

int64_t ZeroAdamW::shard_numel() const { return m_.numel(); }

Tensor ZeroAdamW::param_part(const Segment& s) const {
  return flat_part(params()[s.param].second, s.begin, s.length);
}

Tensor ZeroAdamW::grad_part(const Segment& s) const {
  const Bucket& b = ddp_->buckets()[s.bucket];
  return flat_part(b.flat, ddp_->communicator().rank() * b.chunk + s.in_chunk, s.length);
}

Tensor ZeroAdamW::moment_part(const Tensor& moment, const Segment& s) const {
  return flat_part(moment, chunk_start_[s.bucket] + s.in_chunk, s.length);
}

Tensor ZeroAdamW::clip_grad_norm_on_device(double max_norm) {
  GLASS_CHECK(max_norm > 0, "clip_grad_norm: max_norm {} must be positive", max_norm);
  NoGradGuard no_grad;
  LaunchScope scope("clip_grad_norm", -1, Phase::optimizer);
  Communicator& comm = ddp_->communicator();
  std::vector<Tensor> grads;
  for (const Segment& s : segments_) grads.push_back(grad_part(s));
  // 1. This rank's sum of squares, then the sum over the ranks (f64, so the padding-free chunks of
  //    N ranks add to the global sum).
  Tensor total = Tensor::empty({1}, DType::f64, comm.device());
  if (grads.empty())
    kernels::backend(total).fill(total, 0.0);
  else
    kernels::backend(total).sum_squares(grads, total);
  comm.all_reduce(total, ReduceOp::sum);
  comm.synchronize();
  if (std::isinf(max_norm)) return total;
  // 2. Each rank scales its own chunks by the global factor.
  for (const Tensor& g : grads) kernels::backend(g).clip_scale(g, total, max_norm);
  return total;
}

void ZeroAdamW::update(const std::vector<size_t>& /*with_grad*/) {
  // Every parameter has its averaged gradient in the buckets (a missing one is zeros there, as
  // DataParallel gives the unsharded optimizer), so every segment updates.
  std::vector<kernels::AdamWParam> batch;
  for (const Segment& s : segments_)
    batch.push_back({param_part(s), grad_part(s), moment_part(m_, s), moment_part(v_, s),
                     decays(s.param) ? options().weight_decay : 0.0});
  if (!batch.empty()) {
    const AdamWOptions& o = options();
    kernels::AdamWHyper hyper{lr(), o.beta1, o.beta2, o.eps, step_count(), Tensor()};
    hyper.finite = finite_gate();
    kernels::backend(batch[0].param).adamw_step(batch, hyper);
  }
  gather_parameters();
}

void ZeroAdamW::gather_parameters() {
  Communicator& comm = ddp_->communicator();
  const std::vector<Bucket>& buckets = ddp_->buckets();
  // The updated segments into this rank's chunk of each bucket (its gradients are spent), then
  // every bucket all-gathered: every rank's buckets hold every updated parameter.
  for (size_t b = 0; b < buckets.size(); ++b) {
    LaunchScope scope(buckets[b].name.c_str(), -1, Phase::comm);
    for (const Segment& s : segments_)
      if (s.bucket == b) kernels::backend(buckets[b].flat).copy(param_part(s), grad_part(s));
    comm.all_gather(buckets[b].flat);
  }
  comm.synchronize();
  for (size_t i = 0; i < params().size(); ++i) {
    const Tensor& p = params()[i].second;
    const Bucket& b = buckets[place_[i].first];
    LaunchScope scope(b.name.c_str(), -1, Phase::comm);
    kernels::backend(p).copy(b.flat.as_strided(p.shape(), contiguous_strides(p.shape()),
                                               b.flat.offset() + place_[i].second),
                             p);
  }
}

void ZeroAdamW::gather_state() {
  NoGradGuard no_grad;
  LaunchScope scope("zero_gather_state", -1, Phase::comm);
  Communicator& comm = ddp_->communicator();
  const std::vector<Bucket>& buckets = ddp_->buckets();
  gathered_m_.clear();
  gathered_v_.clear();
  for (size_t b = 0; b < buckets.size(); ++b) {
    const int64_t chunk = buckets[b].chunk, mine = comm.rank() * chunk;
    for (auto [moment, gathered] : {std::pair{&m_, &gathered_m_}, std::pair{&v_, &gathered_v_}}) {
      const Tensor all = zeros({chunk * comm.size()}, DType::f32, comm.device());
      kernels::backend(all).copy(flat_part(*moment, chunk_start_[b], chunk),
                                 flat_part(all, mine, chunk));
      comm.all_gather(all);
      gathered->push_back(all);
    }
  }
  comm.synchronize();
}

void ZeroAdamW::drop_gathered_state() {
  gathered_m_.clear();
  gathered_v_.clear();
}

NamedTensors ZeroAdamW::state_tensors() const {
  GLASS_CHECK(gathered_m_.size() == ddp_->buckets().size(),
              "ZeroAdamW::state_tensors: the moments are sharded; every rank must call "
              "gather_state() first");
  NamedTensors out;
  for (const auto& [prefix, gathered] :
       {std::pair{"exp_avg.", &gathered_m_}, std::pair{"exp_avg_sq.", &gathered_v_}})
    for (size_t i = 0; i < params().size(); ++i) {
      const auto& [name, p] = params()[i];
      const Tensor& all = (*gathered)[place_[i].first];
      out.emplace_back(prefix + name, all.as_strided(p.shape(), contiguous_strides(p.shape()),
                                                     all.offset() + place_[i].second));
    }
  return out;
}

void ZeroAdamW::load_state(const NamedTensors& tensors,
                           const std::map<std::string, double>& scalars) {
  // The consolidated moments, as the unsharded AdamW names them: every exp_avg, then exp_avg_sq.
  const size_t n = params().size();
  NamedTensors expected;
  for (const char* prefix : {"exp_avg.", "exp_avg_sq."})
    for (const auto& [name, p] : params()) expected.emplace_back(prefix + name, p);
  std::vector<std::string> problems;
  const std::vector<const Tensor*> given =
      match_state_tensors(tensors, expected, "the parameter is", problems);
  const std::vector<const Tensor*> m_of(given.begin(), given.begin() + static_cast<ptrdiff_t>(n)),
      v_of(given.begin() + static_cast<ptrdiff_t>(n), given.end());
  GLASS_CHECK(problems.empty(), "{}::load_state (sharded, rank {} of {}): {} problem(s): {}",
              name(), ddp_->communicator().rank(), ddp_->communicator().size(), problems.size(),
              fmt::join(problems, "; "));
  // The step and learning rate (checked there too), then this rank's slices of the moments.
  AdamW::load_state({}, scalars);
  NoGradGuard no_grad;
  const Device device = m_.device();
  for (const auto& [moment, found] : {std::pair{&m_, &m_of}, std::pair{&v_, &v_of}}) {
    std::vector<Tensor> as_f32(params().size());
    for (const Segment& s : segments_) {
      Tensor& src = as_f32[s.param];
      if (!src.defined()) {
        const Tensor& t = *(*found)[s.param];
        src = contiguous(to_device(t.dtype() == DType::f32 ? t : cast(t, DType::f32), device));
      }
      kernels::backend(*moment).copy(flat_part(src, s.begin, s.length), moment_part(*moment, s));
    }
  }
}

}  // namespace glass::comm
