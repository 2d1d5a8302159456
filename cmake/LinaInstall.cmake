# The CMake package: `cmake --install <build> --prefix P` installs liblina.so, the public headers and
# linaConfig.cmake, so that a consumer writes find_package(lina 0.1 REQUIRED) and links lina::lina
# (docs/install.md). The Python extension has its own rule (bindings/torch, component `python`).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# One version for the package, the wheel (pyproject.toml reads project()) and the headers.
file(STRINGS ${PROJECT_SOURCE_DIR}/include/lina/version.h _lina_version_line REGEX "#define LINA_VERSION ")
string(REGEX REPLACE ".*\"(.*)\".*" "\\1" _lina_header_version "${_lina_version_line}")
if(NOT _lina_header_version STREQUAL PROJECT_VERSION)
  message(FATAL_ERROR "lina: include/lina/version.h says LINA_VERSION \"${_lina_header_version}\", "
                      "expected the project() version \"${PROJECT_VERSION}\" of CMakeLists.txt")
endif()

# A shared library made of every object of lina_ops: a consumer links one file and needs none of
# lina's build dependencies; the static CUDA runtime stays inside it. The target is not called
# `lina` because the CLI executable is.
# A library target needs one source of its own: an empty one, generated.
file(CONFIGURE OUTPUT ${PROJECT_BINARY_DIR}/lina_shared/lina_shared.cpp
     CONTENT "// liblina.so: all of lina_ops, linked whole (cmake/LinaInstall.cmake).\n")
add_library(lina_shared SHARED ${PROJECT_BINARY_DIR}/lina_shared/lina_shared.cpp)
add_library(lina::lina ALIAS lina_shared)
target_link_libraries(lina_shared PRIVATE $<LINK_LIBRARY:WHOLE_ARCHIVE,lina_ops>)
target_include_directories(lina_shared INTERFACE $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
                                                 $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_compile_features(lina_shared INTERFACE cxx_std_20)  # the public headers use C++20
set_target_properties(lina_shared PROPERTIES OUTPUT_NAME lina EXPORT_NAME lina
                                             VERSION ${PROJECT_VERSION}
                                             SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
if(LINA_CUDA_ENABLED)
  # Keep the static CUDA runtime's cuda* symbols private, so that they never interpose on the
  # consumer's own libcudart.
  target_link_options(lina_shared PRIVATE "LINKER:--exclude-libs,libcudart_static.a")
endif()

install(TARGETS lina_shared EXPORT linaTargets COMPONENT lina
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
# The public headers include nothing generated (the generated build_info.h names this build's
# source dir and commit: it is for the harness, not for consumers).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/lina DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT lina)

set(LINA_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/lina)
install(EXPORT linaTargets NAMESPACE lina:: DESTINATION ${LINA_INSTALL_CMAKEDIR} COMPONENT lina)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/linaConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/linaConfig.cmake
                              INSTALL_DESTINATION ${LINA_INSTALL_CMAKEDIR})
# 0.x: a minor release may change the API, so only the same major.minor is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/linaConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/linaConfig.cmake ${PROJECT_BINARY_DIR}/linaConfigVersion.cmake
        DESTINATION ${LINA_INSTALL_CMAKEDIR} COMPONENT lina)
