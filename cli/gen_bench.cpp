// `lina gen-bench`: generation with FLA's own causal LMs, FLA alone against FLA with lina as its backend, in one
// process: a prefill through the chunk op, then N greedy decode steps through the decode op; tokens/s, latency
// per step p50 / p90, prefill time, peak memory (bench/gen_fla_models.py; docs/generation.md). It needs python3
// with torch, transformers and flash-linear-attention, and a GPU; --cpu-smoke runs tiny configs on lina's CPU
// backend, checking the decode's logits against one full-sequence forward. Without python3 and torch it says
// so, exit 2.
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/python_bench.h"

namespace lina::cli {

void register_gen_bench(CLI::App& app, Outcome& outcome) {
  auto* sub = app.add_subcommand("gen-bench", "Generation (prefill + decode steps) of FLA's models, FLA against FLA with lina (PyTorch)");
  struct Opts {
    std::vector<std::string> names = {"gla", "kda", "gdn"};
    std::vector<std::string> sizes = {"small"};
    std::vector<std::string> backends = {"fla", "lina"};
    std::vector<std::string> batches = {"1", "64"};
    std::string json;
    int prompt_len = 512, steps = 128, warmup = 1;
    bool cpu_smoke = false;
  };
  auto o = std::make_shared<Opts>();
  add_model_and_backend_options(sub, o->names, o->backends);
  sub->add_option("--sizes", o->sizes, "small (hidden 1024, 8 layers, head dims 128) and / or default (FLA's config)")
      ->delimiter(',')
      ->check(CLI::IsMember({"small", "default"}));
  sub->add_option("--batch-sizes", o->batches, "sequences decoded together; comma list")->delimiter(',')->check(kPositiveInt);
  sub->add_option("--prompt-len", o->prompt_len, "prompt tokens (the prefill; above 64 FLA's layers run the chunk op)")
      ->check(kPositiveInt);
  sub->add_option("--steps", o->steps, "decode steps after the prefill")->check(kPositiveInt);
  sub->add_option("--warmup", o->warmup, "untimed generations of 4 steps before the timed one")->check(kNonNegativeInt);
  sub->add_flag("--cpu-smoke", o->cpu_smoke, "tiny configs on lina's CPU backend, decode checked, no timing (CI)");
  sub->add_option("--json", o->json, "append the records to this JSON file");
  sub->callback([o, &outcome] {
    std::vector<std::string> models;
    for (const auto& n : o->names) models.push_back(fla_model_types().at(n));
    std::vector<std::string> args = {"--models", comma_list(models), "--sizes", comma_list(o->sizes), "--backends",
                                     comma_list(o->backends), "--batch-sizes", comma_list(o->batches),
                                     "--prompt-len", std::to_string(o->prompt_len), "--steps",
                                     std::to_string(o->steps), "--warmup", std::to_string(o->warmup)};
    if (o->cpu_smoke) args.push_back("--cpu-smoke");
    if (!o->json.empty()) {
      args.push_back("--json");
      args.push_back(o->json);
    }
    exec_python_bench("gen-bench", "gen_fla_models.py", args, outcome);
  });
}

}  // namespace lina::cli
