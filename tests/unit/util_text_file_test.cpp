// The harness's file I/O: atomic writes that leave the previous file intact on failure, reads that
// refuse FIFOs, devices and oversized files by name, output paths checked before any work.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "harness/util/text_file.h"
#include "lina/error.h"
#include "tools_support.h"

namespace lina::harness {
namespace {
namespace fs = std::filesystem;

template <class F>
std::string error_of(F&& f, const std::string& argument) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
    EXPECT_EQ(e.argument(), argument) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return {};
}

TEST(UtilTextFile, AnAtomicWriteReplacesTheFileWholeAndLeavesNoTemporary) {
  lina::testing::TempDir tmp;
  const fs::path p = tmp.path / "out.json";
  write_file_atomically(p, "first\n", "--json");
  write_file_atomically(p, "second\n", "--json");
  EXPECT_EQ(read_text_file(p), "second\n");
  int files = 0;
  for (const auto& e : fs::directory_iterator(tmp.path)) files += e.is_regular_file();
  EXPECT_EQ(files, 1);  // the temporary file was renamed, not left beside it
}

TEST(UtilTextFile, AFailedWriteNamesTheArgumentAndKeepsThePreviousFile) {
  lina::testing::TempDir tmp;
  const fs::path p = tmp.path / "log.json";
  write_file_atomically(p, "[]\n");
  // A folder that cannot take a new file: the write fails before anything is replaced.
  if (geteuid() != 0) {
    ASSERT_EQ(chmod(tmp.path.c_str(), 0500), 0);
    EXPECT_NE(error_of([&] { write_file_atomically(p, "[1]\n", "--json"); }, "--json").find(p.string()), std::string::npos);
    chmod(tmp.path.c_str(), 0700);
    EXPECT_EQ(read_text_file(p), "[]\n");
  }
  // /dev/full and other devices are refused by name (as root a rename would replace the device node).
  const std::string m = error_of([] { write_file_atomically("/dev/full", "x", "--json"); }, "--json");
  EXPECT_NE(m.find("argument `--json`: '/dev/full'"), std::string::npos) << m;
  EXPECT_NE(m.find("expected a regular file path"), std::string::npos) << m;
}

TEST(UtilTextFile, AWriteCutShortByAFileSizeLimitLeavesThePreviousFile) {
  // `ulimit -f` (or a full disk) mid-write used to leave a truncated --json or log.json behind.
  lina::testing::TempDir tmp;
  const fs::path p = tmp.path / "log.json";
  write_file_atomically(p, "[]\n");
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    signal(SIGXFSZ, SIG_IGN);  // the write then fails with EFBIG instead of killing the process
    rlimit fsize{4096, 4096};
    setrlimit(RLIMIT_FSIZE, &fsize);
    try {
      write_file_atomically(p, std::string(1 << 20, 'x'), "--json");
    } catch (const OutputError& e) {
      _exit(std::string(e.what()).find("the file was not changed") != std::string::npos ? 0 : 2);
    }
    _exit(1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: the write was not refused, 2: the message does not say the file was kept";
  EXPECT_EQ(read_text_file(p), "[]\n");
  int files = 0;
  for (const auto& e : fs::directory_iterator(tmp.path)) files += e.is_regular_file();
  EXPECT_EQ(files, 1);  // the partial temporary file was removed
}

TEST(UtilTextFile, OutputPathsAreCheckedBeforeAnyWork) {
  lina::testing::TempDir tmp;
  EXPECT_NE(error_of([&] { check_output_path(tmp.path, "--json"); }, "--json").find("a directory"), std::string::npos);
  EXPECT_NE(error_of([&] { check_output_path(tmp.path / "no" / "such" / "x.json", "--json"); }, "--json").find("does not exist"),
            std::string::npos);
  EXPECT_NE(error_of([] { check_output_path("/dev/null/x", "--output"); }, "--output").find("not a directory"), std::string::npos);
  EXPECT_NE(error_of([] { check_output_path("", "--output"); }, "--output").find("empty"), std::string::npos);
  check_output_path(tmp.path / "new.json", "--json");                                  // a new file in a folder: fine
  check_output_path(tmp.path / "a" / "b" / "new.html", "--output", /*create_parents=*/true);  // folders to be created: fine
  check_output_path("no-such-folder-for-lina/a/new.txt", "--out", /*create_parents=*/true);  // relative: up to the working directory
}

TEST(UtilTextFile, ReadsRefuseFifosFoldersAndOversizedFilesByName) {
  lina::testing::TempDir tmp;
  const fs::path fifo = tmp.path / "pipe";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  // Would block forever waiting for a writer if it were opened as a plain file.
  EXPECT_NE(error_of([&] { read_text_file(fifo, "--from"); }, "--from").find("a FIFO, expected a regular file"), std::string::npos);
  EXPECT_NE(error_of([&] { read_text_file(tmp.path, "--from"); }, "--from").find("a directory"), std::string::npos);
  const fs::path big = tmp.path / "big";
  write_file_atomically(big, std::string(100, 'x'));
  EXPECT_NE(error_of([&] { read_text_file(big, "--from", 99); }, "--from").find("100 bytes, expected at most 99"), std::string::npos);
  EXPECT_EQ(read_text_file(big, "--from", 100).size(), 100u);
  EXPECT_NE(error_of([&] { read_text_file(tmp.path / "missing"); }, (tmp.path / "missing").string()).find("cannot be read"),
            std::string::npos);
}

}  // namespace
}  // namespace lina::harness
