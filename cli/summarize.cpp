// `lina summarize FILE.json...`: rank comparison cells by |change| and print the final-claim stats.
#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "harness/results/html_report.h"
#include "harness/util/text_file.h"
#include "harness/results/summary.h"
#include "lina/error.h"

namespace lina::cli {

void register_summarize(CLI::App& app, Outcome& outcome) {
  struct Opts {
    std::vector<std::string> files;
    double threshold = 5.0;
    int top = 0;
    std::string format = "text";
    std::string output;
  };
  auto opts = std::make_shared<Opts>();
  auto* sub = app.add_subcommand("summarize", "Summarize lina.bench/1 run, verify and compare files");
  sub->add_option("files", opts->files, "Result files (lina.bench/1)")->required();
  sub->add_option("--threshold", opts->threshold, "Flag cells whose |change| is at least PCT percent (default 5)")
      ->check(kPercent);
  sub->add_option("--top", opts->top, "Show only the N largest changes per file (default: all)")->check(kNonNegativeInt);
  sub->add_option("--format", opts->format, "text, markdown or html")->check(CLI::IsMember({"text", "markdown", "html"}));
  sub->add_option("--output", opts->output, "Write here instead of stdout (html defaults to summary.html)")->check(kNonEmpty);
  sub->callback([opts, &outcome] {
    try {
      std::string out = opts->output;
      if (out.empty() && opts->format == "html") out = "summary.html";  // a page is not for a terminal
      if (!out.empty()) harness::check_output_path(out, "--output", /*create_parents=*/true);
      std::vector<harness::SummaryFile> files;
      for (const auto& p : opts->files) files.push_back(harness::load_summary_file(p));
      harness::SummaryOptions o{opts->threshold, opts->top};
      std::string text;
      if (opts->format == "html") text = harness::render_summary_html(files, o);
      else if (opts->format == "markdown") text = harness::render_summary_markdown(files, o);
      else text = harness::render_summary_text(files, o);
      if (out.empty()) {
        std::cout << text;
      } else {
        harness::write_text_file(out, text, "--output");
        std::fprintf(stderr, "lina summarize: wrote %s\n", out.c_str());
      }
      outcome.code = kOk;
    } catch (const Error& e) {
      std::fprintf(stderr, "lina summarize: %s\n", e.what());
      outcome.code = e.code() == ErrorCode::runtime ? kGateFailed : kUsage;
    }
  });
}

}  // namespace lina::cli
