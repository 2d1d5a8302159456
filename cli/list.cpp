// `lina list [OP...] [--json]`: the op registry, as text or JSON.
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/commands.h"
#include "harness/engine/registry.h"

namespace lina::cli {

void register_list(CLI::App& app, Outcome& outcome) {
  auto* sub = app.add_subcommand("list", "List the registered ops (inputs, kwargs, shape sets, gate suite, models)");
  auto names = std::make_shared<std::vector<std::string>>();
  auto as_json = std::make_shared<bool>(false);
  sub->add_option("ops", *names, "Op names to show (default: all)");
  sub->add_flag("--json", *as_json, "Print the registry as JSON");
  sub->callback([names, as_json, &outcome] {
    using namespace lina::harness;
    const auto ops = resolve_ops(names->empty() ? std::vector<std::string>{"all"} : *names);  // unknown -> exit 2
    if (*as_json) {
      nlohmann::json j = nlohmann::json::array();
      for (const auto* op : ops) j.push_back(to_json(*op));
      std::printf("%s\n", j.dump(2).c_str());
      outcome.code = kOk;
      return;
    }
    std::string out;
    for (const auto* op : ops) {
      out += fmt::format("{}  ({})\n", op->name, op->category);
      for (const auto& in : op->inputs) {
        std::string rule;
        for (const auto& r : in.rule) rule += (rule.empty() ? "" : ",") + r;
        out += fmt::format("  input {:<5} [{}] {} = {}\n", in.name, rule, dtype_name(in.dtype), transform_text(in.transform));
      }
      out += fmt::format("  kwargs     {}\n", op->fixed_kwargs.dump());
      out += fmt::format("  GVA        {}\n", op->gva ? "yes (HV % H == 0)" : "no");
      std::string backends;
      for (const auto& b : op->backends) backends += (backends.empty() ? "" : ", ") + b;
      out += fmt::format("  backends   {}\n", backends);
      out += fmt::format("  gate suite {}\n", op->gate_suite);
      out += fmt::format("  models     bytes {}, flops {}\n", op->bytes_model, op->flops_model);
      out += fmt::format("  modes      {}\n", op->mode_list());
      if (op->state_pool) out += "  state      pool [S,HV,K,V] f32 updated in place, re-seeded before every timed call\n";
      out += "  shape sets\n";
      for (const auto& [set, members] : op->shape_sets) {
        std::string list;
        for (const auto& n : members) list += (list.empty() ? "" : " ") + n;
        out += fmt::format("    {:<11}{}\n", set, list);
      }
    }
    out += "varlen distributions: uniform, longtail, single (--varlen DIST:T=<tokens>[,H=..][,D=..][,HV=..][,N=..])\n";
    std::fputs(out.c_str(), stdout);
    outcome.code = kOk;
  });
}

}  // namespace lina::cli
