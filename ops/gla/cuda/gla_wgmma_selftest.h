// The wgmma self-test is test-only code and lives in tests/support/testing (library lina_testing_cuda,
// outside liblina_c.so). This forward stays until tests/cuda/gla_check.cu includes that path.
#pragma once
#include "tests/support/testing/gla_wgmma_selftest.h"
