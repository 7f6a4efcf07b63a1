#include "engine/device_peaks.h"

#include "engine/error.h"

namespace glass {

double DevicePeaks::flops(DType dtype) const {
  const double peak = dtype == DType::bf16 ? bf16_flops : f32_flops;
  GLASS_CHECK(peak > 0, "device '{}' has no {} FLOP/s peak ({})", name, dtype_name(dtype), source);
  return peak;
}

namespace {
// A GPU's datasheet roofs (no measured roof) and where they come from.
DevicePeaks datasheet(const char* name, double f32, double tf32, double bf16, double bytes_per_s,
                      const char* source) {
  DevicePeaks p;
  p.name = name;
  p.f32_flops = f32;
  p.tf32_flops = tf32;
  p.bf16_flops = bf16;
  p.bytes_per_s = bytes_per_s;
  p.source = source;
  return p;
}
}  // namespace

const std::vector<DevicePeaks>& known_gpus() {
  // Dense peaks (the datasheets also list 2x "with sparsity" figures for tensor cores; training
  // does not get those). f32 is the CUDA-core FMA rate, tf32 and bf16 the tensor-core rates.
  static const std::vector<DevicePeaks> table = {
      // NVIDIA A100 Tensor Core GPU datasheet (SXM4 80GB): FP32 19.5 TFLOPS, TF32 Tensor Core 156
      // TFLOPS, BF16 Tensor Core 312 TFLOPS (dense), HBM2e 2,039 GB/s.
      datasheet("a100", 19.5e12, 156e12, 312e12, 2.039e12, "NVIDIA A100 SXM4 80GB datasheet"),
      // NVIDIA H100 Tensor Core GPU datasheet (SXM5): FP32 67 TFLOPS, TF32 Tensor Core 989 and
      // BF16 Tensor Core 1,979 TFLOPS with sparsity = 494 and 989 dense, HBM3 3.35 TB/s.
      datasheet("h100", 67e12, 494e12, 989e12, 3.35e12, "NVIDIA H100 SXM5 datasheet"),
      // NVIDIA H200 Tensor Core GPU datasheet (SXM): the H100's compute (FP32 67 TFLOPS, TF32 494
      // and BF16 989 dense) with HBM3e at 4.8 TB/s.
      datasheet("h200", 67e12, 494e12, 989e12, 4.8e12, "NVIDIA H200 SXM datasheet"),
  };
  return table;
}

std::optional<DevicePeaks> find_known_gpu(const std::string& name) {
  for (const DevicePeaks& p : known_gpus())
    if (p.name == name) return p;
  return std::nullopt;
}

}  // namespace glass
