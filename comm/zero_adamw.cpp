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

// The first `numel` bf16 elements of contiguous `flat`'s storage: the same bytes read as bf16, no
// conversion (a bucket's bytes serve its f32 gradients, then the bf16 weights of the all-gather).
Tensor storage_as_bf16(const Tensor& flat, int64_t numel) {
  GLASS_CHECK(flat.offset() == 0 && static_cast<size_t>(numel) * 2 <= flat.storage()->nbytes,
              "ZeroAdamW: {} bf16 elements do not fit the storage of bucket {}", numel,
              flat.describe());
  Tensor view = flat.detach();  // a tensor of its own over the same storage
  TensorImpl& impl = *view.unsafe_impl();
  impl.dtype = DType::bf16;
  impl.shape = {numel};
  impl.strides = {1};
  return view;
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

std::vector<Tensor> ZeroAdamW::held_state() const {
  std::vector<Tensor> held = {m_, v_};
  if (masters_sharded()) held.push_back(master_);
  return held;
}

Tensor ZeroAdamW::param_part(const Segment& s) const {
  return flat_part(params()[s.param].second, s.begin, s.length);
}

Tensor ZeroAdamW::copy_part(const Segment& s) const {
  return flat_part(copies_[s.param], s.begin, s.length);
}

Tensor ZeroAdamW::chunk_part(const Tensor& buffer, const Segment& s) const {
  const Bucket& b = ddp_->buckets()[s.bucket];
  return flat_part(buffer, ddp_->communicator().rank() * b.chunk + s.in_chunk, s.length);
}

Tensor ZeroAdamW::grad_part(const Segment& s) const {
  return chunk_part(ddp_->buckets()[s.bucket].flat, s);
}

Tensor ZeroAdamW::slot(const Tensor& buffer, size_t i) const {
  const Shape& shape = params()[i].second.shape();
  return buffer.as_strided(shape, contiguous_strides(shape), buffer.offset() + place_[i].second);
}

void ZeroAdamW::shard_masters(std::vector<Tensor> copies) {
  GLASS_CHECK(!masters_sharded(), "ZeroAdamW::shard_masters: the masters are sharded already");
  GLASS_CHECK(copies.size() == params().size(),
              "ZeroAdamW::shard_masters: {} compute copies for {} parameters", copies.size(),
              params().size());
  check_compute_copies(copies);
  for (size_t i = 0; i < copies.size(); ++i)
    GLASS_CHECK(copies[i].defined(),
                "ZeroAdamW::shard_masters: parameter '{}' has no bf16 compute copy (the model's "
                "compute dtype must be bf16)",
                params()[i].first);
  NoGradGuard no_grad;
  LaunchScope scope("zero_shard_masters", -1, Phase::optimizer);
  master_ = zeros({m_.numel()}, DType::f32, m_.device());
  for (const Segment& s : segments_)
    kernels::backend(master_).copy(param_part(s), moment_part(master_, s));
  copies_ = std::move(copies);
  release_parameters();
}

void ZeroAdamW::release_parameters() {
  if (!released_.defined()) released_ = zeros({1}, DType::f32, m_.device());
  for (const auto& [name, p] : params()) {
    Shape no_strides = p.shape();
    for (int64_t& stride : no_strides) stride = 0;
    Tensor handle = p;  // the parameter itself (every handle to it sees the change)
    handle.set_data(released_.as_strided(p.shape(), no_strides, 0));
  }
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
  // Sharded masters: the shard's masters, and the bf16 copy of each updated element written by
  // the same launch (into the compute copies, whence gather_parameters takes this rank's part).
  std::vector<kernels::AdamWParam> batch;
  const bool sharded = masters_sharded();
  for (const Segment& s : segments_)
    batch.push_back({sharded ? moment_part(master_, s) : param_part(s), grad_part(s),
                     moment_part(m_, s), moment_part(v_, s),
                     decays(s.param) ? options().weight_decay : 0.0,
                     sharded ? copy_part(s) : Tensor()});
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
  // every bucket all-gathered: every rank's buckets hold every updated parameter. Sharded masters:
  // the bf16 copies, in the bucket's storage read as bf16 (the first half of its bytes).
  const bool bf16 = masters_sharded();
  std::vector<Tensor> gathered;
  for (size_t b = 0; b < buckets.size(); ++b) {
    LaunchScope scope(buckets[b].name.c_str(), -1, Phase::comm);
    const Tensor& flat = buckets[b].flat;
    gathered.push_back(bf16 ? storage_as_bf16(flat, flat.numel()) : flat);
    for (const Segment& s : segments_)
      if (s.bucket == b)
        kernels::backend(flat).copy(bf16 ? copy_part(s) : param_part(s),
                                    chunk_part(gathered[b], s));
    comm.all_gather(gathered[b]);
  }
  comm.synchronize();
  for (size_t i = 0; i < params().size(); ++i) {
    const Tensor& to = bf16 ? copies_[i] : params()[i].second;
    LaunchScope scope(buckets[place_[i].first].name.c_str(), -1, Phase::comm);
    kernels::backend(to).copy(slot(gathered[place_[i].first], i), to);
  }
  // The padding of a bucket (its last elements, zero: comm/data_parallel.h) lies past the bf16
  // half of its bytes unless the bucket is nearly all padding; then it is zeroed again.
  if (bf16)
    for (const Bucket& b : buckets) {
      const int64_t all = b.chunk * comm.size();
      if (b.numel < all && 4 * b.numel < 2 * all)
        kernels::backend(b.flat).fill(flat_part(b.flat, b.numel, all - b.numel), 0.0);
    }
}

void ZeroAdamW::gather_state() {
  NoGradGuard no_grad;
  LaunchScope scope("zero_gather_state", -1, Phase::comm);
  Communicator& comm = ddp_->communicator();
  const std::vector<Bucket>& buckets = ddp_->buckets();
  gathered_m_.clear();
  gathered_v_.clear();
  std::vector<Tensor> gathered_masters;
  std::vector<std::pair<const Tensor*, std::vector<Tensor>*>> shards = {{&m_, &gathered_m_},
                                                                        {&v_, &gathered_v_}};
  if (masters_sharded()) shards.emplace_back(&master_, &gathered_masters);
  for (size_t b = 0; b < buckets.size(); ++b) {
    const int64_t chunk = buckets[b].chunk, mine = comm.rank() * chunk;
    for (auto [shard, gathered] : shards) {
      const Tensor all = zeros({chunk * comm.size()}, DType::f32, comm.device());
      kernels::backend(all).copy(flat_part(*shard, chunk_start_[b], chunk),
                                 flat_part(all, mine, chunk));
      comm.all_gather(all);
      gathered->push_back(all);
    }
  }
  comm.synchronize();
  // Sharded masters: every parameter whole again, in fresh f32 storage, until drop_gathered_state.
  if (!masters_sharded()) return;
  for (size_t i = 0; i < params().size(); ++i) {
    const Tensor& p = params()[i].second;
    Tensor whole = Tensor::empty(p.shape(), DType::f32, p.device());
    kernels::backend(whole).copy(slot(gathered_masters[place_[i].first], i), whole);
    Tensor handle = p;
    handle.set_data(whole);
  }
}

void ZeroAdamW::drop_gathered_state() {
  gathered_m_.clear();
  gathered_v_.clear();
  if (masters_sharded()) release_parameters();
}

NamedTensors ZeroAdamW::state_tensors() const {
  GLASS_CHECK(gathered_m_.size() == ddp_->buckets().size(),
              "ZeroAdamW::state_tensors: the moments are sharded; every rank must call "
              "gather_state() first");
  NamedTensors out;
  for (const auto& [prefix, gathered] :
       {std::pair{"exp_avg.", &gathered_m_}, std::pair{"exp_avg_sq.", &gathered_v_}})
    for (size_t i = 0; i < params().size(); ++i) {
      const std::string& name = params()[i].first;
      out.emplace_back(prefix + name, slot((*gathered)[place_[i].first], i));
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
