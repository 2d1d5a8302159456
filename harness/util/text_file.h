// Whole-file text I/O with errors that name the argument and the path: reads refuse what is not a
// regular file (a FIFO would block forever) and files over a size limit; every write goes through
// one atomic write (a temporary file in the same folder, written, checked, fsynced, renamed), so a
// process that dies or a disk that fills mid-write leaves the previous file intact.
#pragma once
#include <cstddef>
#include <filesystem>
#include <string>

#include "lina/error.h"

namespace lina::harness {

// The largest file any reader of the harness takes (result files, logs, kwargs.json, reports).
inline constexpr std::size_t kMaxInputBytes = std::size_t{256} << 20;

// An output file that could not be written (full disk, not a regular file, no such folder): the
// CLI's exit 2 with the argument it came from.
class OutputError : public Error {
 public:
  OutputError(const std::string& argument, const std::string& message) : Error(ErrorCode::invalid_argument, argument, message) {}
};

// Whole file as a string. lina::Error(invalid_argument) naming `argument` (default: the path) when it
// cannot be opened, is not a regular file or is larger than `max_bytes`.
std::string read_text_file(const std::filesystem::path& path, const std::string& argument = "",
                           std::size_t max_bytes = kMaxInputBytes);

// Writes `text` to `path` atomically (the folder must exist). OutputError naming `argument` (default:
// the path) on any failure; the previous file at `path`, if any, is then left as it was.
void write_file_atomically(const std::filesystem::path& path, const std::string& text, const std::string& argument = "");
// The same after creating the parent folders.
void write_text_file(const std::filesystem::path& path, const std::string& text, const std::string& argument = "");

// Refuses, before any work, an output path that write_file_atomically would refuse at the end: an
// existing directory, device or FIFO, a folder that does not exist or cannot be written.
// create_parents: the writer will create missing folders (only an existing non-folder ancestor is refused).
void check_output_path(const std::filesystem::path& path, const std::string& argument, bool create_parents = false);

// Without trailing newlines, carriage returns and spaces (a command's captured output, a /proc field).
std::string trim_trailing_space(std::string s);

// The last `n` characters of `s`, after "..." where it was cut (a child's output in an error message).
std::string last_chars(const std::string& s, std::size_t n);

}  // namespace lina::harness
