#include "engine/rng.h"

namespace glass {

Generator& default_generator() {
  static Generator gen(1337);
  return gen;
}

void manual_seed(uint64_t seed) { default_generator().set_state(seed, 0); }

}  // namespace glass
