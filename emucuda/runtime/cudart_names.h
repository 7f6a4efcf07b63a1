// The emulated CUDA runtime's names. Force-included (-include) into every C++ file of a build with
// -DGLASS_CUDA_RUNTIME=emu, before any CUDA header: each runtime function the engine calls is a
// macro for a symbol of the emulator's own (glass_emu_cudaMalloc, ...), so that the declarations
// of the real <cuda_runtime_api.h>, read afterwards as they are, declare the emulator's functions
// with CUDA's exact signatures, and the call sites stay byte for byte those a GPU build compiles.
// The real libcudart's symbols are never defined or called: a runtime function the emulator does
// not provide is a link error naming it, not a silent fallback.
#pragma once

#define cudaGetDeviceCount glass_emu_cudaGetDeviceCount
#define cudaSetDevice glass_emu_cudaSetDevice
#define cudaGetDevice glass_emu_cudaGetDevice
#define cudaGetDeviceProperties glass_emu_cudaGetDeviceProperties
#define cudaDeviceGetAttribute glass_emu_cudaDeviceGetAttribute
#define cudaDeviceSynchronize glass_emu_cudaDeviceSynchronize
#define cudaMemGetInfo glass_emu_cudaMemGetInfo
#define cudaGetLastError glass_emu_cudaGetLastError
#define cudaPeekAtLastError glass_emu_cudaPeekAtLastError
#define cudaGetErrorString glass_emu_cudaGetErrorString
#define cudaGetErrorName glass_emu_cudaGetErrorName
#define cudaMalloc glass_emu_cudaMalloc
#define cudaFree glass_emu_cudaFree
#define cudaHostAlloc glass_emu_cudaHostAlloc
#define cudaMallocHost glass_emu_cudaMallocHost
#define cudaFreeHost glass_emu_cudaFreeHost
#define cudaMemcpy glass_emu_cudaMemcpy
#define cudaMemcpyAsync glass_emu_cudaMemcpyAsync
#define cudaMemset glass_emu_cudaMemset
#define cudaMemsetAsync glass_emu_cudaMemsetAsync
#define cudaStreamCreate glass_emu_cudaStreamCreate
#define cudaStreamCreateWithFlags glass_emu_cudaStreamCreateWithFlags
#define cudaStreamDestroy glass_emu_cudaStreamDestroy
#define cudaStreamSynchronize glass_emu_cudaStreamSynchronize
#define cudaStreamQuery glass_emu_cudaStreamQuery
#define cudaStreamGetDevice glass_emu_cudaStreamGetDevice
#define cudaStreamWaitEvent glass_emu_cudaStreamWaitEvent
#define cudaEventCreate glass_emu_cudaEventCreate
#define cudaEventCreateWithFlags glass_emu_cudaEventCreateWithFlags
#define cudaEventDestroy glass_emu_cudaEventDestroy
#define cudaEventRecord glass_emu_cudaEventRecord
#define cudaEventQuery glass_emu_cudaEventQuery
#define cudaEventSynchronize glass_emu_cudaEventSynchronize
#define cudaEventElapsedTime glass_emu_cudaEventElapsedTime
#define cudaLaunchKernel glass_emu_cudaLaunchKernel
#define cudaFuncSetAttribute glass_emu_cudaFuncSetAttribute
#define cudaFuncGetAttributes glass_emu_cudaFuncGetAttributes
#define cudaStreamBeginCapture glass_emu_cudaStreamBeginCapture
#define cudaStreamEndCapture glass_emu_cudaStreamEndCapture
#define cudaStreamIsCapturing glass_emu_cudaStreamIsCapturing
#define cudaGraphGetNodes glass_emu_cudaGraphGetNodes
#define cudaGraphInstantiate glass_emu_cudaGraphInstantiate
#define cudaGraphLaunch glass_emu_cudaGraphLaunch
#define cudaGraphExecDestroy glass_emu_cudaGraphExecDestroy
#define cudaGraphDestroy glass_emu_cudaGraphDestroy
#define cudaThreadExchangeStreamCaptureMode glass_emu_cudaThreadExchangeStreamCaptureMode
