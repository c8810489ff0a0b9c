#include "runner/process/fd.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "runner/common/error.hpp"

namespace runner {

void UniqueFd::reset(int fd) noexcept {
  // close() may report EINTR on some systems; the descriptor is gone either
  // way on Linux, so retrying would close someone else's.
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

Pipe make_pipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    throw Error(std::string("cannot create a pipe: ") + std::strerror(errno), {}, ErrorKind::run);
  return Pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
}

bool write_all(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

std::string read_all(int fd) {
  std::string out;
  char buffer[4096];
  ssize_t n = 0;
  while ((n = ::read(fd, buffer, sizeof buffer)) > 0 || (n < 0 && errno == EINTR))
    if (n > 0) out.append(buffer, static_cast<std::size_t>(n));
  return out;
}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    kill_and_reap();
    pid_ = std::exchange(other.pid_, -1);
  }
  return *this;
}

void ChildProcess::signal(int signal) const noexcept {
  if (pid_ > 0) ::kill(pid_, signal);
}

int ChildProcess::wait() noexcept {
  if (pid_ <= 0) return 0;
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  return status;
}

int ChildProcess::kill_and_reap() noexcept {
  if (pid_ <= 0) return 0;
  ::kill(pid_, SIGKILL);
  return wait();
}

ChildProcess fork_linked(const std::string& what) {
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0)
    throw Error("cannot fork " + what + ": " + std::strerror(errno), {}, ErrorKind::run);
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(125);  // the parent died before prctl
    return ChildProcess();
  }
  return ChildProcess(pid);
}

UniqueFd open_pidfd(const ChildProcess& child) {
  const int fd = static_cast<int>(::syscall(SYS_pidfd_open, child.pid(), 0));
  if (fd < 0)
    throw Error(std::string("cannot watch the run process (pidfd_open): ") + std::strerror(errno),
                errno == EMFILE || errno == ENFILE
                    ? "too many open files: raise the limit (ulimit -n)"
                    : "runner needs Linux 5.3 or newer",
                ErrorKind::run);
  return UniqueFd(fd);
}

int count_open_fds() {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int count = 0;
  while (const dirent* entry = ::readdir(dir))
    if (entry->d_name[0] != '.') ++count;
  ::closedir(dir);
  return count - 1;  // the directory stream's own descriptor
}

}  // namespace runner
