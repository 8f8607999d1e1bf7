#include "child.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <exception>

namespace bpbench {
namespace {

bool writeAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

void* mapDontFork(size_t bytes) {
  if (bytes == 0) bytes = 1;
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  ::madvise(p, bytes, MADV_DONTFORK);
  return p;
}

void unmapDontFork(void* p, size_t bytes) { ::munmap(p, bytes ? bytes : 1); }

Bytes runIsolated(const std::function<void(Bytes&)>& work, bool fork) {
  Bytes out;
  if (!fork) {
    work(out);
    return out;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error("pipe() failed");
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork() failed");
  if (pid == 0) {
    ::close(fds[0]);
    // Status byte: 0 = result follows, 1 = error message follows.
    Bytes result;
    char status = 0;
    std::string error;
    try {
      work(result);
    } catch (const std::exception& e) {
      status = 1;
      error = e.what();
    }
    std::vector<char> msg(1, status);
    if (status == 0) {
      msg.insert(msg.end(), result.raw().begin(), result.raw().end());
    } else {
      msg.insert(msg.end(), error.begin(), error.end());
    }
    std::fflush(stderr);
    const bool ok = writeAll(fds[1], msg.data(), msg.size());
    ::close(fds[1]);
    // _exit: no static destructors of state shared with the parent image.
    ::_exit(ok ? 0 : 3);
  }
  ::close(fds[1]);
  std::vector<char> msg;
  char buf[1 << 16];
  for (;;) {
    const ssize_t r = ::read(fds[0], buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    msg.insert(msg.end(), buf, buf + r);
  }
  ::close(fds[0]);
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(wstatus))
    throw std::runtime_error(std::string("child process killed by signal ") +
                             std::to_string(WTERMSIG(wstatus)) + " (" +
                             strsignal(WTERMSIG(wstatus)) + ")");
  if (msg.empty() || !WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0)
    throw std::runtime_error("child process failed (exit status " +
                             std::to_string(WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1) + ")");
  if (msg[0] != 0) throw std::runtime_error(std::string(msg.begin() + 1, msg.end()));
  out.raw().assign(msg.begin() + 1, msg.end());
  return out;
}

}  // namespace bpbench
