// The optimization-loop log (`lina loop init|log|status`, docs/loop.md): a contract written once,
// one row per attempt read from a verify JSON (cited by path and sha256, not copied), and the
// promotion / no-go bars checked from them.
#pragma once
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lina::harness {

struct LoopContract {
  std::string op;
  std::vector<std::string> shapes, modes, backends;
  std::string base_ref, base_sha;
  std::string validation_command, benchmark_command, profile_command;
  double min_gain_pct = 1.0;  // an iteration improves only when it beats the best by more than this
  std::map<std::string, std::string> frozen_hashes;
  nlohmann::json to_json() const;
  static LoopContract from_json(const nlohmann::json& j, const std::filesystem::path& source);
};

// profile/<op>-<loop> under `root` ("opt" by default, the forward loop). A loop
// name is 1-32 characters of [a-z0-9_]; anything else is refused (lina::Error naming --loop), so that
// a name can never leave profile/.
std::filesystem::path loop_dir(const std::filesystem::path& root, const std::string& op, const std::string& loop = "opt");

// Writes contract.json, OPT_LOG.md and an empty log.json; refuses (lina::Error naming the folder)
// when the folder already holds a contract and `force` is false.
void loop_init(const std::filesystem::path& dir, const LoopContract& c, bool force);
LoopContract load_contract(const std::filesystem::path& dir);

struct LoopEntry {
  int iteration = 0;
  // source / profile: the cited files, relative to the repository when inside it. Rows logged before
  // evidence was cited point at copies under the loop's evidence/ folder and carry no hash.
  std::string direction, decision, gate, source, head_sha, profile, bound, time_utc;
  std::string source_sha256, profile_sha256;  // of the cited files when logged; empty: not recorded
  // The commit whose tree holds a cited file that has since left the working tree (records are
  // curated: a replaced one stays in git); empty: the file is expected in the tree.
  std::string source_commit, profile_commit;
  std::vector<std::string> cells;          // "mode shape median_ms check" per target cell
  std::optional<double> metric_ms;         // geomean of the target cells' medians
  std::optional<double> base_metric_ms;    // same cells in the verify file's baseline
  std::optional<double> vs_best_pct;       // metric vs best so far (negative = faster)
  bool all_checks_pass = false;            // every target cell has a passing check
  bool repeatable_win = false;             // every target cell compared as `faster` (CI excludes 1)
  bool improving = false;
  nlohmann::json to_json() const;
  static LoopEntry from_json(const nlohmann::json& j);
};

struct LogRequest {
  std::string direction;
  std::filesystem::path verify_json;
  std::optional<std::string> decision;  // keep | revert | floor; default: keep if improving else revert
  std::string profile, bound;
};

std::vector<LoopEntry> load_entries(const std::filesystem::path& dir);
// Builds the next entry from a verify JSON against the contract and the entries so far (pure).
LoopEntry make_entry(const LoopContract& c, const std::vector<LoopEntry>& prior, const LogRequest& req,
                     const nlohmann::json& verify_doc);
// make_entry + append to log.json and one row to OPT_LOG.md.
LoopEntry loop_log(const std::filesystem::path& dir, const LogRequest& req);
std::string opt_log_row(const LoopEntry& e);

// A cited evidence file as it is now: still there with the logged hash, or not.
struct EvidenceCheck {
  // in_history: not in the tree, but the row names the commit that holds it (`git show commit:path`).
  enum class State { ok, missing, changed, unhashed, in_history };
  int iteration = 0;
  std::string role;  // verify | profile
  std::string path;  // as the row cites it
  std::string logged_sha256, current_sha256;
  std::string commit;  // the row's commit for this file, if any
  State state = State::ok;
};
// Checks every row's cited files; relative paths are read under `repo_root`.
std::vector<EvidenceCheck> check_evidence(const std::vector<LoopEntry>& entries, const std::filesystem::path& repo_root);

struct BarItem {
  std::string name;
  bool met = false;
  std::string detail;
};
struct LoopStatus {
  std::vector<LoopEntry> entries;
  bool stalled = false;  // the last three iterations did not improve
  std::vector<BarItem> promotion, no_go;
  std::vector<std::string> frozen_changes;  // files whose hash differs from the contract's
  std::vector<EvidenceCheck> evidence;      // empty when no repository root was given
};
// `repo_root` empty: the cited evidence is not checked.
LoopStatus loop_status(const LoopContract& c, const std::vector<LoopEntry>& entries,
                       const std::map<std::string, std::string>& frozen_now, const std::filesystem::path& repo_root = {});
std::string render_loop_status(const LoopContract& c, const LoopStatus& s);

}  // namespace lina::harness
