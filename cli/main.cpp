// The `lina` command: flags -> one library call -> printed table / JSON / exit code.
#include <exception>
#include <string>

#include "cli/commands.h"
#include "cli/exit_code.h"
#include "harness/util/subprocess.h"
#include "lina/lina.h"

int main(int argc, char** argv) {
  // A signalled lina takes its builds, gates and runs with it (each child leads its own process group).
  lina::harness::forward_signals_to_children();
  CLI::App app{"lina: linear-attention kernels for Hopper and the toolkit that proves them"};
  app.set_version_flag("--version", std::string("lina ") + lina::kVersion);
  app.require_subcommand(1);
  lina::cli::Outcome outcome;
  lina::cli::register_list(app, outcome);
  lina::cli::register_run(app, outcome);
  lina::cli::register_verify(app, outcome);
  lina::cli::register_check(app, outcome);
  lina::cli::register_loop(app, outcome);
  lina::cli::register_compare(app, outcome);
  lina::cli::register_summarize(app, outcome);
  lina::cli::register_merge(app, outcome);
  lina::cli::register_cmd(app, outcome);
  lina::cli::register_profile(app, outcome);
  lina::cli::register_train_bench(app, outcome);
  lina::cli::register_gen_bench(app, outcome);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : lina::cli::kUsage;  // CLI11 usage errors -> documented exit 2
  } catch (...) {
    // Every other exception, from any subcommand, through the one mapping to the documented codes.
    return lina::cli::report_exception(std::current_exception(), "");
  }
  return outcome.code;
}
