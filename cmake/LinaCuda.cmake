# The CUDA backend: sm_90a only (wgmma / TMA need the arch-specific target).
set(LINA_CUDA_ENABLED OFF)
if(NOT LINA_WITH_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(LINA_CUDA_ENABLED ON)
  elseif(LINA_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "LINA_WITH_CUDA=ON but no CUDA compiler was found")
  endif()
endif()

if(LINA_CUDA_ENABLED)
  # Arch flags are given explicitly: the 'a' targets need -gencode, and older CMake lacks "90a".
  set(CMAKE_CUDA_ARCHITECTURES OFF)
  enable_language(CUDA)
  # CMake < 3.26 knows no C++20 flag for nvcc; nvcc 12+ accepts -std=c++20.
  if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  endif()
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  find_package(CUDAToolkit REQUIRED)
  set(LINA_CUDA_FLAGS -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -lineinfo
      -Xptxas=-warn-spills -Xptxas=-warn-lmem-usage)
  if(NOT LINA_CUTLASS_INCLUDE)
    execute_process(COMMAND python3 -c "import importlib.util as u, os; s = u.find_spec('cutlass_library'); print(os.path.join(s.submodule_search_locations[0], 'source', 'include') if s else '')"
                    OUTPUT_VARIABLE _cutlass OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(_cutlass AND EXISTS "${_cutlass}/cute/tensor.hpp")
      set(LINA_CUTLASS_INCLUDE "${_cutlass}" CACHE PATH "" FORCE)
    endif()
  endif()
  # The wgmma kernels (ops/common/cuda/wgmma_sm90.cuh) use CuTe's GMMA atoms and descriptors.
  if(NOT LINA_CUTLASS_INCLUDE OR NOT EXISTS "${LINA_CUTLASS_INCLUDE}/cute/arch/mma_sm90_gmma.hpp")
    message(FATAL_ERROR "lina: the CUDA backend needs the CUTLASS/CuTe headers: pip install nvidia-cutlass "
                        "(scripts/install-deps.sh does this where nvcc is present), or set LINA_CUTLASS_INCLUDE "
                        "to a CUTLASS include directory, or configure with -DLINA_WITH_CUDA=OFF")
  endif()
  message(STATUS "lina: CUDA backend ON (sm_90a), CUTLASS include: ${LINA_CUTLASS_INCLUDE}")
else()
  message(STATUS "lina: CUDA backend OFF")
endif()
