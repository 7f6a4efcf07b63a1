// What every fuzz target shares: the libFuzzer entry point, and the fuzzer's bytes as a file.
//
// The loaders take paths, as users give them, so each input is written to a scratch file that the
// loader then reads. A target may let only glass::Error escape the loader (a clear error); any
// other exception, a crash, a leak or undefined behaviour is a finding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace glass::fuzz {

// A scratch directory of this process (created on first use, emptied of nothing: targets
// overwrite their files each run).
const std::string& scratch_dir();

// Writes the bytes to scratch_dir()/name and returns that path.
std::string write_input(const uint8_t* data, size_t size, const std::string& name);

// An input the loader refused with its clear error: printed to stderr when GLASS_FUZZ_VERBOSE=1
// (to see which check each committed input reaches: GLASS_FUZZ_VERBOSE=1 fuzz_replay_<t> DIR).
void rejected(const std::exception& e);

}  // namespace glass::fuzz
