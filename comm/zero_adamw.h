// ZeroAdamW: AdamW with its state sharded over the ranks of data parallelism (ZeRO stage 1,
// train_gpt --zero 1; docs/distributed.md).
//
// Shard layout. The gradient buckets of DataParallel (comm/data_parallel.h, built with
// sharded = true) are the layout: bucket b is one flat buffer of its parameters back to back, in
// reverse parameter order, padded with zeros to N chunks of `chunk_b` elements (N ranks). Rank r
// owns chunk r of every bucket: elements [r * chunk_b, (r + 1) * chunk_b) of bucket b. Its shard
// is those chunks, bucket after bucket; its AdamW moments (exp_avg, exp_avg_sq) are two f32
// buffers of that size, 1/N of the unsharded ones (plus at most N - 1 padding elements a bucket).
// A chunk cuts parameters where it falls: the parts of parameters inside it are the segments
// that this rank updates, each with its parameter's weight decay.
//
// One step, three collectives, all on the bucket buffers (no memory beyond DataParallel's):
//   1. backward: each bucket is reduce-scattered (average) as soon as its gradients are ready, so
//      rank r holds the averaged gradients of its chunks;
//   2. clipping: each rank sums the squares of its chunks' gradients, the sums are all-reduced
//      (f64), and each rank scales its chunks by the global factor (clip_grad_norm_on_device);
//   3. step(): AdamW updates this rank's segments of the f32 master weights (the parameters) with
//      its moments; each bucket's own chunk is then filled with the updated parameters and
//      all-gathered, and every rank copies the gathered buckets back into its parameters.
// The average of each element is the reduce-scatter's, which sums as the all-reduce does (comm/
// communicator.h), and AdamW is elementwise, so the weights equal the unsharded data-parallel
// run's bit for bit. The global norm's sum of squares is added in another order (per rank, then
// across ranks, instead of the unsharded kernel's chunks in parameter order): the f64 sums agree
// to about 1e-16 relative, and clipping scales by that factor rounded to f32, which is the same
// f32 unless the f64 factors straddle an f32 rounding boundary (odds about 2^-29 a step).
//
// bf16 mixed precision (shard_masters): the f32 master weights are sharded too, as llm.c's and
// DeepSpeed's ZeRO-1 shard them. Rank r keeps the masters of its chunks in one flat f32 buffer
// beside its moments (12 bytes per element of its shard: master, m, v) and the parameters' own
// f32 storage is freed; step 3 then updates those masters, writes the bf16 copy of each updated
// element in the same adamw_step launch (optim/adamw.h: the cast's rounding), copies the bf16
// segments into this rank's chunk of each bucket's storage read as bf16 (the first half of its
// bytes: the gradients there are spent), all-gathers those bf16 buckets (half the
// bytes of the f32 all-gather) and copies them into every parameter's compute copy. The copies
// are bit for bit what the unsharded bf16 run's AdamW writes, so the weights equal its weights.
// The parameters keep their shape, dtype and device (autograd joins each compute copy to its
// master, the gradient buckets and the optimizer's checks read them), but over one shared f32
// element (strides 0): their values exist only while gather_state() has made them whole. What
// reads the f32 masters: checkpoints and --save (train/trainer.cpp gathers around them), nothing
// in a step (forward reads the copies, clipping and AdamW the buckets and shards).
//
// Checkpoints are consolidated: gather_state() (collective: every rank calls it) all-gathers the
// moments (and sharded masters, into the parameters), and state_tensors() then answers with the
// unsharded names and shapes ("exp_avg.<param>"), so a checkpoint of a sharded run is one an
// unsharded run reads, and a sharded run resumes from either, at any world size (load_state takes
// this rank's slices; the masters are the parameters a checkpoint loads before shard_masters).
//
// Not for CUDA graphs: the clipping and the all-gather wait on the host (train_gpt refuses
// --cuda-graph with --zero 1).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "comm/data_parallel.h"
#include "optim/adamw.h"

namespace glass::comm {

class ZeroAdamW final : public AdamW {
 public:
  // `params` are the model's (named_parameters()); `ddp` must be sharded and hold the same
  // parameters.
  ZeroAdamW(NamedTensors params, const AdamWOptions& options, DataParallel& ddp);

  // The global gradient norm over the ranks' chunks and clipping (optim/clip.h's contract): the
  // sum of squares, f64 [1], the same on every rank. Collective.
  Tensor clip_grad_norm_on_device(double max_norm);

  // bf16 mixed precision: from now on this rank keeps the f32 masters of its shard only (taken
  // from the parameters now) and the parameters' f32 storage is freed (the header). `copies` are
  // the parameters' bf16 compute copies (Module::parameter_copies: params()' order, each defined),
  // which every step() then writes. Once, after the parameters and copies hold their final values
  // (initialised or resumed).
  void shard_masters(std::vector<Tensor> copies);
  bool masters_sharded() const { return master_.defined(); }

  // Collective: all-gathers the moments for the next state_tensors() (a checkpoint) and, with
  // sharded masters, the masters into the parameters (fresh f32 storage), whole on every rank.
  void gather_state();
  // Frees what gather_state() gathered (a copy of the unsharded moments; the masters' storage).
  void drop_gathered_state();
  // The consolidated moments of the last gather_state() (fails without one).
  NamedTensors state_tensors() const override;
  // From unsharded (consolidated) state of any world size: this rank's slices.
  void load_state(const NamedTensors& tensors,
                  const std::map<std::string, double>& scalars) override;

  // This rank's shard: elements of the moments (each), padding included.
  int64_t shard_numel() const;
  // What this rank's optimizer holds all the time: the moments' shards, and with sharded masters
  // the masters' (train/memory_ledger.h counts them).
  std::vector<Tensor> held_state() const;

 protected:
  void update(const std::vector<size_t>& with_grad) override;

 private:
  // The part of parameter `param` (an index into params()) in this rank's chunk of bucket
  // `bucket`: elements [begin, begin + length) of the flattened parameter, at `in_chunk` of the
  // chunk.
  struct Segment {
    size_t param;
    size_t bucket;
    int64_t begin, length, in_chunk;
  };
  Tensor param_part(const Segment& s) const;
  Tensor copy_part(const Segment& s) const;  // of the parameter's compute copy
  // The segment in this rank's chunk of `buffer`, bucket s.bucket's storage (as f32 or bf16).
  Tensor chunk_part(const Tensor& buffer, const Segment& s) const;
  Tensor grad_part(const Segment& s) const;
  Tensor moment_part(const Tensor& moment, const Segment& s) const;  // also of master_
  // Parameter i's slice of a bucket-shaped buffer (its bucket's).
  Tensor slot(const Tensor& buffer, size_t i) const;
  // Every parameter's values (sharded masters: every compute copy's), from the buckets' chunks
  // after this rank's update.
  void gather_parameters();
  // Points every parameter at released_ (sharded masters: the header).
  void release_parameters();

  DataParallel* ddp_;
  std::vector<Segment> segments_;
  std::vector<int64_t> chunk_start_;  // where bucket b's chunk begins in the moments
  Tensor m_, v_;                      // this rank's moments, [shard_numel()]
  Tensor master_;                     // shard_masters: this rank's f32 masters, [shard_numel()]
  std::vector<Tensor> copies_;        // shard_masters: the compute copies, params()' order
  Tensor released_;                   // the one f32 element released parameters stand on
  // Per parameter: its bucket and its offset there (DataParallel's order is not params()').
  std::vector<std::pair<size_t, int64_t>> place_;
  std::vector<Tensor> gathered_m_, gathered_v_;  // per bucket, after gather_state()
};

}  // namespace glass::comm
