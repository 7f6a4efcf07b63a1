// Where each element of a warp-wide matrix lives: the fragment layouts of the Tensor Core
// instructions glass uses, written once, from the PTX ISA (section "Warp-level matrix
// instructions": "Matrix Fragments for mma.m16n8k16 with floating point type" and "Warp-level
// matrix load instruction: ldmatrix"). The emulator builds each mma's matrices from the lanes'
// registers with these tables and hands results back with them (engine/emu/tensor_core.cpp); the
// kernels read them to know which row and column an accumulator register holds (for masking and
// row-wise softmax); tests/emu/test_tensor_core.cpp checks them against CUTLASS/CuTe's MMA atom
// layouts, written there independently.
//
// A warp's 32 lanes form 8 groups of 4: group = lane / 4 ("groupID"), thread = lane % 4
// ("threadID_in_group"). A 32-bit register holds two 16-bit elements, the lower-indexed one in
// its low half.
//
// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32   D[16x8] = A[16x16] * B[16x8] + C[16x8]
//   A: 4 registers a0..a3 = 8 elements; element i of lane (group g, thread t) is
//        row g + 8 * ((i / 2) % 2),  column 2t + (i % 2) + 8 * (i / 4)
//      so a0 = (g, 2t..2t+1), a1 = (g+8, 2t..), a2 = (g, 2t+8..), a3 = (g+8, 2t+8..)
//   B: 2 registers b0..b1 = 4 elements; element i is row (k) 2t + (i % 2) + 8 * (i / 2), column g
//   C, D: 4 f32 registers; element i is row g + 8 * (i / 2), column 2t + (i % 2)
//
// ldmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared.b16: 1, 2 or 4 matrices of 8x8 16-bit
//   elements; lanes 8j..8j+7 give the addresses of rows 0..7 of matrix j (16 contiguous bytes
//   each, 16-byte aligned); every lane receives one register per matrix:
//   without .trans, register j of lane (g, t) holds row g, columns 2t and 2t+1 of matrix j;
//   with .trans, it holds rows 2t and 2t+1 of column g (the matrix is delivered transposed).
// So an x4 of a 16x16 row-major tile whose rows are addressed as lane -> (row lane % 16, column
// 8 * (lane / 16)) yields exactly mma's A registers a0..a3.
#pragma once

#if defined(__CUDACC__)
#define GLASS_MMA_HD __host__ __device__
#else
#define GLASS_MMA_HD
#endif

namespace glass::mma {

struct RowCol {
  int row, col;
};

// lane -> (group, thread in group)
GLASS_MMA_HD constexpr int lane_group(int lane) { return lane >> 2; }
GLASS_MMA_HD constexpr int lane_thread(int lane) { return lane & 3; }

// m16n8k16, 16-bit inputs: element `i` (0..7) of lane's A fragment
GLASS_MMA_HD constexpr RowCol a_element(int lane, int i) {
  return {lane_group(lane) + 8 * ((i / 2) % 2), 2 * lane_thread(lane) + i % 2 + 8 * (i / 4)};
}
// element `i` (0..3) of lane's B fragment: {row = k, col = n}
GLASS_MMA_HD constexpr RowCol b_element(int lane, int i) {
  return {2 * lane_thread(lane) + i % 2 + 8 * (i / 2), lane_group(lane)};
}
// element `i` (0..3) of lane's C or D fragment (f32 accumulators)
GLASS_MMA_HD constexpr RowCol c_element(int lane, int i) {
  return {lane_group(lane) + 8 * (i / 2), 2 * lane_thread(lane) + i % 2};
}

// ldmatrix: element `half` (0 = low, 1 = high 16 bits) of the register a lane receives from one
// 8x8 matrix, as (row, column) of that matrix in memory.
GLASS_MMA_HD constexpr RowCol ldmatrix_element(int lane, int half, bool trans) {
  return trans ? RowCol{2 * lane_thread(lane) + half, lane_group(lane)}
               : RowCol{lane_group(lane), 2 * lane_thread(lane) + half};
}

constexpr int kM = 16, kN = 8, kK = 16;  // the mma shape: m16n8k16

}  // namespace glass::mma
