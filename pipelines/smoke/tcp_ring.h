// The ranks' TCP ring: rank R listens on its port, connects to rank R+1 and
// accepts rank R-1. It carries the CPU ring all-reduce and the bootstrap of
// the GPU path (the NCCL unique id goes round the same ring). Every wait has
// a deadline: a peer that never connects or stalls is an error, not a hang.
// Ranks in other VMs are reached through the host's port forwards
// (provisioner/vm/guest_contract.h): peers are "10.0.2.2:<port>" there.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace kiln::smoke {

struct Endpoint {
    std::string host;
    int port = 0;
};

// "host:port,host:port,..."; false with a message on bad input.
bool parse_peers(const std::string& text, std::vector<Endpoint>* out, std::string* err);

using Deadline = std::chrono::steady_clock::time_point;

class TcpRing {
public:
    ~TcpRing();
    TcpRing(const TcpRing&) = delete;
    TcpRing& operator=(const TcpRing&) = delete;

    // Listens on listen_addr:listen_port (0 = the port of peers[rank]) and
    // links up with both neighbours before `deadline`.
    static std::unique_ptr<TcpRing> connect(int rank, const std::vector<Endpoint>& peers,
                                            const std::string& listen_addr, int listen_port, Deadline deadline,
                                            std::string* err);

    int rank() const { return rank_; }
    int size() const { return size_; }

    // Sends `send_len` bytes to the next rank while receiving `recv_len`
    // from the previous one, both at once (so a ring never deadlocks).
    bool exchange(const void* send, size_t send_len, void* recv, size_t recv_len, Deadline deadline, std::string* err);
    // Rank 0's `data` reaches every rank, round the ring.
    bool broadcast(std::string& data, Deadline deadline, std::string* err);
    // Shuts both links down: the neighbours see them closed (a test fault).
    void drop_links();

private:
    TcpRing() = default;
    int rank_ = 0;
    int size_ = 1;
    int next_fd_ = -1;
    int prev_fd_ = -1;
};

}  // namespace kiln::smoke
