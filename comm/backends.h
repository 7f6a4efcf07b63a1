// The communicator backends that need MPI, each in its own file; make_communicator() picks one.
// Declared only when the build has them (GLASS_HAS_MPI, GLASS_HAS_EMU_NCCL, GLASS_HAS_NCCL).
#pragma once

#include <memory>

#include "comm/communicator.h"

namespace glass::comm {

// MPI_COMM_WORLD over host memory (comm/mpi_communicator.cpp).
std::unique_ptr<Communicator> make_mpi_communicator(Device device, const CommOptions& options);
// NCCL bootstrapped over MPI (comm/nccl_communicator.cpp): compiled once against the emulated
// NCCL for `emu`, and once against NVIDIA's for `cuda`.
std::unique_ptr<Communicator> make_nccl_communicator_emu(Device device, const CommOptions& options);
std::unique_ptr<Communicator> make_nccl_communicator_cuda(Device device,
                                                          const CommOptions& options);

}  // namespace glass::comm
