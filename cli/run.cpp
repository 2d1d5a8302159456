// `lina run`: benchmark ops on seeded workloads; table on stdout, progress on stderr, JSON on --json.
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "cli/command_line.h"
#include "cli/commands.h"
#include "cli/gpu_fanout.h"
#include "cli/shard.h"
#include "harness/util/text_file.h"
#include "harness/results/report.h"
#include "harness/engine/runner.h"
#include "lina/error.h"

namespace lina::cli {

void register_run(CLI::App& app, Outcome& outcome) {
  auto* sub = app.add_subcommand("run", "Benchmark ops: time each (op, mode, shape) cell and check it against the reference");
  auto cfg = std::make_shared<harness::RunConfig>();
  auto budget = std::make_shared<double>(cfg->policy.time_budget_s);
  auto no_flush = std::make_shared<bool>(false);
  auto no_check = std::make_shared<bool>(false);
  sub->add_option("--op", cfg->ops, "Op name(s), comma separated, or all")->required()->delimiter(',');
  sub->add_option("--modes", cfg->modes, "Modes: fwd infer bwd fwdbwd (default: each op's, fwd fwdbwd for the chunk ops, infer for the decode ops)")->delimiter(',')->expected(1, -1);
  sub->add_option("--shapes", cfg->shapes, "Shape names or set names of each op (`lina list`: default, cpu, ...), comma separated")
      ->delimiter(',')->expected(1, -1);
  sub->add_option("--custom-shapes", cfg->custom_shapes, "JSON list of shape names or {B,T,H,D[,HV]} objects, or @file");
  sub->add_option("--varlen", cfg->varlen, "Varlen workload DIST:T=<tokens>[,H=16][,D=128][,HV=..][,N=..]; DIST uniform|longtail|single")
      ->expected(1, -1);
  sub->add_option("--backend", cfg->backend, "cuda or cpu (default: cuda when a GPU is visible)");
  sub->add_option("--seed", cfg->seed, "Seed of every input (default 42)")->check(kSeed);
  sub->add_flag("--graphs", cfg->graphs, "Capture each call in a CUDA graph and time replays");
  sub->add_flag("--no-l2-flush", *no_flush, "Do not flush L2 before each sample");
  sub->add_flag("--final-state", cfg->final_state, "Call with output_final_state=True: write ht and check it too");
  auto safe_gate = std::make_shared<std::string>("on");
  add_safe_gate_option(*sub, *safe_gate);
  sub->add_flag("--no-check", *no_check, "Skip the per-cell reference check (recorded in the JSON)");
  sub->add_option("--min-samples", cfg->policy.min_samples, "Minimum samples per cell (default 10)");
  sub->add_option("--max-samples", cfg->policy.max_samples, "Maximum samples per cell (default 1000)");
  sub->add_option("--max-noise", cfg->policy.max_noise, "Stop once std/mean falls below this fraction (default 0.005)");
  sub->add_option("--time-budget", *budget, "Sampling budget per cell in seconds (default 2)");
  sub->add_option("--warmup", cfg->policy.warmup, "Untimed calls before sampling (default 3)");
  sub->add_option("--threads", cfg->threads, "CPU backend threads (default 0: all cores)")
      ->check(kNonNegativeInt & CLI::Validator(
                                    [](std::string& text) -> std::string {
                                      const std::optional<double> v = parse_number(text);
                                      if (v && *v > harness::kMaxThreads)
                                        return "got " + text + ", expected an integer in [0, " + std::to_string(harness::kMaxThreads) + "]";
                                      return {};
                                    },
                                    "THREADS"));
  auto shard_text = std::make_shared<std::string>();
  auto gpus = std::make_shared<int>(1);
  auto* shard_opt = sub->add_option("--shard", *shard_text, "Run only cells j with j % N == I of the cell order (one process of a sweep; `lina merge` joins the files)")
                        ->check(kShardSpec);
  auto* gpus_opt = add_gpus_option(*sub, *gpus, "Shard the cells over N GPUs of this host, one child process per GPU, one merged result");
  gpus_opt->excludes(shard_opt);
  sub->add_option("--json", cfg->json_path, "Write results (schema lina.bench/1) to this file")->check(kNonEmpty);
  // `lina run` measures this build only; baselines are built and paired by `lina verify` / `lina compare`,
  // which call `lina run --no-base` on each side.
  auto base = std::make_shared<std::string>();
  auto no_base = std::make_shared<bool>(false);
  sub->add_flag("--no-base", *no_base, "Measure this build alone (the default; accepted for FLA-style command lines)");
  auto* base_opt = sub->add_option("--base", *base, "Not taken by run: use `lina verify --base REF` or `lina compare --base REF --head REF`");
  // Every variable an option writes into is owned by the callback: CLI11 keeps references to them.
  sub->callback([cfg, budget, no_flush, no_check, safe_gate, base, no_base, base_opt, shard_text, shard_opt, gpus, gpus_opt, &outcome] {
    (void)no_base;  // only --no-base's storage: measuring this build alone is what run always does
    if (base_opt->count() > 0)
      throw_invalid("--base", "'" + *base + "'", "no --base on `lina run` (use `lina verify --base REF` or `lina compare`)");
    cfg->policy.time_budget_s = *budget;
    cfg->l2_flush = !*no_flush;
    cfg->check = !*no_check;
    cfg->safe_gate = *safe_gate == "on";
    cfg->command = command_line();
    const harness::Plan full_plan = harness::make_plan(*cfg);  // bad flags -> lina::Error -> exit 2
    // Found out before minutes of measuring, not after.
    if (!cfg->json_path.empty()) harness::check_output_path(cfg->json_path, "--json");
    if (gpus_opt->count() > 0) {
      outcome.code = run_on_gpus(*cfg, full_plan, *gpus);
      return;
    }
    std::optional<Shard> shard;
    std::vector<std::size_t> cell_index;
    if (shard_opt->count() > 0) {
      std::string why;
      shard = parse_shard(*shard_text, why);
    }
    const harness::Plan plan = shard ? select_shard(full_plan, *shard, cell_index) : full_plan;
    const bool tty = isatty(STDERR_FILENO) != 0;
    const auto progress = [tty](std::size_t i, std::size_t n, const harness::Cell& c, const std::string& state) {
      const std::string line = harness::progress_line(i, n, c.op->name, harness::mode_name(c.mode), c.workload.name, state);
      if (tty) {
        std::fprintf(stderr, "\r\033[K%s", line.c_str());
      } else if (state == "timing") {  // failures are listed once, after the table
        std::fprintf(stderr, "%s\n", line.c_str());
      }
    };
    harness::RunOutput out = harness::run_plan(*cfg, plan, progress);
    if (shard) mark_shard_document(out.document, *shard, plan, cell_index);
    if (tty) std::fprintf(stderr, "\r\033[K");
    if (!out.rows.empty()) std::fputs(harness::format_table(out.rows).c_str(), stdout);
    for (const auto& f : out.failures)
      std::fprintf(stderr, "lina run: %s %s %s failed: %s\n", f.op.c_str(), f.mode.c_str(), f.shape.c_str(), f.error.c_str());
    if (!cfg->json_path.empty()) {
      harness::write_json_file(cfg->json_path, out.document);
      std::fprintf(stderr, "lina run: wrote %s\n", cfg->json_path.c_str());
    }
    outcome.code = out.exit_code;
  });
}

}  // namespace lina::cli
