// test_emucuda_nccl runs as every rank of `mpirun -np N`: each rank runs every test, and the
// collectives inside them meet. Only rank 0 prints the test log; a failure on any rank makes that
// rank's exit status non-zero, and mpirun's with it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  if (rank != nullptr && std::string(rank) != "0") {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  return RUN_ALL_TESTS();
}
