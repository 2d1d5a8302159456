#include "harness/engine/workload.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <numeric>
#include <regex>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "lina/error.h"
#include "harness/util/json_file.h"
#include "harness/util/text_file.h"

namespace lina::harness {

std::uint64_t CounterRng::mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

double CounterRng::uniform_at(std::uint64_t c) const {
  // 53 random bits, shifted by half a step so the value is never 0 (log) or 1.
  return (static_cast<double>(at(c) >> 11) + 0.5) * 0x1.0p-53;
}

double CounterRng::normal_at(std::uint64_t c) const {
  const double u1 = uniform_at(2 * c), u2 = uniform_at(2 * c + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

std::uint64_t stream_of(const std::string& name) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// ---------------------------------------------------------------------------------------------
// Shape names

std::string dense_name(std::int64_t B, std::int64_t T, std::int64_t H, std::int64_t D, std::int64_t HV) {
  std::string s = fmt::format("B{}_T{}_H{}_D{}", B, T, H, D);
  if (HV != H) s += fmt::format("_HV{}", HV);
  return s;
}

namespace {

std::string varlen_name(const std::string& dist, std::int64_t T, std::int64_t H, std::int64_t D, std::int64_t HV) {
  std::string s = fmt::format("varlen_{}_T{}_H{}_D{}", dist, T, H, D);
  if (HV != H) s += fmt::format("_HV{}", HV);
  return s;
}

std::int64_t positive(const std::string& argument, const std::string& what, const std::string& text) {
  std::int64_t v = 0;
  try {
    std::size_t used = 0;
    v = std::stoll(text, &used);
    if (used != text.size()) v = 0;
  } catch (const std::exception&) {
    v = 0;
  }
  if (v < 1) throw_invalid(argument, what + " = '" + text + "'", "a positive integer");
  return v;
}

void check_dist(const std::string& argument, const std::string& dist) {
  const auto& d = varlen_distributions();
  if (std::find(d.begin(), d.end(), dist) == d.end())
    throw_invalid(argument, "varlen distribution '" + dist + "'", "one of uniform, longtail, single");
}

// Refuses workloads whose tensors could not be allocated or indexed: the element count of the
// largest tensor, computed without overflow, must stay under 2^33 (16 GiB of bf16 per tensor).
void check_size(const std::string& argument, const std::string& name, const ShapeKeys& k) {
  constexpr std::int64_t kMaxElements = std::int64_t{1} << 33;
  std::int64_t n = 1;
  for (std::int64_t d : {k.B, k.T, std::max(k.H, k.HV), std::max(k.K, k.V)}) {
    if (__builtin_mul_overflow(n, d, &n) || n > kMaxElements)
      throw_invalid(argument, "shape '" + name + "' (a tensor of more than 2^33 elements)",
                    "B*T*H*D at most 2^33 = 8589934592 elements");
  }
}

Workload make_varlen(const std::string& dist, std::int64_t T, std::int64_t H, std::int64_t D, std::int64_t HV,
                     std::int64_t N, std::uint64_t seed) {
  Workload w;
  w.name = varlen_name(dist, T, H, D, HV);
  check_size("--varlen", w.name, ShapeKeys{1, T, H, HV, D, D, dist, 1});
  w.cu_seqlens = make_cu_seqlens(dist, T, seed, N);
  w.keys = ShapeKeys{1, T, H, HV, D, D, dist, static_cast<std::int64_t>(w.cu_seqlens.size()) - 1};
  return w;
}

}  // namespace

Workload parse_shape_name(const std::string& name, std::uint64_t seed, const std::string& argument) {
  static const std::regex dense(R"(B(\w+?)_T(\w+?)_H(\w+?)_D(\w+?)(?:_HV(\w+))?)");
  static const std::regex varlen(R"(varlen_([a-z]+)_T(\w+?)_H(\w+?)_D(\w+?)(?:_HV(\w+))?)");
  std::smatch m;
  const std::string expected = "B{b}_T{t}_H{h}_D{d}[_HV{hv}] or varlen_{dist}_T{t}_H{h}_D{d}[_HV{hv}]";
  if (std::regex_match(name, m, varlen)) {
    check_dist(argument, m[1]);
    const std::int64_t T = positive(argument, "T in '" + name + "'", m[2]);
    const std::int64_t H = positive(argument, "H in '" + name + "'", m[3]);
    const std::int64_t D = positive(argument, "D in '" + name + "'", m[4]);
    const std::int64_t HV = m[5].matched ? positive(argument, "HV in '" + name + "'", m[5]) : H;
    return make_varlen(m[1], T, H, D, HV, 0, seed);
  }
  if (!std::regex_match(name, m, dense)) throw_invalid(argument, "shape '" + name + "'", expected + ", or a set name");
  Workload w;
  const std::int64_t B = positive(argument, "B in '" + name + "'", m[1]);
  const std::int64_t T = positive(argument, "T in '" + name + "'", m[2]);
  const std::int64_t H = positive(argument, "H in '" + name + "'", m[3]);
  const std::int64_t D = positive(argument, "D in '" + name + "'", m[4]);
  const std::int64_t HV = m[5].matched ? positive(argument, "HV in '" + name + "'", m[5]) : H;
  w.keys = ShapeKeys{B, T, H, HV, D, D, std::nullopt, B};
  w.name = dense_name(B, T, H, D, HV);
  check_size(argument, w.name, w.keys);
  return w;
}

const std::vector<std::string>& shape_set_names() {
  static const std::vector<std::string> names{"default", "cpu", "varlen", "varlen-cpu"};
  return names;
}

std::optional<std::vector<std::string>> shape_set(const std::string& name) {
  static const std::map<std::string, std::vector<std::string>> sets{
      // FLA benchmarks/ops/registry.py shapes (B, T, H, D), K = V = D.
      {"default", {"B1_T8192_H96_D128", "B2_T16384_H16_D128", "B4_T2048_H16_D128", "B4_T4096_H64_D128",
                   "B8_T2048_H32_D256", "B8_T1024_H8_D64"}},
      // Small enough for the CPU backend and its fp64 check to finish in seconds.
      {"cpu", {"B1_T256_H2_D64", "B2_T512_H4_D64", "B1_T1024_H2_D128"}},
      {"varlen", {"varlen_uniform_T32768_H16_D128", "varlen_longtail_T32768_H16_D128", "varlen_single_T32768_H16_D128"}},
      {"varlen-cpu", {"varlen_uniform_T1024_H2_D64", "varlen_longtail_T1024_H2_D64"}},
  };
  auto it = sets.find(name);
  if (it == sets.end()) return std::nullopt;
  return it->second;
}

std::vector<Workload> resolve_shapes(const std::vector<std::string>& entries, std::uint64_t seed, const ShapeSetLookup& sets) {
  std::vector<Workload> out;
  for (const auto& e : entries) {
    if (e.empty()) throw_invalid("--shapes", "an empty entry", "a set name or a shape name");
    if (const auto set = sets(e)) {
      for (const auto& n : *set) out.push_back(parse_shape_name(n, seed));
    } else {
      out.push_back(parse_shape_name(e, seed));
    }
  }
  return out;
}

std::vector<Workload> parse_custom_shapes(const std::string& text_in, std::uint64_t seed) {
  const std::string arg = "--custom-shapes";
  std::string text = text_in;
  if (!text.empty() && text[0] == '@') {
    text = read_text_file(text.substr(1), arg);
  }
  const nlohmann::json j = parse_json_text(text, "argument `" + arg + "`", arg);
  if (!j.is_array() || j.empty()) throw_invalid(arg, std::string("a JSON ") + j.type_name(), "a non-empty JSON list");
  std::vector<Workload> out;
  for (std::size_t i = 0; i < j.size(); ++i) {
    const auto& item = j[i];
    const std::string where = "item " + std::to_string(i);
    if (item.is_string()) {
      out.push_back(parse_shape_name(item.get<std::string>(), seed, arg));
      continue;
    }
    if (!item.is_object()) throw_invalid(arg, where + " (a JSON " + std::string(item.type_name()) + ")", "a shape name or an object {B,T,H,D[,HV]}");
    std::map<std::string, std::int64_t> v;
    for (auto it = item.begin(); it != item.end(); ++it) {
      static const std::vector<std::string> known{"B", "T", "H", "D", "HV", "K", "V"};
      if (std::find(known.begin(), known.end(), it.key()) == known.end())
        throw_invalid(arg, where + " key '" + it.key() + "'", "keys B, T, H, D, HV (or K and V)");
      if (!it->is_number_integer() || it->get<std::int64_t>() < 1)
        throw_invalid(arg, where + " key '" + it.key() + "' = " + (it->is_primitive() ? it->dump() : std::string("a JSON ") + it->type_name()), "a positive integer");
      v[it.key()] = it->get<std::int64_t>();
    }
    for (const char* need : {"B", "T", "H"})
      if (!v.count(need)) throw_invalid(arg, where + " without key '" + std::string(need) + "'", "keys B, T, H and D");
    const bool has_d = v.count("D") != 0;
    const bool has_kv = v.count("K") && v.count("V");
    if (!has_d && !has_kv) throw_invalid(arg, where + " without key 'D'", "keys B, T, H and D (or K and V)");
    Workload w;
    const std::int64_t K = has_kv ? v["K"] : v["D"], V = has_kv ? v["V"] : v["D"];
    const std::int64_t HV = v.count("HV") ? v["HV"] : v["H"];
    w.keys = ShapeKeys{v["B"], v["T"], v["H"], HV, K, V, std::nullopt, v["B"]};
    w.name = dense_name(v["B"], v["T"], v["H"], K, HV);
    if (K != V) {  // D names cannot express K != V: spell both out
      w.name = fmt::format("B{}_T{}_H{}_K{}_V{}", v["B"], v["T"], v["H"], K, V);
      if (HV != v["H"]) w.name += fmt::format("_HV{}", HV);
    }
    check_size(arg, w.name, w.keys);
    out.push_back(std::move(w));
  }
  return out;
}

std::vector<Workload> parse_varlen(const std::string& spec, std::uint64_t seed) {
  const std::string arg = "--varlen";
  const std::string expected = "DIST:T=<tokens>[,H=<h>][,D=<d>][,HV=<hv>][,N=<seqs>] with DIST uniform|longtail|single";
  const auto colon = spec.find(':');
  const std::string dist = spec.substr(0, colon);
  check_dist(arg, dist);
  std::map<std::string, std::int64_t> v{{"H", 16}, {"D", 128}};
  if (colon != std::string::npos) {
    std::stringstream ss(spec.substr(colon + 1));
    std::string kv;
    while (std::getline(ss, kv, ',')) {
      const auto eq = kv.find('=');
      const std::string key = kv.substr(0, eq);
      if (eq == std::string::npos || (key != "T" && key != "H" && key != "D" && key != "HV" && key != "N"))
        throw_invalid(arg, "'" + kv + "' in '" + spec + "'", expected);
      v[key] = positive(arg, key + " in '" + spec + "'", kv.substr(eq + 1));
    }
  }
  if (!v.count("T")) throw_invalid(arg, "'" + spec + "' without T=<tokens>", expected);
  const std::int64_t HV = v.count("HV") ? v["HV"] : v["H"];
  const std::int64_t N = v.count("N") ? v["N"] : 0;
  if (N > v["T"]) throw_invalid(arg, "N = " + std::to_string(N) + " sequences for T = " + std::to_string(v["T"]), "N <= T");
  Workload w = make_varlen(dist, v["T"], v["H"], v["D"], HV, N, seed);
  if (N > 0 && dist != "uniform") throw_invalid(arg, "N= with distribution '" + dist + "'", "N= only with uniform");
  return {w};
}

const std::vector<std::string>& varlen_distributions() {
  static const std::vector<std::string> d{"uniform", "longtail", "single"};
  return d;
}

namespace {
// Splits `total` into lengths proportional to `weights` (each >= 1, sum exactly total).
std::vector<std::int64_t> apportion(const std::vector<double>& weights, std::int64_t total) {
  const auto n = static_cast<std::int64_t>(weights.size());
  std::vector<std::int64_t> len(weights.size(), 1);
  const double wsum = std::accumulate(weights.begin(), weights.end(), 0.0);
  std::int64_t left = total - n;
  std::int64_t given = 0;
  for (std::size_t i = 0; i < weights.size(); ++i) {
    const auto extra = static_cast<std::int64_t>(std::floor(weights[i] / wsum * static_cast<double>(left)));
    len[i] += extra;
    given += extra;
  }
  for (std::int64_t i = 0; given < left; ++i, ++given) len[static_cast<std::size_t>(i % n)] += 1;
  return len;
}
}  // namespace

std::vector<std::int64_t> make_cu_seqlens(const std::string& dist, std::int64_t total, std::uint64_t seed,
                                          std::int64_t num_seqs) {
  check_dist("varlen", dist);
  if (total < 1) throw_invalid("varlen", "T = " + std::to_string(total), "T >= 1");
  CounterRng rng(seed, stream_of("cu_seqlens:" + dist));
  std::vector<std::int64_t> len;
  if (dist == "single") {
    len = {total};
  } else if (dist == "uniform") {
    const std::int64_t n = std::min<std::int64_t>(total, num_seqs > 0 ? num_seqs : std::max<std::int64_t>(1, total / 2048));
    std::vector<double> w(static_cast<std::size_t>(n));
    for (auto& x : w) x = 0.5 + rng.next_uniform();  // lengths within about 3x of each other
    len = apportion(w, total);
  } else {  // longtail
    const std::int64_t long_budget = total * 3 / 4;
    const std::int64_t n_long = std::clamp<std::int64_t>(total / 8192, 1, 8);
    std::vector<double> w(static_cast<std::size_t>(n_long));
    for (auto& x : w) x = 0.5 + rng.next_uniform();
    len = long_budget >= n_long ? apportion(w, long_budget) : std::vector<std::int64_t>{};
    std::int64_t left = total - std::accumulate(len.begin(), len.end(), std::int64_t{0});
    while (left > 0) {
      const std::int64_t l = std::min<std::int64_t>(left, 16 + static_cast<std::int64_t>(rng.next_u64() % 497));
      len.push_back(l);
      left -= l;
    }
    // Seeded Fisher-Yates so the long sequences are not all at the front.
    for (std::size_t i = len.size(); i > 1; --i) std::swap(len[i - 1], len[rng.next_u64() % i]);
  }
  std::vector<std::int64_t> cu{0};
  for (auto l : len) cu.push_back(cu.back() + l);
  return cu;
}

// ---------------------------------------------------------------------------------------------
// Tensors

std::string transform_text(Transform t) {
  switch (t) {
    case Transform::randn: return "randn";
    case Transform::logsigmoid_clamp5: return "logsigmoid(randn).clamp_min(-5)";
    case Transform::logsigmoid: return "logsigmoid(randn)";
    case Transform::sigmoid: return "sigmoid(randn)";
  }
  return "?";
}

namespace {
double apply(Transform t, double x) {
  const auto logsig = [](double y) { return y >= 0 ? -std::log1p(std::exp(-y)) : y - std::log1p(std::exp(y)); };
  switch (t) {
    case Transform::randn: return x;
    case Transform::logsigmoid_clamp5: return std::max(logsig(x), -5.0);
    case Transform::logsigmoid: return logsig(x);
    case Transform::sigmoid: return 1.0 / (1.0 + std::exp(-x));
  }
  return x;
}
}  // namespace

HostTensor generate_tensor(const std::string& name, DType dtype, const Shape& shape, Transform t, std::uint64_t seed) {
  HostTensor out(dtype, shape);
  const CounterRng rng(seed, stream_of(name));
  const std::int64_t n = out.numel();
  // Each element depends on its index only, so splitting the range across threads changes nothing.
  const auto fill = [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t i = lo; i < hi; ++i) {
      const float r = round_to_dtype(static_cast<float>(rng.normal_at(static_cast<std::uint64_t>(i))), dtype);
      const double y = apply(t, r);
      if (dtype == DType::bf16) {
        static_cast<std::uint16_t*>(out.data())[i] = float_to_bf16_bits(static_cast<float>(y));
      } else {
        out.set(i, y);
      }
    }
  };
  const std::int64_t threads = std::clamp<std::int64_t>(n / (1 << 20), 1, std::max(1u, std::thread::hardware_concurrency()));
  if (threads == 1) {
    fill(0, n);
  } else {
    std::vector<std::thread> pool;
    for (std::int64_t w = 0; w < threads; ++w) pool.emplace_back(fill, n * w / threads, n * (w + 1) / threads);
    for (auto& th : pool) th.join();
  }
  return out;
}

}  // namespace lina::harness
