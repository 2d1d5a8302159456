#include "harness/util/text_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace lina::harness {

std::string trim_trailing_space(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

namespace fs = std::filesystem;

namespace {

std::string named(const std::string& argument, const fs::path& path) { return argument.empty() ? path.string() : argument; }

std::string where(const std::string& argument, const fs::path& path) {
  return argument.empty() ? path.string() : "argument `" + argument + "`: '" + path.string() + "'";
}

// Closes the descriptor on every path out of a scope.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

bool write_all(int fd, const std::string& text) {
  const char* p = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  return true;
}

const char* file_kind(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m) || S_ISBLK(m)) return "a device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

}  // namespace

std::string read_text_file(const fs::path& path, const std::string& argument, std::size_t max_bytes) {
  const std::string arg = named(argument, path);
  // O_NONBLOCK: opening a FIFO does not wait for a writer; fstat then refuses it by name.
  Fd in{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)};
  if (in.fd < 0)
    throw Error(ErrorCode::invalid_argument, arg, where(argument, path) + ": cannot be read (" + std::strerror(errno) + ")");
  struct stat st{};
  if (::fstat(in.fd, &st) != 0 || !S_ISREG(st.st_mode))
    throw Error(ErrorCode::invalid_argument, arg,
                where(argument, path) + ": seen " + file_kind(st.st_mode) + ", expected a regular file");
  if (static_cast<std::uintmax_t>(st.st_size) > max_bytes)
    throw Error(ErrorCode::invalid_argument, arg,
                where(argument, path) + ": seen " + std::to_string(st.st_size) + " bytes, expected at most " +
                    std::to_string(max_bytes));
  std::string text;
  text.reserve(static_cast<std::size_t>(st.st_size));
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(in.fd, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error(ErrorCode::invalid_argument, arg, where(argument, path) + ": read failed (" + std::strerror(errno) + ")");
    }
    text.append(buf, static_cast<std::size_t>(n));
    if (text.size() > max_bytes)  // grew while being read
      throw Error(ErrorCode::invalid_argument, arg, where(argument, path) + ": larger than " + std::to_string(max_bytes) + " bytes");
  }
  return text;
}

void check_output_path(const fs::path& path, const std::string& argument, bool create_parents) {
  const std::string arg = named(argument, path);
  auto refuse = [&](const std::string& what) {
    throw OutputError(arg, where(argument, path) + ": " + what);
  };
  if (path.empty()) refuse("empty, expected a file path");
  struct stat st{};
  if (::lstat(path.c_str(), &st) == 0) {
    if (S_ISLNK(st.st_mode) && ::stat(path.c_str(), &st) != 0) refuse("a dangling symbolic link, expected a regular file path");
    if (!S_ISREG(st.st_mode)) refuse(std::string("seen ") + file_kind(st.st_mode) + ", expected a regular file path");
  }
  fs::path parent = path.parent_path();
  if (parent.empty()) parent = ".";
  // The nearest folder that exists must be a writable directory (the missing ones below it are created
  // only when create_parents).
  fs::path probe = parent;
  while (::stat(probe.c_str(), &st) != 0) {
    if (!create_parents) refuse("folder '" + parent.string() + "' does not exist");
    // A relative path runs out at the working directory, an absolute one at '/'.
    probe = probe.has_parent_path() && probe.parent_path() != probe ? probe.parent_path() : fs::path(".");
  }
  if (!S_ISDIR(st.st_mode)) refuse("'" + probe.string() + "' is not a directory");
  if (::access(probe.c_str(), W_OK | X_OK) != 0) refuse("folder '" + probe.string() + "' is not writable");
}

void write_file_atomically(const fs::path& path, const std::string& text, const std::string& argument) {
  const std::string arg = named(argument, path);
  check_output_path(path, argument);
  auto fail = [&](const std::string& what, const std::string& tmp) {
    const int err = errno;
    if (!tmp.empty()) ::unlink(tmp.c_str());
    throw OutputError(arg, where(argument, path) + ": " + what + " (" + std::strerror(err) + "); the file was not changed");
  };
  const fs::path dir = path.parent_path().empty() ? fs::path(".") : path.parent_path();
  // In the same folder, so that rename() replaces the file in one step on the same file system.
  std::string tmp = (dir / ("." + path.filename().string() + ".tmp-XXXXXX")).string();
  Fd out{::mkostemp(tmp.data(), O_CLOEXEC)};
  if (out.fd < 0) fail("cannot create a temporary file in '" + dir.string() + "'", "");
  // Keep an existing file's permissions; a new one gets what the umask allows of rw-rw-rw-.
  struct stat st{};
  mode_t mode = 0;
  if (::stat(path.c_str(), &st) == 0) {
    mode = st.st_mode & 07777;
  } else {
    const mode_t mask = ::umask(0);
    ::umask(mask);
    mode = 0666 & ~mask;
  }
  if (::fchmod(out.fd, mode) != 0) fail("cannot set the permissions of the temporary file", tmp);
  if (!write_all(out.fd, text)) fail("write failed", tmp);
  if (::fsync(out.fd) != 0) fail("fsync failed", tmp);
  const int fd = out.fd;
  out.fd = -1;
  if (::close(fd) != 0) fail("close failed", tmp);
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail("rename failed", tmp);
  // The rename itself reaches the disk with the folder.
  if (Fd d{::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)}; d.fd >= 0) ::fsync(d.fd);
}

void write_text_file(const fs::path& path, const std::string& text, const std::string& argument) {
  check_output_path(path, argument, /*create_parents=*/true);
  if (path.has_parent_path()) {
    std::error_code ec;
    fs::create_directories(path.parent_path(), ec);
    if (ec) throw OutputError(named(argument, path), where(argument, path) + ": cannot create its folder (" + ec.message() + ")");
  }
  write_file_atomically(path, text, argument);
}

std::string last_chars(const std::string& s, std::size_t n) { return s.size() <= n ? s : "..." + s.substr(s.size() - n); }

}  // namespace lina::harness
