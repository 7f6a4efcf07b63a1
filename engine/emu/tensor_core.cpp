// The Tensor Core instructions on the emulator: mma.sync (m16n8k16, bf16 in, f32 accumulate),
// ldmatrix (x1/x2/x4, .trans) and cp.async with its commit and wait groups. What each does is
// kernels/cuda/tensor_core.h; which lane holds which element is engine/emu/mma_fragments.h.
//
// mma and ldmatrix are warp collectives (warp_collective.cpp, WaitKind::warp_matrix): every lane
// deposits a pointer to its MatrixOperands and waits; the lane that completes the collective
// checks that all 32 lanes are there, at one instruction with one shape, then gathers the whole
// matrices from the lanes' registers through the fragment tables, computes, and scatters each
// lane's result registers back. Its errors fail the block, naming the kernel, thread and line.
//
// cp.async is deferred, as the hardware may defer it: the copy is recorded in the issuing
// thread's list and its destination filled with poison (0xFF bytes: NaN as bf16/f32); the copy
// lands at the cp.async.wait_group that covers its group, reading the source then. So a read of
// the destination before the wait sees poison, and an ldmatrix of it is an error naming both
// lines. A thread that exits with copies it never waited for is an error too.
#include <bit>
#include <cstring>
#include <string>

#include "engine/emu/block_scheduler.h"
#include "engine/emu/describe.h"
#include "engine/emu/error.h"
#include "engine/emu/mma_fragments.h"

namespace glass::emu::detail {
namespace {

const MatrixOperands& operands_of(const WarpCollective& c, unsigned lane) {
  return *reinterpret_cast<const MatrixOperands*>(static_cast<uintptr_t>(c.value[lane]));
}

std::string instruction_name(const MatrixOperands& op) {
  if (op.instruction == MatrixOperands::Instruction::mma_m16n8k16_bf16)
    return "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32";
  return "ldmatrix.sync.aligned.m8n8.x" + std::to_string(op.matrices) + (op.trans ? ".trans" : "") +
         ".shared.b16";
}

std::string describe_address(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

// Element `half` (0: low 16 bits) of a register, and a bf16's value (its bits are the high half
// of an f32's).
uint16_t half_of(uint32_t reg, int half) { return static_cast<uint16_t>(reg >> (16 * half)); }
float bf16_value(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

// The bytes [offset, offset + bytes) of a 16-byte chunk as a bit mask.
uint16_t chunk_bytes(uintptr_t offset, int bytes) {
  return static_cast<uint16_t>(((1u << bytes) - 1u) << offset);
}

}  // namespace

std::string BlockScheduler::matrix_lanes_error(const WarpState& w, const WarpCollective& c) const {
  const MatrixOperands& first = operands_of(c, std::countr_zero(c.arrived));
  const std::string what = instruction_name(first) + " at " + describe(c.site);
  if (c.arrived != ~0u)
    return what + " executed by lanes " + describe_mask(c.arrived) + " only: lanes " +
           describe_mask(~c.arrived & w.present) + " had exited" +
           (w.present != ~0u ? " and lanes " + describe_mask(~w.present) + " do not exist" : "") +
           "; every lane of the warp must execute it (.sync.aligned: no diverged warp)";
  for (unsigned lane = 1; lane < 32; ++lane) {
    const MatrixOperands& op = operands_of(c, lane);
    if (op.instruction != first.instruction || op.matrices != first.matrices ||
        op.trans != first.trans)
      return "lanes of one warp disagree at " + describe(c.site) + ": lane 0 executes " +
             instruction_name(first) + ", lane " + std::to_string(lane) + " " +
             instruction_name(op);
  }
  return {};
}

void BlockScheduler::run_matrix_instruction(const WarpCollective& c) {
  if (operands_of(c, 0).instruction == MatrixOperands::Instruction::mma_m16n8k16_bf16)
    run_mma(c);
  else
    run_ldmatrix(c);
}

// D = A B + C over the whole warp's fragments. Each product of two bf16 is exact in f32; the 16
// products and C are summed in double and rounded to f32 once, so the result is the exact sum
// rounded (the hardware's internal order is unspecified; this is within its error bound).
void BlockScheduler::run_mma(const WarpCollective& c) {
  using namespace glass::mma;
  float a[kM][kK], b[kK][kN], acc[kM][kN];
  for (int lane = 0; lane < 32; ++lane) {
    const MatrixOperands& op = operands_of(c, lane);
    for (int i = 0; i < 8; ++i) {
      const RowCol e = a_element(lane, i);
      a[e.row][e.col] = bf16_value(half_of(op.a[i / 2], i % 2));
    }
    for (int i = 0; i < 4; ++i) {
      const RowCol e = b_element(lane, i);
      b[e.row][e.col] = bf16_value(half_of(op.b[i / 2], i % 2));
      const RowCol ec = c_element(lane, i);
      acc[ec.row][ec.col] = op.c[i];
    }
  }
  float d[kM][kN];
  for (int m = 0; m < kM; ++m)
    for (int n = 0; n < kN; ++n) {
      double sum = acc[m][n];
      for (int k = 0; k < kK; ++k) sum += static_cast<double>(a[m][k]) * b[k][n];
      d[m][n] = static_cast<float>(sum);
    }
  for (int lane = 0; lane < 32; ++lane) {  // after every C was read: d may alias c
    const MatrixOperands& op = operands_of(c, lane);
    for (int i = 0; i < 4; ++i) {
      const RowCol e = c_element(lane, i);
      op.d[i] = d[e.row][e.col];
    }
  }
}

bool BlockScheduler::in_shared_memory(const void* p, size_t bytes) const {
  const auto* b = static_cast<const std::byte*>(p);
  const std::byte* dynamic = shared_.get();
  const bool in_dynamic =
      dynamic && b >= dynamic && b + bytes <= dynamic + job_->dynamic_shared_bytes;
  return in_dynamic || static_shared_.contains(p, bytes);
}

// Each lane receives, per matrix j, the two elements of row/column (ldmatrix_element) of the 8x8
// matrix whose rows lanes 8j..8j+7 addressed.
void BlockScheduler::run_ldmatrix(const WarpCollective& c) {
  const MatrixOperands& first = operands_of(c, 0);
  const std::string what = instruction_name(first) + " at " + describe(c.site);
  const std::byte* rows[32];
  for (int lane = 0; lane < 8 * first.matrices; ++lane) {
    const void* row = operands_of(c, lane).row;
    const std::string whose =
        what + ": lane " + std::to_string(lane) + "'s row address " + describe_address(row);
    if (reinterpret_cast<uintptr_t>(row) % 16 != 0)
      throw EmuError(whose + " is not 16-byte aligned");
    if (!in_shared_memory(row, 16)) throw EmuError(whose + " is not in the block's shared memory");
    if (!copies_in_flight_.empty()) {
      const auto it = copies_in_flight_.find(reinterpret_cast<uintptr_t>(row));
      if (it != copies_in_flight_.end())
        throw EmuError(whose + " reads bytes that the cp.async at " + describe(it->second.site) +
                       " has not written yet: cp.async.wait_group (and __syncthreads() for "
                       "other threads' copies) must come first");
    }
    rows[lane] = static_cast<const std::byte*>(row);
  }
  for (int lane = 0; lane < 32; ++lane) {
    const MatrixOperands& op = operands_of(c, lane);
    for (int j = 0; j < first.matrices; ++j) {
      uint16_t element[2];
      for (int half = 0; half < 2; ++half) {
        const glass::mma::RowCol e = glass::mma::ldmatrix_element(lane, half, first.trans);
        std::memcpy(&element[half], rows[8 * j + e.row] + 2 * e.col, 2);
      }
      op.r[j] = static_cast<uint32_t>(element[0]) | static_cast<uint32_t>(element[1]) << 16;
    }
  }
}

void BlockScheduler::cp_async(void* dst, const void* src, int bytes, int src_bytes, Site site) {
  const std::string what = "cp.async at " + describe(site);
  if (bytes != 4 && bytes != 8 && bytes != 16)
    throw EmuError(what + ": copies 4, 8 or 16 bytes, not " + std::to_string(bytes));
  if (src_bytes < 0 || src_bytes > bytes)
    throw EmuError(what + ": source size " + std::to_string(src_bytes) + " is outside 0.." +
                   std::to_string(bytes));
  const auto d = reinterpret_cast<uintptr_t>(dst);
  if (d % bytes != 0 || (src_bytes > 0 && reinterpret_cast<uintptr_t>(src) % bytes != 0))
    throw EmuError(what + ": destination " + describe_address(dst) + " and source " +
                   describe_address(src) + " must be aligned to the copy's " +
                   std::to_string(bytes) + " bytes");
  if (!in_shared_memory(dst, bytes))
    throw EmuError(what + ": destination " + describe_address(dst) +
                   " is not in the block's shared memory");
  InFlight& chunk = copies_in_flight_[d & ~uintptr_t{15}];
  const uint16_t mask = chunk_bytes(d & 15, bytes);
  if (chunk.bytes & mask)
    throw EmuError(what + ": writes " + describe_address(dst) + ", which the cp.async at " +
                   describe(chunk.site) + " will still write");
  chunk.bytes |= mask;
  chunk.site = site;
  std::memset(dst, 0xFF, static_cast<size_t>(bytes));  // poison until it lands
  Fiber& self = *current_;
  self.copies.push_back(PendingCopy{static_cast<std::byte*>(dst),
                                    static_cast<const std::byte*>(src), bytes, src_bytes,
                                    self.committed_groups, site});
}

void BlockScheduler::cp_async_commit() { ++current_->committed_groups; }

// Lands every committed group but the `pending_groups` most recently committed ones. Those are
// counted whether or not they hold copies: a group committed with none (a pipeline's last, empty
// stage) is still one of the N most recent, as in PTX's cp.async.wait_group. Copies not committed
// yet belong to no group and stay in flight.
void BlockScheduler::cp_async_wait(int pending_groups, Site site) {
  if (pending_groups < 0)
    throw EmuError("cp.async.wait_group at " + describe(site) +
                   ": N = " + std::to_string(pending_groups) + " is negative");
  Fiber& self = *current_;
  // Groups below this index must have landed (copies are in issue order, so groups ascend).
  const int64_t landed_below =
      static_cast<int64_t>(self.committed_groups) - static_cast<int64_t>(pending_groups);
  int groups = 0;
  for (size_t i = 0; i < self.copies.size() && self.copies[i].group < landed_below; ++i)
    groups += i == 0 || self.copies[i].group != self.copies[i - 1].group;
  if (groups > 0) land_oldest_groups(self, groups);
}

// Performs the copies of `thread`'s oldest `groups` groups in flight, in issue order.
void BlockScheduler::land_oldest_groups(Fiber& thread, int groups) {
  size_t landed = 0;
  for (; landed < thread.copies.size(); ++landed) {
    const PendingCopy& copy = thread.copies[landed];
    if (landed > 0 && copy.group != thread.copies[landed - 1].group && --groups == 0) break;
    std::memcpy(copy.dst, copy.src, static_cast<size_t>(copy.src_bytes));
    std::memset(copy.dst + copy.src_bytes, 0, static_cast<size_t>(copy.bytes - copy.src_bytes));
    forget_in_flight(copy);
  }
  thread.copies.erase(thread.copies.begin(),
                      thread.copies.begin() + static_cast<ptrdiff_t>(landed));
}

void BlockScheduler::forget_in_flight(const PendingCopy& copy) {
  const auto d = reinterpret_cast<uintptr_t>(copy.dst);
  const auto it = copies_in_flight_.find(d & ~uintptr_t{15});
  if (it == copies_in_flight_.end()) return;
  it->second.bytes &= static_cast<uint16_t>(~chunk_bytes(d & 15, copy.bytes));
  if (it->second.bytes == 0) copies_in_flight_.erase(it);
}

// At a thread's exit: a copy it never waited for would land whenever the hardware pleased.
void BlockScheduler::check_copies_waited(Fiber& thread) {
  const Site first = thread.copies.front().site;
  const size_t count = thread.copies.size();
  for (const PendingCopy& copy : thread.copies) forget_in_flight(copy);
  thread.copies.clear();
  if (aborting_) return;  // the block failed already; its threads just unwind
  fail(std::make_exception_ptr(
           EmuError("exits with " + std::to_string(count) +
                    " cp.async never waited for (the first issued at " + describe(first) +
                    "): cp.async.wait_group must cover every copy before the thread exits")),
       thread);
}

// --- the device entry points of kernels/cuda/tensor_core.h

void mma_m16n8k16_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                       const float (&c)[4], Site site) {
  MatrixOperands op{.instruction = MatrixOperands::Instruction::mma_m16n8k16_bf16,
                    .a = a,
                    .b = b,
                    .c = c,
                    .d = d};
  running_scheduler("mma.sync", site).matrix_instruction(op, site);
}

void ldmatrix(uint32_t* r, int matrices, bool trans, const void* row, Site site) {
  MatrixOperands op{.instruction = MatrixOperands::Instruction::ldmatrix,
                    .matrices = matrices,
                    .trans = trans,
                    .row = row,
                    .r = r};
  running_scheduler("ldmatrix", site).matrix_instruction(op, site);
}

void cp_async(void* dst, const void* src, int bytes, int src_bytes, Site site) {
  running_scheduler("cp.async", site).cp_async(dst, src, bytes, src_bytes, site);
}

void cp_async_commit(Site site) {
  running_scheduler("cp.async.commit_group", site).cp_async_commit();
}

void cp_async_wait(int pending_groups, Site site) {
  running_scheduler("cp.async.wait_group", site).cp_async_wait(pending_groups, site);
}

}  // namespace glass::emu::detail
