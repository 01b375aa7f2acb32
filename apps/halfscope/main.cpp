// halfscope: entry point. Parses the command line, runs one subcommand and maps what it throws to
// the exit status of DESIGN.md section 4: 0 success, 2 bad usage or input, 1 runtime failure.
// Started by mpirun in a build with MPI, it initialises MPI first; then only the MPI-aware
// subcommands run on more than one rank, and a failure that not every rank shares ends the whole
// job (MPI_Abort) instead of leaving the other ranks waiting.
#include <array>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "cli.hpp"
#include "deconv_cli.hpp"
#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"

#if HALFSCOPE_HAS_MPI
#include "halfscope/mpi/comm.hpp"
#endif

namespace {

using halfscope::cli::Globals;

// Subcommands (space-separated paths) that split their work over MPI ranks (docs/scaling.md).
constexpr std::array<const char*, 3> kMpiAware{"mfilter", "cholesky", "ao reconstructor"};

// The path of the subcommand the command line chose, e.g. "ao reconstructor".
std::string chosen_path(const CLI::App& app) {
  std::string path;
  const CLI::App* level = &app;
  while (true) {
    const auto chosen = level->get_subcommands();
    if (chosen.empty()) return path;
    level = chosen.front();
    path += (path.empty() ? "" : " ") + level->get_name();
  }
}

// The message for a command line that stops at a group without choosing one of its subcommands
// ("halfscope bogus", "halfscope simulate", "halfscope -V"), or "" for any other parse error.
// CLI11 reports those as "A subcommand is required" (its requirement check runs before the
// unexpected-argument check), which names neither the token at fault nor the valid choices.
std::string missing_subcommand_message(const CLI::App& app) {
  std::string path = "halfscope";
  const CLI::App* level = &app;
  for (auto chosen = level->get_subcommands(); !chosen.empty(); chosen = level->get_subcommands()) {
    level = chosen.front();
    path += " " + level->get_name();
  }
  if (level->get_require_subcommand_min() == 0) return {};
  std::string valid;
  // Option groups are unnamed subcommands in CLI11: only named ones are choices.
  for (const CLI::App* sub :
       level->get_subcommands([](const CLI::App* s) { return !s->get_name().empty(); }))
    valid += (valid.empty() ? "" : ", ") + sub->get_name();
  const std::vector<std::string> extras = app.remaining(true);
  const std::string choices = "expected a subcommand of '" + path + "': " + valid + " (" + path +
                              " --help lists them and the options)";
  if (extras.empty()) return choices;
  const std::string& token = extras.front();
  if (token.size() > 1 && token[0] == '-')
    return "unknown option '" + token + "' for '" + path + "': " + choices +
           (level == &app ? "; --version prints the version" : "");
  return "unknown subcommand '" + token + "': " + choices;
}

// Every integer option takes decimal text within its type's range. CLI11 2.1 reads integers with
// strtoll base 0 (so "010" is 8 and "0x10" 16), clamps what overflows int64
// ("--step 99999999999999999999" ran as 2^63 - 1) and wraps "-1" into an unsigned option: this
// check runs on the text before CLI11 converts it, and hands CLI11 the number in plain decimal.
// Narrower types are then range-checked by CLI11.
void check_integer_texts(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    const std::string type = opt->get_type_name();
    const bool is_unsigned = type.starts_with("UINT");
    if (!is_unsigned && !type.starts_with("INT")) continue;
    opt->transform(CLI::Validator(
        [is_unsigned](std::string& text) -> std::string {
          // One optional sign ('-' only where from_chars takes it: signed types), then digits.
          std::string_view t = text;
          const bool plus = t.starts_with('+');
          if (plus) t.remove_prefix(1);
          const char* end = t.data() + t.size();
          std::from_chars_result r{};
          std::string canonical;  // what CLI11 then reads: no leading zeros (its octal), no '+'
          if (is_unsigned) {
            std::uint64_t v = 0;
            r = std::from_chars(t.data(), end, v);
            canonical = std::to_string(v);
          } else {
            std::int64_t v = 0;
            r = std::from_chars(t.data(), end, v);
            canonical = std::to_string(v);
          }
          if (!(plus && t.starts_with('-')) && r.ec == std::errc() && r.ptr == end) {
            text = canonical;
            return {};
          }
          return std::string("expected a decimal integer") +
                 (is_unsigned ? " in [0, 18446744073709551615]"
                              : " in [-9223372036854775808, 9223372036854775807]") +
                 ", found '" + text + "'";
        },
        ""));
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    check_integer_texts(*sub);
}

// Set when the error being handled was met identically by every rank (the command line).
bool every_rank_fails = false;

// Rejects, on every rank alike, a subcommand that would run whole on each rank (each writing the
// same outputs) in a job of several ranks.
void check_ranks(const CLI::App& app, const Globals& g) {
  if (g.ranks == 1) return;
  const std::string path = chosen_path(app);
  for (const char* aware : kMpiAware)
    if (path == aware) return;
  every_rank_fails = true;
  throw halfscope::InvalidInput("halfscope " + path +
                                " does not run over MPI ranks (this job has " +
                                std::to_string(g.ranks) +
                                "); run it without mpirun, or use an MPI-aware subcommand: "
                                "mfilter, cholesky, ao reconstructor");
}

// Prints an error and gives the exit status; in a job of several ranks an error only some ranks
// met ends every rank (an agreed one, which every rank throws, is printed once, by rank 0).
int fail(const Globals& g, const std::string& message, int status) {
#if HALFSCOPE_HAS_MPI
  if (g.ranks > 1 && !every_rank_fails && !halfscope::mpi::failure_was_agreed(message))
    halfscope::mpi::abort_job(message, status);
#endif
  if (g.rank == 0) std::cerr << "halfscope: error: " << message << "\n";
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace halfscope;
  cli::Globals globals;
#if HALFSCOPE_HAS_MPI
  std::optional<mpi::Environment> mpi_environment;
  std::optional<mpi::Comm> world;
  try {
    if (mpi::launched()) {
      mpi_environment.emplace(argc, argv);
      world.emplace(mpi::Comm::world());
      globals.rank = world->rank();
      globals.ranks = world->size();
    }
  } catch (const Error& e) {
    std::cerr << "halfscope: error: " << e.what() << "\n";
    return 1;
  }
#else
  // Without MPI, N copies started by a launcher would each run the whole job and write the same
  // outputs: refuse (once is not possible: every copy says it).
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char* size = std::getenv(name); size != nullptr && std::atoi(size) > 1) {
      std::cerr << "halfscope: error: started by an MPI launcher with " << size
                << " ranks, but this build of halfscope has no MPI (rebuild with "
                   "HALFSCOPE_WITH_MPI=ON and Open MPI installed)\n";
      return 2;
    }
#endif
  CLI::App app{"halfscope " HALFSCOPE_VERSION
               ": mixed-precision kernels of observational science on tensor cores and CPUs",
               "halfscope"};
  app.set_version_flag("--version", HALFSCOPE_VERSION);
  app.require_subcommand(1);
  app.fallthrough();
  app.add_option("--device", globals.device, "where to run: auto, cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  app.add_flag("-q,--quiet", globals.quiet, "print only results and errors");
  auto* verbose = app.add_flag("-v,--verbose", globals.verbose, "print details of what is done");
  verbose->excludes("--quiet");

  cli::register_info(app, globals);
  cli::register_convert(app, globals);
  cli::register_conv(app, globals);
  cli::register_mfilter(app, globals);
  cli::register_simulate(app, globals);
  cli::register_ao(app, globals);
  cli::register_cholesky(app, globals);
  cli::register_deconv(app, globals);
  cli::register_bench(app, globals);
  cli::register_demo(app, globals);
  check_integer_texts(app);
  // Parse errors in the one-line form of every other error (CLI11's own adds a second line).
  app.failure_message([&app](const CLI::App*, const CLI::Error& e) {
    const std::string path = chosen_path(app);
    return "halfscope: error: " + (path.empty() ? "" : path + ": ") + std::string(e.what()) +
           " (halfscope " + (path.empty() ? "" : path + " ") + "--help lists the options)\n";
  });
  // Runs after parsing, before the chosen subcommand's callback.
  app.parse_complete_callback([&] { check_ranks(app, globals); });

  try {
    app.parse(argc, argv);
    return 0;
  } catch (const CLI::ParseError& e) {
    // --help and --version are "errors" with exit code 0 in CLI11. Every rank parses the same
    // command line, so every rank ends alike; one prints.
    if (globals.rank != 0) return e.get_exit_code() == 0 ? 0 : 2;
    if (e.get_exit_code() != 0)
      if (const std::string message = missing_subcommand_message(app); !message.empty()) {
        std::cerr << "halfscope: error: " << message << "\n";
        return 2;
      }
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  } catch (const Error& e) {
    return fail(globals, e.what(), e.exit_status());
  } catch (const std::bad_alloc&) {
    return fail(globals, "out of memory", 1);
  } catch (const std::exception& e) {
    return fail(globals, e.what(), 1);
  }
}
