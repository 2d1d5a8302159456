#include "harness/tools/cmd_builder.h"

#include <algorithm>
#include <array>
#include <regex>

#include "harness/engine/registry.h"
#include "harness/util/git.h"
#include "lina/error.h"

namespace lina::harness {

namespace {
constexpr std::array<const char*, 4> kModes = {"fwd", "infer", "bwd", "fwdbwd"};

template <class A>
bool contains(const A& a, const std::string& s) {
  return std::any_of(a.begin(), a.end(), [&](const auto& x) { return s == x; });
}
template <class A>
std::string listed(const A& a) {
  std::string out;
  for (const auto& x : a) out += (out.empty() ? "" : ", ") + std::string(x);
  return out;
}
}  // namespace

std::optional<ShapeName> parse_shape_name(const std::string& name) {
  static const std::regex dense(R"(B([1-9][0-9]{0,8})_T([1-9][0-9]{0,9})_H([1-9][0-9]{0,5})_D([1-9][0-9]{0,4})(?:_HV([1-9][0-9]{0,5}))?)");
  static const std::regex varlen(R"(varlen_([a-z][a-z0-9]*)_T([1-9][0-9]{0,9})_H([1-9][0-9]{0,5})_D([1-9][0-9]{0,4})(?:_HV([1-9][0-9]{0,5}))?)");
  std::smatch m;
  ShapeName s;
  if (std::regex_match(name, m, dense)) {
    s.B = std::stoll(m[1]); s.T = std::stoll(m[2]); s.H = std::stoll(m[3]); s.D = std::stoll(m[4]);
    if (m[5].matched) s.HV = std::stoll(m[5]);
    return s;
  }
  if (std::regex_match(name, m, varlen)) {
    s.varlen = true; s.dist = m[1];
    s.T = std::stoll(m[2]); s.H = std::stoll(m[3]); s.D = std::stoll(m[4]);
    if (m[5].matched) s.HV = std::stoll(m[5]);
    return s;
  }
  return std::nullopt;
}

void check_cell_selection(const std::vector<std::string>& ops, const std::vector<std::string>& modes,
                          const std::vector<std::string>& shapes) {
  const std::vector<std::string> known = op_names();
  if (ops.empty()) throw Error(ErrorCode::invalid_argument, "--op", "--op: give at least one op (" + listed(known) + ")");
  for (const auto& op : ops) {
    if (!contains(known, op)) {
      throw Error(ErrorCode::invalid_argument, "--op", "--op `" + op + "`: unknown op, expected one of " + listed(known));
    }
  }
  for (const auto& m : modes) {
    if (!contains(kModes, m)) {
      throw Error(ErrorCode::invalid_argument, "--modes", "--modes `" + m + "`: unknown mode, expected one of " + listed(kModes));
    }
  }
  for (const auto& op : ops) resolve_modes(find_op(op), modes);  // e.g. bwd of a forward-only op
  for (const auto& sh : shapes) {
    auto s = parse_shape_name(sh);
    if (!s) {
      throw Error(ErrorCode::invalid_argument, "--shapes",
                  "--shapes `" + sh + "`: not a shape name, expected B{b}_T{t}_H{h}_D{d}[_HV{hv}] or "
                  "varlen_<dist>_T{t}_H{h}_D{d}[_HV{hv}]");
    }
    if (s->D != 64 && s->D != 128 && s->D != 256) {
      throw Error(ErrorCode::invalid_argument, "--shapes", "--shapes `" + sh + "`: head dim D" + std::to_string(s->D) + " unsupported, expected 64, 128 or 256");
    }
    if (s->HV) {
      for (const auto& op : ops) {
        if (!find_op(op).gva) {
          throw Error(ErrorCode::invalid_argument, "--shapes", "--shapes `" + sh + "`: HV (grouped value heads) is not an argument of " + op);
        }
      }
      if (s->HV % s->H != 0) {
        throw Error(ErrorCode::invalid_argument, "--shapes", "--shapes `" + sh + "`: HV" + std::to_string(s->HV) + " must be a multiple of H" + std::to_string(s->H));
      }
    }
  }
}

std::vector<std::string> build_command_argv(const CmdRequest& req, const std::string& lina_exe,
                                            const std::filesystem::path& repo) {
  if (req.action != "verify" && req.action != "run" && req.action != "profile") {
    throw Error(ErrorCode::invalid_argument, "action", "lina cmd `" + req.action + "`: expected verify, run or profile");
  }
  // `run --op all` is the run command's own shorthand for every registered op.
  const bool all = req.action == "run" && req.ops == std::vector<std::string>{"all"};
  check_cell_selection(all ? op_names() : req.ops, req.modes, req.shapes);
  if (req.action != "run" && req.ops.size() != 1) {
    throw Error(ErrorCode::invalid_argument, "--op", "--op: lina " + req.action + " takes exactly one op");
  }
  if (req.base && req.no_base) throw Error(ErrorCode::invalid_argument, "--base", "--base and --no-base exclude each other");
  if (req.set && req.action != "profile") throw Error(ErrorCode::invalid_argument, "--set", "--set is a flag of lina profile only");
  if (req.set && *req.set != "full" && *req.set != "source") {
    throw Error(ErrorCode::invalid_argument, "--set", "--set `" + *req.set + "`: expected full or source");
  }
  if (req.out && req.action != "profile") throw Error(ErrorCode::invalid_argument, "--out", "--out is a flag of lina profile only (use --json)");
  if (req.json && req.action == "profile") throw Error(ErrorCode::invalid_argument, "--json", "lina profile writes to --out, not --json");
  if (req.gate_k && req.action != "verify") throw Error(ErrorCode::invalid_argument, "--gate-k", "--gate-k is a flag of lina verify only");
  if (req.rounds && req.action != "verify") throw Error(ErrorCode::invalid_argument, "--rounds", "--rounds is a flag of lina verify only");
  if (req.rounds && *req.rounds < 1) throw Error(ErrorCode::invalid_argument, "--rounds", "--rounds must be >= 1");
  if (req.no_base && req.action != "run") throw Error(ErrorCode::invalid_argument, "--no-base", "--no-base is a flag of lina run only");
  // `lina run` measures this build only and refuses --base (exit 2); printing such a command would
  // hand the user one that fails.
  if (req.base && req.action == "run")
    throw Error(ErrorCode::invalid_argument, "--base", "--base is not a flag of lina run (it measures this build only): use `lina cmd verify --base REF` or `lina compare`");
  if (req.backend && *req.backend != "cuda" && *req.backend != "cpu") {
    throw Error(ErrorCode::invalid_argument, "--backend", "--backend `" + *req.backend + "`: expected cuda or cpu");
  }

  std::vector<std::string> argv{lina_exe, req.action, "--op"};
  std::string ops;
  for (const auto& op : req.ops) ops += (ops.empty() ? "" : ",") + op;
  argv.push_back(ops);
  // A ref is resolved now so the printed command measures that commit even if the branch moves.
  if (req.base) argv.insert(argv.end(), {"--base", git_resolve_commit(repo, *req.base, "--base")});
  if (req.no_base) argv.push_back("--no-base");
  if (!req.modes.empty()) {
    argv.push_back("--modes");
    argv.insert(argv.end(), req.modes.begin(), req.modes.end());
  }
  if (!req.shapes.empty()) {
    std::string sh;
    for (const auto& s : req.shapes) sh += (sh.empty() ? "" : ",") + s;
    argv.insert(argv.end(), {"--shapes", sh});
  }
  if (req.backend) argv.insert(argv.end(), {"--backend", *req.backend});
  if (req.seed) argv.insert(argv.end(), {"--seed", std::to_string(*req.seed)});
  if (req.gate_k) argv.insert(argv.end(), {"--gate-k", *req.gate_k});
  if (req.rounds) argv.insert(argv.end(), {"--rounds", std::to_string(*req.rounds)});
  if (req.set) argv.insert(argv.end(), {"--set", *req.set});
  if (req.out) argv.insert(argv.end(), {"--out", *req.out});
  if (req.json) argv.insert(argv.end(), {"--json", *req.json});
  return argv;
}

}  // namespace lina::harness
