// `lina compare --base REF --head REF`: both builds measured in alternating rounds, cells matched,
// regressions and improvements with speedup and bootstrap 95 % interval, kind "compare" output.
#include <cstdio>
#include <iostream>
#include <optional>

#include "cli/commands.h"
#include "cli/shard.h"
#include "harness/tools/cmd_builder.h"
#include "harness/verify/compare_refs.h"
#include "harness/tools/diff_map.h"
#include "harness/util/subprocess.h"
#include "harness/util/git.h"
#include "harness/util/text_file.h"
#include "harness/util/shell_quote.h"
#include "lina/build_info.h"
#include "lina/error.h"

namespace lina::cli {
namespace fs = std::filesystem;

void register_compare(CLI::App& app, Outcome& outcome) {
  struct Opts {
    std::string base, head = "HEAD", op, output, base_binary, head_binary, build_dir, runs_dir, repo = ".", safe_gate = "on";
    std::vector<std::string> modes, shapes;
    int rounds = 3, gpus = 1;
    double threshold = 5.0;
    long long seed = 0;
    bool from_diff = false, fail_on_regression = false;
  };
  auto o = std::make_shared<Opts>();
  auto* sub = app.add_subcommand("compare", "Compare two git refs: alternating rounds, speedups with 95% intervals");
  sub->add_option("--base", o->base, "Baseline git ref")->check(kNonEmpty);
  sub->add_option("--head", o->head, "Candidate git ref (default HEAD)")->check(kNonEmpty);
  auto* op_opt = sub->add_option("--op", o->op, "Op(s), comma-separated");
  auto* diff_opt = sub->add_flag("--from-diff", o->from_diff, "Pick the ops whose code changed between base and head");
  op_opt->excludes(diff_opt);
  sub->add_option("--modes", o->modes, "fwd, infer, bwd, fwdbwd")->delimiter(',');
  sub->add_option("--shapes", o->shapes, "Shape names")->delimiter(',');
  sub->add_option("--rounds", o->rounds, "Alternating rounds per side (default 3)")->check(kPositiveInt);
  sub->add_option("--threshold", o->threshold, "Minimum |change| %% for faster / slower (default 5)")->check(kPercent);
  auto* seed_opt = sub->add_option("--seed", o->seed, "Input seed (same on both sides)")->check(kSeed);
  sub->add_option("--output", o->output, "Write the lina.bench/1 compare document here")->check(kNonEmpty);
  sub->add_flag("--fail-on-regression", o->fail_on_regression, "Exit 5 when any cell is slower");
  sub->add_option("--base-binary", o->base_binary, "Already-built lina of the base ref");
  sub->add_option("--head-binary", o->head_binary, "Already-built lina of the head ref (default: this binary when it is HEAD, clean)");
  sub->add_option("--build-dir", o->build_dir, "--from-diff: build tree whose dependency graph is read (default: this binary's)");
  sub->add_option("--runs-dir", o->runs_dir, "Keep each round's run JSON here (default: a temporary folder)");
  sub->add_option("--repo", o->repo, "Repository the refs live in (default: .)");
  add_gpus_option(*sub, o->gpus, "Each side's `lina run` shards the cells over N GPUs of this host (`lina run --gpus`); a cell runs on the same GPU for both sides");
  add_safe_gate_option(*sub, o->safe_gate);
  sub->callback([o, op_opt, diff_opt, seed_opt, &outcome] {
    try {
      if (!op_opt->count() && !diff_opt->count()) throw Error(ErrorCode::invalid_argument, "--op", "give --op OP[,OP...] or --from-diff");
      if (o->base.empty() && o->base_binary.empty()) throw Error(ErrorCode::invalid_argument, "--base", "--base REF is required");
      // Every argument is checked before either side is built (minutes of CUDA build).
      std::vector<std::string> ops;
      if (!o->from_diff) {
        for (size_t a = 0, b; a <= o->op.size(); a = b + 1) {
          b = o->op.find(',', a);
          if (b == std::string::npos) b = o->op.size();
          ops.push_back(o->op.substr(a, b - a));
        }
        if (ops == std::vector<std::string>{"all"}) ops = harness::all_ops();
      }
      if (!o->from_diff) harness::check_cell_selection(ops, o->modes, o->shapes);  // --from-diff: once its ops are known
      if (!o->output.empty()) harness::check_output_path(o->output, "--output");
      const fs::path repo = harness::git_toplevel(o->repo);
      harness::CompareSide base{"base", o->base, "", o->base_binary};
      harness::CompareSide head{"head", o->head, "", o->head_binary};
      if (!o->base.empty()) base.sha = harness::git_resolve_commit(repo, o->base, "--base");
      head.sha = harness::git_resolve_commit(repo, o->head, "--head");
      if (base.binary.empty()) base.binary = harness::build_ref_binary(repo, o->base, "--base");
      if (head.binary.empty()) {
        // This very build is the head when it is that commit and clean; otherwise build the ref.
        if (head.sha == LINA_BUILD_GIT_SHA && !LINA_BUILD_GIT_DIRTY) head.binary = harness::current_executable();
        else head.binary = harness::build_ref_binary(repo, o->head, "--head");
      }
      for (auto* s : {&base, &head}) {
        if (!fs::exists(s->binary)) throw Error(ErrorCode::invalid_argument, "--" + s->name + "-binary", "--" + s->name + "-binary " + s->binary.string() + ": no such file");
      }
      if (o->from_diff) {
        if (base.sha.empty()) throw Error(ErrorCode::invalid_argument, "--from-diff", "--from-diff needs --base REF");
        const fs::path build = o->build_dir.empty() ? harness::current_executable().parent_path().parent_path() : fs::path(o->build_dir);
        const auto changed = harness::changed_files(repo, base.sha, head.sha);
        const auto m = harness::map_changes_to_ops(changed, harness::collect_dep_graph(build, repo));
        std::printf("--from-diff: %zu changed files between %s and %s\n", changed.size(), base.sha.substr(0, 12).c_str(), head.sha.substr(0, 12).c_str());
        for (const auto& [op, why] : m.ops) {
          ops.push_back(op);
          std::printf("  %s: %s%s\n", op.c_str(), why.front().c_str(), why.size() > 1 ? (" (+" + std::to_string(why.size() - 1) + " more)").c_str() : "");
        }
        for (const auto& f : m.unmapped) std::printf("  (no op depends on %s)\n", f.c_str());
        if (ops.empty()) {
          std::printf("no op depends on the changed files: nothing to compare\n");
          outcome.code = kOk;
          return;
        }
      }
      harness::check_cell_selection(ops, o->modes, o->shapes);
      harness::CompareOptions opt;
      opt.ops = ops;
      opt.modes = o->modes;
      opt.shapes = o->shapes;
      opt.rounds = o->rounds;
      opt.gpus = o->gpus;
      opt.safe_gate = o->safe_gate == "on";
      opt.threshold_pct = o->threshold;
      if (seed_opt->count()) opt.seed = o->seed;
      opt.command = "lina compare --base " + harness::shell_quote(base.sha.empty() ? base.binary.string() : base.sha) +
                    " --head " + harness::shell_quote(head.sha) + " --op " + harness::shell_quote(o->op.empty() ? "(from diff)" : o->op) +
                    (o->gpus > 1 ? " --gpus " + std::to_string(o->gpus) : std::string()) +
                    (opt.safe_gate ? std::string() : " --safe-gate off");
      // A private folder (mkdtemp, mode 0700) unless --runs-dir: a predictable name in /tmp could be
      // planted by another user as a symlink to elsewhere.
      std::optional<harness::TempDir> tmp_runs;
      if (o->runs_dir.empty()) tmp_runs.emplace("lina-compare");
      const fs::path runs = tmp_runs ? tmp_runs->path() : fs::path(o->runs_dir);
      const auto doc = harness::run_compare(base, head, opt, runs);
      std::cout << harness::render_compare_text(doc, o->threshold);
      if (!o->output.empty()) {
        harness::write_file_atomically(o->output, doc.dump(2) + "\n", "--output");
        std::fprintf(stderr, "lina compare: wrote %s\n", o->output.c_str());
      }
      const auto reg = harness::regressions(doc);
      outcome.code = (o->fail_on_regression && !reg.empty()) ? kRegression : kOk;
    } catch (const harness::BaselineError& e) {  // a side (or its ref) could not be resolved, built, run or proven
      std::fprintf(stderr, "lina compare: %s\n", e.what());
      outcome.code = kBaselineFailed;
    } catch (const Error& e) {
      std::fprintf(stderr, "lina compare: %s\n", e.what());
      outcome.code = e.code() == ErrorCode::runtime ? kBaselineFailed : kUsage;
    }
  });
}

}  // namespace lina::cli
