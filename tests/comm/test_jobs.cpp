// train_gpt under `mpirun -np 2`, as a user runs it: ranks that disagree on the model or a batch
// the world does not divide fail on every rank with one clear line; a rank that is killed, or
// that stops answering, ends the whole job with an error within a bounded time, never a hang.
// --report's gradient-norm pass neither hangs the job nor changes what it trains.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "tests/testing.h"
#include "tests/train/report_testing.h"

namespace glass {
namespace {

struct Outcome {
  int status = 0;
  std::string out;  // stdout and stderr together
  double seconds = 0;
};

// Runs a shell command; returns its exit status, and its stdout and stderr in `out`.
int run_command(const std::string& command, std::string& out) {
  out.clear();
  // Under AddressSanitizer: no leak check in processes that start MPI (OpenMPI's plugins keep
  // allocations until exit and are unloaded before LeakSanitizer looks).
  const std::string env = "ASAN_OPTIONS=detect_leaks=0 ";
  FILE* p = popen((env + command + " 2>&1").c_str(), "r");
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  const int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// Runs `rank_command` (a shell command; $OMPI_COMM_WORLD_RANK tells the rank) in 2 ranks.
Outcome run_job(const std::string& rank_command) {
  const auto t0 = std::chrono::steady_clock::now();
  Outcome r;
  r.status =
      run_command("OMP_NUM_THREADS=1 mpirun --allow-run-as-root --oversubscribe -np 2 sh -c '" +
                      rank_command + "'",
                  r.out);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

const std::string kTrain = std::string(GLASS_BINARY_DIR) + "/samples/train_gpt --data " +
                           GLASS_SOURCE_DIR +
                           "/data/tinyshakespeare.txt --n-layer 1 --n-head 2 --seq-len 8 "
                           "--sample 0 --eval-every 0 --threads 1 --quiet ";

TEST(DataParallelJob, RanksThatDisagreeOnTheModelFailTogether) {
  const Outcome r =
      run_job(kTrain + "--batch 4 --steps 2 --n-embd $((16 + 16 * OMPI_COMM_WORLD_RANK))");
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(testing::contains_all(r.out, {"train_gpt: error: the run's configuration differs "
                                            "between ranks: 1 of 2 ranks disagree with rank 0"}));
}

TEST(DataParallelJob, AWorldThatDoesNotDivideTheBatchIsAnError) {
  const Outcome r = run_job(kTrain + "--n-embd 16 --batch 3 --steps 2");
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(testing::contains_all(
      r.out, {"train_gpt: error: --batch 3 is the global batch and must split evenly over the 2 "
              "ranks"}));
}

// Rank 1 trains in the background and is stopped (SIGSTOP: alive, silent) or killed (SIGKILL) in
// the middle of training: once rank 0 has written its first step to the metrics file, which it
// can only do after both ranks are past start-up and have all-reduced one step's gradients. (A
// fixed delay is not enough: under sanitizers, start-up alone can take longer.)
std::string rank1_meets(const char* signal, const std::string& train) {
  const std::string metrics = (std::filesystem::temp_directory_path() /
                               ("glass_job_" + std::to_string(getpid()) + "_" + signal + ".jsonl"))
                                  .string();
  std::filesystem::remove(metrics);
  return "if [ $OMPI_COMM_WORLD_RANK = 1 ]; then " + train + " --metrics " + metrics +
         " & pid=$!; for i in $(seq 600); do [ -s " + metrics +
         " ] && break; sleep 0.1; done; kill -" + signal + " $pid; wait $pid; else " + train +
         " --metrics " + metrics + "; fi";
}

// Rank 1 stops answering; rank 0 must give up after --comm-timeout with a message.
void expect_time_out(const std::string& device, const std::string& backend) {
  const std::string train =
      kTrain + "--n-embd 16 --batch 4 --steps 100000 --comm-timeout 3 --device " + device;
  const Outcome r = run_job(rank1_meets("STOP", train));
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(testing::contains_all(
      r.out,
      {"train_gpt: error: " + backend + " backend, rank 0 of 2:", "did not finish within 3 s"}))
      << r.out;
  EXPECT_LT(r.seconds, 30) << r.out;
}

// cpu: the MPI request is abandoned after the time-out.
TEST(DataParallelJob, ARankThatStopsAnsweringTimesOutTheOthersOnCpu) {
  expect_time_out("cpu", "mpi");
}

// emu: ncclCommAbort ends the emulated ncclAllReduce that waits for the silent rank.
TEST(DataParallelJob, ARankThatStopsAnsweringTimesOutTheOthersOnEmu) {
  expect_time_out("emu", "nccl");
}

TEST(DataParallelJob, AKilledRankEndsTheJob) {
  const std::string train = kTrain + "--n-embd 16 --batch 4 --steps 100000 --comm-timeout 20";
  const Outcome r = run_job(rank1_meets("KILL", train));
  EXPECT_NE(r.status, 0);
  EXPECT_LT(r.seconds, 30) << r.out;
}

// The last line of a run: "done: 3 steps in ... | final loss 4.1462 | val loss ...", times cut.
std::string final_loss(const std::string& out) {
  const size_t at = out.find("final loss");
  return at == std::string::npos ? "no final loss in: " + out : out.substr(at, 40);
}

TEST(DataParallelJob, ForcedBackendsInAWorldOfOneTrainLikeLocal) {
  const std::string emu = kTrain + "--n-embd 16 --batch 4 --steps 3 --device emu ";
  std::string out;
  const int local = run_command(emu + "--comm local", out);
  ASSERT_EQ(local, 0) << out;
  const std::string expected = final_loss(out);
  for (const char* backend : {"nccl", "mpi"}) {  // the emulated NCCL and MPI, one rank each
    ASSERT_EQ(run_command(emu + "--comm " + backend, out), 0) << out;
    EXPECT_EQ(final_loss(out), expected) << backend;
  }
  EXPECT_NE(run_command(kTrain + "--n-embd 16 --device cpu --comm nccl", out), 0);
  EXPECT_TRUE(testing::contains_all(
      out, {"train_gpt: error: communicator: no nccl backend for device cpu"}));
}

// train_gpt --report under mpirun: every rank runs the gradient-norm pass before the recorded
// step with its gradient sync paused (an all-reduce that one rank's extra backward started would
// wait for the other until --comm-timeout), the saved weights are the same bytes as the job's
// without --report, and rank 0's report has a positive norm on every tape node. --grad-accum 2:
// the pass's gradients (the first micro-step's) differ from the step's.
TEST(DataParallelJob, ReportWithGradientNormsTrainsTheSameWeights) {
  std::string weights[2];
  const std::string report = testing::scratch_path("job_report.html");
  for (const bool with_report : {false, true}) {
    const std::string saved =
        testing::scratch_path(with_report ? "job_r.safetensors" : "job.safetensors");
    std::filesystem::remove(saved);
    const Outcome r = run_job(
        kTrain + "--n-embd 16 --batch 4 --steps 3 --grad-accum 2 --comm-timeout 30 --save " +
        saved + (with_report ? " --report " + report : ""));
    ASSERT_EQ(r.status, 0) << r.out;
    weights[with_report] = testing::file_bytes(saved);
  }
  EXPECT_FALSE(weights[0].empty());
  EXPECT_TRUE(weights[1] == weights[0]) << "--report changed the trained weights";
  const nlohmann::json d = testing::report_json(testing::file_bytes(report));
  ASSERT_FALSE(d["tape"].empty());
  for (const auto& n : d["tape"]) {
    ASSERT_TRUE(n["grad_norm"].is_number()) << n;
    EXPECT_GT(n["grad_norm"].get<double>(), 0) << n;
  }
}

#if defined(GLASS_CUDA_RUNTIME_EMU)
// --cuda-graph under mpirun, as a user runs it, on two emulated GPUs (one per rank): each rank
// captures its step with the gradient all-reduces in it and replays it, and the job prints the
// eager job's losses and gradient norms bit for bit (the metrics). This failed with
// cudaErrorInvalidValue at rank 1's first replay while the graph was made on GPU 0, the one a
// fresh process has current, rather than on the rank's GPU.
TEST(DataParallelJob, CudaGraphJobEqualsTheEagerJob) {
  std::string metrics[2];
  for (const bool graph : {false, true}) {
    const std::string m = testing::scratch_path(graph ? "graph_job.jsonl" : "eager_job.jsonl");
    const Outcome r = run_job("GLASS_EMU_GPUS=2 " + kTrain +
                              "--n-embd 16 --batch 4 --steps 4 --device cuda --dtype f32 "
                              "--comm-bucket-mb 0.001 --metrics " +
                              m + (graph ? " --cuda-graph" : ""));
    ASSERT_EQ(r.status, 0) << r.out;
    std::ifstream in(m);
    std::string line;
    while (std::getline(in, line)) {
      const auto j = nlohmann::json::parse(line);
      std::ostringstream step;
      step << std::setprecision(17) << "step " << j.at("step").get<int>() << " loss "
           << j.at("loss").get<double>() << " norm " << j.at("grad_norm").get<double>() << "\n";
      metrics[graph] += step.str();
    }
  }
  EXPECT_EQ(std::count(metrics[0].begin(), metrics[0].end(), '\n'), 4) << metrics[0];
  EXPECT_EQ(metrics[1], metrics[0]);
}
#endif

}  // namespace
}  // namespace glass
