// Parsing a sample's command line the same way in every sample: --help prints the help and exits
// 0; a command line CLI11 refuses is one line, "<program>: error: ... (see --help)", and exit 2.
#pragma once

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace glass::samples {

// What every sample's --help shows besides its flags: each flag's default value, and the page
// of the documentation that explains the program. Call before adding the flags.
inline void describe_program(CLI::App& app, std::string_view doc_page) {
  app.option_defaults()->always_capture_default();
  // In the description, not the footer: subcommands would repeat an inherited footer.
  app.description(fmt::format("{}\nDocumentation: {} (in the glass repository)",
                              app.get_description(), doc_page));
}

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

// Every long flag of `app` and of its subcommands, as typed ("--n-layer").
inline void long_flags(const CLI::App& app, std::vector<std::string>& names) {
  for (const CLI::Option* o : app.get_options())
    for (const std::string& n : o->get_lnames()) names.push_back("--" + n);
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    long_flags(*sub, names);
}

// Levenshtein distance: the fewest single-character insertions, deletions and substitutions.
inline size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t substituted = diagonal + (a[i - 1] != b[j - 1]);
      diagonal = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, substituted});
    }
  }
  return row[b.size()];
}

// The flag a mistyped `arg` most likely meant: the same name with '-' for '_', or the nearest
// within two edits; empty when none is that close. (`--n_layer` -> `--n-layer`.)
inline std::string closest_flag(const CLI::App& app, std::string arg) {
  arg = arg.substr(0, arg.find('='));
  if (arg.rfind("--", 0) != 0) return "";
  std::string dashed = arg;
  std::replace(dashed.begin() + 2, dashed.end(), '_', '-');
  std::vector<std::string> names;
  long_flags(app, names);
  std::string best;
  size_t best_distance = 3;
  for (const std::string& name : names) {
    const size_t d = name == dashed ? 0 : edit_distance(dashed, name);
    if (d < best_distance) best = name, best_distance = d;
  }
  return best;
}

// What the user did wrong, in the words of the flags. CLI11 words a flag given twice as "--data:
// At Most 1 required but received 2", which `make train ARGS="--data X"` used to produce.
inline std::string command_line_error(const CLI::App& app, const CLI::ParseError& e) {
  if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
    for (const std::string& extra : app.remaining())
      if (const std::string flag = closest_flag(app, extra); !flag.empty())
        return fmt::format("{}; did you mean {}?", e.what(), flag);
    return e.what();
  }
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
