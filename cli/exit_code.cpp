#include "cli/exit_code.h"

#include <cstdio>
#include <filesystem>
#include <new>
#include <system_error>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "harness/util/baseline_error.h"
#include "lina/error.h"

namespace lina::cli {

int report_exception(const std::exception_ptr& error, const std::string& command) {
  const std::string who = command.empty() ? "lina" : "lina " + command;
  const auto say = [&](const std::string& text, int code) {
    std::fprintf(stderr, "%s: %s\n", who.c_str(), text.c_str());
    return code;
  };
  // Most specific first: every type here is a std::exception, and only a CUDA or system failure during
  // the work (ErrorCode::runtime, std::system_error) is exit 1, which a caller reads as "gate failed".
  try {
    std::rethrow_exception(error);
  } catch (const harness::BaselineError& e) {
    return say(e.what(), kBaselineFailed);
  } catch (const Error& e) {
    return say(e.what(), e.code() == ErrorCode::runtime ? kGateFailed : kUsage);
  } catch (const std::bad_alloc&) {
    return say("out of memory: the shapes or inputs asked for more memory than this machine has (try smaller shapes)", kUsage);
  } catch (const std::filesystem::filesystem_error& e) {
    return say(e.what(), kUsage);
  } catch (const std::system_error& e) {
    return say(std::string("system error: ") + e.what(), kGateFailed);
  } catch (const nlohmann::json::exception& e) {
    return say(std::string("bad JSON input: ") + e.what(), kUsage);
  } catch (const std::exception& e) {
    return say(std::string("error: ") + e.what(), kUsage);
  } catch (...) {
    return say("error: an unknown exception", kUsage);
  }
}

}  // namespace lina::cli
