// One error type for the whole library. `code` maps onto the CLI's documented exit codes.
#pragma once
#include <stdexcept>
#include <string>

namespace lina {

enum class ErrorCode {
  invalid_argument,  // bad shape / dtype / value; CLI exit 2
  unsupported,       // valid but not supported by the chosen backend; CLI exit 2
  runtime,           // CUDA or system failure
};

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, std::string argument, const std::string& message)
      : std::runtime_error(message), code_(code), argument_(std::move(argument)) {}
  ErrorCode code() const noexcept { return code_; }
  // The argument the error is about ("q", "cu_seqlens", ...); empty if none.
  const std::string& argument() const noexcept { return argument_; }

 private:
  ErrorCode code_;
  std::string argument_;
};

// "argument `q`: seen <seen>, expected <expected>"
[[noreturn]] void throw_invalid(const std::string& argument, const std::string& seen,
                                const std::string& expected);
[[noreturn]] void throw_unsupported(const std::string& argument, const std::string& seen,
                                    const std::string& expected);

}  // namespace lina
