#include "ops/common/variant.h"

#include <cstdlib>

#include "lina/error.h"

namespace lina::detail {
namespace {

std::string joined(std::span<const std::string_view> names) {
  std::string s;
  for (std::string_view n : names) s += (s.empty() ? "" : ", ") + std::string(n);
  return s;
}

bool has(std::span<const std::string_view> names, std::string_view n) {
  for (std::string_view x : names)
    if (x == n) return true;
  return false;
}

// The LINA_VARIANT entry for `site`: "site=name" wins over a bare name; a bare name counts only
// where the site has a variant of that name (one override can then steer several sites).
std::string from_environment(std::string_view site, std::span<const std::string_view> names) {
  const char* env = std::getenv("LINA_VARIANT");  // the library's one environment override
  if (env == nullptr || *env == '\0') return "";
  std::string_view rest(env);
  std::string bare;
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    const std::string_view entry = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    const std::size_t eq = entry.find('=');
    if (eq == std::string_view::npos) {
      if (has(names, entry)) bare = std::string(entry);
    } else if (entry.substr(0, eq) == site) {
      return std::string(entry.substr(eq + 1));
    }
  }
  return bare;
}

}  // namespace

std::string requested_variant(const ExecOptions& opts, std::string_view site, std::span<const std::string_view> names) {
  if (!opts.variant.empty()) return opts.variant;
  return from_environment(site, names);
}

void refuse_named_variant(std::string_view site, std::string_view where, std::string_view why, const ExecOptions& opts) {
  const std::string requested = requested_variant(opts, site, {});
  if (requested.empty()) return;
  throw_invalid("variant", "'" + requested + "' for " + std::string(site) + (where.empty() ? "" : " ") + std::string(where),
                "none: " + std::string(why));
}

void refuse_variant_on_cpu(std::string_view site, const ExecOptions& opts) {
  refuse_named_variant(site, "on the cpu backend", "the cpu backend has one implementation (the variants are CUDA kernels)", opts);
}

void throw_unknown_variant(std::string_view site, std::string_view requested, std::span<const std::string_view> names) {
  throw_invalid("variant", "'" + std::string(requested) + "' for " + std::string(site),
                "one of " + joined(names) + " (or none, for the default choice)");
}

void throw_variant_declines(std::string_view site, std::string_view name, const std::string& why) {
  throw_unsupported("variant", std::string(name) + " for " + std::string(site) + ", which declines: " + why,
                    "a variant that supports this call (or none, for the default choice)");
}

void throw_no_variant(std::string_view site, const std::string& reasons) {
  throw_unsupported(std::string(site), "a call every variant declines (" + reasons + ")", "a call one variant supports");
}

}  // namespace lina::detail
