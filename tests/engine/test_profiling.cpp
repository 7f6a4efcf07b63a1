// Profiling in the engine: the roofline model against the course's worked numbers, the device
// table, the per-kernel summary (self vs total time of nested launches, shares, bounds) against
// hand-computed values, and the Chrome trace of launches from several threads.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <set>
#include <thread>

#include "engine/kernel_summary.h"
#include "engine/roofline.h"
#include "engine/trace.h"
#include "kernels/cpu/hardware_peak.h"
#include "kernels/peaks.h"
#include "tests/testing.h"

namespace glass {
namespace {

// A device with round numbers: 1 TFLOP/s f32, 100 GB/s: ridge at 10 FLOP/byte.
DevicePeaks round_peaks() { return {"test", 1e12, 0, 100e9, "made up for the test"}; }

TEST(Roofline, CourseGemmIntensities) {
  // bf16, K = N = 4096: 2*32*4096^2 FLOPs over 2*(32*4096 + 4096^2 + 32*4096) bytes.
  const OpCost small = gemm_cost(32, 4096, 4096, DType::bf16);
  EXPECT_DOUBLE_EQ(small.flops, 1073741824.0);
  EXPECT_DOUBLE_EQ(small.bytes, 34078720.0);
  EXPECT_NEAR(small.intensity(), 31.5, 0.01);
  EXPECT_DOUBLE_EQ(gemm_cost(2048, 4096, 4096, DType::bf16).intensity(), 1024.0);
  // On an H200 (ridge 989e12 / 4.8e12 = 206) the first is memory-bound, the second compute-bound.
  const DevicePeaks h200 = *find_known_gpu("h200");
  EXPECT_NEAR(h200.ridge(DType::bf16), 206.04, 0.01);
  EXPECT_TRUE(roofline(small, h200, DType::bf16).memory_bound);
  EXPECT_FALSE(roofline(gemm_cost(2048, 4096, 4096, DType::bf16), h200, DType::bf16).memory_bound);
  EXPECT_NEAR(roofline(small, h200, DType::bf16).floor_s, 34078720.0 / 4.8e12, 1e-15);
}

TEST(Roofline, ElementwiseAndFloor) {
  // An f32 add of 1000 elements: 1000 FLOPs, 4 * 1000 * 3 bytes.
  const OpCost add = elementwise_cost(1000, 2, 1, 1, DType::f32);
  EXPECT_DOUBLE_EQ(add.flops, 1000);
  EXPECT_DOUBLE_EQ(add.bytes, 12000);
  const RooflinePoint p = roofline(add, round_peaks(), DType::f32);
  EXPECT_TRUE(p.memory_bound);
  EXPECT_DOUBLE_EQ(p.ridge, 10);
  EXPECT_DOUBLE_EQ(p.floor_s, 12000 / 100e9);
  // 1e12 FLOPs on 1 byte: compute-bound, one second.
  const RooflinePoint c = roofline(OpCost{1e12, 1}, round_peaks(), DType::f32);
  EXPECT_FALSE(c.memory_bound);
  EXPECT_DOUBLE_EQ(c.floor_s, 1.0);
}

TEST(Roofline, BadInputIsNamed) {
  EXPECT_TRUE(testing::contains_all(testing::error_of([] { gemm_cost(0, 4, 4, DType::f32); }),
                                    {"gemm_cost", "M=0"}));
  EXPECT_TRUE(testing::contains_all(testing::error_of([] { round_peaks().flops(DType::bf16); }),
                                    {"test", "bf16"}));
  EXPECT_FALSE(find_known_gpu("h300").has_value());
}

TEST(DevicePeaks, HostIsMeasuredAndSaysSo) {
  const DevicePeaks p = kernels::peaks_for(kEmu);
  EXPECT_GT(p.f32_flops, 1e8);
  EXPECT_GT(p.bytes_per_s, 1e8);
  EXPECT_TRUE(testing::contains_all(
      p.source, {"emu runs on the host", "hardware peak", "cores x", "GHz", "FLOP/cycle",
                 "measured", "GEMM 512^3", "threads", "attainable", device_name(kCPU)}));
  EXPECT_EQ(p.name, "emu");
}

// The host's peak is the hardware's, cores x clock x FLOPs per cycle, with every factor printed,
// and it is at least every GEMM rate the engine measures (a peak taken from a measurement, or a
// clock or width too low, fails this: the 512^3 GEMM measured ~200 GFLOP/s on 2 cores here).
TEST(DevicePeaks, HostPeakIsTheHardwaresAndAboveEveryGemmTheEngineMeasures) {
  const kernels::cpu::HardwarePeak& hw = kernels::cpu::hardware_peak();
  EXPECT_GE(hw.cores, 1);
  EXPECT_TRUE(hw.f32_lanes == 4 || hw.f32_lanes == 8 || hw.f32_lanes == 16) << hw.f32_lanes;
  EXPECT_DOUBLE_EQ(hw.flops(), hw.cores * hw.clock_hz * hw.f32_lanes * hw.fma_units * 2.0);
  EXPECT_TRUE(testing::contains_all(
      hw.derivation(), {"cores x", "GHz x", "FLOP/cycle", "FMA units", "clock:", "/proc/cpuinfo",
                        "dependent adds", "OpenBLAS GEMM kernel"}));
  // A dependent-add chain reads the clock low on a busy machine, never high: a reading above any
  // real x86 clock means the chain was not one add per cycle (x += 1 read 6.95 GHz here: Golden
  // Cove folds immediate adds).
  const double chain = kernels::cpu::measure_clock_hz(3);
  EXPECT_GT(chain, 1e7);
  EXPECT_LT(chain, 6.5e9);
  EXPECT_GT(hw.clock_hz, 3e8);
  EXPECT_LT(hw.clock_hz, 6.5e9);

  const DevicePeaks p = kernels::peaks_for(kCPU);
  EXPECT_DOUBLE_EQ(p.f32_flops, hw.flops());
  EXPECT_GT(p.attainable_f32_flops, 0);
  EXPECT_GE(p.f32_flops, p.attainable_f32_flops);
  for (int n : {128, 256, 384, 512}) {
    const double gemm = kernels::measure_device_peaks(kCPU, n, size_t{1} << 20).f32_flops;
    EXPECT_GE(p.f32_flops, gemm) << n << "^3 GEMM above the hardware peak: " << p.source;
  }
}

// The peak's clock is the highest reading on this CPU model, remembered across runs: a later run
// on a busy host (whose turbo clock reads lower) keeps the quiet run's clock, so the peak behind
// MFU does not move with the load.
TEST(DevicePeaks, ClockIsTheHighestReadingRememberedPerCpuModel) {
  using kernels::cpu::remembered_clock_hz;
  const std::string file = testing::scratch_path("clock_memory/cpu_clock");  // directory made
  const std::string zen = "AMD EPYC family 26 model 2 stepping 1", intel = "Intel Xeon family 6";
  const auto read = [&] {
    std::ifstream in(file);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  // 1. Nothing remembered: the reading, written down.
  auto c = remembered_clock_hz(file, zen, 4.09e9);
  EXPECT_DOUBLE_EQ(c.hz, 4.09e9);
  EXPECT_DOUBLE_EQ(c.remembered, 0);
  EXPECT_EQ(read(), "4090000000 " + zen + "\n");
  // 2. A busy run reads lower: the remembered clock stands, the file is unchanged.
  c = remembered_clock_hz(file, zen, 3.42e9);
  EXPECT_DOUBLE_EQ(c.hz, 4.09e9);
  EXPECT_DOUBLE_EQ(c.remembered, 4.09e9);
  EXPECT_EQ(read(), "4090000000 " + zen + "\n");
  // 3. Another model has its own line; a higher reading replaces only its model's line.
  EXPECT_DOUBLE_EQ(remembered_clock_hz(file, intel, 3.0e9).hz, 3.0e9);
  EXPECT_DOUBLE_EQ(remembered_clock_hz(file, zen, 4.2e9).hz, 4.2e9);
  EXPECT_EQ(read(), "3000000000 " + intel + "\n4200000000 " + zen + "\n");
  // 4. No x86 core runs at 6.5 GHz: such a reading (or line) is ignored, not remembered.
  EXPECT_DOUBLE_EQ(remembered_clock_hz(file, zen, 9e9).hz, 4.2e9);
  { std::ofstream(file) << "garbage\n7000000000 " << zen << "\n"; }
  c = remembered_clock_hz(file, zen, 3.5e9);
  EXPECT_DOUBLE_EQ(c.hz, 3.5e9);
  EXPECT_DOUBLE_EQ(c.remembered, 0);
  // 5. No file possible (a directory where the file would be, or no path): the reading itself.
  EXPECT_DOUBLE_EQ(remembered_clock_hz(testing::scratch_path("clock_memory"), zen, 3.3e9).hz,
                   3.3e9);
  EXPECT_DOUBLE_EQ(remembered_clock_hz("", zen, 3.3e9).hz, 3.3e9);
}

// The start-up line says whether the machine was busy while the host's figures were measured:
// where Linux reports CPU pressure, busy when over half a core on average had a thread waiting
// for it; elsewhere when the measuring thread got less than 90% of the wall-clock time.
TEST(DevicePeaks, BusyMachineDecisionAndWords) {
  EXPECT_FALSE(kernels::measurement_was_busy(1.0));
  EXPECT_FALSE(kernels::measurement_was_busy(0.95));
  EXPECT_FALSE(kernels::measurement_was_busy(kernels::kQuietCpuShare));
  EXPECT_TRUE(kernels::measurement_was_busy(0.89));
  EXPECT_TRUE(kernels::measurement_was_busy(0.3));
  const std::string quiet = kernels::measurement_load_note(0.98, 0.2, 2);
  EXPECT_TRUE(testing::contains_all(quiet, {"quiet", "98%", "load average 0.2 on 2 cores"}))
      << quiet;
  const std::string busy = kernels::measurement_load_note(0.41, 23.5, 2);
  EXPECT_TRUE(testing::contains_all(busy, {"BUSY", "41%", "23.5 on 2 cores", "read low"})) << busy;
  EXPECT_EQ(kernels::measurement_load_note(0.5, -1, 2).find("load average"), std::string::npos);
  // The pressure decides where there is one: a quiet VM's slow wake-ups lower the share only.
  EXPECT_FALSE(kernels::measurement_was_busy(0.8, 0.02));
  EXPECT_TRUE(kernels::measurement_was_busy(1.0, 1.4));
  const std::string woken = kernels::measurement_load_note(0.82, 1.2, 2, 0.0);
  EXPECT_TRUE(testing::contains_all(woken, {"quiet", "0.00 cores", "CPU pressure", "82%"}))
      << woken;
  const std::string queued = kernels::measurement_load_note(0.6, 4.0, 2, 1.9);
  EXPECT_TRUE(testing::contains_all(queued, {"BUSY", "1.90 cores", "60%", "read low"})) << queued;
}

// The host's line gives both copies, and the cache-resident one is a real copy speed: at least
// a few GB/s on any machine this runs on (it read 0.0-0.1 GB/s when one copy was timed alone).
TEST(DevicePeaks, HostLineGivesBothCopiesAndTheLoad) {
  const DevicePeaks p = kernels::peaks_for(kCPU);
  EXPECT_TRUE(testing::contains_all(
      p.source, {"32 MiB", "256 KiB", "copies per timing", "during the measurement"}))
      << p.source;
  EXPECT_GT(p.bytes_per_s, 1e9) << p.source;
}

// What peaks_for does for a GPU without a datasheet row, run on emu: the engine's own GEMM and
// copy, synchronised, named in the source line.
TEST(DevicePeaks, MeasuredOnADeviceThroughItsKernels) {
  const DevicePeaks p = kernels::measure_device_peaks(kEmu, 48, size_t{1} << 20);
  EXPECT_GT(p.f32_flops, 1e5);
  EXPECT_GT(p.bytes_per_s, 1e5);
  EXPECT_EQ(p.name, "emu");
  EXPECT_TRUE(testing::contains_all(
      p.source, {"measured on emu (CUDA emulator) on", "GEMM 48^3", "1 MiB copy", "best of 10"}));
}

TEST(DeviceName, SaysWhatRunsTheKernels) {
  EXPECT_FALSE(device_name(kCPU).empty());
  EXPECT_EQ(device_name(kEmu), "emu (CUDA emulator) on " + device_name(kCPU));
}

TracedLaunch traced(const char* kernel, int tid, double start, double end, double flops,
                    double bytes, int64_t step = 0) {
  TracedLaunch l;
  l.record.info.kernel = kernel;
  l.record.info.flops = flops;
  l.record.info.bytes = bytes;
  l.record.start_us = start;
  l.record.end_us = end;
  l.tid = tid;
  l.step = step;
  return l;
}

TEST(KernelSummary, NestedLaunchesSplitSelfAndTotal) {
  // Thread 1: outer [0, 10) contains inner [2, 5) and inner [6, 7); thread 2: inner [3, 9),
  // overlapping outer in time but on another thread, so not nested in it. Window: 0..10 us.
  const std::vector<TracedLaunch> ls = {
      traced("outer", 1, 0, 10, 0, 1000), traced("inner", 1, 2, 5, 3000, 100),
      traced("inner", 1, 6, 7, 1000, 100), traced("inner", 2, 3, 9, 2000, 200)};
  const KernelSummary s = summarize_kernels(ls, round_peaks());
  ASSERT_EQ(s.rows.size(), 2u);
  EXPECT_DOUBLE_EQ(s.window_us, 10);
  const KernelRow& inner = s.rows[0];  // self 3 + 1 + 6 = 10 us, the largest
  const KernelRow& outer = s.rows[1];
  EXPECT_EQ(inner.kernel, "inner");
  EXPECT_EQ(inner.calls, 3);
  EXPECT_DOUBLE_EQ(inner.self_us, 10);
  EXPECT_DOUBLE_EQ(inner.total_us, 10);
  EXPECT_DOUBLE_EQ(outer.self_us, 10 - 3 - 1);
  EXPECT_DOUBLE_EQ(outer.total_us, 10);
  EXPECT_DOUBLE_EQ(outer.share, 0.6);
  // inner: 6000 FLOPs and 400 bytes in 10 us: 0.6 GFLOP/s, 0.04 GB/s, 15 FLOP/byte > ridge 10.
  EXPECT_DOUBLE_EQ(inner.gflops, 0.6);
  EXPECT_DOUBLE_EQ(inner.gbps, 0.04);
  EXPECT_DOUBLE_EQ(inner.roof.intensity, 15);
  EXPECT_FALSE(inner.roof.memory_bound);
  // Floor: max(6000 / 1e12, 400 / 1e11) = 6 ns; 10 us is 1666.7x that.
  EXPECT_NEAR(inner.over_floor, 10e-6 / 6e-9, 1e-6);
  EXPECT_TRUE(outer.roof.memory_bound);
  EXPECT_TRUE(testing::contains_all(s.table(), {"inner", "outer", "made up for the test"}));
}

TEST(KernelSummary, WindowSumsSteps) {
  // Two steps, 4 us and 5 us long, 96 us apart: the gap between the steps is not step time; the
  // 1 us gap inside step 2, between its two launches, is.
  const std::vector<TracedLaunch> ls = {traced("k", 1, 0, 4, 0, 0, 1),
                                        traced("k", 1, 100, 102, 0, 0, 2),
                                        traced("k", 1, 103, 105, 0, 0, 2)};
  const KernelSummary s = summarize_kernels(ls, round_peaks());
  EXPECT_DOUBLE_EQ(s.window_us, 9);
  EXPECT_DOUBLE_EQ(s.rows[0].self_us, 8);
  EXPECT_DOUBLE_EQ(s.rows[0].share, 8.0 / 9.0);
  EXPECT_EQ(s.rows[0].over_floor, 0);  // nothing counted: no floor to compare against
}

TEST(KernelSummary, EachCallIsJudgedAgainstTheRoofOfItsUnit) {
  // 1 TFLOP/s f32, 4 TFLOP/s bf16 (the cpu's vdpbf16ps path or a GPU's Tensor Cores), 100 GB/s.
  DevicePeaks peaks = round_peaks();
  peaks.bf16_flops = 4e12;
  // "mixed": 4e6 FLOPs on the bf16 unit and 1e6 on the f32 one, 1000 bytes, in 10 us in all
  std::vector<TracedLaunch> ls = {traced("mixed", 1, 0, 5, 4e6, 500),
                                  traced("mixed", 1, 5, 10, 1e6, 500),
                                  traced("fma", 1, 10, 20, 1e6, 1000)};
  ls[0].record.info.unit = ComputeUnit::tensor_core_bf16;
  const KernelSummary s = summarize_kernels(ls, peaks);
  ASSERT_EQ(s.rows.size(), 2u);
  const KernelRow& fma = s.rows[0].kernel == "fma" ? s.rows[0] : s.rows[1];
  const KernelRow& mixed = s.rows[0].kernel == "mixed" ? s.rows[0] : s.rows[1];
  // floor: 4e6 / 4e12 + 1e6 / 1e12 = 2 us of compute (more than 1000 B / 100 GB/s = 10 ns); the
  // combined roof 5e6 FLOPs / 2 us = 2.5 TFLOP/s, whose ridge is 25 FLOP/byte
  EXPECT_NEAR(mixed.roof.floor_s, 2e-6, 1e-18);
  EXPECT_NEAR(mixed.over_floor, 5, 1e-9);
  EXPECT_NEAR(mixed.roof.ridge, 25, 1e-9);
  EXPECT_EQ(mixed.unit, ComputeUnit::tensor_core_bf16);  // the unit that did most of its FLOPs
  EXPECT_NEAR(fma.roof.floor_s, 1e-6, 1e-18);            // f32: 1e6 / 1e12
  EXPECT_EQ(fma.unit, ComputeUnit::cuda_core);
  // the header names both roofs by the units of the launches' device (cpu here)
  EXPECT_TRUE(testing::contains_all(
      s.table(), {"1000.0 GFLOP/s FMA units (f32)", "4000.0 GFLOP/s vdpbf16ps (bf16)", "ridges"}))
      << s.table();
  // a device without a bf16 peak (emu: its bf16 math runs in f32 on the host) judges the bf16
  // unit's FLOPs against the f32 roof: 5e6 / 1e12 = 5 us, and one roof in the header
  const KernelSummary f32_only = summarize_kernels(ls, round_peaks());
  const KernelRow& m32 = f32_only.rows[0].kernel == "mixed" ? f32_only.rows[0] : f32_only.rows[1];
  EXPECT_NEAR(m32.roof.floor_s, 5e-6, 1e-18);
  EXPECT_TRUE(testing::contains_all(f32_only.table(), {"1000.0 GFLOP/s f32, 100.0 GB/s, ridge 10"}))
      << f32_only.table();
}

// Launches `n` empty kernels named `name` in `phase` on `stream`.
void launch_empties(const char* name, int n, Phase phase, int stream = 0) {
  LaunchScope scope("test_op", 7, phase);
  for (int i = 0; i < n; ++i) {
    LaunchInfo info;
    info.kernel = name;
    info.stream = stream;
    info.grid = {3, 2, 1};
    info.flops = 100;
    info.bytes = 40;
    launch(info, [] {});
  }
}

// A recorder stopped (and destroyed) while another thread's launch is still running must not be
// called by that launch afterwards: stop() returns only when the launch is done.
TEST(TraceRecorder, StopWaitsForLaunchesInFlightOnOtherThreads) {
  auto rec = std::make_unique<TraceRecorder>();
  rec->start();
  std::promise<void> started, release;
  std::shared_future<void> released = release.get_future().share();
  std::thread launcher([&] {
    LaunchInfo info;
    info.kernel = "blocking";
    launch(info, [&] {
      started.set_value();
      released.wait();
    });
  });
  started.get_future().wait();
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    rec->stop();
    stopped = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(stopped) << "stop() returned while a launch it observes was still running";
  release.set_value();
  stopper.join();
  launcher.join();
  EXPECT_TRUE(stopped);
  ASSERT_EQ(rec->launches().size(), 1u);  // the launch was recorded, then the recorder stopped
  rec.reset();
}

TEST(TraceRecorder, ChromeTraceOfSeveralThreads) {
  TraceRecorder rec;
  rec.start();
  rec.begin_step(5);
  launch_empties("fwd", 3, Phase::forward);
  launch_empties("bwd", 2, Phase::backward);
  std::thread worker([] { launch_empties("side", 4, Phase::other); });
  worker.join();
  launch_empties("allreduce", 2, Phase::comm, /*stream=*/1);
  rec.end_step();
  rec.stop();
  launch_empties("after_stop", 1, Phase::other);  // not recorded

  ASSERT_EQ(rec.launches().size(), 11u);
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("glass_trace_" + std::to_string(getpid()) + ".json"))
                               .string();
  rec.write(path);
  EXPECT_TRUE(
      testing::contains_all(testing::error_of([&] { rec.write("/nonexistent_dir/trace.json"); }),
                            {"/nonexistent_dir/trace.json"}));
  std::ifstream in(path);
  const nlohmann::json trace = nlohmann::json::parse(in);
  std::map<std::string, int> launches, spans;
  std::set<int> launch_tids, named_tids;
  int counters = 0, flow_events = 0;
  for (const auto& e : trace.at("traceEvents")) {
    for (const char* field : {"name", "ph", "pid", "tid"}) ASSERT_TRUE(e.contains(field)) << e;
    const std::string ph = e["ph"];
    if (ph == "M") {
      if (e["name"] == "thread_name") named_tids.insert(e["tid"].get<int>());
      continue;
    }
    ASSERT_TRUE(e.contains("ts")) << e;
    if (ph == "s" || ph == "f") {  // node 7's forward launch -> each of its backward launches
      ++flow_events;
      continue;
    }
    if (ph == "C") {
      ++counters;
      EXPECT_TRUE(e["args"].contains("allocated_MiB") && e["args"].contains("reserved_MiB"));
    } else if (e["cat"] == "phase" || e["cat"] == "step") {
      spans[e["name"]]++;
    } else {
      ASSERT_EQ(ph, "X");
      ASSERT_TRUE(e.contains("dur"));
      launches[e["args"]["kernel"].get<std::string>()]++;
      launch_tids.insert(e["tid"].get<int>());
      const auto& a = e["args"];
      EXPECT_EQ(a["grid"], nlohmann::json({3, 2, 1}));
      EXPECT_EQ(a["op"], "test_op");
      EXPECT_EQ(a["node_id"], 7);
      EXPECT_EQ(a["step"], 5);
      EXPECT_EQ(a["phase"], e["cat"]);
      for (const char* f :
           {"block", "shared_bytes", "flops", "bytes", "seq", "achieved_GBps", "achieved_GFLOPps"})
        EXPECT_TRUE(a.contains(f)) << f;
    }
  }
  EXPECT_EQ(launches,
            (std::map<std::string, int>{{"fwd", 3}, {"bwd", 2}, {"side", 4}, {"allreduce", 2}}));
  EXPECT_EQ(counters, 11);
  EXPECT_EQ(flow_events, 2 * 2);
  // Main thread, worker thread, stream 1: three tracks, each named.
  EXPECT_EQ(launch_tids.size(), 3u);
  EXPECT_TRUE(launch_tids.count(1001));
  for (int tid : launch_tids) EXPECT_TRUE(named_tids.count(tid)) << tid;
  // One span per run of a phase on a thread, and one for the step.
  EXPECT_EQ(spans, (std::map<std::string, int>{
                       {"forward", 1}, {"backward", 1}, {"other", 1}, {"comm", 1}, {"step 5", 1}}));
}

}  // namespace
}  // namespace glass
