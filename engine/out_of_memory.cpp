#include "engine/out_of_memory.h"

#include <atomic>

namespace glass {

namespace {

std::atomic<ModulePathSource> module_source{nullptr};

std::string message_of(const OutOfMemoryFigures& f) {
  std::string m = fmt::format("out of memory on {} allocating {}", f.device.str(),
                              format_bytes(static_cast<double>(f.request_bytes)));
  if (!f.tensor.empty()) m += " for a tensor " + f.tensor;
  if (!f.op.empty()) m += fmt::format(" in op '{}' ({})", f.op, phase_name(f.phase));
  if (!f.module.empty()) m += fmt::format(" of module '{}'", f.module);
  m +=
      fmt::format(": the allocator holds {} allocated and {} reserved; its largest free block was ",
                  format_bytes(static_cast<double>(f.allocated_bytes)),
                  format_bytes(static_cast<double>(f.reserved_bytes)));
  m += f.largest_free_block > 0
           ? format_bytes(static_cast<double>(f.largest_free_block)) +
                 " (the cache was given back to the device and the allocation tried again)"
           : "none (nothing cached)";
  if (f.free)
    m += fmt::format("; the device has {} free of {} ({})",
                     format_bytes(static_cast<double>(f.free->free_bytes)),
                     format_bytes(static_cast<double>(f.free->total_bytes)), f.free->source);
  m += ". To fit the step: a smaller --batch, --grad-accum K (the same global batch in K "
       "micro-steps), --dtype bf16 (on emu and cuda), --recompute (activations recomputed in "
       "backward), --zero 1 (optimizer state sharded over the data-parallel ranks); run without "
       "--no-preflight to have each one's peak planned before step 1 (docs/memory.md)";
  return m;
}

}  // namespace

OutOfMemoryError::OutOfMemoryError(OutOfMemoryFigures figures)
    : Error("out of memory"), figures_(std::move(figures)), message_(message_of(figures_)) {}

void OutOfMemoryError::set_tensor(const std::string& tensor) {
  if (!figures_.tensor.empty()) return;  // the innermost tensor is the one that asked
  figures_.tensor = tensor;
  message_ = message_of(figures_);
}

void throw_out_of_memory(OutOfMemoryFigures figures) {
  const LaunchContext& ctx = current_launch_context();
  figures.op = ctx.op;
  figures.phase = ctx.phase;
  if (const ModulePathSource source = module_source.load()) figures.module = source();
  throw OutOfMemoryError(std::move(figures));
}

void set_module_path_source(ModulePathSource source) { module_source.store(source); }

}  // namespace glass
