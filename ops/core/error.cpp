#include "lina/error.h"

namespace lina {

void throw_invalid(const std::string& argument, const std::string& seen, const std::string& expected) {
  throw Error(ErrorCode::invalid_argument, argument,
              "argument `" + argument + "`: got " + seen + ", expected " + expected);
}

void throw_unsupported(const std::string& argument, const std::string& seen, const std::string& expected) {
  throw Error(ErrorCode::unsupported, argument,
              "argument `" + argument + "`: " + seen + " is not supported, expected " + expected);
}

}  // namespace lina
