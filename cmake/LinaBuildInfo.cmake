# Bakes the source commit into the build: results must name the SHA they measured.
# A baseline build passes -DLINA_GIT_SHA=<sha> (its tree is an export, not a checkout).
set(LINA_GIT_SHA "" CACHE STRING "Commit this build is made from (default: git rev-parse HEAD)")
set(_sha "${LINA_GIT_SHA}")
set(_dirty "false")
if(NOT _sha)
  execute_process(COMMAND git -C ${PROJECT_SOURCE_DIR} rev-parse HEAD OUTPUT_VARIABLE _sha
                  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    set(_sha "unknown")
  endif()
  # Dirty state is read at configure time; scripts/build.sh re-configures on every build.
  execute_process(COMMAND git -C ${PROJECT_SOURCE_DIR} status --porcelain --untracked-files=no
                  OUTPUT_VARIABLE _status OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(_status)
    set(_dirty "true")
  endif()
endif()
set(LINA_BUILD_GIT_SHA "${_sha}")
set(LINA_BUILD_GIT_DIRTY "${_dirty}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/build_info.h.in ${PROJECT_BINARY_DIR}/generated/lina/build_info.h @ONLY)
