// `lina merge SHARD.json... --json OUT`: the result files of one run's shards (a Slurm array's tasks,
// `lina run --shard I/N` each) as the one run file `lina summarize` and `lina compare` read.
#include <cstdio>

#include "cli/command_line.h"
#include "cli/commands.h"
#include "cli/shard_merge.h"
#include "harness/results/schema.h"
#include "harness/util/text_file.h"

namespace lina::cli {

void register_merge(CLI::App& app, Outcome& outcome) {
  struct Opts {
    std::vector<std::string> files;
    std::string json;
  };
  auto o = std::make_shared<Opts>();
  auto* sub = app.add_subcommand("merge", "Merge the result files of a run's shards (`lina run --shard I/N`) into one run file");
  sub->add_option("files", o->files, "Every shard's result file (lina.bench/1, kind run), in any order")->required();
  sub->add_option("--json", o->json, "Write the merged run file here")->required()->check(kNonEmpty);
  sub->callback([o, &outcome] {
    harness::check_output_path(o->json, "--json");
    std::vector<ShardFile> files;
    for (const auto& f : o->files) files.push_back({f, harness::read_results_file(f)});
    const nlohmann::json merged = merge_shards(files, command_line());
    harness::write_json_file(o->json, merged);
    std::fprintf(stderr, "lina merge: %zu shards, %zu cells, %zu failures: wrote %s\n", files.size(), merged["results"].size(),
                 merged["failures"].size(), o->json.c_str());
    outcome.code = kOk;
  });
}

}  // namespace lina::cli
