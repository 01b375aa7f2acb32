// halfscope: entry point. Parses the command line, runs one subcommand and maps what it throws to
// the exit status of DESIGN.md section 4: 0 success, 2 bad usage or input, 1 runtime failure.
#include <cstdio>
#include <exception>
#include <iostream>
#include <new>

#include "cli.hpp"
#include "deconv_cli.hpp"
#include "halfscope/config.hpp"
#include "halfscope/core/error.hpp"

int main(int argc, char** argv) {
  using namespace halfscope;
  CLI::App app{"halfscope " HALFSCOPE_VERSION
               ": mixed-precision kernels of observational science on tensor cores and CPUs",
               "halfscope"};
  app.set_version_flag("--version", HALFSCOPE_VERSION);
  app.require_subcommand(1);
  app.fallthrough();
  cli::Globals globals;
  app.add_option("--device", globals.device, "where to run: auto, cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  app.add_flag("-q,--quiet", globals.quiet, "print only results and errors");
  app.add_flag("-v,--verbose", globals.verbose, "print details of what is done");

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

  try {
    app.parse(argc, argv);
    return 0;
  } catch (const CLI::ParseError& e) {
    // --help and --version are "errors" with exit code 0 in CLI11.
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  } catch (const Error& e) {
    std::cerr << "halfscope: error: " << e.what() << "\n";
    return e.exit_status();
  } catch (const std::bad_alloc&) {
    std::cerr << "halfscope: error: out of memory\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "halfscope: error: " << e.what() << "\n";
    return 1;
  }
}
