// The test kernels (kernels/*.cu, compiled under emu); __global__ functions are plain functions
// on emu, so the tests declare them as such.
#pragma once

#include <cuda_bf16.h>
#include <vector_types.h>

#include <cstddef>
#include <cstdint>

// kernels/basic.cu
void scale_add(const float* x, float* y, float a, int n);
void write_thread_ids(unsigned* out);
void bf16_round_trip(const float4* x, __nv_bfloat16* y, float* back, int n4);
void math_intrinsics(float* f, int* i);
void trap_in_thread(int bad_thread, int* destroyed);
void throw_in_thread(int bad_thread);
void launch_inside_kernel(float* x);
void copy_vectors(const float* x, float* y, int n);

// kernels/sync.cu
void block_sum(const float* x, float* sums, int n);
void block_sum_missing_barrier(const float* x, float* sums, int n);
void read_left_neighbour(const float* x, float* y);
void read_left_neighbour_missing_barrier(const float* x, float* y);
void divergent_barrier(float* out);
void early_exit_before_barrier(const int* x, int* y, int n);
void barrier_votes(int* out);
void transpose_tile(const float* in, float* out, int rows, int cols);
void reverse_dynamic_shared(const int* x, int* y, int n);
void read_fresh_dynamic_shared(unsigned* out);

// kernels/warp.cu
void warp_sum(const float* x, float* sums);
void shuffle_lane_ids(int* out, int mode, int lane_arg, int width);
void shuffle_types(double* d, long long* ll, float* f, unsigned* u, __nv_bfloat16* h);
void warp_votes(unsigned* ballot, int* any, int* all);
void disjoint_mask_shuffles(int* out);
void shuffle_from_two_sites(int* out);
void warp_sync_exchange(int* out);
void shuffle_and_vote_mixed(int* out);
void shuffle_mask_without_caller(int* out);
void active_lanes(unsigned* out);

// kernels/atomic.cu
void atomic_counters(int* i, unsigned* u, unsigned long long* ull, float* f, double* d, int* imax,
                     int* imin);
void cas_increment(int* counter);
void exchange_ids(int* slot, int* seen);
void wrapping_increment(unsigned* counter, unsigned limit);
void atomic_bit_ops(unsigned* set, unsigned* cleared, unsigned* flipped, int* sub, unsigned* down);

// kernels/checks.cu
void read_static_shared_before_write(unsigned* out, float* f);
void static_and_dynamic_shared(float* out);
void dynamic_shared_a(float* out);
void dynamic_shared_b(float* out);
void too_much_static_shared(float* out);
void neighbour_racy_in_one_block(const float* x, float* y, int racy_block);
void add_one(const float* x, float* y, int n);
void copy_words(const unsigned* x, unsigned* y, int n);
void dynamic_shared_c(float* out);
void allow_dynamic_shared_c(size_t bytes);  // kernels/cuda/shared_memory.h's helper
void atomic_sum(const float* x, float* sum, int n, int* last);

// kernels/memory.cu
void write_at(float* p, long offset, float v);

// kernels/tensor_core.cu
void mma_tile(const uint16_t* a, const uint16_t* b, const float* c, float* d);
void mma_in_diverged_warp(float* out);
void mma_at_two_sites(float* out);
void ldmatrix_misaligned(uint32_t* out);
void ldmatrix_before_wait(const uint16_t* g, uint32_t* out);
void ldmatrix_shapes_disagree(uint32_t* out);
void copy_groups(const uint32_t* g, uint32_t* out);
void copy_then_empty_group(const uint32_t* g, uint32_t* out);
void copy_never_waited(const uint32_t* g, uint32_t* out);
