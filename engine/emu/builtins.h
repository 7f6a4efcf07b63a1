// The CUDA built-in variables threadIdx, blockIdx, blockDim, gridDim and warpSize.
//
// An OS thread runs one block at a time and the fibers of that block never leave it, so the
// built-ins can be ordinary thread_local variables: blockIdx/blockDim/gridDim are set once per
// block and threadIdx is rewritten whenever the scheduler switches to another CUDA thread.
// gdb prints them like any thread-local variable (`print threadIdx`).
#pragma once

#include <vector_types.h>

inline thread_local uint3 threadIdx;
inline thread_local uint3 blockIdx;
inline thread_local dim3 blockDim;
inline thread_local dim3 gridDim;
constexpr int warpSize = 32;
