#include "harness/verify/gate.h"

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "harness/util/json_file.h"
#include "harness/util/subprocess.h"
#include "harness/util/text_file.h"
#include "lina/error.h"

namespace lina::harness {

struct KeywordExpr::Node {
  enum Kind { word, op_not, op_and, op_or } kind = word;
  std::string text;
  std::shared_ptr<const Node> a, b;
  bool eval(const std::string& name) const {
    switch (kind) {
      case word: return name.find(text) != std::string::npos;
      case op_not: return !a->eval(name);
      case op_and: return a->eval(name) && b->eval(name);
      case op_or: return a->eval(name) || b->eval(name);
    }
    return false;
  }
};

namespace {

using NodeP = std::shared_ptr<const KeywordExpr::Node>;

struct Parser {
  std::vector<std::string> toks;
  std::size_t i = 0;
  std::string text;
  int depth = 0;  // open parentheses and `not`s: each is one level of recursion here and in eval

  [[noreturn]] void fail(const std::string& what) const {
    throw_invalid("--gate-k", "'" + text + "' (" + what + ")",
                  "a keyword expression: words joined by and / or / not, with optional parentheses");
  }
  bool at(const char* t) const { return i < toks.size() && toks[i] == t; }
  NodeP parse_or() {
    NodeP left = parse_and();
    while (at("or")) {
      ++i;
      auto n = std::make_shared<KeywordExpr::Node>();
      n->kind = KeywordExpr::Node::op_or;
      n->a = left;
      n->b = parse_and();
      left = n;
    }
    return left;
  }
  NodeP parse_and() {
    NodeP left = parse_not();
    while (at("and")) {
      ++i;
      auto n = std::make_shared<KeywordExpr::Node>();
      n->kind = KeywordExpr::Node::op_and;
      n->a = left;
      n->b = parse_not();
      left = n;
    }
    return left;
  }
  void enter() {
    if (++depth > KeywordExpr::kMaxDepth) fail("nested deeper than " + std::to_string(KeywordExpr::kMaxDepth) + " levels");
  }
  NodeP parse_not() {
    if (at("not")) {
      ++i;
      enter();
      auto n = std::make_shared<KeywordExpr::Node>();
      n->kind = KeywordExpr::Node::op_not;
      n->a = parse_not();
      --depth;
      return n;
    }
    return parse_atom();
  }
  NodeP parse_atom() {
    if (i >= toks.size()) fail("ends where a word was expected");
    if (at("(")) {
      ++i;
      enter();
      NodeP n = parse_or();
      if (!at(")")) fail("missing ')'");
      ++i;
      --depth;
      return n;
    }
    if (at(")") || at("and") || at("or")) fail("unexpected '" + toks[i] + "'");
    auto n = std::make_shared<KeywordExpr::Node>();
    n->text = toks[i++];
    return n;
  }
};

}  // namespace

KeywordExpr KeywordExpr::parse(const std::string& text) {
  Parser p;
  p.text = text.size() > 80 ? text.substr(0, 80) + "..." : text;
  // A long chain of `or`s builds a tree as deep as it is long (eval and the destructor recurse).
  if (text.size() > kMaxLength)
    p.fail(std::to_string(text.size()) + " characters, longer than " + std::to_string(kMaxLength));
  std::string cur;
  auto flush = [&] {
    if (!cur.empty()) p.toks.push_back(cur);
    cur.clear();
  };
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c))) flush();
    else if (c == '(' || c == ')') {
      flush();
      p.toks.emplace_back(1, c);
    } else cur += c;
  }
  flush();
  if (p.toks.empty()) p.fail("empty");
  KeywordExpr e;
  e.text_ = text;
  e.root_ = p.parse_or();
  if (p.i != p.toks.size()) p.fail("unexpected '" + p.toks[p.i] + "'");
  return e;
}

bool KeywordExpr::matches(const std::string& test_name) const { return root_ && root_->eval(test_name); }

std::string gate_status_name(GateStatus s) {
  switch (s) {
    case GateStatus::green: return "green";
    case GateStatus::partial: return "partial";
    case GateStatus::red: return "red";
    case GateStatus::empty: return "empty";
  }
  return "?";
}

std::vector<std::string> parse_gtest_list(const std::string& text) {
  std::vector<std::string> names;
  std::istringstream in(text);
  std::string line, suite;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const std::size_t hash = line.find("  #");
    std::string body = hash == std::string::npos ? line : line.substr(0, hash);
    while (!body.empty() && std::isspace(static_cast<unsigned char>(body.back()))) body.pop_back();
    if (body.empty()) continue;
    if (body[0] != ' ') {
      // Suite lines end with '.'; anything else (a banner printed by a main()) is not a test.
      suite = body.back() == '.' ? body : std::string();
    } else if (!suite.empty()) {
      const std::string test = body.substr(body.find_first_not_of(' '));
      // Disabled tests are listed but never run: they cannot be selected.
      if (test.rfind("DISABLED_", 0) == 0 || suite.rfind("DISABLED_", 0) == 0 || suite.find("/DISABLED_") != std::string::npos) continue;
      names.push_back(suite + test);
    }
  }
  return names;
}

GateResult parse_gtest_json(const std::string& json_text) {
  GateResult r;
  nlohmann::json j;
  try {
    j = parse_json_text(json_text, "the gate's JSON report", "gate");
  } catch (const Error& e) {
    r.problem = e.what();
    return r;
  }
  if (!j.contains("testsuites") || !j["testsuites"].is_array()) {
    r.problem = "the gate's JSON report has no 'testsuites' array";
    return r;
  }
  if (j.contains("lina_git_sha") && j["lina_git_sha"].is_string()) r.build_sha = j["lina_git_sha"].get<std::string>();
  for (const auto& suite : j["testsuites"]) {
    const std::string sname = suite.value("name", "");
    if (!suite.contains("testsuite")) continue;
    for (const auto& t : suite["testsuite"]) {
      // Filtered-out or disabled tests appear with status NOTRUN; they were not selected.
      if (t.value("status", "RUN") != "RUN") continue;
      GateTest g;
      g.name = sname + "." + t.value("name", "");
      const std::string result = t.value("result", "COMPLETED");
      std::string time = t.value("time", "0s");
      g.time_s = std::atof(time.c_str());
      std::string msg;
      if (t.contains("failures"))
        for (const auto& f : t["failures"]) msg += (msg.empty() ? "" : "\n") + f.value("failure", std::string());
      // Skip messages: absent in 1.12 and 1.14 (checked); accepted as an object or an array of {message}.
      if (t.contains("skipped")) {
        const auto& s = t["skipped"];
        if (s.is_object()) msg += s.value("message", std::string());
        if (s.is_array())
          for (const auto& e : s)
            if (e.is_object()) msg += (msg.empty() ? "" : "\n") + e.value("message", std::string());
      }
      g.message = msg;
      ++r.selected;
      if (t.contains("failures") && !t["failures"].empty()) {
        g.result = "failed";
        ++r.failed;
      } else if (result == "SKIPPED") {
        g.result = "skipped";
        ++r.skipped;
      } else {
        g.result = "passed";
        ++r.passed;
      }
      r.tests.push_back(std::move(g));
    }
  }
  return r;
}

GateStatus classify_gate(const GateResult& r) {
  if (r.failed > 0 || !r.problem.empty()) return GateStatus::red;
  if (r.selected == 0) return GateStatus::empty;
  if (r.skipped > 0 || !r.filter.empty()) return GateStatus::partial;
  return GateStatus::green;
}

GateResult run_gate(const GateRunOptions& opts) {
  const std::string exe = opts.executable.string();
  ProcessOptions list_opts;
  list_opts.timeout = child_timeout(kQuickTimeout);
  ProcessResult list = run_process({exe, "--gtest_list_tests"}, list_opts);
  if (!list.spawned || list.exit_code != 0)
    throw Error(ErrorCode::invalid_argument, "gate",
                "cannot list the gate suite " + exe + ": " +
                    (list.spawned ? "exit code " + std::to_string(list.exit_code) + "\n" + last_chars(list.err, 2000) : list.spawn_error));
  const std::vector<std::string> all = parse_gtest_list(list.out);

  std::vector<std::string> chosen;
  if (opts.k_expr.empty()) {
    chosen = all;
  } else {
    const KeywordExpr k = KeywordExpr::parse(opts.k_expr);
    for (const auto& n : all)
      if (k.matches(n)) chosen.push_back(n);
  }
  GateResult r;
  if (chosen.empty()) {
    r.suite = exe;
    r.filter = opts.k_expr;
    r.status = GateStatus::empty;
    return r;
  }

  std::optional<TempDir> tmp;
  std::filesystem::path dir;
  if (opts.log_dir) {
    dir = *opts.log_dir;
    std::filesystem::create_directories(dir);
  } else {
    tmp.emplace("lina-gate");
    dir = tmp->path();
  }
  const auto report = dir / "gate_report.json";
  const auto log = dir / "gate_output.txt";
  std::filesystem::remove(report);
  std::filesystem::remove(log);
  std::vector<std::string> argv = {exe, "--gtest_output=json:" + report.string(), "--gtest_color=no"};
  if (!opts.k_expr.empty()) {
    // Exact names, so a keyword can never pull in more than it matched in the listing.
    std::string filter = "--gtest_filter=";
    for (std::size_t i = 0; i < chosen.size(); ++i) filter += (i ? ":" : "") + chosen[i];
    argv.push_back(filter);
  }
  ProcessOptions po;
  po.env = opts.env;
  po.log_file = log;
  const ProcessResult pr = run_process(argv, po);
  const auto read_or_empty = [](const std::filesystem::path& p) {
    try {
      return read_text_file(p);
    } catch (const Error&) {
      return std::string();
    }
  };
  const std::string gate_output = read_or_empty(log);
  if (pr.timed_out) {
    r.problem = "the gate " + timeout_message(po);
  } else if (std::filesystem::exists(report)) {
    r = parse_gtest_json(read_or_empty(report));
  } else {
    r.problem = "the gate wrote no JSON report (it crashed or was killed)";
  }
  r.suite = exe;
  r.filter = opts.k_expr;
  r.exit_code = pr.spawned ? pr.exit_code : -1;
  r.output_tail = last_chars(gate_output, 4000);
  if (opts.log_dir) r.log_path = log.string();
  if (!pr.spawned && r.problem.empty()) r.problem = pr.spawn_error;
  if (r.problem.empty() && r.selected < static_cast<int>(chosen.size()))
    r.problem = "the gate reported " + std::to_string(r.selected) + " of the " + std::to_string(chosen.size()) +
                " selected tests (it stopped early)";
  if (r.problem.empty() && r.failed == 0 && r.exit_code != 0)
    r.problem = "the gate exited with code " + std::to_string(r.exit_code) + " although no test failed";
  r.status = classify_gate(r);
  return r;
}

std::filesystem::path find_gate_executable(const std::string& op, const std::filesystem::path& self_exe) {
  namespace fs = std::filesystem;
  const std::string name = "lina_" + op + "_gate";
  std::vector<fs::path> places;
  if (const char* d = std::getenv("LINA_GATE_DIR"); d && *d) places.push_back(fs::path(d) / name);
  if (!self_exe.empty()) {
    places.push_back(self_exe.parent_path().parent_path() / "tests" / name);
    places.push_back(self_exe.parent_path() / name);
  }
  std::string looked;
  for (const auto& p : places) {
    std::error_code ec;
    if (fs::is_regular_file(p, ec)) return p;
    looked += "\n  " + p.string();
  }
  throw Error(ErrorCode::invalid_argument, "gate",
              "no gate suite " + name + " found; looked at:" + looked +
                  "\n(build with -DLINA_BUILD_TESTS=ON, set LINA_GATE_DIR, or pass --gate-bin PATH)");
}

}  // namespace lina::harness
