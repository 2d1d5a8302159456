// `lina verify`: gate, then candidate vs baseline timing, then the promotion verdict (harness/verify/verify.h).
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/shard.h"
#include "harness/verify/verify.h"
#include "lina/build_info.h"

namespace lina::cli {

void register_verify(CLI::App& app, Outcome& outcome) {
  auto opts = std::make_shared<harness::VerifyOptions>();
  auto base = std::make_shared<std::string>();
  auto json = std::make_shared<std::string>();
  auto gate_bin = std::make_shared<std::string>();
  auto base_exe = std::make_shared<std::string>();
  auto repo = std::make_shared<std::string>(LINA_BUILD_SOURCE_DIR);
  auto* sub = app.add_subcommand("verify", "Gate, then time candidate vs baseline");
  sub->add_option("--op", opts->op, "Op to verify (`lina list`: chunk_gla, ..., fused_recurrent_gdn)")->required();
  sub->add_option("--base", *base, "Baseline git ref (resolved to a SHA, built into the cache); absent: candidate only")->check(kNonEmpty);
  sub->add_option("--base-exe", *base_exe,
                  "A `lina` already built from --base (no build); its results must report --base's SHA")
      ->check(CLI::ExistingFile);
  sub->add_option("--modes", opts->modes, "Modes passed to `lina run` (fwd fwdbwd bwd infer; the decode ops: infer)");
  sub->add_option("--shapes", opts->shapes, "Shape set or names passed to `lina run`")->delimiter(',');
  sub->add_option("--backend", opts->backend, "Backend passed to `lina run`")->check(CLI::IsMember({"cuda", "cpu"}));
  sub->add_option("--gate-k", opts->gate_k, "Gate filter: words joined by and/or/not, matched as substrings of test names");
  sub->add_flag("--no-gate", opts->no_gate, "Skip the gate: time anyway, label everything UNVERIFIED");
  sub->add_option("--rounds", opts->rounds, "Alternating candidate/baseline rounds")->default_val(3);
  sub->add_option("--seed", opts->seed, "Input seed, the same on both sides")->default_val(42)->check(kSeed);
  sub->add_option("--threshold", opts->threshold_pct, "Minimum |change| in percent for faster/slower")->default_val(harness::kDefaultThresholdPct)->check(kPercent);
  sub->add_flag("--fail-on-regression", opts->fail_on_regression, "Exit 5 when any cell is slower");
  sub->add_option("--json", *json, "Write a lina.bench/1 verify document here")->check(kNonEmpty);
  sub->add_option("--gate-bin", *gate_bin, "Gate executable (default: tests/lina_<op>_gate of this build)");
  sub->add_option("--repo", *repo, "Source checkout holding --base and profile/ (default: this build's source dir)");
  add_gpus_option(*sub, opts->gpus, "Each side's `lina run` shards the cells over N GPUs of this host (`lina run --gpus`); a cell runs on the same GPU for both sides");
  auto safe_gate = std::make_shared<std::string>("on");
  add_safe_gate_option(*sub, *safe_gate);
  sub->callback([&outcome, opts, base, base_exe, json, gate_bin, repo, safe_gate] {
    opts->safe_gate = *safe_gate == "on";
    if (!base->empty()) opts->base = *base;
    if (!base_exe->empty()) {
      if (base->empty()) throw CLI::ValidationError("--base-exe", "needs --base REF: the SHA its results must report");
      opts->baseline_exe = *base_exe;
    }
    if (!json->empty()) opts->json = *json;
    if (!gate_bin->empty()) opts->gate_exe = *gate_bin;
    opts->repo = *repo;
    // The baseline is built like this build: same CUDA setting.
    opts->baseline_cmake_args = {std::string("-DLINA_WITH_CUDA=") + (LINA_BUILD_CUDA_ENABLED ? "ON" : "OFF")};
    outcome.code = harness::verify(*opts, std::cout).exit_code;
  });
}

}  // namespace lina::cli
