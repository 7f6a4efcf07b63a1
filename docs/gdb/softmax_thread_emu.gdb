# docs/debugging.md, part 2: one CUDA thread of the softmax kernel on emu, through its warp reduction.
#   gdb -batch -x docs/gdb/softmax_thread_emu.gdb --args build/samples/debug_step --device emu
source tools/gdb/glass.py
set environment GLASS_EMU_THREADS 1
set environment GLASS_EMU_BREAK 3/5@softmax_forward
break glass_emu_thread_hook
run
delete
tbreak softmax_forward_kernel
continue
print blockIdx
print threadIdx
break block_reduce if blockIdx.x == 3 && threadIdx.x == 5
continue
next
print value
display lane_mask
display value
next
next
next
next
next
next
next
next
next
next
next
undisplay 1 2
next
next
# warp_results is a static __shared__ variable: on emu it lives in the emulator's shared-memory
# section (poisoned at each block start), where gdb sees it by its symbol, without a type.
print ((float*)&'glass::kernels::cuda::on_emu::block_reduce<float, glass::kernels::cuda::on_emu::Max>(float, glass::kernels::cuda::on_emu::Max)::warp_results')[0]@2
delete
continue
