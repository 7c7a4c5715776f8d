#include "pipelines/smoke/tcp_ring.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

namespace kiln::smoke {

namespace {

using Clock = std::chrono::steady_clock;

bool fail(std::string* err, const std::string& m) {
    if (err) *err = m;
    return false;
}

int ms_left(Deadline d, int cap) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(d - Clock::now()).count();
    if (left <= 0) return 0;
    return static_cast<int>(std::min<long long>(left, cap));
}

void set_nonblocking(int fd) {
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

void set_nodelay(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// Numeric IPv4 first; names through the resolver (guests may use names).
bool resolve(const std::string& host, int port, sockaddr_in* out, std::string* err) {
    std::memset(out, 0, sizeof *out);
    out->sin_family = AF_INET;
    out->sin_port = htons(static_cast<uint16_t>(port));
    if (inet_pton(AF_INET, host.c_str(), &out->sin_addr) == 1) return true;
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || !res)
        return fail(err, "cannot resolve '" + host + "'");
    out->sin_addr = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
    freeaddrinfo(res);
    return true;
}

// Blocking-style transfers on a non-blocking socket, bounded by `deadline`.
bool send_all(int fd, const void* data, size_t len, Deadline deadline, std::string* err) {
    auto* p = static_cast<const char*>(data);
    while (len > 0) {
        ssize_t n = ::send(fd, p, len, MSG_NOSIGNAL);
        if (n > 0) {
            p += n;
            len -= static_cast<size_t>(n);
            continue;
        }
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return fail(err, std::string("send: ") + std::strerror(errno));
        pollfd pfd{fd, POLLOUT, 0};
        int wait = ms_left(deadline, 1000);
        if (wait == 0) return fail(err, "send: the peer stopped reading before the deadline");
        poll(&pfd, 1, wait);
    }
    return true;
}

bool recv_all(int fd, void* data, size_t len, Deadline deadline, std::string* err) {
    auto* p = static_cast<char*>(data);
    while (len > 0) {
        ssize_t n = ::recv(fd, p, len, 0);
        if (n > 0) {
            p += n;
            len -= static_cast<size_t>(n);
            continue;
        }
        if (n == 0) return fail(err, "recv: the peer closed the connection");
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return fail(err, std::string("recv: ") + std::strerror(errno));
        pollfd pfd{fd, POLLIN, 0};
        int wait = ms_left(deadline, 1000);
        if (wait == 0) return fail(err, "recv: nothing from the peer before the deadline");
        poll(&pfd, 1, wait);
    }
    return true;
}

}  // namespace

bool parse_peers(const std::string& text, std::vector<Endpoint>* out, std::string* err) {
    out->clear();
    size_t start = 0;
    while (start <= text.size()) {
        size_t comma = text.find(',', start);
        std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        auto colon = item.rfind(':');
        if (item.empty() || colon == std::string::npos || colon == 0 || colon + 1 == item.size())
            return fail(err, "--peers: expected host:port, got '" + item + "'");
        int port = 0;
        for (char c : item.substr(colon + 1)) {
            if (c < '0' || c > '9') return fail(err, "--peers: bad port in '" + item + "'");
            port = port * 10 + (c - '0');
            if (port > 65535) return fail(err, "--peers: port out of range in '" + item + "'");
        }
        out->push_back({item.substr(0, colon), port});
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    if (out->empty()) return fail(err, "--peers: empty list");
    return true;
}

void TcpRing::drop_links() {
    if (next_fd_ >= 0) ::shutdown(next_fd_, SHUT_RDWR);
    if (prev_fd_ >= 0) ::shutdown(prev_fd_, SHUT_RDWR);
}

TcpRing::~TcpRing() {
    if (next_fd_ >= 0) ::close(next_fd_);
    if (prev_fd_ >= 0) ::close(prev_fd_);
}

std::unique_ptr<TcpRing> TcpRing::connect(int rank, const std::vector<Endpoint>& peers, const std::string& listen_addr,
                                          int listen_port, Deadline deadline, std::string* err) {
    const int n = static_cast<int>(peers.size());
    if (rank < 0 || rank >= n) {
        fail(err, "--rank " + std::to_string(rank) + " is not in 0.." + std::to_string(n - 1));
        return nullptr;
    }
    std::unique_ptr<TcpRing> ring(new TcpRing);
    ring->rank_ = rank;
    ring->size_ = n;
    if (n == 1) return ring;

    const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    sockaddr_in listen_sa{}, next_sa{};
    if (!resolve(listen_addr, listen_port ? listen_port : peers[static_cast<size_t>(rank)].port, &listen_sa, err))
        return nullptr;
    if (!resolve(peers[static_cast<size_t>(next)].host, peers[static_cast<size_t>(next)].port, &next_sa, err))
        return nullptr;

    int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(lfd, reinterpret_cast<sockaddr*>(&listen_sa), sizeof listen_sa) != 0 || ::listen(lfd, 16) != 0) {
        fail(err, "listen on " + listen_addr + ":" + std::to_string(ntohs(listen_sa.sin_port)) + ": " +
                      std::strerror(errno));
        ::close(lfd);
        return nullptr;
    }
    set_nonblocking(lfd);

    const std::string next_name =
        peers[static_cast<size_t>(next)].host + ":" + std::to_string(peers[static_cast<size_t>(next)].port);
    int connecting = -1;
    // Sent our rank, waiting for next's answer: a forwarder (QEMU's user
    // networking hostfwd) accepts a connection before the guest behind it
    // listens, so only next's answer proves the link.
    int awaiting = -1;
    auto ack_by = Clock::now();
    std::vector<int> hello;  // accepted, rank not yet read
    auto retry_at = Clock::now();
    std::string last_connect_error = "no answer";
    auto cleanup = [&] {
        ::close(lfd);
        if (connecting >= 0) ::close(connecting);
        if (awaiting >= 0) ::close(awaiting);
        for (int fd : hello) ::close(fd);
    };

    while (ring->next_fd_ < 0 || ring->prev_fd_ < 0) {
        if (Clock::now() >= deadline) {
            cleanup();
            if (ring->next_fd_ < 0)
                fail(err, "rank " + std::to_string(next) + " at " + next_name + " unreachable before the deadline (" +
                              last_connect_error + ")");
            else
                fail(err, "rank " + std::to_string(prev) + " never connected before the deadline");
            return nullptr;
        }
        if (awaiting >= 0 && Clock::now() >= ack_by) {
            last_connect_error = "connected, but no answer from the rank behind it";
            ::close(awaiting);
            awaiting = -1;
            retry_at = Clock::now() + std::chrono::milliseconds(100);
        }
        if (ring->next_fd_ < 0 && connecting < 0 && awaiting < 0 && Clock::now() >= retry_at) {
            connecting = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
            set_nonblocking(connecting);
            int rc = ::connect(connecting, reinterpret_cast<sockaddr*>(&next_sa), sizeof next_sa);
            if (rc != 0 && errno != EINPROGRESS) {
                last_connect_error = std::strerror(errno);
                ::close(connecting);
                connecting = -1;
                retry_at = Clock::now() + std::chrono::milliseconds(100);
            }
        }
        // Where each socket sits in `fds`: a socket that changes role below
        // (connecting -> awaiting) must not read another socket's entry.
        std::vector<pollfd> fds;
        fds.push_back({lfd, POLLIN, 0});
        const size_t no_entry = static_cast<size_t>(-1);
        size_t connecting_at = no_entry, awaiting_at = no_entry;
        if (connecting >= 0) {
            connecting_at = fds.size();
            fds.push_back({connecting, POLLOUT, 0});
        }
        if (awaiting >= 0) {
            awaiting_at = fds.size();
            fds.push_back({awaiting, POLLIN, 0});
        }
        const size_t hello_at = fds.size();
        for (int fd : hello) fds.push_back({fd, POLLIN, 0});
        poll(fds.data(), fds.size(), std::max(1, ms_left(deadline, 100)));

        // A connection accepted now has no entry in `fds` yet: it joins
        // `hello` after this round, and is polled from the next one.
        int accepted = -1;
        if (fds[0].revents & POLLIN) accepted = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (connecting_at != no_entry) {
            if (fds[connecting_at].revents) {
                int so = 0;
                socklen_t len = sizeof so;
                getsockopt(connecting, SOL_SOCKET, SO_ERROR, &so, &len);
                if (so == 0) {
                    const int32_t me = htonl(static_cast<uint32_t>(rank));
                    std::string e;
                    if (send_all(connecting, &me, sizeof me, deadline, &e)) {
                        awaiting = connecting;
                        ack_by = std::min(deadline, Clock::now() + std::chrono::seconds(30));
                    } else {
                        last_connect_error = e;
                        ::close(connecting);
                        retry_at = Clock::now() + std::chrono::milliseconds(100);
                    }
                } else {
                    last_connect_error = std::strerror(so);
                    ::close(connecting);
                    retry_at = Clock::now() + std::chrono::milliseconds(100);
                }
                connecting = -1;
            }
        }
        if (awaiting_at != no_entry) {
            if (fds[awaiting_at].revents) {
                int32_t who = -1;
                std::string e;
                if (recv_all(awaiting, &who, sizeof who, std::min(deadline, Clock::now() + std::chrono::seconds(2)),
                             &e) &&
                    static_cast<int>(ntohl(static_cast<uint32_t>(who))) == next) {
                    set_nodelay(awaiting);
                    ring->next_fd_ = awaiting;
                } else {
                    last_connect_error = e.empty() ? "answered as another rank" : e;
                    ::close(awaiting);
                    retry_at = Clock::now() + std::chrono::milliseconds(100);
                }
                awaiting = -1;
            }
        }
        std::vector<int> still;
        size_t k = hello_at;
        for (int fd : hello) {
            if (!(fds[k++].revents & (POLLIN | POLLHUP | POLLERR))) {
                still.push_back(fd);
                continue;
            }
            int32_t who = -1;
            std::string e;
            const int32_t me = htonl(static_cast<uint32_t>(rank));
            if (recv_all(fd, &who, sizeof who, std::min(deadline, Clock::now() + std::chrono::seconds(2)), &e) &&
                static_cast<int>(ntohl(static_cast<uint32_t>(who))) == prev && ring->prev_fd_ < 0 &&
                send_all(fd, &me, sizeof me, std::min(deadline, Clock::now() + std::chrono::seconds(2)), &e)) {
                set_nodelay(fd);
                ring->prev_fd_ = fd;
            } else {
                ::close(fd);  // a stranger or a duplicate: not our ring
            }
        }
        hello = std::move(still);
        if (accepted >= 0) hello.push_back(accepted);
    }
    ::close(lfd);
    for (int fd : hello) ::close(fd);
    return ring;
}

bool TcpRing::exchange(const void* send, size_t send_len, void* recv, size_t recv_len, Deadline deadline,
                       std::string* err) {
    if (size_ == 1) return fail(err, "exchange on a ring of one");
    auto* sp = static_cast<const char*>(send);
    auto* rp = static_cast<char*>(recv);
    size_t sent = 0, got = 0;
    const int next = (rank_ + 1) % size_, prev = (rank_ + size_ - 1) % size_;
    while (sent < send_len || got < recv_len) {
        pollfd fds[2] = {{next_fd_, static_cast<short>(sent < send_len ? POLLOUT : 0), 0},
                         {prev_fd_, static_cast<short>(got < recv_len ? POLLIN : 0), 0}};
        int wait = ms_left(deadline, 1000);
        if (wait == 0)
            return fail(err, sent < send_len ? "rank " + std::to_string(next) + " stopped reading (stalled peer)"
                                             : "rank " + std::to_string(prev) + " stopped sending (stalled peer)");
        if (poll(fds, 2, wait) < 0 && errno != EINTR) return fail(err, std::string("poll: ") + std::strerror(errno));
        if (sent < send_len && (fds[0].revents & (POLLOUT | POLLERR | POLLHUP))) {
            ssize_t n = ::send(next_fd_, sp + sent, send_len - sent, MSG_NOSIGNAL);
            if (n > 0)
                sent += static_cast<size_t>(n);
            else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                return fail(err, "send to rank " + std::to_string(next) + ": " + std::strerror(errno));
        }
        if (got < recv_len && (fds[1].revents & (POLLIN | POLLERR | POLLHUP))) {
            ssize_t n = ::recv(prev_fd_, rp + got, recv_len - got, 0);
            if (n > 0)
                got += static_cast<size_t>(n);
            else if (n == 0)
                return fail(err, "rank " + std::to_string(prev) + " closed the connection");
            else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                return fail(err, "recv from rank " + std::to_string(prev) + ": " + std::strerror(errno));
        }
    }
    return true;
}

bool TcpRing::broadcast(std::string& data, Deadline deadline, std::string* err) {
    if (size_ == 1) return true;
    uint64_t len = data.size();
    if (rank_ != 0) {
        if (!recv_all(prev_fd_, &len, sizeof len, deadline, err)) return false;
        if (len > (64u << 20)) return fail(err, "broadcast: implausible length");
        data.resize(len);
        if (len && !recv_all(prev_fd_, data.data(), len, deadline, err)) return false;
    }
    if ((rank_ + 1) % size_ == 0) return true;  // the last rank: rank 0 has it
    if (!send_all(next_fd_, &len, sizeof len, deadline, err)) return false;
    return len == 0 || send_all(next_fd_, data.data(), len, deadline, err);
}

}  // namespace kiln::smoke
