# Every dependency is a Debian or PyPI package installed by scripts/install-deps.sh; nothing is
# downloaded at build time.
find_package(Threads REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(fmt REQUIRED)
if(LINA_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
