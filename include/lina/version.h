#pragma once
#define LINA_VERSION "0.1.0"
namespace lina {
inline constexpr const char* kVersion = LINA_VERSION;
bool cuda_backend_compiled();          // built with the CUDA backend
int cuda_device_count();               // 0 when not compiled or no GPU present
}  // namespace lina
