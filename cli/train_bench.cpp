// `lina train-bench`: FLA's training-throughput method on FLA's own causal LMs, FLA alone against FLA with
// lina as its backend, in one process (bench/train_fla_models.py; docs/pytorch.md). It needs python3 with
// torch, transformers, accelerate and flash-linear-attention, and a GPU; --cpu-smoke runs tiny configs on
// lina's CPU backend without timing. Without python3 and torch it says so, exit 2.
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/python_bench.h"

namespace lina::cli {

void register_train_bench(CLI::App& app, Outcome& outcome) {
  auto* sub = app.add_subcommand("train-bench", "Training throughput of FLA's models, FLA against FLA with lina (PyTorch)");
  struct Opts {
    std::vector<std::string> names = {"gla", "kda", "gdn"};
    std::vector<std::string> sizes = {"default", "340m"};
    std::vector<std::string> backends = {"fla", "lina"};
    std::string json;
    int batch = 2, seq_len = 8192, warmup = 16, steps = 32, profile_steps = 2;
    bool varlen = false, cpu_smoke = false, fla_gated_bwd = false;
  };
  auto o = std::make_shared<Opts>();
  add_model_and_backend_options(sub, o->names, o->backends);
  sub->add_option("--sizes", o->sizes, "default (FLA's config) and / or 340m; comma list")
      ->delimiter(',')
      ->check(CLI::IsMember({"default", "340m"}));
  sub->add_option("--batch-size", o->batch)->check(kPositiveInt);
  sub->add_option("--seq-len", o->seq_len)->check(kPositiveInt);
  sub->add_option("--warmup-steps", o->warmup)->check(CLI::NonNegativeNumber);
  sub->add_option("--steps", o->steps)->check(kPositiveInt);
  sub->add_option("--profile-steps", o->profile_steps, "steps under torch.profiler for the attention op's GPU share")
      ->check(CLI::NonNegativeNumber);
  sub->add_flag("--varlen", o->varlen, "FLA's random cu_seqlens over B x T tokens");
  sub->add_flag("--cpu-smoke", o->cpu_smoke, "tiny configs on lina's CPU backend, no timing (CI)");
  sub->add_flag("--fla-gated-bwd-on-old-triton", o->fla_gated_bwd,
                "let FLA's GatedDeltaNet backward run on a Triton its version guard refuses");
  sub->add_option("--json", o->json, "append the records to this JSON file");
  sub->callback([o, &outcome] {
    std::vector<std::string> models;
    for (const auto& n : o->names) models.push_back(fla_model_types().at(n));
    std::vector<std::string> args = {"--models", comma_list(models), "--sizes", comma_list(o->sizes), "--backends",
                                     comma_list(o->backends), "--batch-size", std::to_string(o->batch), "--seq-len",
                                     std::to_string(o->seq_len), "--warmup-steps", std::to_string(o->warmup),
                                     "--steps", std::to_string(o->steps), "--profile-steps",
                                     std::to_string(o->profile_steps)};
    if (o->varlen) args.push_back("--varlen");
    if (o->cpu_smoke) args.push_back("--cpu-smoke");
    if (o->fla_gated_bwd) args.push_back("--fla-gated-bwd-on-old-triton");
    if (!o->json.empty()) {
      args.push_back("--json");
      args.push_back(o->json);
    }
    exec_python_bench("train-bench", "train_fla_models.py", args, outcome);
  });
}

}  // namespace lina::cli
