// Probe: c10d::TCPStore between two local processes over loopback.
//
// The server process binds a listening socket to 127.0.0.1 on a kernel-chosen
// port, hands it to a master TCPStore (TCPStoreOptions::masterListenFd, so no
// port race and nothing listens beyond loopback), then re-executes itself as
// the client (`--client <port>`). The two exchange keys with set/get/add/wait/
// check; every blocking call is bounded (kTimeout, or kClientStartTimeout for
// the first wait, which includes the client's start-up), and
// the processes synchronise only through the store's blocking wait/get.
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <string>

#include "probe_common.hpp"

extern char** environ;

namespace {

constexpr std::string_view kProbe = "tcpstore";
// Bound on every store operation.
constexpr std::chrono::milliseconds kTimeout{10000};
// Bound on the server's first wait, which also covers starting the client
// process and loading LibTorch into it (seconds on a loaded 2-core machine).
constexpr std::chrono::milliseconds kClientStartTimeout{30000};
const std::string kHost = "127.0.0.1";

using probe::bytes;
using probe::expect;
using probe::text;

// A TCP socket listening on 127.0.0.1:<ephemeral port>.
int listen_on_loopback() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  expect(fd >= 0, std::string("socket(): ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  expect(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0,
         std::string("bind(127.0.0.1:0): ") + std::strerror(errno));
  expect(::listen(fd, 16) == 0, std::string("listen(): ") + std::strerror(errno));
  return fd;
}

std::uint16_t local_port(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof addr;
  expect(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0,
         std::string("getsockname(): ") + std::strerror(errno));
  return ntohs(addr.sin_port);
}

int run_client(std::uint16_t port) {
  c10d::TCPStoreOptions opts;
  opts.port = port;
  opts.isServer = false;
  opts.waitWorkers = false;
  opts.timeout = kTimeout;
  c10d::TCPStore store(kHost, opts);

  store.wait({"server/hello"});  // blocks until the server has set it
  expect(text(store.get("server/hello")) == "hello from server", "client read a wrong server/hello");
  store.set("client/hello", bytes("hello from client"));
  store.add("counter", 1);
  store.set("client/added", bytes("1"));

  store.wait({"server/verdict"});
  const std::string verdict = text(store.get("server/verdict"));
  expect(verdict == "ok", "server verdict: " + verdict);
  store.set("client/done", bytes("1"));  // last use of the store: the server may go away now
  return 0;
}

int run_server(const char* self) {
  c10d::TCPStoreOptions opts;
  opts.port = 0;
  opts.isServer = true;
  opts.waitWorkers = false;
  opts.timeout = kTimeout;
  const int listen_fd = listen_on_loopback();
  opts.masterListenFd = listen_fd;
  c10d::TCPStore store(kHost, opts);
  const std::uint16_t port = store.getPort();
  expect(port != 0 && port == local_port(listen_fd),
         "the master store did not adopt the loopback socket (port " + std::to_string(port) + ")");
  probe::say(kProbe, "master on " + kHost + ":" + std::to_string(port) +
                         (store.isLibUvBackend() ? " (libuv backend)" : " (classic backend)"));

  const std::string port_arg = std::to_string(port);
  char client_flag[] = "--client";
  std::string self_copy = self;
  char* child_argv[] = {self_copy.data(), client_flag, const_cast<char*>(port_arg.c_str()), nullptr};
  pid_t child = -1;
  if (const int rc = ::posix_spawn(&child, "/proc/self/exe", nullptr, nullptr, child_argv, environ); rc != 0) {
    probe::fail(kProbe, std::string("posix_spawn: ") + std::strerror(rc));
  }

  std::string error;
  try {
    store.set("server/hello", bytes("hello from server"));
    store.add("counter", 1);
    store.wait({"client/hello", "client/added"}, kClientStartTimeout);
    expect(text(store.get("client/hello")) == "hello from client", "server read a wrong client/hello");
    const auto total = store.add("counter", 0);
    expect(total == 2, "counter is " + std::to_string(total) + ", expected 2");
    expect(store.check({"server/hello", "client/hello"}), "check() misses a key");

    // A wait on a key nobody sets must give up after its timeout.
    bool timed_out = false;
    const auto t0 = std::chrono::steady_clock::now();
    try {
      store.wait({"nobody/sets/this"}, std::chrono::milliseconds(200));
    } catch (const c10::Error&) {
      timed_out = true;
    }
    const auto waited = std::chrono::steady_clock::now() - t0;
    expect(timed_out, "wait() on a missing key did not time out");
    expect(waited < kTimeout, "wait(200ms) took longer than the store timeout");

    store.set("server/verdict", bytes("ok"));
    store.wait({"client/done"});
  } catch (const std::exception& e) {
    error = e.what();
  }
  if (!error.empty()) {
    ::kill(child, SIGKILL);
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (!error.empty()) probe::fail(kProbe, "server: " + error);
  expect(WIFEXITED(status) && WEXITSTATUS(status) == 0,
         "client process failed (wait status " + std::to_string(status) + ")");
  probe::say(kProbe, "OK: server and client exchanged keys via set/get/add/wait/check");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc == 3 && std::string_view(argv[1]) == "--client") {
      return run_client(static_cast<std::uint16_t>(std::stoi(argv[2])));
    }
    return run_server(argv[0]);
  } catch (const std::exception& e) {
    probe::fail(kProbe, std::string(argc == 3 ? "client: " : "server: ") + e.what());
  }
}
