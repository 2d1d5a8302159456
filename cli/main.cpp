// PLACEHOLDER: the `lina` command.
#include <cstdio>
#include "lina/lina.h"
int main() { std::printf("lina %s\n", lina::kVersion); return 0; }
