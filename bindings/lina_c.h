/* lina's C ABI: one entry point for every op and phase, so that Python (ctypes), other languages
 * and FLA side-by-side benchmarks call exactly the library the CLI measures. Tensors are passed by
 * name; keyword arguments as a small JSON object. Returns 0 on success, else the CLI's exit-code
 * family (2 bad input / unsupported, 1 runtime failure) with the message in `err`. */
#ifndef LINA_C_H
#define LINA_C_H
#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define LINA_C_API __attribute__((visibility("default")))
#else
#define LINA_C_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

enum lina_c_dtype { LINA_F64 = 0, LINA_F32 = 1, LINA_BF16 = 2, LINA_F16 = 3, LINA_I32 = 4, LINA_I64 = 5 };
enum lina_c_device { LINA_CPU = 0, LINA_CUDA = 1 };

typedef struct {
  const char* name; /* q, k, v, g, beta, initial_state, cu_seqlens, A_log, dt_bias, o, final_state,
                       do, dht, dq, dk, dv, dg, dbeta, dh0, dA_log, ddt_bias */
  void* data;       /* contiguous row-major */
  int32_t dtype;    /* lina_c_dtype */
  int32_t device;   /* lina_c_device */
  int32_t device_index;
  int32_t rank;
  int64_t shape[6];
} lina_c_tensor;

/* op: "chunk_gla" | "chunk_kda" | "chunk_gdn"; phase: "forward" | "inference" | "backward" |
 * "reference_forward" | "reference_backward" (fp64 host) | "gpu_reference_forward" |
 * "gpu_reference_backward" (fp32 device).
 * kwargs_json: e.g. {"scale": 0.088, "use_qk_l2norm_in_kernel": true, "lower_bound": -5,
 * "safe_gate": true, "backend": "cuda"}; NULL or "" for none.
 * kernels_out (optional): receives the comma-separated names of what ran. */
LINA_C_API int lina_c_call(const char* op, const char* phase, const lina_c_tensor* tensors, int num_tensors,
                const char* kwargs_json, void* stream, char* err, size_t err_len, char* kernels_out,
                size_t kernels_len);

LINA_C_API const char* lina_c_version(void);
LINA_C_API int lina_c_cuda_device_count(void);

/* lina's device scratch pool (lina/workspace.h) on the current device: reserved, in use, and the
 * high-water mark of use since the last reset. Returns 0, or -1 if the CUDA runtime failed. */
LINA_C_API int lina_c_workspace_stats(uint64_t* reserved, uint64_t* used, uint64_t* used_high);
LINA_C_API int lina_c_workspace_reset_high_water(void);
LINA_C_API int lina_c_workspace_release(void);

#ifdef __cplusplus
}
#endif
#endif
