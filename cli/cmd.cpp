// `lina cmd verify|run|profile ...`: print one safe, shell-quoted command; refs resolved to SHAs.
#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "harness/tools/cmd_builder.h"
#include "harness/util/subprocess.h"
#include "harness/util/shell_quote.h"
#include "lina/error.h"

namespace lina::cli {

void register_cmd(CLI::App& app, Outcome& outcome) {
  struct Opts {
    std::string action, op, base, gate_k, json, backend, set, out, lina, repo = ".";
    std::vector<std::string> modes, shapes;
    long long seed = 0, rounds = 0;
    bool no_base = false;
  };
  auto o = std::make_shared<Opts>();
  auto* sub = app.add_subcommand("cmd", "Print one safe, shell-quoted lina command (runs nothing)");
  sub->add_option("action", o->action, "verify, run or profile")->required()->check(CLI::IsMember({"verify", "run", "profile"}));
  sub->add_option("--op", o->op, "Op name(s), comma-separated for run")->required();
  sub->add_option("--modes", o->modes, "fwd, infer, bwd, fwdbwd")->delimiter(',');
  sub->add_option("--shapes", o->shapes, "Shape names B{b}_T{t}_H{h}_D{d}[_HV{hv}]")->delimiter(',');
  sub->add_option("--base", o->base, "Baseline git ref (printed as its SHA)")->check(kNonEmpty);
  sub->add_flag("--no-base", o->no_base, "run: no baseline");
  auto* seed_opt = sub->add_option("--seed", o->seed, "Input seed")->check(kSeed);
  auto* rounds_opt = sub->add_option("--rounds", o->rounds, "verify: alternating rounds");
  sub->add_option("--gate-k", o->gate_k, "verify: gate name filter");
  sub->add_option("--backend", o->backend, "cuda or cpu");
  sub->add_option("--json", o->json, "verify/run: JSON output path");
  sub->add_option("--set", o->set, "profile: full or source");
  sub->add_option("--out", o->out, "profile: output folder");
  sub->add_option("--lina", o->lina, "lina executable to print (default: this one)");
  sub->add_option("--repo", o->repo, "Git repository the refs are resolved in (default: .)");
  sub->callback([o, seed_opt, rounds_opt, &outcome] {
    try {
      harness::CmdRequest r;
      r.action = o->action;
      for (size_t a = 0, b; a <= o->op.size(); a = b + 1) {
        b = o->op.find(',', a);
        if (b == std::string::npos) b = o->op.size();
        r.ops.push_back(o->op.substr(a, b - a));
      }
      r.modes = o->modes;
      r.shapes = o->shapes;
      if (!o->base.empty()) r.base = o->base;
      r.no_base = o->no_base;
      if (seed_opt->count()) r.seed = o->seed;
      if (rounds_opt->count()) r.rounds = o->rounds;
      if (!o->gate_k.empty()) r.gate_k = o->gate_k;
      if (!o->json.empty()) r.json = o->json;
      if (!o->backend.empty()) r.backend = o->backend;
      if (!o->set.empty()) r.set = o->set;
      if (!o->out.empty()) r.out = o->out;
      const std::string exe = o->lina.empty() ? harness::current_executable().string() : o->lina;
      std::cout << harness::shell_join(harness::build_command_argv(r, exe, o->repo)) << "\n";
      outcome.code = kOk;
    } catch (const Error& e) {
      std::fprintf(stderr, "lina cmd: %s\n", e.what());
      outcome.code = kUsage;
    }
  });
}

}  // namespace lina::cli
