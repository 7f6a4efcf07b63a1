#include "kernels/cpu/threads.h"

#include <cblas.h>
#include <omp.h>

namespace glass::kernels::cpu {

int set_threads(int threads) {
  if (threads <= 0) threads = omp_get_num_procs();
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);
  return threads;
}

int num_threads() { return omp_get_max_threads(); }

}  // namespace glass::kernels::cpu
