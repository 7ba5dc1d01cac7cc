#include "runtime/trun/dist/TcpBootstrap.h"
#include "runtime/trun/dist/RankGroup.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <utility>
#include <vector>

namespace tcc::trun {
namespace {

using Clock = std::chrono::steady_clock;
constexpr uint32_t kMagic = 0x74636331; // "tcc1"

struct Hello {
  uint32_t magic = kMagic;
  int32_t rank = 0;
  int32_t world_size = 0;
};

class Socket {
public:
  explicit Socket(int fd = -1) : fd_(fd) {}
  ~Socket() {
    if (fd_ >= 0)
      ::close(fd_);
  }
  Socket(Socket &&other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  Socket &operator=(Socket &&other) noexcept {
    std::swap(fd_, other.fd_);
    return *this;
  }
  int fd() const { return fd_; }

private:
  int fd_;
};

int MillisecondsLeft(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() > 0 ? static_cast<int>(left.count()) : 0;
}

// Reads or writes exactly `size` bytes before `deadline`.
absl::Status Transfer(int fd, char *data, size_t size, bool send, Clock::time_point deadline,
                      const std::string &peer) {
  size_t done = 0;
  while (done < size) {
    pollfd p{fd, static_cast<short>(send ? POLLOUT : POLLIN), 0};
    int ready = ::poll(&p, 1, MillisecondsLeft(deadline));
    if (ready == 0)
      return absl::DeadlineExceededError(absl::StrCat("timed out talking to ", peer));
    if (ready < 0 && errno == EINTR)
      continue;
    ssize_t n = send ? ::send(fd, data + done, size - done, MSG_NOSIGNAL)
                     : ::recv(fd, data + done, size - done, 0);
    if (n == 0)
      return absl::UnavailableError(absl::StrCat(peer, " closed the connection"));
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN)
        continue;
      return absl::ErrnoToStatus(errno, absl::StrCat("talking to ", peer));
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status Serve(const RankInfo &info, const BootstrapOptions &o, char *bytes, size_t size,
                   Clock::time_point deadline) {
  Socket listener(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  bool v6 = listener.fd() >= 0;
  if (!v6)
    listener = Socket(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (listener.fd() < 0)
    return absl::ErrnoToStatus(errno, "socket");
  int one = 1, zero = 0;
  ::setsockopt(listener.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int bound = -1;
  if (v6) { // both IPv6 and IPv4 peers
    ::setsockopt(listener.fd(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_any;
    a.sin6_port = htons(static_cast<uint16_t>(o.master_port));
    bound = ::bind(listener.fd(), reinterpret_cast<sockaddr *>(&a), sizeof a);
  } else {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons(static_cast<uint16_t>(o.master_port));
    bound = ::bind(listener.fd(), reinterpret_cast<sockaddr *>(&a), sizeof a);
  }
  if (bound != 0 || ::listen(listener.fd(), 128) != 0)
    return absl::ErrnoToStatus(
        errno, absl::StrCat("rank 0 cannot listen on port ", o.master_port, " (", o.port_source,
                            "; another job may be using it)"));
  std::vector<Socket> peers;
  std::vector<bool> seen(info.world_size, false);
  seen[0] = true;
  int missing = info.world_size - 1;
  while (missing > 0) {
    pollfd p{listener.fd(), POLLIN, 0};
    int ready = ::poll(&p, 1, MillisecondsLeft(deadline));
    if (ready < 0 && errno == EINTR)
      continue;
    if (ready == 0) {
      std::vector<int> absent;
      for (int r = 0; r < info.world_size; ++r)
        if (!seen[r])
          absent.push_back(r);
      return absl::DeadlineExceededError(absl::StrCat(
          "rank 0 waited ", o.timeout_seconds, " s (TCC_DIST_TIMEOUT) on port ", o.master_port,
          " for ranks that never connected: ", absl::StrJoin(absent, ", ")));
    }
    Socket peer(::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC));
    if (peer.fd() < 0)
      continue;
    Hello hello;
    if (!Transfer(peer.fd(), reinterpret_cast<char *>(&hello), sizeof hello, false, deadline,
                  "a connecting rank")
             .ok() ||
        hello.magic != kMagic)
      continue; // not one of ours (a port scan, a stale job)
    if (hello.world_size != info.world_size)
      return absl::FailedPreconditionError(
          absl::StrCat("rank ", hello.rank, " was started with a world size of ", hello.world_size,
                       ", rank 0 with ", info.world_size, ": start all ranks of one job"));
    if (hello.rank <= 0 || hello.rank >= info.world_size || seen[hello.rank])
      return absl::FailedPreconditionError(
          absl::StrCat("two processes claim rank ", hello.rank, " of ", info.world_size));
    seen[hello.rank] = true;
    --missing;
    peers.push_back(std::move(peer));
  }
  for (Socket &peer : peers)
    if (absl::Status s = Transfer(peer.fd(), bytes, size, true, deadline, "a rank"); !s.ok())
      return s;
  return absl::OkStatus();
}

absl::Status Fetch(const RankInfo &info, const BootstrapOptions &o, char *bytes, size_t size,
                   Clock::time_point deadline) {
  std::string master = absl::StrCat(o.master_addr, ":", o.master_port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo *found = nullptr;
  if (int rc = ::getaddrinfo(o.master_addr.c_str(), std::to_string(o.master_port).c_str(), &hints,
                             &found);
      rc != 0)
    return absl::UnavailableError(absl::StrCat("cannot resolve the master address ", o.master_addr,
                                               " (MASTER_ADDR): ", gai_strerror(rc)));
  std::string last_error = "no address";
  // Rank 0 may not listen yet: retry until the deadline.
  while (true) {
    for (addrinfo *a = found; a; a = a->ai_next) {
      Socket s(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
      if (s.fd() < 0)
        continue;
      if (::connect(s.fd(), a->ai_addr, a->ai_addrlen) != 0) {
        last_error = std::strerror(errno);
        continue;
      }
      ::freeaddrinfo(found);
      Hello hello;
      hello.rank = info.rank;
      hello.world_size = info.world_size;
      std::string peer = absl::StrCat("the master ", master, " (rank 0)");
      if (absl::Status st = Transfer(s.fd(), reinterpret_cast<char *>(&hello), sizeof hello, true,
                                     deadline, peer);
          !st.ok())
        return st;
      return Transfer(s.fd(), bytes, size, false, deadline, peer);
    }
    if (Clock::now() >= deadline)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ::freeaddrinfo(found);
  return absl::UnavailableError(absl::StrCat("cannot reach the master ", master,
                                             " (rank 0, MASTER_ADDR:MASTER_PORT) within ",
                                             o.timeout_seconds, " s: ", last_error));
}

} // namespace

absl::StatusOr<BootstrapOptions> BootstrapFromEnvironment(const RankInfo &info) {
  BootstrapOptions o;
  o.master_addr = info.master_addr;
  o.master_port = info.master_port;
  if (o.master_addr.empty()) {
    const char *addr = std::getenv("MASTER_ADDR");
    const char *port = std::getenv("MASTER_PORT");
    if (!addr || !*addr)
      return absl::FailedPreconditionError(absl::StrCat(
          "started as ", info.Describe(), ": a cuda step's ranks meet at MASTER_ADDR:MASTER_PORT "
          "(rank 0's host and a free port) for NCCL's bootstrap; set them (mpirun -x MASTER_ADDR=... "
          "-x MASTER_PORT=...)"));
    o.master_addr = addr;
    o.master_port = kDefaultMasterPort;
    if (port && *port && (!absl::SimpleAtoi(port, &o.master_port) || o.master_port <= 0 ||
                          o.master_port > 65535))
      return absl::InvalidArgumentError(
          absl::StrCat("MASTER_PORT is '", port, "', not a port number"));
  }
  // torchrun's agent hosts its own store (PyTorch's c10d TCPStore) at
  // MASTER_PORT and tells its workers so (TORCHELASTIC_USE_AGENT_STORE):
  // rank 0 cannot listen there, so under torchrun the ranks meet one port
  // above. TCC_BOOTSTRAP_PORT names the port outright.
  if (const char *port = std::getenv("TCC_BOOTSTRAP_PORT"); port && *port) {
    if (!absl::SimpleAtoi(port, &o.master_port) || o.master_port <= 0 || o.master_port > 65535)
      return absl::InvalidArgumentError(
          absl::StrCat("TCC_BOOTSTRAP_PORT is '", port, "', not a port number"));
    o.port_source = "TCC_BOOTSTRAP_PORT";
  } else if (const char *agent = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
             agent && absl::EqualsIgnoreCase(agent, "true")) {
    o.master_port = o.master_port % 65535 + 1;
    o.port_source = "MASTER_PORT + 1: torchrun's store holds MASTER_PORT; TCC_BOOTSTRAP_PORT "
                    "names another";
  }
  absl::StatusOr<double> timeout = DistTimeoutSeconds();
  if (!timeout.ok())
    return timeout.status();
  o.timeout_seconds = *timeout;
  return o;
}

absl::Status ShareBootstrapBytes(const RankInfo &info, const BootstrapOptions &options,
                                 char *bytes, size_t size) {
  Clock::time_point deadline =
      Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(options.timeout_seconds * 1e3));
  return info.rank == 0 ? Serve(info, options, bytes, size, deadline)
                        : Fetch(info, options, bytes, size, deadline);
}

} // namespace tcc::trun
