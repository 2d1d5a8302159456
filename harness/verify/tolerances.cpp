#include "harness/verify/tolerances.h"

#include <string>

#include "lina/error.h"

namespace lina::harness {
namespace {

struct Entry {
  std::string_view op, name;
  double dense, varlen;
};

// test_gla.py test_chunk / test_chunk_varlen; test_gdn.py test_chunk (+ gate-in-kernel) / varlen;
// test_kda.py test_chunk / test_chunk_varlen. dA_log follows FLA's numbers although FLA only warns.
constexpr Entry kTable[] = {
    {"chunk_gla", "o", 0.004, 0.004},     {"chunk_gla", "ht", 0.005, 0.005},
    {"chunk_gla", "dq", 0.005, 0.005},    {"chunk_gla", "dk", 0.005, 0.005},
    {"chunk_gla", "dv", 0.005, 0.005},    {"chunk_gla", "dg", 0.005, 0.005},
    {"chunk_gla", "dh0", 0.005, 0.005},

    {"chunk_gdn", "o", 0.005, 0.005},     {"chunk_gdn", "ht", 0.005, 0.005},
    {"chunk_gdn", "dq", 0.008, 0.007},    {"chunk_gdn", "dk", 0.008, 0.008},
    {"chunk_gdn", "dv", 0.008, 0.007},    {"chunk_gdn", "dh0", 0.008, 0.007},
    {"chunk_gdn", "dg", 0.02, 0.015},     {"chunk_gdn", "dbeta", 0.02, 0.015},
    {"chunk_gdn", "dA_log", 0.02, 0.02},  {"chunk_gdn", "ddt_bias", 0.02, 0.02},

    {"chunk_kda", "o", 0.005, 0.005},     {"chunk_kda", "ht", 0.005, 0.005},
    {"chunk_kda", "dq", 0.008, 0.007},    {"chunk_kda", "dk", 0.008, 0.008},
    {"chunk_kda", "dv", 0.008, 0.007},    {"chunk_kda", "dh0", 0.008, 0.007},
    {"chunk_kda", "dg", 0.02, 0.015},     {"chunk_kda", "dbeta", 0.02, 0.015},
    {"chunk_kda", "dA_log", 0.003, 0.008}, {"chunk_kda", "ddt_bias", 0.008, 0.005},

    // Decode: test_gla.py test_fused_recurrent; test_gated_delta.py test_fused_recurrent; test_kda.py
    // test_fused_recurrent / test_fused_recurrent_vllm_decode (pool and in-place). FLA has no separate
    // varlen numbers for these: the dense ones apply. ht is the final state or the updated pool.
    {"fused_recurrent_gla", "o", 0.005, 0.005}, {"fused_recurrent_gla", "ht", 0.005, 0.005},
    {"fused_recurrent_gdn", "o", 0.002, 0.002}, {"fused_recurrent_gdn", "ht", 0.002, 0.002},
    {"fused_recurrent_kda", "o", 0.005, 0.005}, {"fused_recurrent_kda", "ht", 0.005, 0.005},
};

}  // namespace

double tolerance(std::string_view op, std::string_view name, ToleranceSet set) {
  for (const Entry& e : kTable)
    if (e.op == op && e.name == name) return set == ToleranceSet::dense ? e.dense : e.varlen;
  throw_invalid("tolerance", std::string(op) + "/" + std::string(name), "an op and tensor name in the tolerance table");
}

}  // namespace lina::harness
