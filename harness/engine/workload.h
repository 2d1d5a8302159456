// Seeded workloads: shape names, shape sets, custom shapes, varlen cu_seqlens and input tensors.
// Every random value is a pure function of (seed, stream, element index) (a counter-based
// generator), so inputs are bit-identical for the same seed whatever the thread count.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "lina/tensor.h"

namespace lina::harness {

// Counter-based generator: splitmix64 over (seed, stream, counter).
class CounterRng {
 public:
  CounterRng(std::uint64_t seed, std::uint64_t stream) : key_(mix(seed ^ mix(stream + 0x9E3779B97F4A7C15ull))) {}
  static std::uint64_t mix(std::uint64_t x);
  std::uint64_t at(std::uint64_t counter) const { return mix(key_ ^ mix(counter)); }
  std::uint64_t next_u64() { return at(counter_++); }
  double uniform_at(std::uint64_t counter) const;  // (0, 1), never 0 or 1
  double normal_at(std::uint64_t counter) const;   // standard normal (Box-Muller on 2 draws)
  double next_uniform() { return uniform_at(counter_++); }

 private:
  std::uint64_t key_;
  std::uint64_t counter_ = 0;
};

// Stream id of a named tensor ("q", "k", "do", ...): FNV-1a of the name.
std::uint64_t stream_of(const std::string& name);

// Sizes of one workload. Dense: B sequences of T. Varlen: B = 1, T = total tokens, num_seqs = N.
struct ShapeKeys {
  std::int64_t B = 0, T = 0, H = 0, HV = 0, K = 0, V = 0;
  std::optional<std::string> varlen;  // distribution name, or none when dense
  std::int64_t num_seqs = 0;
  std::int64_t tokens() const { return B * T; }
};

struct Workload {
  std::string name;                     // B2_T1024_H4_D64[_HV8] or varlen_<dist>_T<t>_H<h>_D<d>[_HV<hv>]
  ShapeKeys keys;
  std::vector<std::int64_t> cu_seqlens;  // N + 1 offsets when varlen, empty when dense
  bool is_varlen() const { return keys.varlen.has_value(); }
};

// "B{b}_T{t}_H{h}_D{d}[_HV{hv}]" -> dense workload; "varlen_{dist}_T{t}_H{h}_D{d}[_HV{hv}]" ->
// varlen workload (cu_seqlens drawn from `seed`). Errors (lina::Error invalid_argument) name
// `argument` and the part of the name that is wrong.
Workload parse_shape_name(const std::string& name, std::uint64_t seed, const std::string& argument = "--shapes");
std::string dense_name(std::int64_t B, std::int64_t T, std::int64_t H, std::int64_t D, std::int64_t HV);

// The chunk ops' named shape sets: default (FLA's six), cpu, varlen, varlen-cpu.
const std::vector<std::string>& shape_set_names();
std::optional<std::vector<std::string>> shape_set(const std::string& name);

// `--shapes a,b,...`: each entry a set name (looked up in `sets`: the chunk ops' sets above unless
// an op brings its own) or a shape name.
using ShapeSetLookup = std::function<std::optional<std::vector<std::string>>(const std::string&)>;
std::vector<Workload> resolve_shapes(const std::vector<std::string>& entries, std::uint64_t seed,
                                     const ShapeSetLookup& sets = shape_set);

// `--custom-shapes JSON`: a JSON list whose items are shape names or objects {B,T,H,D[,HV]}
// (or K and V instead of D); "@path" reads the JSON from a file.
std::vector<Workload> parse_custom_shapes(const std::string& text, std::uint64_t seed);

// `--varlen DIST:T=<tokens>[,H=<h>][,D=<d>][,HV=<hv>][,N=<seqs>]`, DIST in uniform | longtail | single.
std::vector<Workload> parse_varlen(const std::string& spec, std::uint64_t seed);

// Sequence lengths packed to exactly `total` tokens. uniform: `num_seqs` sequences of similar
// length (default total / 2048); longtail: a few long sequences holding 3/4 of the tokens plus many
// short ones (16..512 tokens); single: one sequence. Returns cu_seqlens (N + 1 entries, starts at 0).
std::vector<std::int64_t> make_cu_seqlens(const std::string& dist, std::int64_t total, std::uint64_t seed,
                                          std::int64_t num_seqs = 0);
const std::vector<std::string>& varlen_distributions();

// Element-wise transforms applied to randn draws (FLA's benchmark conventions).
enum class Transform { randn, logsigmoid_clamp5, logsigmoid, sigmoid };
std::string transform_text(Transform t);
// Fills a tensor of `dtype`/`shape` with transform(randn) drawn from (seed, stream_of(name)).
// The randn draw is rounded to `dtype` first (FLA draws randn in the benchmark dtype).
HostTensor generate_tensor(const std::string& name, DType dtype, const Shape& shape, Transform t, std::uint64_t seed);

}  // namespace lina::harness
