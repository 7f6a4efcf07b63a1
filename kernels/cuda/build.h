// Which build of kernels/cuda this translation unit is part of.
//
// The same sources are compiled twice into one program: by nvcc for the `cuda` device and by the
// host compiler (with GLASS_EMU) for `emu`. Same names, different code: so everything they
// define lives in an inline namespace named after the build, glass::kernels::cuda::on_gpu or
// glass::kernels::cuda::on_emu, and the two never meet at link time (no ODR clash between, say,
// the two instantiations of launch_cuda_kernel). Source code still writes kernels::cuda::fill.
// With -DGLASS_CUDA_RUNTIME=emu the `cuda` build is compiled by the host compiler instead
// (GLASS_CUDA_TABLE_ON_EMU_RUNTIME) and is on_gpu too; nvcc's objects are then not linked.
// Host C++ outside these builds (the tests that call emu kernels directly) sees on_emu.
#pragma once

#if defined(__CUDACC__) || defined(GLASS_CUDA_TABLE_ON_EMU_RUNTIME)
#define GLASS_CUDA_BUILD on_gpu
#else
#define GLASS_CUDA_BUILD on_emu
#endif
