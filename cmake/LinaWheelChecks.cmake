# Included right after project() in a wheel build (pyproject.toml sets CMAKE_PROJECT_lina_INCLUDE):
# lina/_C.so compiles against the torch of the Python that builds the wheel, so that Python must
# import torch, and pip must not hide it behind an isolated build environment.
set(_lina_wheel_python "${Python3_EXECUTABLE}")
if(NOT _lina_wheel_python)
  set(_lina_wheel_python "${Python_EXECUTABLE}")
endif()
execute_process(COMMAND "${_lina_wheel_python}" -c "import torch; print(torch.__version__)"
                OUTPUT_VARIABLE _lina_wheel_torch OUTPUT_STRIP_TRAILING_WHITESPACE
                ERROR_VARIABLE _lina_wheel_torch_error ERROR_STRIP_TRAILING_WHITESPACE
                RESULT_VARIABLE _lina_wheel_rc)
if(NOT _lina_wheel_rc EQUAL 0)
  string(REGEX MATCH "[^\n]+$" _lina_wheel_torch_error "${_lina_wheel_torch_error}")
  message(FATAL_ERROR
    "lina: the wheel's extension lina/_C.so is compiled against the torch installed where it is built, "
    "but the building Python (${_lina_wheel_python}) cannot import torch: under pip's default build "
    "isolation it never can.\n"
    "Install torch into your environment first, then build without pip's isolated environment:\n"
    "  pip install torch\n"
    "  pip install scikit-build-core cmake ninja\n"
    "  pip install -v --no-build-isolation .\n"
    "(docs/install.md). The import said: ${_lina_wheel_torch_error}")
endif()
message(STATUS "lina: building the wheel against torch ${_lina_wheel_torch} of ${_lina_wheel_python}")
