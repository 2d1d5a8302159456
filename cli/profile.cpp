// `lina profile --op OP`: Nsight Compute on the timed launches only, candidate and optionally a
// baseline binary, reports kept under profile/, then a side-by-side of the kernels.
#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "harness/engine/registry.h"
#include "harness/tools/cmd_builder.h"
#include "harness/verify/compare_refs.h"
#include "harness/tools/profile.h"
#include "harness/util/subprocess.h"
#include "harness/util/git.h"
#include "harness/util/text_file.h"
#include "harness/util/shell_quote.h"
#include "lina/error.h"
#include "lina/version.h"

namespace lina::cli {
namespace fs = std::filesystem;

void register_profile(CLI::App& app, Outcome& outcome) {
  struct Opts {
    std::string op, base, base_binary, lina, ncu = "ncu", set = "full", out, safe_gate = "on";
    std::vector<std::string> modes, shapes;
    int launch_count = 64;
  };
  auto o = std::make_shared<Opts>();
  auto* sub = app.add_subcommand("profile", "Nsight Compute hand-off: profile the timed launches, side by side with a baseline");
  sub->add_option("--op", o->op, "Op to profile")->required();
  sub->add_option("--modes", o->modes, "Modes (default fwd; infer for the decode ops)")->delimiter(',');
  sub->add_option("--shapes", o->shapes, "Shape names (default: the run's default set)")->delimiter(',');
  sub->add_option("--base", o->base, "Baseline git ref to profile as well")->check(kNonEmpty);
  sub->add_option("--base-binary", o->base_binary, "Already-built lina of the baseline");
  sub->add_option("--set", o->set, "ncu section set: full or source")->check(CLI::IsMember({"full", "source"}));
  sub->add_option("--out", o->out, "Folder for the .ncu-rep files (default profile/<op>)");
  sub->add_option("--launch-count", o->launch_count, "Kernels profiled per side, 0 = all timed launches (default 64)")->check(kNonNegativeInt);
  sub->add_option("--ncu", o->ncu, "ncu executable (default: ncu on PATH)");
  sub->add_option("--lina", o->lina, "Candidate lina binary (default: this one)");
  add_safe_gate_option(*sub, o->safe_gate);
  sub->callback([o, &outcome] {
    try {
      // One mode by default: the op's first (fwd; a forward-only decode op's infer).
      const harness::OpSpec* op = harness::lookup_op(o->op);  // unknown: check_cell_selection says so
      if (o->modes.empty() && op) o->modes = {harness::mode_name(op->default_modes.front())};
      harness::check_cell_selection({o->op}, o->modes, o->shapes);
      // Say every missing prerequisite at once, then stop.
      auto ncu = harness::find_on_path(o->ncu);
      if (!ncu && o->ncu == "ncu" && fs::exists("/usr/local/cuda/bin/ncu")) ncu = fs::path("/usr/local/cuda/bin/ncu");
      const int gpus = lina::cuda_device_count();
      std::string missing;
      if (!ncu) missing += "Nsight Compute (`" + o->ncu + "`) not found on PATH; ";
      if (gpus == 0) missing += lina::cuda_backend_compiled() ? "no CUDA GPU visible; " : "this lina was built without the CUDA backend (no GPU to profile); ";
      if (!missing.empty()) throw Error(ErrorCode::invalid_argument, "ncu", missing.substr(0, missing.size() - 2));
      // Before the baseline build and the profiling.
      const fs::path out = o->out.empty() ? fs::path("profile") / o->op : fs::path(o->out);
      harness::check_output_path(out / "side_by_side.txt", "--out", /*create_parents=*/true);
      if (!o->base.empty() && o->base_binary.empty()) {
        try {
          o->base_binary = harness::build_ref_binary(harness::git_toplevel("."), o->base, "--base").string();
        } catch (const harness::CompareSideError& e) {
          std::fprintf(stderr, "lina profile: %s\n", e.what());
          outcome.code = kBaselineFailed;
          return;
        }
      }
      fs::create_directories(out);
      harness::ProfileSpec spec;
      spec.op = o->op;
      spec.modes = o->modes;
      spec.shapes = o->shapes;
      spec.set = o->set;
      spec.launch_count = o->launch_count;
      spec.safe_gate = o->safe_gate == "on";
      struct Side { std::string name; std::string binary; };
      std::vector<Side> sides;
      if (!o->base_binary.empty()) sides.push_back({"base", o->base_binary});
      sides.push_back({"head", o->lina.empty() ? harness::current_executable().string() : o->lina});
      std::vector<harness::KernelProfile> base_k, head_k;
      for (const auto& s : sides) {
        const auto argv = harness::ncu_profile_argv(ncu->string(), spec, out / s.name, s.binary, out / (s.name + ".json"));
        std::fprintf(stderr, "lina profile: %s\n", harness::shell_join(argv).c_str());
        auto r = harness::run_process(argv);
        harness::write_text_file(out / (s.name + ".ncu.log"), r.out + r.err_or_spawn_error());
        if (r.exit_code != 0) {
          std::fprintf(stderr, "lina profile: ncu exited %d for %s (log: %s)\n", r.exit_code, s.name.c_str(), (out / (s.name + ".ncu.log")).c_str());
          outcome.code = s.name == "base" ? kBaselineFailed : kGateFailed;
          return;
        }
        const fs::path rep = out / (s.name + ".ncu-rep");
        auto ex = harness::run_process(harness::ncu_export_argv(ncu->string(), rep));
        if (ex.exit_code != 0) throw Error(ErrorCode::runtime, "ncu", "ncu --import " + rep.string() + " failed: " + ex.err_or_spawn_error());
        harness::write_text_file(out / (s.name + ".csv"), ex.out);
        auto k = harness::parse_ncu_raw_csv(ex.out, (out / (s.name + ".csv")).string());
        if (k.empty()) {
          throw Error(ErrorCode::runtime, "ncu", rep.string() + ": no kernel was profiled; does `" + s.binary +
                                                     " run` push the NVTX ranges lina:timed:<op>:<mode>:<shape>?");
        }
        (s.name == "base" ? base_k : head_k) = std::move(k);
      }
      const std::string table = harness::render_profile_side_by_side(base_k, head_k, !o->base_binary.empty());
      harness::write_text_file(out / "side_by_side.txt", table);
      std::cout << table << "reports: " << out.string() << "/{" << (o->base_binary.empty() ? "" : "base,") << "head}.ncu-rep\n";
      outcome.code = kOk;
    } catch (const Error& e) {
      std::fprintf(stderr, "lina profile: %s\n", e.what());
      outcome.code = e.code() == ErrorCode::runtime ? kBaselineFailed : kUsage;
    }
  });
}

}  // namespace lina::cli
