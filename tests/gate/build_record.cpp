// Every gate suite records which lina build it checks (the git SHA and dirty flag of <lina/build_info.h>)
// as top-level properties of its GoogleTest report. `lina verify` refuses a gate whose build is not the
// candidate's: a gate binary left beside a newer lina would otherwise judge other kernels than the ones
// being timed (it happened once on the GPU machine). Outside tests/gate/common on purpose: the
// loops' frozen hashes cover the files that judge; this one only records.
#include <gtest/gtest.h>

#include "lina/build_info.h"

namespace {

class RecordLinaBuild : public ::testing::Environment {
 public:
  void SetUp() override {
    ::testing::Test::RecordProperty("lina_git_sha", LINA_BUILD_GIT_SHA);
    ::testing::Test::RecordProperty("lina_git_dirty", static_cast<bool>(LINA_BUILD_GIT_DIRTY) ? "true" : "false");
  }
};

[[maybe_unused]] ::testing::Environment* const kRecordLinaBuild = ::testing::AddGlobalTestEnvironment(new RecordLinaBuild);

}  // namespace
