#include "harness/tools/loop_log.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <sstream>

#include <sys/stat.h>

#include <fmt/format.h>

#include "harness/util/json_file.h"
#include "harness/util/sha256.h"
#include "harness/util/terminal_text.h"
#include "harness/util/text_file.h"
#include "harness/results/summary.h"
#include "lina/error.h"

namespace lina::harness {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {
constexpr const char* kLoopSchema = "lina.loop/1";

[[noreturn]] void bad(const std::string& arg, const std::string& msg) { throw Error(ErrorCode::invalid_argument, arg, msg); }

std::string now_utc() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

json read_json(const fs::path& p) { return read_json_file(p); }

// The most iterations one loop logs: far beyond any real loop, and the next number always fits an int.
constexpr int kMaxIteration = 1000000;

// --profile: an existing regular file (not a folder, FIFO or device) inside the repository the loop
// lives in, so that a row can only cite, and hash, the project's own evidence.
void check_evidence_path(const std::string& path, const fs::path& repo) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) bad("--profile", "argument `--profile`: '" + path + "' does not exist, expected a report file");
  if (!S_ISREG(st.st_mode)) bad("--profile", "argument `--profile`: '" + path + "' is not a regular file, expected a report file");
  if (repo.empty()) return;
  std::error_code ec, repo_ec;
  const fs::path abs = fs::canonical(path, ec), root = fs::canonical(repo, repo_ec);
  const fs::path rel = abs.lexically_relative(root);
  if (ec || repo_ec || rel.empty() || *rel.begin() == "..")
    bad("--profile", "argument `--profile`: '" + path + "' is outside the repository " + repo.string() +
                         ", expected a report file inside it (e.g. under profile/)");
}

std::optional<double> geomean(const std::vector<double>& v) {
  if (v.empty()) return std::nullopt;
  double s = 0;
  for (double x : v) {
    if (!(x > 0)) return std::nullopt;
    s += std::log(x);
  }
  return std::exp(s / static_cast<double>(v.size()));
}

template <class T>
std::optional<T> opt(const json& j, const char* k) {
  if (!j.contains(k) || j[k].is_null()) return std::nullopt;
  return j[k].get<T>();
}
template <class T>
json jopt(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

json str_or_null(const std::string& s) { return s.empty() ? json(nullptr) : json(s); }
std::string str_or_empty(const json& j, const char* k) {
  return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : std::string();
}

std::string md_cell(const std::string& s) {
  std::string o;
  for (char c : s) o += c == '|' ? std::string("\\|") : std::string(1, c);
  return o;
}
}  // namespace

json LoopContract::to_json() const {
  return json{{"schema", kLoopSchema},
              {"op", op},
              {"target_shapes", shapes},
              {"modes", modes},
              {"baseline", {{"ref", base_ref}, {"sha", base_sha}}},
              {"allowed_backends", backends},
              {"validation_command", validation_command},
              {"benchmark_command", benchmark_command},
              {"profile_command", profile_command},
              {"promotion_criteria",
               {"full frozen gate green (no filter, no skips)", "every target cell's check passed",
                fmt::format("repeatable win: every target cell `faster` with the 95% interval above 1 and the "
                            "geomean beating the best by more than {}%", min_gain_pct),
                "an Nsight Compute profile linked that explains the win", "frozen gate, reference and tolerance files unchanged"}},
              {"no_go_criteria",
               {"baseline recorded", "at least one reasoned attempt (direction)", "gate status recorded",
                "bench evidence (target-cell medians)", "a named bound with its number (e.g. HBM 4.3 TB/s at 81%)"}},
              {"min_gain_pct", min_gain_pct},
              {"frozen_hashes", frozen_hashes},
              {"created_utc", now_utc()}};
}

LoopContract LoopContract::from_json(const json& j, const fs::path& source) {
  auto need = [&](const char* k) -> const json& {
    if (!j.contains(k)) bad(source.string(), source.string() + ": key `" + k + "`: missing");
    return j[k];
  };
  if (!j.is_object() || !j.contains("schema") || !j["schema"].is_string() || j["schema"].get<std::string>() != kLoopSchema) {
    bad(source.string(), source.string() + ": key `schema`: expected `" + kLoopSchema + "`");
  }
  LoopContract c;
  try {
    c.op = need("op").get<std::string>();
    c.shapes = need("target_shapes").get<std::vector<std::string>>();
    c.modes = need("modes").get<std::vector<std::string>>();
    c.backends = need("allowed_backends").get<std::vector<std::string>>();
    c.base_ref = need("baseline").at("ref").get<std::string>();
    c.base_sha = need("baseline").at("sha").get<std::string>();
    c.validation_command = need("validation_command").get<std::string>();
    c.benchmark_command = need("benchmark_command").get<std::string>();
    c.profile_command = j.value("profile_command", "");
    c.min_gain_pct = j.value("min_gain_pct", 1.0);
    c.frozen_hashes = need("frozen_hashes").get<std::map<std::string, std::string>>();
  } catch (const json::exception& e) {
    bad(source.string(), source.string() + ": " + e.what());
  }
  return c;
}

fs::path loop_dir(const fs::path& root, const std::string& op, const std::string& loop) {
  const bool ok = !loop.empty() && loop.size() <= 32 &&
                  std::all_of(loop.begin(), loop.end(), [](char ch) { return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_'; });
  if (!ok) throw Error(ErrorCode::invalid_argument, "--loop", "--loop `" + loop + "`: expected 1-32 characters of a-z, 0-9 and _");
  return root / "profile" / (op + "-" + loop);
}

void loop_init(const fs::path& dir, const LoopContract& c, bool force) {
  if (fs::exists(dir / "contract.json") && !force) {
    bad(dir.string(), dir.string() + " already holds a contract.json (pass --force to start the loop over)");
  }
  fs::create_directories(dir);
  write_text_file(dir / "contract.json", c.to_json().dump(2) + "\n");
  write_text_file(dir / "log.json", "[]\n");
  std::string md = fmt::format("# {} optimization log\n\n", c.op);
  md += fmt::format("Baseline `{}` ({}), target shapes {}, modes {}.\n\n", c.base_sha, c.base_ref,
                    c.shapes.empty() ? "(all)" : fmt::format("{}", fmt::join(c.shapes, ", ")),
                    c.modes.empty() ? "(all)" : fmt::format("{}", fmt::join(c.modes, ", ")));
  md += "Validate: `" + c.validation_command + "`\n\nBenchmark: `" + c.benchmark_command + "`\n\n";
  md += "Rows are appended by `lina loop log`; the contract is contract.json. Median = geomean of the target cells' "
        "medians (ms); vs best = change against the best kept result so far (the baseline at first).\n\n";
  md += "| # | direction | gate | median ms (target) | vs best | decision | evidence |\n";
  md += "|---|---|---|---|---|---|---|\n";
  write_text_file(dir / "OPT_LOG.md", md);
}

LoopContract load_contract(const fs::path& dir) {
  const fs::path p = dir / "contract.json";
  if (!fs::exists(p)) bad(dir.string(), p.string() + " not found: run `lina loop init` first");
  return LoopContract::from_json(read_json(p), p);
}

json LoopEntry::to_json() const {
  json j{{"iteration", iteration}, {"time_utc", time_utc}, {"direction", direction}, {"decision", decision},
              {"gate", gate}, {"source", source}, {"source_sha256", str_or_null(source_sha256)}, {"head_sha", head_sha},
              {"profile", profile}, {"profile_sha256", str_or_null(profile_sha256)}, {"bound", bound},
              {"cells", cells}, {"metric_ms", jopt(metric_ms)}, {"base_metric_ms", jopt(base_metric_ms)},
              {"vs_best_pct", jopt(vs_best_pct)}, {"all_checks_pass", all_checks_pass},
              {"repeatable_win", repeatable_win}, {"improving", improving}};
  if (!source_commit.empty()) j["source_commit"] = source_commit;
  if (!profile_commit.empty()) j["profile_commit"] = profile_commit;
  return j;
}

LoopEntry LoopEntry::from_json(const json& j) {
  LoopEntry e;
  const json& it = j.at("iteration");
  if (!it.is_number_integer() || it.get<long long>() < 1 || it.get<long long>() > kMaxIteration)
    bad("iteration", "key `iteration`: seen " + it.dump() + ", expected an integer in [1, " + std::to_string(kMaxIteration) + "]");
  e.iteration = it.get<int>();
  e.time_utc = j.value("time_utc", "");
  e.direction = j.at("direction").get<std::string>();
  e.decision = j.at("decision").get<std::string>();
  e.gate = j.at("gate").get<std::string>();
  e.source = j.value("source", "");
  e.source_sha256 = str_or_empty(j, "source_sha256");
  e.profile_sha256 = str_or_empty(j, "profile_sha256");
  e.source_commit = str_or_empty(j, "source_commit");
  e.profile_commit = str_or_empty(j, "profile_commit");
  e.head_sha = j.value("head_sha", "");
  e.profile = j.value("profile", "");
  e.bound = j.value("bound", "");
  e.cells = j.value("cells", std::vector<std::string>{});
  e.metric_ms = opt<double>(j, "metric_ms");
  e.base_metric_ms = opt<double>(j, "base_metric_ms");
  e.vs_best_pct = opt<double>(j, "vs_best_pct");
  e.all_checks_pass = j.value("all_checks_pass", false);
  e.repeatable_win = j.value("repeatable_win", false);
  e.improving = j.value("improving", false);
  return e;
}

std::vector<LoopEntry> load_entries(const fs::path& dir) {
  const fs::path p = dir / "log.json";
  if (!fs::exists(p)) bad(dir.string(), p.string() + " not found: run `lina loop init` first");
  const json j = read_json(p);
  if (!j.is_array()) bad(p.string(), p.string() + ": expected an array of entries");
  std::vector<LoopEntry> out;
  try {
    for (const auto& e : j) out.push_back(LoopEntry::from_json(e));
  } catch (const std::exception& e) {  // json::exception, or a value out of range
    bad(p.string(), p.string() + ": " + e.what());
  }
  return out;
}

namespace {
// The cells a row's metric covers, as sorted "mode shape" keys (a row's cells read "mode shape median check").
std::vector<std::string> cell_keys(const std::vector<std::string>& cells) {
  std::vector<std::string> keys;
  for (const auto& c : cells) {
    std::istringstream in(c);
    std::string mode, shape;
    in >> mode >> shape;
    keys.push_back(mode + " " + shape);
  }
  std::sort(keys.begin(), keys.end());
  return keys;
}
}  // namespace

LoopEntry make_entry(const LoopContract& c, const std::vector<LoopEntry>& prior, const LogRequest& req,
                     const json& verify_doc) {
  const SummaryFile f = parse_summary_file(verify_doc, req.verify_json);
  if (f.kind != "verify" && f.kind != "run") {
    bad("--from", req.verify_json.string() + ": key `kind`: `" + f.kind + "`, expected verify (or run)");
  }
  LoopEntry e;
  e.iteration = prior.empty() ? 1 : prior.back().iteration + 1;
  e.time_utc = now_utc();
  // The log is a table: one line per direction, whatever was typed.
  for (char ch : req.direction) e.direction += (ch == '\n' || ch == '\r' || ch == '\t') ? ' ' : ch;
  while (!e.direction.empty() && e.direction.back() == ' ') e.direction.pop_back();
  if (e.direction.empty()) bad("--direction", "--direction: say in one line what this attempt changed");
  e.gate = f.gate.is_object() && f.gate.contains("status") && f.gate["status"].is_string() ? f.gate["status"].get<std::string>() : "none";
  e.source = req.verify_json.string();
  e.head_sha = f.head_sha + (f.head_dirty ? " (dirty)" : "");
  e.profile = req.profile;
  e.bound = req.bound;

  auto target = [&](const std::string& op, const std::string& mode, const std::string& shape) {
    return op == c.op && (c.modes.empty() || std::count(c.modes.begin(), c.modes.end(), mode)) &&
           (c.shapes.empty() || std::count(c.shapes.begin(), c.shapes.end(), shape));
  };
  std::vector<double> head, base;
  std::map<std::string, double> base_by_key;
  for (const auto& r : f.base_rows) base_by_key[r.key()] = r.median_ms;
  e.all_checks_pass = true;
  bool all_base = true;
  for (const auto& r : f.rows) {
    if (!target(r.op, r.mode, r.shape) || !r.not_run.empty() || is_reference_row(r)) continue;  // lina's timed rows only
    head.push_back(r.median_ms);
    e.cells.push_back(fmt::format("{} {} {:.4f} {}", r.mode, r.shape, r.median_ms, check_label(r.check)));
    e.all_checks_pass = e.all_checks_pass && r.check == CheckState::pass;
    auto it = base_by_key.find(r.key());
    if (it == base_by_key.end()) all_base = false;
    else base.push_back(it->second);
  }
  if (head.empty()) {
    bad("--from", req.verify_json.string() + ": no result row for the contract's target cells (op " + c.op + ")");
  }
  // The metric is a geomean over the target cells, compared with earlier rows' geomeans: a verify that
  // timed only some of them would compare different cell sets, so it is refused, naming what is missing.
  std::string missing;
  for (const auto& mode : c.modes)
    for (const auto& shape : c.shapes) {
      const bool seen = std::any_of(f.rows.begin(), f.rows.end(),
                                    [&](const auto& r) { return r.op == c.op && r.mode == mode && r.shape == shape; });
      if (!seen) missing += (missing.empty() ? "" : ", ") + mode + " " + shape;
    }
  if (!missing.empty()) {
    bad("--from", req.verify_json.string() + ": no result for target cell(s) " + missing + " (op " + c.op +
                      "; the row's metric is the geomean over every target cell, so all of them must be timed)");
  }
  e.metric_ms = geomean(head);
  if (all_base) e.base_metric_ms = geomean(base);
  int faster = 0, targets = 0;
  for (const auto& cmp : f.comparisons) {
    if (!target(cmp.op, cmp.mode, cmp.shape)) continue;
    ++targets;
    faster += cmp.verdict == "faster" && cmp.ci_low && *cmp.ci_low > 1.0;
  }
  e.repeatable_win = targets > 0 && faster == targets && targets == static_cast<int>(head.size());

  // Best so far: the baseline of these cells, then every kept result over the same cells (a row logged
  // before the contract's cells were all required may cover fewer; its geomean is not comparable).
  std::optional<double> best = e.base_metric_ms;
  const auto mine = cell_keys(e.cells);
  for (const auto& p : prior) {
    if (cell_keys(p.cells) != mine) continue;
    if (p.base_metric_ms && (!best || *p.base_metric_ms < *best)) best = p.base_metric_ms;
    if (p.decision == "keep" && p.metric_ms && (!best || *p.metric_ms < *best)) best = p.metric_ms;
  }
  if (best && e.metric_ms) e.vs_best_pct = (*e.metric_ms / *best - 1.0) * 100.0;
  const bool beats = !e.vs_best_pct || *e.vs_best_pct < -c.min_gain_pct;
  e.improving = e.gate == "green" && e.all_checks_pass && e.metric_ms && beats;
  if (req.decision) {
    if (*req.decision != "keep" && *req.decision != "revert" && *req.decision != "floor") {
      bad("--decision", "--decision `" + *req.decision + "`: expected keep, revert or floor");
    }
    e.decision = *req.decision;
  } else {
    e.decision = e.improving ? "keep" : "revert";
  }
  return e;
}

std::string opt_log_row(const LoopEntry& e) {
  std::string median = e.metric_ms ? fmt::format("{:.4f}", *e.metric_ms) : "-";
  if (e.cells.size() > 1) median += fmt::format(" ({} cells)", e.cells.size());
  std::string vs = e.vs_best_pct ? fmt::format("{:+.2f}%", *e.vs_best_pct) : "first";
  if (!e.improving) vs += " (not improving)";
  std::string evidence = "`" + e.source + "`";
  if (!e.source_sha256.empty()) evidence += " sha256 " + e.source_sha256.substr(0, 12);
  if (!e.all_checks_pass) evidence += " checks NOT all passed;";
  if (e.repeatable_win) evidence += " repeatable win;";
  if (!e.profile.empty())
    evidence += " profile `" + e.profile + "`" + (e.profile_sha256.empty() ? "" : " sha256 " + e.profile_sha256.substr(0, 12)) + ";";
  if (!e.bound.empty()) evidence += " bound: " + e.bound;
  return fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", e.iteration, md_cell(e.direction), md_cell(e.gate), median,
                     vs, e.decision, md_cell(evidence));
}

LoopEntry loop_log(const fs::path& dir, const LogRequest& req) {
  const LoopContract c = load_contract(dir);
  auto entries = load_entries(dir);
  const fs::path repo_root = dir.parent_path().filename() == "profile" ? dir.parent_path().parent_path() : fs::path();
  if (!req.profile.empty()) check_evidence_path(req.profile, repo_root);
  LoopEntry e = make_entry(c, entries, req, read_json(req.verify_json));
  // A row cites its files by path and sha256 (they stay where they are, usually under
  // benchmarks/results/): `lina loop status` then shows a file that is gone or no longer the same.
  // Paths are relative to the repository (the log lives in <repo>/profile/<op>-<loop>) so that the
  // row reads the same in another clone.
  const fs::path repo = dir.parent_path().filename() == "profile" ? dir.parent_path().parent_path() : fs::path();
  const auto cite = [&](std::string& path, std::string& sha) {
    if (path.empty() || !fs::is_regular_file(path)) return;
    sha = sha256_file(path);
    std::error_code ec, repo_ec;
    const fs::path abs = fs::weakly_canonical(path, ec);
    if (ec) return;
    if (!repo.empty()) {
      const fs::path rel = abs.lexically_relative(fs::weakly_canonical(repo, repo_ec));
      if (!repo_ec && !rel.empty() && *rel.begin() != "..") {
        path = rel.string();
        return;
      }
    }
    path = abs.string();  // outside the repository: cited where it is
  };
  cite(e.source, e.source_sha256);
  cite(e.profile, e.profile_sha256);
  json all = json::array();
  for (const auto& p : entries) all.push_back(p.to_json());
  all.push_back(e.to_json());
  // Both files are replaced whole (atomically): a log cut short by a crash or a full disk never
  // replaces a readable one.
  const std::string md = read_text_file(dir / "OPT_LOG.md") + opt_log_row(e);
  write_file_atomically(dir / "log.json", all.dump(2) + "\n");
  write_file_atomically(dir / "OPT_LOG.md", md);
  return e;
}

std::vector<EvidenceCheck> check_evidence(const std::vector<LoopEntry>& entries, const fs::path& repo_root) {
  std::vector<EvidenceCheck> out;
  const auto check = [&](const LoopEntry& e, const char* role, const std::string& path, const std::string& sha,
                         const std::string& commit) {
    if (path.empty()) return;
    EvidenceCheck k;
    k.iteration = e.iteration;
    k.role = role;
    k.path = path;
    k.logged_sha256 = sha;
    k.commit = commit;
    const fs::path file = fs::path(path).is_relative() ? repo_root / path : fs::path(path);
    if (!fs::is_regular_file(file))
      k.state = commit.empty() ? EvidenceCheck::State::missing : EvidenceCheck::State::in_history;
    else if (sha.empty()) k.state = EvidenceCheck::State::unhashed;
    else {
      k.current_sha256 = sha256_file(file);
      k.state = k.current_sha256 == sha ? EvidenceCheck::State::ok : EvidenceCheck::State::changed;
    }
    out.push_back(std::move(k));
  };
  for (const auto& e : entries) {
    check(e, "verify", e.source, e.source_sha256, e.source_commit);
    check(e, "profile", e.profile, e.profile_sha256, e.profile_commit);
  }
  return out;
}

LoopStatus loop_status(const LoopContract& c, const std::vector<LoopEntry>& entries,
                       const std::map<std::string, std::string>& frozen_now, const fs::path& repo_root) {
  LoopStatus s;
  s.entries = entries;
  if (!repo_root.empty()) s.evidence = check_evidence(entries, repo_root);
  const size_t n = entries.size();
  s.stalled = n >= 3 && !entries[n - 1].improving && !entries[n - 2].improving && !entries[n - 3].improving;
  for (const auto& [path, hash] : c.frozen_hashes) {
    auto it = frozen_now.find(path);
    if (it == frozen_now.end()) s.frozen_changes.push_back(path + " (removed)");
    else if (it->second != hash) s.frozen_changes.push_back(path + " (changed)");
  }
  for (const auto& [path, hash] : frozen_now) {
    if (!c.frozen_hashes.count(path)) s.frozen_changes.push_back(path + " (added)");
  }

  // The promotion candidate: the latest kept entry (else the latest one).
  const LoopEntry* cand = nullptr;
  for (const auto& e : entries) if (e.decision == "keep") cand = &e;
  if (!cand && !entries.empty()) cand = &entries.back();
  const std::string which = cand ? fmt::format("iteration {}", cand->iteration) : "no iteration logged";
  s.promotion.push_back({"gate green", cand && cand->gate == "green", cand ? which + ": gate " + cand->gate : which});
  s.promotion.push_back({"every check passed", cand && cand->all_checks_pass, which});
  s.promotion.push_back({"repeatable win", cand && cand->repeatable_win && cand->improving,
                         cand && cand->vs_best_pct ? which + fmt::format(": {:+.2f}% vs best", *cand->vs_best_pct) : which});
  // Rows cite the profile relative to the repository.
  const std::string profile = !cand || cand->profile.empty() ? std::string()
                              : repo_root.empty() || fs::path(cand->profile).is_absolute() ? cand->profile
                                                                                            : (repo_root / cand->profile).string();
  s.promotion.push_back({"profile linked", !profile.empty() && fs::exists(profile),
                         !profile.empty() ? profile + (fs::exists(profile) ? "" : " (missing)") : which + ": none"});
  s.promotion.push_back({"frozen files unchanged", s.frozen_changes.empty(),
                         s.frozen_changes.empty() ? fmt::format("{} files", c.frozen_hashes.size())
                                                  : fmt::format("{}", fmt::join(s.frozen_changes, ", "))});

  auto any = [&](auto pred) { return std::any_of(entries.begin(), entries.end(), pred); };
  const bool base_measured = any([](const LoopEntry& e) { return e.base_metric_ms.has_value(); });
  s.no_go.push_back({"baseline recorded", !c.base_sha.empty() && base_measured,
                     c.base_sha + (base_measured ? " measured" : " (not measured in any logged file)")});
  s.no_go.push_back({"a reasoned attempt", any([](const LoopEntry& e) { return !e.direction.empty(); }),
                     fmt::format("{} iterations", n)});
  s.no_go.push_back({"gate status", any([](const LoopEntry& e) { return e.gate != "none" && !e.gate.empty(); }), ""});
  s.no_go.push_back({"bench evidence", any([](const LoopEntry& e) { return e.metric_ms.has_value(); }), ""});
  const LoopEntry* bound = nullptr;
  for (const auto& e : entries)
    if (std::any_of(e.bound.begin(), e.bound.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) bound = &e;
  s.no_go.push_back({"a named bound with its number", bound != nullptr, bound ? bound->bound : "none logged (--bound)"});
  return s;
}

std::string render_loop_status(const LoopContract& c, const LoopStatus& s) {
  std::string out = fmt::format("loop {}: baseline {} ({}), {} iterations\n", c.op, c.base_sha, c.base_ref, s.entries.size());
  for (const auto& e : s.entries) {
    out += fmt::format("  #{:<3} {:<7} gate {:<8} {:>10} {:>12}  {}\n", e.iteration, e.decision, e.gate,
                       e.metric_ms ? fmt::format("{:.4f} ms", *e.metric_ms) : "-",
                       e.vs_best_pct ? fmt::format("{:+.2f}%", *e.vs_best_pct) : "first", e.direction);
    for (const auto& k : s.evidence) {
      if (k.iteration != e.iteration) continue;
      std::string state;
      switch (k.state) {
        case EvidenceCheck::State::ok: state = "sha256 " + k.logged_sha256.substr(0, 12) + " ok"; break;
        case EvidenceCheck::State::missing: state = "MISSING"; break;
        case EvidenceCheck::State::changed:
          state = "HASH DIFFERS: logged " + k.logged_sha256.substr(0, 12) + ", now " + k.current_sha256.substr(0, 12);
          break;
        case EvidenceCheck::State::unhashed: state = "(no hash logged)"; break;
        case EvidenceCheck::State::in_history:
          state = "in git history: git show " + k.commit.substr(0, 12) + ":" + k.path +
                  (k.logged_sha256.empty() ? "" : " (sha256 " + k.logged_sha256.substr(0, 12) + ")");
          break;
      }
      out += fmt::format("        {:<7} {}  {}\n", k.role, k.path, state);
    }
  }
  if (s.stalled) {
    const size_t n = s.entries.size();
    out += fmt::format("STALLED: three non-improving iterations in a row (#{}, #{}, #{}): change direction, or "
                       "write the no-go with the bound\n",
                       s.entries[n - 3].iteration, s.entries[n - 2].iteration, s.entries[n - 1].iteration);
  }
  auto bar = [&](const char* title, const std::vector<BarItem>& items) {
    const bool met = std::all_of(items.begin(), items.end(), [](const BarItem& b) { return b.met; });
    out += fmt::format("{}: {}\n", title, met ? "MET" : "not met");
    for (const auto& b : items) out += fmt::format("  [{}] {}{}\n", b.met ? "x" : " ", b.name, b.detail.empty() ? "" : " — " + b.detail);
  };
  bar("promotion bar", s.promotion);
  bar("no-go bar", s.no_go);
  return terminal_safe(out);
}

}  // namespace lina::harness
