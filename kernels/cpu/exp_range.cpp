// The clamp of exp_vectorisable (kernels/cpu/cpu.h), defined here rather than in the header so
// that the files that inline the exp cannot see the values: see the declaration for why.
#include "kernels/cpu/cpu.h"

namespace glass::kernels::cpu {

const float kExpArgumentMin = -87.0f;
const float kExpArgumentMax = 88.0f;

}  // namespace glass::kernels::cpu
