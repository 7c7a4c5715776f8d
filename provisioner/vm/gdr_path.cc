#include "provisioner/vm/gdr_path.h"

#include <cstdio>

namespace kiln::vm {

namespace {

std::string hex4(unsigned v) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "0x%04x", v);
    return buf;
}

// Downstream ports below the shared switch on one side (even positions:
// root port 0, upstream 1, downstream 2, ...).
void ports_below(const PciDevice& d, int shared_depth, std::vector<std::string>& out) {
    for (size_t i = static_cast<size_t>(shared_depth) + 1; i < d.bridges.size(); ++i) {
        if (i % 2 == 0) out.push_back(d.bridges[i]);
    }
}

// A link running narrower than it can (a card in a x8 slot, a bad riser).
void check_width(const PciDevice& d, std::vector<std::string>& reasons) {
    if (!d.config || !d.config->link_cap || !d.config->link_status) return;
    const auto& cap = *d.config->link_cap;
    const auto& sta = *d.config->link_status;
    if (sta.width > 0 && sta.width < cap.width) {
        reasons.push_back(d.address + " runs x" + std::to_string(sta.width) + " of x" + std::to_string(cap.width));
    }
}

}  // namespace

const char* gdr_ready_name(GdrReady r) {
    switch (r) {
        case GdrReady::yes:
            return "yes";
        case GdrReady::no:
            return "no";
        case GdrReady::unknown:
            return "unknown";
    }
    return "unknown";
}

GdrPath gdr_path(const HostTopology& host, const std::string& gpu_addr, const std::string& nic_addr) {
    GdrPath p{gpu_addr, nic_addr};
    const PciDevice& gpu = *host.device(gpu_addr);
    const PciDevice& nic = *host.device(nic_addr);
    p.relation = pci_relation(host, gpu, nic);
    std::vector<std::string> no, unknown;
    if (p.relation != PciRelation::pix && p.relation != PciRelation::pxb) {
        no.push_back(std::string("they share no PCIe switch (") + relation_name(p.relation) +
                     "): peer-to-peer crosses the root complex");
    } else {
        const int depth = shared_switch_depth(gpu, nic);
        ports_below(gpu, depth, p.ports);
        ports_below(nic, depth, p.ports);
        for (const auto& port : p.ports) {
            const PciDevice* d = host.device(port);
            if (!d || !d->acs_ctrl) {
                if (!d || !d->config || !d->config->extended) {
                    unknown.push_back("ACS of " + port + " unknown (config space not read in full: run as root)");
                }
                continue;  // read in full and no ACS capability: nothing redirects
            }
            if (*d->acs_ctrl & (kAcsP2pReqRedirect | kAcsP2pCmpltRedirect)) {
                no.push_back("ACS redirects P2P at " + port + " (ACSCtl " + hex4(*d->acs_ctrl) + ")");
            }
        }
    }
    if (!nic.config || !nic.config->extended) {
        unknown.push_back("ATS of " + nic_addr + " unknown (config space not read in full: run as root)");
    } else if (!nic.config->ats_enabled) {
        no.push_back(nic_addr + " has no ATS capability");
    } else if (!*nic.config->ats_enabled) {
        no.push_back("ATS is off on " + nic_addr + " (ConnectX: mlxconfig ATS_ENABLED=true, then a reboot)");
    }
    check_width(gpu, no);
    check_width(nic, no);
    if (!no.empty()) {
        p.ready = GdrReady::no;
        p.reasons = no;
        p.reasons.insert(p.reasons.end(), unknown.begin(), unknown.end());
    } else if (!unknown.empty()) {
        p.ready = GdrReady::unknown;
        p.reasons = unknown;
    } else {
        p.ready = GdrReady::yes;
    }
    return p;
}

std::vector<GdrPath> gdr_paths(const HostTopology& host) {
    std::vector<GdrPath> out;
    for (const auto& g : host.gpus) {
        for (const auto& n : g.nics) out.push_back(gdr_path(host, g.address, n));
    }
    return out;
}

std::string describe(const GdrPath& p) {
    std::string out = std::string("GDR path ready: ") + gdr_ready_name(p.ready);
    for (size_t i = 0; i < p.reasons.size(); ++i) out += (i == 0 ? ", because " : "; ") + p.reasons[i];
    return out;
}

}  // namespace kiln::vm
