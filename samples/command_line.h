// Parsing a sample's command line the same way in every sample: --help prints the help and exits
// 0; a command line CLI11 refuses is one line, "<program>: error: ... (see --help)", and exit 2.
#pragma once

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace glass::samples {

// A flag of `app` (or of its subcommands) that takes one value and was given more than once.
inline const CLI::Option* repeated_flag(const CLI::App& app) {
  for (const CLI::Option* o : app.get_options()) {
    const int most = o->get_items_expected_max();
    if (most >= 1 && o->count() > static_cast<size_t>(most) && !o->get_name().empty()) return o;
  }
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    if (const CLI::Option* o = repeated_flag(*sub)) return o;
  return nullptr;
}

// What the user did wrong, in the words of the flags. CLI11 words a flag given twice as "--data:
// At Most 1 required but received 2", which `make train ARGS="--data X"` used to produce.
inline std::string command_line_error(const CLI::App& app, const CLI::ParseError& e) {
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&e) == nullptr) return e.what();
  const CLI::Option* o = repeated_flag(app);
  if (o == nullptr) return e.what();
  const size_t n = o->count();
  std::vector<std::string> values;
  for (const std::string& v : o->results()) values.push_back("'" + v + "'");
  return fmt::format("{} given {} ({}): give it once", o->get_name(),
                     n == 2 ? std::string("twice") : fmt::format("{} times", n),
                     fmt::join(values, ", "));
}

// Parses argv into `app`. Returns the exit status when the program should stop now (0 after
// --help, 2 after the error line), nullopt when it should go on.
inline std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv,
                                             std::string_view program) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    fmt::print(stderr, "{}: error: {} (see --help)\n", program, command_line_error(app, e));
    return 2;
  }
  return std::nullopt;
}

}  // namespace glass::samples
