#include "pipelines/smoke/rdma_checks.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "pipelines/smoke/child_process.h"

namespace kiln::smoke {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// How long a round waits for its perftest server to listen, and how long a
// server may outlive its client's bound (it prints its table after).
constexpr std::chrono::milliseconds kListenWait{10000};
constexpr std::chrono::milliseconds kServerGrace{5000};

using nlohmann::json;

namespace {

std::optional<std::string> read_line(const fs::path& p) {
    std::ifstream in(p);
    std::string s;
    if (!in || !std::getline(in, s)) return std::nullopt;
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
    return s;
}

bool zero_gid(const std::string& gid) {
    return gid.empty() || gid.find_first_not_of("0:") == std::string::npos;
}

bool ipv4_mapped(const std::string& gid) {
    return gid.rfind("0000:0000:0000:0000:0000:ffff:", 0) == 0;
}

// The GID perftest should use on a RoCE port (see the header).
void choose_gid(const fs::path& port_dir, RdmaPort* p) {
    std::map<int, std::string> v2;  // index -> gid
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(port_dir / "gids", ec)) {
        int idx = 0;
        try {
            idx = std::stoi(e.path().filename().string());
        } catch (...) {
            continue;
        }
        auto gid = read_line(e.path());
        if (!gid || zero_gid(*gid)) continue;
        // Reading the type of an unused entry fails (EINVAL): skipped above.
        auto type = read_line(port_dir / "gid_attrs" / "types" / std::to_string(idx));
        if (!type || *type != "RoCE v2") continue;
        v2[idx] = *gid;
    }
    for (const auto& [idx, gid] : v2) {
        if (!ipv4_mapped(gid)) continue;
        p->gid_index = idx;
        p->gid = gid;
        break;
    }
    if (p->gid_index < 0 && !v2.empty()) {
        p->gid_index = v2.begin()->first;
        p->gid = v2.begin()->second;
    }
    if (p->gid_index >= 0)
        p->netdev = read_line(port_dir / "gid_attrs" / "ndevs" / std::to_string(p->gid_index)).value_or("");
}

std::string trim(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r' || s.back() == '\t')) s.pop_back();
    size_t i = 0;
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
    return s.substr(i);
}

// A program's error lines, else its last lines, on one line, for a detail.
// perftest writes errors unbuffered to stderr and its table buffered to
// stdout, so in one pipe the error comes before the table it interrupted.
std::string tail_of(const std::string& out, size_t lines = 3) {
    std::vector<std::string> all, errors;
    std::istringstream in(out);
    std::string l;
    while (std::getline(in, l)) {
        l = trim(l);
        if (l.empty() || l.find_first_not_of("-*") == std::string::npos) continue;
        all.push_back(l);
        for (const char* mark : {"rror", "ailed", "ouldn't", "Unable", "state is"})
            if (l.find(mark) != std::string::npos) {
                errors.push_back(l);
                break;
            }
    }
    if (!errors.empty()) all = errors;
    std::string s;
    for (size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i)
        s += (s.empty() ? "" : " / ") + all[i];
    return s.empty() ? "no output" : s;
}

std::string fmt_gbs(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.4g", v);
    return b;
}

// What a rank tells the others before the rounds: its rails.
json rails_json(const std::vector<RdmaPort>& ports) {
    json rails = json::array();
    for (const auto& p : ports) rails.push_back({{"label", p.label()}, {"active", p.active()}});
    return rails;
}

struct PairResult {
    int partner = 0;
    size_t rail = 0;
    bool ok = false;
    double gbs = 0;  // GB/s
    std::string why;
};

std::vector<std::string> perftest_args(const RdmaOptions& o, const RdmaPort& p, int port, const std::string& gpu) {
    std::vector<std::string> a = {o.perftest,
                                  "-d",
                                  p.device,
                                  "-i",
                                  std::to_string(p.port),
                                  "-s",
                                  std::to_string(o.bytes),
                                  "-n",
                                  std::to_string(o.iterations),
                                  "-F",
                                  "--report_gbits",
                                  "-u",
                                  std::to_string(o.qp_timeout),
                                  "-p",
                                  std::to_string(port)};
    if (p.gid_index >= 0) {
        a.push_back("-x");
        a.push_back(std::to_string(p.gid_index));
    }
    if (!gpu.empty()) a.push_back("--use_cuda_bus_id=" + gpu);
    return a;
}

}  // namespace

std::string RdmaPort::label() const {
    std::string s = device + " port " + std::to_string(port);
    if (!netdev.empty()) s += " (" + netdev + ")";
    return s;
}

std::string pci_function_of(const std::string& device_link, std::string* path) {
    std::error_code ec;
    const fs::path real = fs::canonical(device_link, ec);
    if (ec) return "";
    // "0000:03:00.0": domain, bus, device, function.
    auto is_bdf = [](const std::string& c) {
        if (c.size() != 12 || c[4] != ':' || c[7] != ':' || c[10] != '.') return false;
        for (size_t i : {0u, 1u, 2u, 3u, 5u, 6u, 8u, 9u})
            if (!std::isxdigit(static_cast<unsigned char>(c[i]))) return false;
        return c[11] >= '0' && c[11] <= '7';
    };
    std::string found;
    fs::path upto, at;
    for (const auto& part : real) {
        upto /= part;
        if (is_bdf(part.string())) {
            found = part.string();
            at = upto;
        }
    }
    if (path) *path = at.string();
    return found;
}

std::vector<PciFunction> nvidia_gpus(const std::string& sysfs_root) {
    std::vector<PciFunction> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(fs::path(sysfs_root) / "bus" / "pci" / "devices", ec)) {
        const std::string cls = read_line(e.path() / "class").value_or("");
        if (read_line(e.path() / "vendor").value_or("") != "0x10de") continue;
        if (cls.rfind("0x0300", 0) != 0 && cls.rfind("0x0302", 0) != 0) continue;
        PciFunction f;
        f.address = pci_function_of(e.path().string(), &f.path);
        if (!f.address.empty()) out.push_back(std::move(f));
    }
    std::sort(out.begin(), out.end(), [](const PciFunction& a, const PciFunction& b) { return a.address < b.address; });
    return out;
}

std::string nearest_gpu(const RdmaPort& port, const std::vector<PciFunction>& gpus) {
    if (port.pci_path.empty()) return "";
    const fs::path mine(port.pci_path);
    std::string best;
    long best_common = -1;
    for (const auto& g : gpus) {  // address order: the first of equals wins
        long common = 0;
        const fs::path theirs(g.path);
        for (auto a = mine.begin(), b = theirs.begin(); a != mine.end() && b != theirs.end() && *a == *b; ++a, ++b)
            ++common;
        if (common > best_common) {
            best_common = common;
            best = g.address;
        }
    }
    return best;
}

bool perftest_has_gpu_memory(const std::string& perftest, std::chrono::milliseconds bound, std::string* why) {
    // perftest prints its usage and exits non-zero: only the text counts.
    const ChildResult r = run_child({perftest, "--help"}, Clock::now() + bound);
    if (!r.error.empty()) {
        if (why) *why = perftest + " --help could not run: " + r.error;
        return false;
    }
    if (r.output.find("--use_cuda_bus_id") != std::string::npos) return true;
    if (why) *why = perftest + " was built without CUDA (its --help lists no --use_cuda_bus_id)";
    return false;
}

std::vector<RdmaPort> rdma_ports(const std::string& sysfs_root, std::string* err) {
    std::vector<RdmaPort> out;
    const fs::path cls = fs::path(sysfs_root) / "class" / "infiniband";
    std::error_code ec;
    if (!fs::exists(cls, ec)) {
        if (err) *err = cls.string() + " does not exist (no RDMA driver loaded)";
        return out;
    }
    std::vector<std::string> devices;
    for (const auto& e : fs::directory_iterator(cls, ec)) devices.push_back(e.path().filename().string());
    std::sort(devices.begin(), devices.end());
    for (const auto& dev : devices) {
        std::vector<int> ports;
        for (const auto& e : fs::directory_iterator(cls / dev / "ports", ec)) {
            try {
                ports.push_back(std::stoi(e.path().filename().string()));
            } catch (...) {
            }
        }
        std::sort(ports.begin(), ports.end());
        for (int n : ports) {
            const fs::path dir = cls / dev / "ports" / std::to_string(n);
            RdmaPort p;
            p.device = dev;
            p.port = n;
            // "4: ACTIVE" -> "ACTIVE"
            const std::string state = read_line(dir / "state").value_or("unreadable");
            const size_t colon = state.find(':');
            p.state = colon == std::string::npos ? state : trim(state.substr(colon + 1));
            p.link_layer = read_line(dir / "link_layer").value_or("");
            if (p.link_layer == "Ethernet") choose_gid(dir, &p);
            // A hardware device's own function; Soft-RoCE has none, its
            // network interface's is the NIC it runs on.
            p.pci = pci_function_of((cls / dev / "device").string(), &p.pci_path);
            if (p.pci.empty() && !p.netdev.empty())
                p.pci = pci_function_of((fs::path(sysfs_root) / "class" / "net" / p.netdev / "device").string(),
                                        &p.pci_path);
            out.push_back(std::move(p));
        }
    }
    if (out.empty() && err) *err = "no RDMA device under " + cls.string();
    return out;
}

double pair_write_gbs(const PerftestFigure& fig, std::chrono::nanoseconds client_wall, std::string* note) {
    const double reported = fig.average_gbit_precise() / 8.0;
    if (note) note->clear();
    const double seconds = std::chrono::duration<double>(client_wall).count();
    if (seconds <= 0) return reported;
    const double bound = static_cast<double>(fig.bytes) * static_cast<double>(fig.iterations) / seconds / 1e9;
    if (reported >= bound) return reported;
    if (note)
        *note = "perftest's clock said " + fmt_gbs(reported) + " GB/s; its run of " + fmt_gbs(seconds) +
                " s moved at least " + fmt_gbs(bound);
    return bound;
}

std::optional<PerftestFigure> parse_perftest_bw(const std::string& output) {
    // The header line names the columns; the figures are the next line
    // that starts with a number.
    const size_t head = output.find("BW average[Gb/sec]");
    if (head == std::string::npos) return std::nullopt;
    std::istringstream in(
        output.substr(output.find('\n', head) == std::string::npos ? output.size() : output.find('\n', head) + 1));
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream f(line);
        PerftestFigure fig;
        if (f >> fig.bytes >> fig.iterations >> fig.peak_gbit >> fig.average_gbit) {
            if (fig.bytes <= 0 || fig.iterations <= 0 || fig.average_gbit < 0) return std::nullopt;
            if (!(f >> fig.message_rate_mpps) || fig.message_rate_mpps < 0) fig.message_rate_mpps = 0;
            return fig;
        }
        if (trim(line).find_first_not_of('-') != std::string::npos) return std::nullopt;
    }
    return std::nullopt;
}

bool ring_allgather(TcpRing& ring, const std::string& mine, std::vector<std::string>* all, Deadline deadline,
                    std::string* err) {
    const int n = ring.size();
    all->assign(static_cast<size_t>(n), "");
    (*all)[static_cast<size_t>(ring.rank())] = mine;
    std::string carry = mine;
    for (int step = 0; step < n - 1; ++step) {
        uint64_t send_len = carry.size(), recv_len = 0;
        if (!ring.exchange(&send_len, sizeof send_len, &recv_len, sizeof recv_len, deadline, err)) return false;
        if (recv_len > (16u << 20)) {
            if (err) *err = "a ring member sent " + std::to_string(recv_len) + " bytes for its RDMA rails";
            return false;
        }
        std::string got(recv_len, '\0');
        if (!ring.exchange(carry.data(), carry.size(), got.data(), got.size(), deadline, err)) return false;
        // What arrives at step s left rank r-1-s.
        const int from = ((ring.rank() - 1 - step) % n + n) % n;
        (*all)[static_cast<size_t>(from)] = got;
        carry = std::move(got);
    }
    return true;
}

std::chrono::milliseconds rdma_checks_bound(int ranks, int rails, const RdmaOptions& o) {
    const int rounds = std::max(1, ranks - 1);
    // Per round and rail: the server's start (at most kListenWait), the
    // clients' runs with their retries (per_run), the servers' end (at most
    // kServerGrace past that), and two barriers.
    const auto per = o.per_run + std::min(o.per_run, kListenWait) + kServerGrace + std::chrono::seconds(30);
    return per * rounds * std::max(1, rails) + std::chrono::seconds(30);
}

Check rdma_ports_check(const std::vector<RdmaPort>& ports, const std::string& err) {
    Check down{"rdma_ports_down", 0, std::nullopt, "ports", "<="};
    std::vector<std::string> down_labels;
    for (const auto& p : ports)
        if (!p.active()) down_labels.push_back(p.label() + " is " + p.state);
    down.figure = static_cast<double>(down_labels.size());
    if (ports.empty()) {
        down.figure = 1;
        down.verdict = Verdict::Fail;
        down.detail = err.empty() ? "no RDMA device" : err;
    } else if (!down_labels.empty()) {
        down.verdict = Verdict::Fail;
        for (const auto& l : down_labels) down.detail += (down.detail.empty() ? "" : "; ") + l;
    } else {
        down.verdict = Verdict::Pass;
        down.detail = std::to_string(ports.size()) + " port(s) active:";
        for (const auto& p : ports) down.detail += " " + p.label();
    }
    return down;
}

std::vector<Check> rdma_checks(TcpRing* ring, int rank, const std::vector<RdmaPeer>& peers, const RdmaOptions& o,
                               Deadline deadline, json* evidence) {
    Check unreachable{"rdma_unreachable_peers", 0, std::nullopt, "peers", "<="};
    Check bw{"rdma_write_bw_gbps", 0, std::nullopt, "GB/s", ">="};
    std::string err;
    const std::vector<RdmaPort> ports = o.passive ? std::vector<RdmaPort>{} : rdma_ports(o.sysfs_root, &err);
    const Check down = rdma_ports_check(ports, err);
    auto finish = [&](const std::string& why_all) {
        for (Check* c : {&unreachable, &bw}) {
            if (c->verdict != Verdict::Fail && !why_all.empty()) {
                c->verdict = Verdict::Fail;
                c->detail = why_all;
            }
        }
        if (o.passive) return std::vector<Check>{};
        return std::vector<Check>{down, unreachable, bw};
    };

    const int n = ring ? ring->size() : 1;
    if (static_cast<int>(peers.size()) != n)
        return finish("kiln-smoke was given " + std::to_string(peers.size()) + " RDMA peers for a ring of " +
                      std::to_string(n));

    // Every rank's rails, so a rank knows what its partners have.
    std::vector<json> rails_of(static_cast<size_t>(n));
    rails_of[static_cast<size_t>(rank)] = rails_json(ports);
    if (ring) {
        std::vector<std::string> all;
        if (!ring_allgather(*ring, rails_json(ports).dump(), &all, deadline, &err))
            return finish("the ring broke before the RDMA rounds: " + err);
        for (int r = 0; r < n; ++r) {
            const json j = json::parse(all[static_cast<size_t>(r)], nullptr, false);
            rails_of[static_cast<size_t>(r)] = j.is_array() ? j : json::array();
        }
    }
    size_t rails = 0;
    for (const auto& r : rails_of) rails = std::max(rails, r.size());

    // Which memory each rail writes from (RdmaOptions::gpu_memory).
    std::vector<std::string> rail_gpu(ports.size());
    std::string memory_note;
    if (o.gpu_memory == "off") {
        memory_note = "--rdma-gpu-memory off";
    } else if (ports.empty()) {
        memory_note = "no RDMA device";
    } else {
        const auto gpus = nvidia_gpus(o.sysfs_root);
        if (gpus.empty()) {
            memory_note = "no NVIDIA GPU in this VM";
        } else if (perftest_has_gpu_memory(o.perftest, std::chrono::seconds(10), &memory_note)) {
            for (size_t i = 0; i < ports.size(); ++i) {
                rail_gpu[i] = nearest_gpu(ports[i], gpus);
                if (rail_gpu[i].empty() && memory_note.empty())
                    memory_note = ports[i].device + " has no PCI function to find its nearest GPU by";
            }
        }
    }
    const bool gpu_memory = !ports.empty() && memory_note.empty();

    auto barrier = [&](std::string* why) {
        if (!ring) return true;
        std::vector<std::string> all;
        return ring_allgather(*ring, "", &all, deadline, why);
    };

    std::vector<PairResult> results;
    std::string broke;
    const int rounds = std::max(1, n - 1);
    for (int k = 1; k <= rounds && broke.empty(); ++k) {
        const int partner = (rank + k) % n;
        for (size_t i = 0; i < rails && broke.empty(); ++i) {
            const bool have = i < ports.size();
            // This rank serves rank - k on its rail i.
            Child server;
            bool serving = false;
            if (have) {
                serving = server.start(perftest_args(o, ports[i], o.listen_port, rail_gpu[i]));
                if (serving) {
                    // perftest prints this once it listens. Only a head
                    // start for the clients, which retry their setup within
                    // their own bound: a server that does not listen (a port
                    // that is down can keep perftest from it) is not waited
                    // for longer than kListenWait.
                    server.wait_for_output("Waiting for client",
                                           std::min(deadline, Clock::now() + std::min(o.per_run, kListenWait)));
                }
            }
            if (!barrier(&err)) {
                broke = "the ring broke in RDMA round " + std::to_string(k) + ": " + err;
                break;
            }
            // Every rank's client starts now, with one bound; each server
            // ends with its client, or is killed kServerGrace past that same
            // bound (not a bound past this rank's own client's end: a round
            // then took three pair timeouts).
            const auto round_end = std::min(deadline, Clock::now() + o.per_run);
            if (o.passive) {
                if (!barrier(&err)) broke = "the ring broke after RDMA round " + std::to_string(k) + ": " + err;
                continue;
            }
            PairResult pr{partner, i};
            const RdmaPeer& peer = peers[static_cast<size_t>(partner)];
            const json& theirs = rails_of[static_cast<size_t>(partner)];
            if (!have) {
                pr.why = "this VM has no rail " + std::to_string(i);
            } else if (peer.port <= 0) {
                pr.why = "its VM has no RDMA checks configured (no RDMA port in the VM's smoke config)";
            } else if (i >= theirs.size()) {
                pr.why = "it has no rail " + std::to_string(i);
            } else {
                std::vector<std::string> args = perftest_args(o, ports[i], peer.port, rail_gpu[i]);
                args.push_back(peer.host);
                const auto run_end = round_end;
                ChildResult cr;
                // perftest's setup connection goes through a forward that
                // answers before the server behind it listens: a client that
                // got nothing back from setup tries again, until its bound.
                auto setup_failed = [](const ChildResult& r) {
                    return r.exit_code != 0 && !r.timed_out && r.error.empty() &&
                           (r.output.find("Couldn't connect") != std::string::npos ||
                            r.output.find("Failed to exchange data") != std::string::npos ||
                            r.output.find("Unable to read from socket") != std::string::npos);
                };
                int tries = 0;
                Clock::time_point ran_from;
                for (;;) {
                    ++tries;
                    ran_from = Clock::now();
                    cr = run_child(args, run_end);
                    if (!setup_failed(cr) || Clock::now() + std::chrono::seconds(2) >= run_end) break;
                    std::this_thread::sleep_for(std::chrono::seconds(1));
                }
                auto fig = cr.exit_code == 0 ? parse_perftest_bw(cr.output) : std::nullopt;
                const std::string their_label = theirs[i].value("label", "rail " + std::to_string(i));
                const std::string pair = ports[i].label() + " -> " + their_label;
                if (fig) {
                    pr.ok = true;
                    std::string note;
                    pr.gbs = pair_write_gbs(*fig, Clock::now() - ran_from, &note);
                    pr.why = note.empty() ? pair : pair + " (" + note + ")";
                } else if (!cr.error.empty()) {
                    pr.why = pair + ": " + cr.error;
                } else if (cr.timed_out) {
                    pr.why = pair + ": no answer within " + std::to_string(o.per_run.count() / 1000) + " s (" +
                             tail_of(cr.output) + ")";
                } else {
                    pr.why = pair + ": " + o.perftest + " exited " + std::to_string(cr.exit_code) +
                             (tries > 1 ? " after " + std::to_string(tries) + " tries" : std::string()) + " (" +
                             tail_of(cr.output) + ")";
                }
                if (!theirs[i].value("active", true)) pr.why += "; its port is not active";
            }
            results.push_back(pr);
            // The server ends on its own once its client has; one whose
            // client gave up is killed at the bound. Only then the barrier,
            // so the next round's server finds the port free.
            if (serving) server.wait(std::min(deadline, round_end + kServerGrace));
            if (!barrier(&err)) broke = "the ring broke after RDMA round " + std::to_string(k) + ": " + err;
        }
    }

    std::set<int> bad;
    double slowest = -1;
    std::string failures, figures;
    json ev = {{"ports_down", json::array()}, {"unreachable", json::array()}, {"pairs", json::array()}};
    for (const auto& p : ports)
        if (!p.active()) ev["ports_down"].push_back(p.label());
    ev["rails"] = json::array();
    for (size_t i = 0; i < ports.size(); ++i)
        ev["rails"].push_back({{"rail", i},
                               {"device", ports[i].device},
                               {"port", ports[i].port},
                               {"netdev", ports[i].netdev},
                               {"pci", ports[i].pci},
                               {"active", ports[i].active()},
                               {"gpu", rail_gpu[i]}});
    ev["memory"] = gpu_memory ? "gpu" : "host";
    if (!gpu_memory) ev["memory_note"] = memory_note;
    for (const auto& r : results) {
        const RdmaPeer& peer = peers[static_cast<size_t>(r.partner)];
        const std::string who = peer.name + " (rank " + std::to_string(r.partner) + ")";
        if (r.ok)
            ev["pairs"].push_back({{"vm", peer.name}, {"rank", r.partner}, {"rail", r.rail}, {"gbps", r.gbs}});
        else
            ev["unreachable"].push_back({{"vm", peer.name}, {"rank", r.partner}, {"rail", r.rail}, {"why", r.why}});
        if (r.ok) {
            slowest = slowest < 0 ? r.gbs : std::min(slowest, r.gbs);
            figures += (figures.empty() ? "" : "; ") + who + " " + r.why + ": " + fmt_gbs(r.gbs) + " GB/s";
        } else {
            bad.insert(r.partner);
            failures += (failures.empty() ? "" : "; ") + who + " rail " + std::to_string(r.rail) + ": " + r.why;
        }
    }
    unreachable.figure = static_cast<double>(bad.size());
    if (!bad.empty()) {
        unreachable.verdict = Verdict::Fail;
        unreachable.detail = "cannot RDMA-write to " + failures;
    } else if (!results.empty()) {
        unreachable.verdict = Verdict::Pass;
        unreachable.detail = "wrote to every member of the ring on every rail";
    }
    std::string memory = "host memory (" + memory_note + ")";
    if (gpu_memory) {
        memory = "GPU memory (GPUDirect RDMA:";
        for (size_t i = 0; i < ports.size(); ++i) memory += " " + ports[i].device + " from " + rail_gpu[i];
        memory += ")";
    }
    if (o.gpu_memory == "on" && !gpu_memory) {
        bw.verdict = Verdict::Fail;
        bw.figure = slowest >= 0 ? slowest : 0;
        bw.detail = "GPU memory was asked for (--rdma-gpu-memory on), and the writes used " + memory;
    } else if (slowest >= 0) {
        bw.verdict = Verdict::Pass;
        bw.figure = slowest;
        bw.detail = std::to_string(o.iterations) + " writes of " + std::to_string(o.bytes) + " B a pair, from " +
                    memory + "; slowest pair of " + std::to_string(results.size() - bad.size()) + ": " + figures;
    } else if (broke.empty()) {
        bw.verdict = Verdict::Fail;
        bw.detail = "no RDMA write was measured" + (failures.empty() ? std::string() : ": " + failures);
    }
    if (evidence && !o.passive) *evidence = ev;
    if (!broke.empty()) return finish(broke + (failures.empty() ? "" : "; before that: " + failures));
    return finish("");
}

}  // namespace kiln::smoke
