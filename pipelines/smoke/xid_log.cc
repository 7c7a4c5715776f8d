#include "pipelines/smoke/xid_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>

namespace kiln::smoke {

std::vector<XidEvent> parse_xid_events(const std::string& log) {
    std::vector<XidEvent> out;
    std::istringstream in(log);
    std::string line;
    const std::string mark = "NVRM: Xid (PCI:";
    while (std::getline(in, line)) {
        const auto at = line.find(mark);
        if (at == std::string::npos) continue;
        const auto pci_start = at + mark.size();
        const auto close = line.find("):", pci_start);
        if (close == std::string::npos) continue;
        const char* code = line.c_str() + close + 2;
        char* end = nullptr;
        const long xid = std::strtol(code, &end, 10);
        if (end == code || xid <= 0) continue;
        XidEvent e;
        e.pci = line.substr(pci_start, close - pci_start);
        e.xid = static_cast<int>(xid);
        std::string rest(end);
        if (!rest.empty() && rest[0] == ',') rest.erase(0, 1);
        while (!rest.empty() && rest[0] == ' ') rest.erase(0, 1);
        e.text = rest;
        out.push_back(std::move(e));
    }
    return out;
}

bool xid_needs_service(int xid) {
    switch (xid) {
        case 48:
        case 61:
        case 62:
        case 64:
        case 74:
        case 79:
        case 94:
        case 95:
        case 119:
        case 120:
            return true;
        default:
            return false;
    }
}

Check xid_check(const std::vector<XidEvent>& events, const std::string& read_error) {
    Check c;
    c.name = "xid_events";
    c.unit = "events";
    c.compare = "<=";
    if (!read_error.empty()) {
        c.verdict = Verdict::Fail;
        c.detail = "cannot read the kernel log: " + read_error;
        return c;
    }
    c.verdict = Verdict::Pass;
    // "PCI:0000:c6:00 Xid 79 x2" per GPU and code, in first-seen order.
    std::vector<std::pair<std::string, int>> order;
    std::map<std::pair<std::string, int>, int> seen;
    int service = 0;
    for (const auto& e : events) {
        if (xid_needs_service(e.xid)) ++service;
        if (seen[{e.pci, e.xid}]++ == 0) order.push_back({e.pci, e.xid});
    }
    c.figure = service;
    std::string detail;
    for (const auto& key : order) {
        detail += (detail.empty() ? "" : "; ") + std::string("PCI:") + key.first + " Xid " + std::to_string(key.second);
        if (int n = seen[key]; n > 1) detail += " x" + std::to_string(n);
        if (!xid_needs_service(key.second)) detail += " (not counted)";
    }
    c.detail = detail.empty() ? "no Xid since boot" : detail;
    return c;
}

bool read_kernel_log(std::string* out, std::string* err) {
    const int fd = ::open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        *err = std::string("/dev/kmsg: ") + std::strerror(errno);
        return false;
    }
    // Each read returns one record: "prio,seq,usec,flags;message\n" plus
    // continuation lines. EAGAIN: the end; EPIPE: records were overwritten
    // while reading, go on with the next.
    std::string log;
    char buf[8192];
    for (;;) {
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0) {
            if (errno == EPIPE || errno == EINTR) continue;
            if (errno == EAGAIN) break;
            *err = std::string("/dev/kmsg: ") + std::strerror(errno);
            ::close(fd);
            return false;
        }
        if (n == 0) break;
        std::string rec(buf, static_cast<size_t>(n));
        const auto semi = rec.find(';');
        std::string msg = semi == std::string::npos ? rec : rec.substr(semi + 1);
        const auto nl = msg.find('\n');
        log += (nl == std::string::npos ? msg : msg.substr(0, nl)) + "\n";
    }
    ::close(fd);
    *out = std::move(log);
    return true;
}

}  // namespace kiln::smoke
