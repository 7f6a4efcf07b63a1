// Stopping at one CUDA thread in gdb.
//
// A conditional breakpoint (`break softmax.cu:42 if threadIdx.x == 37 && blockIdx.x == 5`) works,
// but gdb evaluates the condition at every thread that passes the line. Cheaper: name the thread
// in GLASS_EMU_BREAK (or Settings::break_at) and break on glass_emu_thread_hook, which the
// emulator calls right before that thread starts:
//
//   GLASS_EMU_THREADS=1 GLASS_EMU_BREAK=5/37@softmax_forward gdb --args ./train ...
//   (gdb) break glass_emu_thread_hook
//   (gdb) run
//   (gdb) tbreak softmax_forward      # the next entry on this OS thread is thread 37 of block 5
//   (gdb) continue
//
// From there `next` steps over __syncthreads() and stays with the thread (gdb matches the frame).
#pragma once

#include <cstdint>

extern "C" void glass_emu_thread_hook(const char* kernel, unsigned block_x, unsigned block_y,
                                      unsigned block_z, unsigned thread_x, unsigned thread_y,
                                      unsigned thread_z);

namespace glass::emu {

// How many times glass_emu_thread_hook has been called in this process.
uint64_t thread_hook_calls();

}  // namespace glass::emu
