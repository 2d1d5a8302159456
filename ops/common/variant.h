// Kernel variants: each op and direction of a backend keeps one table of the implementations it can
// run, in order of preference. A variant says whether it supports a call (nullopt) or why it declines
// (a sentence naming the argument and the value it cannot take); the default choice is the first that
// supports the call. A caller can name a variant through ExecOptions::variant; the harness's one
// override is the environment variable LINA_VARIANT (docs/environment.md), read here and nowhere else
// in the library.
#pragma once
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lina/ops.h"

namespace lina::detail {

using Decline = std::optional<std::string>;

// Call: whatever the op's launch code needs (problem, args, outputs, stream); passed by reference.
template <class Call>
struct Variant {
  std::string_view name;
  Decline (*supports)(const Call&);
  RunInfo (*launch)(const Call&);
};

// The variant the caller asked for: opts.variant if set, else the LINA_VARIANT entry for `site`
// ("chunk_gla.fwd", "chunk_kda.bwd", ...), else "" (the default choice). LINA_VARIANT holds
// comma-separated "site=name" entries, or one bare name that applies to every site that has it.
std::string requested_variant(const ExecOptions& opts, std::string_view site, std::span<const std::string_view> names);

// Refuses (lina::Error, argument "variant") a requested name that `site` does not have, listing its names.
[[noreturn]] void throw_unknown_variant(std::string_view site, std::string_view requested, std::span<const std::string_view> names);
// Refuses a requested variant that declines the call, with its reason.
[[noreturn]] void throw_variant_declines(std::string_view site, std::string_view name, const std::string& why);
// No variant supports the call: every reason, one per variant.
[[noreturn]] void throw_no_variant(std::string_view site, const std::string& reasons);

// A site with one implementation (a CPU backend, a direction without a table): a variant named for it
// (ExecOptions::variant or a "site=name" LINA_VARIANT entry; a bare name applies only where a site has
// it) is refused, argument "variant". `where` qualifies the site ("on the cpu backend"), `why` says why
// there is nothing to choose.
void refuse_named_variant(std::string_view site, std::string_view where, std::string_view why, const ExecOptions& opts);
// The CPU backend's case of it: one implementation per op and direction (the variants are CUDA kernels).
void refuse_variant_on_cpu(std::string_view site, const ExecOptions& opts);

// Picks and launches: the requested variant (refused with its reason if it declines), else the first
// that supports the call. RunInfo::variant records the name that ran.
template <class Call>
RunInfo run_variant(std::span<const Variant<Call>> table, std::string_view site, const ExecOptions& opts, const Call& call) {
  std::vector<std::string_view> names;
  names.reserve(table.size());
  for (const Variant<Call>& v : table) names.push_back(v.name);
  const std::string requested = requested_variant(opts, site, names);
  std::string reasons;
  for (const Variant<Call>& v : table) {
    if (!requested.empty() && v.name != requested) continue;
    if (Decline why = v.supports(call)) {
      if (!requested.empty()) throw_variant_declines(site, v.name, *why);
      reasons += std::string(v.name) + ": " + *why + "; ";
      continue;
    }
    RunInfo info = v.launch(call);
    info.variant = std::string(v.name);
    return info;
  }
  if (!requested.empty()) throw_unknown_variant(site, requested, names);
  throw_no_variant(site, reasons);
}

}  // namespace lina::detail
