// `lina loop init|log|status --op OP`: the optimization-loop contract and log (docs/loop.md).
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "harness/tools/cmd_builder.h"
#include "harness/verify/frozen.h"
#include "harness/tools/loop_log.h"
#include "harness/util/git.h"
#include "harness/util/shell_quote.h"
#include "harness/util/terminal_text.h"
#include "lina/error.h"

namespace lina::cli {

void register_loop(CLI::App& app, Outcome& outcome) {
  struct Opts {
    std::string op, loop = "opt", base, repo = ".", direction, from, decision, profile, bound;
    std::vector<std::string> shapes, modes, backends{"cuda"};
    double min_gain = 1.0;
    bool force = false;
  };
  auto o = std::make_shared<Opts>();
  auto* loop = app.add_subcommand("loop", "Optimization-loop contract and log (profile/<op>-<loop>/, default profile/<op>-opt/)");
  loop->require_subcommand(1);
  auto common = [&](CLI::App* s) {
    s->add_option("--op", o->op, "Op under optimization")->required();
    s->add_option("--repo", o->repo, "Repository (default: .)");
    s->add_option("--loop", o->loop, "Loop name: profile/<op>-<loop>/ (default opt; e.g. bwd for a backward loop)");
  };
  auto* init = loop->add_subcommand("init", "Write contract.json and OPT_LOG.md");
  common(init);
  init->add_option("--base", o->base, "Baseline git ref (recorded as its SHA)")->required()->check(kNonEmpty);
  init->add_option("--shapes", o->shapes, "Target shapes")->delimiter(',');
  init->add_option("--modes", o->modes, "Target modes")->delimiter(',');
  init->add_option("--backends", o->backends, "Allowed backends (default cuda)")->delimiter(',');
  init->add_option("--min-gain", o->min_gain, "An iteration improves only beyond this %% (default 1)")->check(kNonNegative);
  init->add_flag("--force", o->force, "Overwrite an existing contract");
  auto* log = loop->add_subcommand("log", "Append one iteration read from a verify JSON");
  common(log);
  log->add_option("--direction", o->direction, "One line: what this attempt changed")->required();
  log->add_option("--from", o->from, "verify JSON of this attempt")->required();
  log->add_option("--decision", o->decision, "keep, revert or floor (default: keep if improving, else revert)");
  log->add_option("--profile", o->profile, "Nsight Compute report or export linked as evidence");
  log->add_option("--bound", o->bound, "The bound that limits it, with its number");
  auto* status = loop->add_subcommand("status", "Show the log, stalls and the promotion / no-go bars");
  common(status);

  auto run = [o, &outcome](const std::string& which) {
    try {
      // The op names a folder under profile/: only registered ops, for every subcommand.
      harness::check_cell_selection({o->op}, {}, {});
      const auto root = harness::git_toplevel(o->repo);
      const auto dir = harness::loop_dir(root, o->op, o->loop);
      // Commands in the contract name repo-relative paths so that they work from any clone.
      const auto rel = harness::loop_dir(".", o->op, o->loop).lexically_normal();
      if (which == "init") {
        harness::check_cell_selection({o->op}, o->modes, o->shapes);
        if (!std::isfinite(o->min_gain)) throw Error(ErrorCode::invalid_argument, "--min-gain", "--min-gain: got nan, expected a finite percentage");
        for (const auto& b : o->backends)
          if (b != "cuda" && b != "cpu") throw Error(ErrorCode::invalid_argument, "--backends", "--backends `" + b + "`: expected cuda or cpu");
        harness::LoopContract c;
        c.op = o->op;
        c.shapes = o->shapes;
        c.modes = o->modes;
        c.backends = o->backends;
        c.base_ref = o->base;
        c.base_sha = harness::git_resolve_commit(root, o->base, "--base");
        c.min_gain_pct = o->min_gain;
        harness::CmdRequest r;
        r.ops = {o->op};
        r.modes = o->modes;
        r.shapes = o->shapes;
        r.base = c.base_sha;
        r.action = "verify";
        r.json = (rel / "verify.json").string();
        c.validation_command = harness::shell_join(harness::build_command_argv(r, "lina", root));
        r.action = "run";  // this build alone: `lina run` takes no baseline
        r.base.reset();
        r.json = (rel / "run.json").string();
        c.benchmark_command = harness::shell_join(harness::build_command_argv(r, "lina", root));
        r.action = "profile";
        r.base = c.base_sha;
        r.json.reset();
        r.out = (rel / "ncu").string();
        c.profile_command = harness::shell_join(harness::build_command_argv(r, "lina", root));
        c.frozen_hashes = harness::frozen_hashes(root, o->op);
        harness::loop_init(dir, c, o->force);
        std::printf("lina loop: wrote %s/contract.json and OPT_LOG.md (baseline %s, %zu frozen files)\n",
                    dir.c_str(), c.base_sha.c_str(), c.frozen_hashes.size());
      } else if (which == "log") {
        harness::LogRequest req;
        req.direction = o->direction;
        req.verify_json = o->from;
        if (!o->decision.empty()) req.decision = o->decision;
        req.profile = o->profile;
        req.bound = o->bound;
        const auto e = harness::loop_log(dir, req);
        std::cout << harness::terminal_safe(harness::opt_log_row(e));
      } else {
        const auto c = harness::load_contract(dir);
        const auto entries = harness::load_entries(dir);
        const auto s = harness::loop_status(c, entries, harness::frozen_hashes(root, o->op), root);
        std::cout << harness::render_loop_status(c, s);
      }
      outcome.code = kOk;
    } catch (const Error& e) {
      std::fprintf(stderr, "lina loop %s: %s\n", which.c_str(), e.what());
      outcome.code = e.code() == ErrorCode::runtime ? kGateFailed : kUsage;
    }
  };
  init->callback([run] { run("init"); });
  log->callback([run] { run("log"); });
  status->callback([run] { run("status"); });
}

}  // namespace lina::cli
