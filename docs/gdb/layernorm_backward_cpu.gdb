# docs/debugging.md, part 1: stop at LayerNorm's backward node on cpu.
#   gdb -batch -x docs/gdb/layernorm_backward_cpu.gdb --args build/samples/debug_step --device cpu
source tools/gdb/glass.py
set environment GLASS_BREAK_ON layernorm_backward
break glass_break_here
run
print *info
print glass::backward_now.node->op
print glass::backward_now.node->created_at
print glass::backward_now.node->saved
print *glass::backward_now.grad_out
glass-step-into kernels/cpu/layernorm.cpp
backtrace 3
continue
