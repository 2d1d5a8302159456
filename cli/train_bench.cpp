// `lina train-bench`: end-to-end training throughput through PyTorch (bench/train_throughput.py),
// using this build's liblina_c.so. It needs python3 with torch and a GPU; otherwise it says so, exit 2.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "harness/engine/registry.h"
#include "lina/build_info.h"

namespace lina::cli {

void register_train_bench(CLI::App& app, Outcome& outcome) {
  auto* sub = app.add_subcommand("train-bench", "End-to-end training throughput of a small model (PyTorch)");
  struct Opts {
    std::string name, impl = "lina", json;
    int batch = 2, seq_len = 8192, steps = 10;
    bool varlen = false;
  };
  auto o = std::make_shared<Opts>();
  std::vector<std::string> models;  // FLA's model names for the registered ops
  for (const auto& op : harness::registry()) models.push_back(op.model_name);
  std::string listed;
  for (std::size_t i = 0; i < models.size(); ++i) listed += (i == 0 ? "" : i + 1 == models.size() ? " or " : ", ") + models[i];
  sub->add_option("--name", o->name, listed)->required()->check(CLI::IsMember(models));
  sub->add_option("--impl", o->impl, "lina or fla")->check(CLI::IsMember({"lina", "fla"}));
  sub->add_option("--batch-size", o->batch)->check(kPositiveInt);
  sub->add_option("--seq-len", o->seq_len)->check(kPositiveInt);
  sub->add_option("--steps", o->steps)->check(kPositiveInt);
  sub->add_flag("--varlen", o->varlen);
  sub->add_option("--json", o->json, "write the result as JSON");
  sub->callback([o, &outcome] {
    const std::string script = std::string(LINA_BUILD_SOURCE_DIR) + "/bench/train_throughput.py";
    if (std::system("python3 -c 'import torch' >/dev/null 2>&1") != 0) {
      std::fprintf(stderr, "lina train-bench: python3 with torch is required (not found)\n");
      outcome.code = kUsage;
      return;
    }
    char self[4096];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
      self[n] = '\0';
      std::string lib = std::string(self);
      lib = lib.substr(0, lib.rfind('/'));
      lib = lib.substr(0, lib.rfind('/')) + "/bindings/liblina_c.so";
      setenv("LINA_LIB", lib.c_str(), 0);
    }
    std::vector<std::string> args = {"python3", script, "--name", o->name, "--impl", o->impl, "--batch-size",
                                     std::to_string(o->batch), "--seq-len", std::to_string(o->seq_len), "--steps",
                                     std::to_string(o->steps)};
    if (o->varlen) args.push_back("--varlen");
    if (!o->json.empty()) { args.push_back("--json"); args.push_back(o->json); }
    std::vector<char*> argv;
    for (auto& s : args) argv.push_back(s.data());
    argv.push_back(nullptr);
    execvp("python3", argv.data());
    std::perror("lina train-bench: exec python3");
    outcome.code = kUsage;
  });
}

}  // namespace lina::cli
