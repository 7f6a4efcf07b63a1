// train_gpt's command line, apart from its main so that the command-line fuzz target
// (tests/fuzz/fuzz_cli.cpp) parses exactly what users type.
#pragma once

#include <CLI/CLI.hpp>

#include "train/trainer.h"

namespace glass::samples {

// Adds every train_gpt flag to `app`, each writing its TrainOptions field.
void add_train_gpt_flags(CLI::App& app, train::TrainOptions& o);

}  // namespace glass::samples
