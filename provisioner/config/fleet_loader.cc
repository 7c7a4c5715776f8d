#include "provisioner/config/fleet_loader.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "provisioner/config/config_table.h"
#include "provisioner/config/toml_reader.h"
#include "provisioner/config/toml_text_check.h"
#include "provisioner/core/sha256.h"
#include "provisioner/journal/store_url.h"

namespace kiln::config {

namespace fs = std::filesystem;

std::string Diagnostic::str() const {
    if (key.empty()) return fmt::format("{}: {}", pos.str(), message);
    return fmt::format("{}: {}: {}", pos.str(), key, message);
}

std::optional<Duration> parse_duration(const std::string& text) {
    static const std::regex re(R"(^\s*(\d+)\s*(ms|s|m|h|d)?\s*$)");
    std::smatch m;
    if (!std::regex_match(text, m, re)) return std::nullopt;
    int64_t n = 0;
    try {
        n = std::stoll(m[1].str());
    } catch (...) {
        return std::nullopt;
    }
    const std::string unit = m[2].matched ? m[2].str() : "s";
    int64_t mult = unit == "ms" ? 1 : unit == "s" ? 1000 : unit == "m" ? 60000 : unit == "h" ? 3600000 : 86400000;
    if (n > INT64_MAX / mult) return std::nullopt;
    return Duration(n * mult);
}

namespace {

bool valid_node_name(const std::string& s) {
    static const std::regex re(R"(^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$)");
    return std::regex_match(s, re);
}

// "host", "host:port", "[v6]" or "[v6]:port", as SSH takes them.
bool valid_host_address(const std::string& s) {
    static const std::regex re(R"(^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_][A-Za-z0-9._-]*)(:(\d{1,5}))?$)");
    std::smatch m;
    if (!std::regex_match(s, m, re)) return false;
    if (!m[3].matched) return true;
    const int port = std::stoi(m[3].str());
    return port >= 1 && port <= 65535;
}

template <class Map>
std::string names_of(const Map& m) {
    std::string out;
    for (const auto& [k, v] : m) out += (out.empty() ? "" : ", ") + k;
    return out.empty() ? "(none)" : out;
}

// Everything the loader needs while it walks one file.
struct Loader {
    Loader(ReadContext c, const LoadOptions& o) : ctx(std::move(c)), options(o) {}
    ReadContext ctx;
    const LoadOptions& options;
    Fleet fleet;
    std::map<std::string, SourcePos> rack_pos, node_pos;
    // "switch port" -> where a cable or uplink first used it: one cable per port, of either kind.
    std::map<std::string, SourcePos> port_seen;

    // A rule between two keys (a < b, a != b) is reported at the value of the
    // first of them the file sets; the table when it sets neither.
    // A core key's secret: the scrubber finds it where the fleet keeps it
    // (a switch, a BMC, the store), so the list a TableScope keeps is dropped.
    std::optional<Secret> secret(TableReader& r, const std::string& key) {
        std::vector<Secret> kept_elsewhere;
        return TableScope(fleet.dir, kept_elsewhere).secret(r, key);
    }

    template <class F>
    void named_tables(TableReader& root, const std::string& section, F&& each) {
        const toml::table* t = root.table(section);
        if (!t) return;
        TableReader r(ctx, *t, section);
        each_named_table(r, each);
    }

    void limits(TableReader& root) {
        const toml::table* t = root.table("limits");
        if (!t) return;
        TableReader r(ctx, *t, "limits");
        auto& l = fleet.limits;
        l.pos = r.pos();
        if (auto v = r.integer("parallel", 1, 100000)) l.parallel = static_cast<int>(*v);
        if (auto v = r.integer("per_rack", 0, 100000)) l.per_rack = static_cast<int>(*v);
        if (auto v = r.integer("per_bmc", 1, 1000)) l.per_bmc = static_cast<int>(*v);
        if (auto v = r.integer("per_switch", 1, 1000)) l.per_switch = static_cast<int>(*v);
        if (auto v = r.integer("max_unavailable", 0, 1000000)) l.max_unavailable = static_cast<int>(*v);
        if (auto v = r.integer("retries", 0, 100)) l.retries = static_cast<int>(*v);
        if (auto v = r.duration("backoff_initial")) l.backoff_initial = *v;
        if (auto v = r.duration("backoff_max")) l.backoff_max = *v;
        if (auto v = r.duration("timeout")) l.default_timeout = *v;
        if (const toml::table* tt = r.table("timeouts")) {
            TableReader tr(ctx, *tt, "limits.timeouts");
            for (const auto& [k, v] : *tt) {
                const std::string stage(k.str());
                if (!options.known_stages.empty() && !options.known_stages.count(stage)) {
                    tr.node(stage);
                    ctx.error(
                        k.source(), tr.key_path(stage),
                        fmt::format("no stage named '{}'; known: {}", stage, fmt::join(options.known_stages, ", ")));
                    continue;
                }
                if (auto d = tr.duration(stage)) l.stage_timeouts[stage] = *d;
            }
            tr.finish();
        }
        if (l.backoff_max < l.backoff_initial)
            pair_error(r, "backoff_max", "backoff_initial", "expected backoff_max >= backoff_initial",
                       "expected backoff_initial <= backoff_max (default \"2m\")");
        r.finish();
    }

    void switches(TableReader& root) {
        named_tables(root, "switches", [&](const std::string& name, TableReader& r) {
            Switch s;
            s.name = name;
            s.pos = r.pos();
            if (auto v = r.choice("os", {"sonic", "nvue", "eos"}, true)) s.os = *v;
            if (auto v = r.str("address", true)) s.address = *v;
            if (auto v = r.str("username")) s.username = *v;
            s.password = secret(r, "password");
            if (auto v = r.integer("rail", 0, 1023)) s.rail = static_cast<int>(*v);
            switch_ports(r, s);
            if (auto v = r.str("ssh_key")) s.ssh_key = v->empty() ? "" : resolve_path(fleet.dir, *v);
            if (auto v = r.str("known_hosts")) s.known_hosts = v->empty() ? "" : resolve_path(fleet.dir, *v);
            fleet.switches.push_back(std::move(s));
        });
    }

    // ports = [{ name = "Ethernet0", speed_mbps = 400000, lanes = "0,1,2,3", alias = "etp1" }, ...]
    void switch_ports(TableReader& r, Switch& s) {
        const toml::array* arr = r.array("ports");
        if (!arr) return;
        static const std::regex lanes_re(R"(^\d+(,\d+)*$)");
        std::map<std::string, SourcePos> seen;
        for (size_t i = 0; i < arr->size(); ++i) {
            const toml::node& n = *arr->get(i);
            const std::string path = fmt::format("{}[{}]", r.key_path("ports"), i);
            if (!n.is_table()) {
                ctx.error(n.source(), path, fmt::format("expected table, found {}", toml_type_name(n)));
                continue;
            }
            TableReader pr(ctx, *n.as_table(), path);
            SwitchPort port;
            port.pos = pr.pos();
            if (auto v = pr.str("name", true)) {
                const auto& where = n.as_table()->get("name")->source();
                if (auto it = seen.find(*v); it != seen.end())
                    ctx.error(
                        where, path + ".name",
                        fmt::format("duplicate port '{}' on switch {} (first at {})", *v, s.name, it->second.str()));
                else
                    seen[*v] = ctx.pos(where);
                port.name = *v;
            }
            if (auto v = pr.integer("speed_mbps", 1000, 1600000)) port.speed_mbps = static_cast<int>(*v);
            if (auto v = pr.str("lanes")) {
                if (!std::regex_match(*v, lanes_re))
                    ctx.error(n.as_table()->get("lanes")->source(), path + ".lanes",
                              fmt::format("expected lane numbers separated by commas, such as \"0,1,2,3\", found "
                                          "\"{}\"",
                                          *v));
                port.lanes = *v;
            }
            if (auto v = pr.str("alias")) port.alias = *v;
            pr.finish();
            s.ports.push_back(std::move(port));
        }
    }

    // nics = ["mlx5_0", "mlx5_1"] in a node or [defaults]; a node's own list
    // replaces the default one.
    // nics = ["mlx5_0", { name = "mlx5_1", ifname = "ens1f1np1", vfs = 8, firmware = true }]
    void node_nics(TableReader& r, Node& n) {
        const toml::array* arr = r.array("nics");
        if (!arr) return;
        n.nics.clear();
        std::map<std::string, std::pair<std::string, SourcePos>> netdevs;  // ifname -> NIC, where
        for (size_t k = 0; k < arr->size(); ++k) {
            const toml::node& e = *arr->get(k);
            const std::string key = fmt::format("{}[{}]", r.key_path("nics"), k);
            NodeNic nic;
            nic.pos = ctx.pos(e.source());
            const toml::source_region* name_at = &e.source();
            const toml::source_region* ifname_at = &e.source();
            std::string name_key = key;
            if (e.is_string()) {
                nic.name = *e.value<std::string>();
            } else if (e.is_table()) {
                const toml::table& t = *e.as_table();
                TableReader nr(ctx, t, key);
                auto name = nr.str("name", true);
                if (auto v = nr.str("ifname")) {
                    ifname_at = &t.get("ifname")->source();
                    if (!is_linux_ifname(*v))
                        ctx.error(*ifname_at, key + ".ifname",
                                  fmt::format("expected an interface name: 1 to 15 letters, digits, '_', '.' or '-', "
                                              "not starting with '.' or '-', found \"{}\"",
                                              *v));
                    else
                        nic.ifname = *v;
                }
                if (auto v = nr.integer("vfs", 0, 4096)) nic.vfs = static_cast<int>(*v);
                if (auto v = nr.boolean("firmware")) nic.firmware = *v;
                if (nic.firmware && !t.get("vfs"))
                    ctx.error(t.get("firmware")->source(), key + ".firmware",
                              "needs vfs: the firmware's NUM_OF_VFS is checked against it");
                if (auto v = nr.integer("max_acc_out_read", 0, 65535)) {
                    nic.max_acc_out_read = static_cast<int>(*v);
                    if (!nic.firmware)
                        ctx.error(t.get("max_acc_out_read")->source(), key + ".max_acc_out_read",
                                  "needs firmware = true: it is a ConnectX firmware setting");
                }
                nr.finish();
                if (!name) continue;  // reported by str()
                nic.name = *name;
                name_at = &t.get("name")->source();
                name_key = key + ".name";
                if (nic.ifname.empty()) ifname_at = name_at;
            } else {
                ctx.error(e.source(), key,
                          fmt::format("expected a NIC name or a table {{ name, ifname, vfs, firmware }}, found {}",
                                      toml_type_name(e)));
                continue;
            }
            if (nic.name.empty()) {
                ctx.error(*name_at, name_key, "expected a NIC name");
                continue;
            }
            if (n.find_nic(nic.name)) {
                ctx.error(*name_at, name_key, fmt::format("NIC '{}' is listed twice", nic.name));
                continue;
            }
            if (auto it = netdevs.find(nic.netdev()); it != netdevs.end()) {
                ctx.error(*ifname_at, nic.ifname.empty() ? name_key : key + ".ifname",
                          fmt::format("interface {} is NIC {}'s already (first at {})", nic.netdev(), it->second.first,
                                      it->second.second.str()));
                continue;
            }
            netdevs[nic.netdev()] = {nic.name, ctx.pos(*ifname_at)};
            n.nics.push_back(std::move(nic));
        }
    }

    // host = { address = "HOST[:PORT]", username, ssh_key, known_hosts } | { local = true } |
    // { netns = "NAME" }, plus require, timeout and reboot_timeout, for a node or [defaults]. Keys
    // merge over `h` one by one; writing one of address, local or netns replaces
    // the way in. True when the table is written.
    bool host_access(TableReader& parent, HostAccess& h) {
        const toml::table* t = parent.table("host");
        if (!t) return false;
        TableReader r(ctx, *t, parent.key_path("host"));
        h.pos = r.pos();
        const char* ways[] = {"address", "local", "netns"};
        int written = 0;
        for (const char* w : ways) written += t->get(w) ? 1 : 0;
        if (written > 1)
            ctx.error(t->source(), r.key_path("address"),
                      "expected one of address (SSH), local = true or netns, not several");
        if (written) {
            h.mode.clear();
            h.address.clear();
            h.netns.clear();
        }
        if (auto v = r.str("address")) {
            if (!valid_host_address(*v))
                ctx.error(
                    t->get("address")->source(), r.key_path("address"),
                    v->find('@') != std::string::npos
                        ? "expected HOST or HOST:PORT; write the user in username"
                        : fmt::format("expected HOST or HOST:PORT (IPv6 as [ADDR] or [ADDR]:PORT), found \"{}\"", *v));
            h.mode = "ssh";
            h.address = *v;
        }
        if (auto v = r.boolean("local")) {
            if (!*v)
                ctx.error(t->get("local")->source(), r.key_path("local"),
                          "expected true; leave local out for an SSH or netns host");
            else
                h.mode = "local";
        }
        if (auto v = r.str("netns")) {
            static const std::regex netns_re(R"(^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$)");
            if (!std::regex_match(*v, netns_re))
                ctx.error(
                    t->get("netns")->source(), r.key_path("netns"),
                    fmt::format("expected a network namespace name: letters, digits, '_', '.', '-', found \"{}\"", *v));
            h.mode = "netns";
            h.netns = *v;
        }
        if (auto v = r.str("username")) h.username = *v;
        if (auto v = r.str("ssh_key")) h.ssh_key = v->empty() ? "" : resolve_path(fleet.dir, *v);
        if (auto v = r.str("known_hosts")) h.known_hosts = v->empty() ? "" : resolve_path(fleet.dir, *v);
        // SSH settings beside local or netns in the same table are a mix-up.
        if (t->get("local") || t->get("netns"))
            for (const char* k : {"username", "ssh_key", "known_hosts"})
                if (const toml::node* n = t->get(k))
                    ctx.error(n->source(), r.key_path(k), "only used with address (SSH)");
        if (auto v = r.strings("require")) {
            static const std::vector<std::string> known = {"mtu", "sriov", "dscp_trust", "pfc", "ecn", "firmware"};
            const toml::array* arr = t->get("require")->as_array();
            h.require.clear();
            for (size_t i = 0; i < v->size(); ++i) {
                const std::string& s = (*v)[i];
                if (std::find(known.begin(), known.end(), s) == known.end())
                    ctx.error(arr->get(i)->source(), fmt::format("{}[{}]", r.key_path("require"), i),
                              fmt::format("expected one of {}, found \"{}\"", fmt::join(known, ", "), s));
                else if (std::find(h.require.begin(), h.require.end(), s) == h.require.end())
                    h.require.push_back(s);
            }
        }
        if (auto v = r.duration("timeout")) {
            if (v->count() <= 0)
                ctx.error(t->get("timeout")->source(), r.key_path("timeout"), "expected a duration > 0");
            else
                h.timeout = *v;
        }
        if (auto v = r.duration("reboot_timeout")) {
            if (v->count() <= 0)
                ctx.error(t->get("reboot_timeout")->source(), r.key_path("reboot_timeout"), "expected a duration > 0");
            else
                h.reboot_timeout = *v;
        }
        r.finish();
        return true;
    }

    // A node's host after [defaults] merged in: a way in, and for SSH a known_hosts file.
    void check_host(const toml::table& node_table, const std::string& path, bool written, const HostAccess& h) {
        const toml::node* own = node_table.get("host");
        const SourcePos at = own ? ctx.pos(own->source()) : (h.pos.line ? h.pos : ctx.pos(node_table.source()));
        if (written && !h.managed()) {
            ctx.errors->push_back(
                {at, path + ".host", "expected address, local = true or netns: how kiln reaches the node's host"});
            return;
        }
        if (h.mode == "ssh" && h.known_hosts.empty())
            ctx.errors->push_back(
                {at, path + ".host.known_hosts", "required with address: kiln checks SSH host keys strictly"});
    }

    // [[cabling]] { node, nic, switch, port }: read after the nodes.
    void cabling(TableReader& root) {
        const toml::array* arr = root.array("cabling");
        if (!arr) return;
        std::map<std::string, SourcePos> nic_seen;
        for (size_t i = 0; i < arr->size(); ++i) {
            const toml::node& n = *arr->get(i);
            const std::string path = fmt::format("cabling[{}]", i);
            if (!n.is_table()) {
                ctx.error(n.source(), path, fmt::format("expected table, found {}", toml_type_name(n)));
                continue;
            }
            const toml::table& t = *n.as_table();
            TableReader r(ctx, t, path);
            auto node = r.str("node", true);
            auto nic = r.str("nic", true);
            auto sw = r.str("switch", true);
            auto port = r.str("port", true);
            auto length = r.integer("cable_length_m", 1, 10000);
            r.finish();
            if (!node || !nic || !sw || !port) continue;
            Cable c{*node, *nic, *sw, *port, length ? static_cast<int>(*length) : 0, r.pos()};
            bool ok = true;
            if (const Node* fn = fleet.find_node(c.node); !fn) {
                // A node that failed to load has reported itself already.
                if (!node_pos.count(c.node))
                    ctx.error(t.get("node")->source(), path + ".node",
                              fmt::format("no node '{}'; defined: {}", c.node, names_of(node_pos)));
                ok = false;
            } else if (!fn->find_nic(c.nic)) {
                std::string have;
                for (const auto& x : fn->nics) have += (have.empty() ? "" : ", ") + x.name;
                ctx.error(t.get("nic")->source(), path + ".nic",
                          fmt::format("node {} has no NIC '{}'; its nics: {}", c.node, c.nic,
                                      have.empty() ? "(none)" : have));
                ok = false;
            }
            if (const Switch* fsw = fleet.find_switch(c.switch_name); !fsw) {
                std::string defined;
                for (const auto& x : fleet.switches) defined += (defined.empty() ? "" : ", ") + x.name;
                ctx.error(
                    t.get("switch")->source(), path + ".switch",
                    fmt::format("no switch '{}'; defined: {}", c.switch_name, defined.empty() ? "(none)" : defined));
                ok = false;
            } else if (!fsw->find_port(c.port)) {
                ctx.error(t.get("port")->source(), path + ".port",
                          fmt::format("switch {} has no port '{}' (declare it in switches.{}.ports)", c.switch_name,
                                      c.port, c.switch_name));
                ok = false;
            }
            const std::string port_key = c.switch_name + " " + c.port;
            if (auto it = port_seen.find(port_key); it != port_seen.end()) {
                ctx.error(t.get("port")->source(), path + ".port",
                          fmt::format("switch port {} {} is cabled twice (first at {})", c.switch_name, c.port,
                                      it->second.str()));
                ok = false;
            } else {
                port_seen[port_key] = ctx.pos(t.get("port")->source());
            }
            const std::string nic_key = c.node + " " + c.nic;
            if (auto it = nic_seen.find(nic_key); it != nic_seen.end()) {
                ctx.error(
                    t.get("nic")->source(), path + ".nic",
                    fmt::format("NIC {} of node {} is cabled twice (first at {})", c.nic, c.node, it->second.str()));
                ok = false;
            } else {
                nic_seen[nic_key] = ctx.pos(t.get("nic")->source());
            }
            if (ok) fleet.cabling.push_back(std::move(c));
        }
    }

    // One end of an uplink: the switch exists and declares the port, which no
    // other cable uses. Reports at the table's keys; false when in error.
    bool uplink_end(const toml::table& t, const std::string& path, const char* switch_key, const char* port_key,
                    const std::string& sw_name, const std::string& port) {
        bool ok = true;
        if (const Switch* fsw = fleet.find_switch(sw_name); !fsw) {
            std::string defined;
            for (const auto& x : fleet.switches) defined += (defined.empty() ? "" : ", ") + x.name;
            ctx.error(t.get(switch_key)->source(), path + "." + switch_key,
                      fmt::format("no switch '{}'; defined: {}", sw_name, defined.empty() ? "(none)" : defined));
            ok = false;
        } else if (!fsw->find_port(port)) {
            ctx.error(
                t.get(port_key)->source(), path + "." + port_key,
                fmt::format("switch {} has no port '{}' (declare it in switches.{}.ports)", sw_name, port, sw_name));
            ok = false;
        }
        const std::string key = sw_name + " " + port;
        if (auto it = port_seen.find(key); it != port_seen.end()) {
            ctx.error(t.get(port_key)->source(), path + "." + port_key,
                      fmt::format("switch port {} {} is cabled twice (first at {})", sw_name, port, it->second.str()));
            ok = false;
        } else {
            port_seen[key] = ctx.pos(t.get(port_key)->source());
        }
        return ok;
    }

    // [[uplinks]] { switch, port, peer_switch, peer_port }: switch-to-switch
    // cables (leaf to spine), read after [[cabling]] so a port used by both is
    // reported at the uplink.
    void uplinks(TableReader& root) {
        const toml::array* arr = root.array("uplinks");
        if (!arr) return;
        for (size_t i = 0; i < arr->size(); ++i) {
            const toml::node& n = *arr->get(i);
            const std::string path = fmt::format("uplinks[{}]", i);
            if (!n.is_table()) {
                ctx.error(n.source(), path, fmt::format("expected table, found {}", toml_type_name(n)));
                continue;
            }
            const toml::table& t = *n.as_table();
            TableReader r(ctx, t, path);
            auto sw = r.str("switch", true);
            auto port = r.str("port", true);
            auto peer_sw = r.str("peer_switch", true);
            auto peer_port = r.str("peer_port", true);
            auto length = r.integer("cable_length_m", 1, 10000);
            r.finish();
            if (!sw || !port || !peer_sw || !peer_port) continue;
            Uplink u{*sw, *port, *peer_sw, *peer_port, length ? static_cast<int>(*length) : 0, r.pos()};
            if (u.switch_name == u.peer_switch) {
                // A loop on one switch carries no traffic between switches.
                ctx.error(t.get("peer_switch")->source(), path + ".peer_switch",
                          fmt::format("an uplink joins two switches; both ends are on {}", u.switch_name));
                continue;
            }
            bool ok = uplink_end(t, path, "switch", "port", u.switch_name, u.port);
            ok = uplink_end(t, path, "peer_switch", "peer_port", u.peer_switch, u.peer_port) && ok;
            if (ok) fleet.uplinks.push_back(std::move(u));
        }
    }

    void racks(TableReader& root) {
        const toml::array* arr = root.array("racks");
        if (!arr) return;
        for (size_t i = 0; i < arr->size(); ++i) {
            const toml::node& n = *arr->get(i);
            const std::string path = fmt::format("racks[{}]", i);
            if (!n.is_table()) {
                ctx.error(n.source(), path, fmt::format("expected table, found {}", toml_type_name(n)));
                continue;
            }
            TableReader r(ctx, *n.as_table(), path);
            Rack rack;
            rack.pos = r.pos();
            if (auto v = r.str("name", true)) {
                rack.name = *v;
                const auto& where = n.as_table()->get("name")->source();
                if (auto it = rack_pos.find(rack.name); it != rack_pos.end()) {
                    ctx.error(where, path + ".name",
                              fmt::format("duplicate rack name '{}' (first at {})", rack.name, it->second.str()));
                } else {
                    rack_pos[rack.name] = ctx.pos(where);
                }
            }
            if (auto v = r.strings("switches")) {
                rack.switches = *v;
                const toml::array* sw = n.as_table()->get("switches")->as_array();
                for (size_t k = 0; k < v->size(); ++k) {
                    if (!fleet.find_switch((*v)[k])) {
                        std::string defined;
                        for (const auto& s : fleet.switches) defined += (defined.empty() ? "" : ", ") + s.name;
                        ctx.error(
                            sw->get(k)->source(), fmt::format("{}.switches[{}]", path, k),
                            fmt::format("no switch '{}'; defined: {}", (*v)[k], defined.empty() ? "(none)" : defined));
                    }
                }
            }
            r.finish();
            fleet.racks.push_back(std::move(rack));
        }
    }

    // Each module's check of the whole fleet (config_table.h: check_fleet).
    void module_checks() {
        for (const auto& mt : options.tables)
            if (mt.check_fleet) mt.check_fleet(fleet, *ctx.errors);
    }

    // The tables stage modules own (config_table.h), each read by its
    // module's reader; the file's other top-level keys are the core's.
    void module_tables(TableReader& root) {
        for (const auto& mt : options.tables) {
            const toml::table* t = root.table(mt.key);
            if (!t) continue;
            TableReader r(ctx, *t, mt.key);
            TableValue v;
            v.pos = r.pos();
            TableScope scope(fleet.dir, v.secrets);
            v.value = mt.read(r, scope);
            r.finish();
            fleet.tables[mt.key] = std::move(v);
        }
    }

    void store(TableReader& root) {
        const toml::table* t = root.table("store");
        if (!t) return;
        TableReader r(ctx, *t, "store");
        StoreConfig st;
        st.pos = r.pos();
        if (auto v = r.str("url", true)) {
            // The message shows the URL with any password masked.
            if (auto ok = journal::check_store_url(*v); !ok)
                ctx.error(t->get("url")->source(), "store.url", ok.error().message);
            st.url = *v;
        }
        st.password = secret(r, "password");
        r.finish();
        fleet.store = std::move(st);
    }

    // bmc = { ... } for a node or for [defaults]; `bmc` starts as the base.
    void bmc(TableReader& parent, Bmc& bmc) {
        const toml::table* t = parent.table("bmc");
        if (!t) return;
        TableReader r(ctx, *t, parent.key_path("bmc"));
        if (auto v = r.str("url")) {
            if (auto problem = http_url_problem(*v); !problem.empty())
                ctx.error(t->get("url")->source(), r.key_path("url"), problem);
            else
                bmc.url = *v;
        }
        if (auto v = r.str("username")) bmc.username = *v;
        if (auto s = secret(r, "password")) bmc.password = *s;
        if (auto v = r.str("ca_bundle")) bmc.ca_bundle = v->empty() ? "" : resolve_path(fleet.dir, *v);
        if (auto v = r.str("fingerprint")) {
            std::string fp = *v;
            fp.erase(std::remove(fp.begin(), fp.end(), ':'), fp.end());
            if (!v->empty() && !is_sha256_hex(fp))
                ctx.error(t->get("fingerprint")->source(), r.key_path("fingerprint"),
                          "expected a SHA-256 fingerprint: 64 hex digits (colons allowed)");
            else
                bmc.fingerprint = ascii_lower(fp);
        }
        if (auto v = r.boolean("verify_tls")) bmc.verify_tls = *v;
        if (auto v = r.str("system")) {
            if (v->rfind("/redfish/", 0) != 0)
                ctx.error(t->get("system")->source(), r.key_path("system"),
                          "expected the system's Redfish path, starting with /redfish/");
            else
                bmc.system = *v;
        }
        r.finish();
    }

    struct Defaults {
        Node node;              // role, profiles, bmc
        bool has_role = false;  // written, even if it failed to check
    } defaults;
    // Pipeline files that exist but failed to load: their own errors say why,
    // so roles naming them are not reported again.
    std::set<std::string> broken_pipelines;

    // The names each module table with node references defines, read once
    // and sorted: every node's pick is looked up in them.
    std::map<std::string, std::vector<std::string>> module_names;

    // A node's reference to a module's profile (config_table.h: node_key),
    // checked against the names its table defines.
    void module_refs(TableReader& r, Node& n) {
        for (const auto& mt : options.tables) {
            if (mt.node_key.empty()) continue;
            auto v = r.str(mt.node_key);
            if (!v) continue;
            auto& names = module_names[mt.key];
            if (names.empty() && mt.names)
                if (auto it = fleet.tables.find(mt.key); it != fleet.tables.end()) {
                    names = mt.names(it->second.value);
                    std::sort(names.begin(), names.end());
                }
            if (!std::binary_search(names.begin(), names.end(), *v)) {
                ctx.error(r.table().get(mt.node_key)->source(), r.key_path(mt.node_key),
                          fmt::format("no {} profile '{}'; defined: {}", mt.node_key, *v,
                                      names.empty() ? "(none)" : fmt::format("{}", fmt::join(names, ", "))));
                continue;
            }
            n.set_profile(mt.node_key, *v);
        }
    }

    void role_ref(TableReader& r, std::string& out) {
        auto v = r.str("role");
        if (!v) return;
        if (!fleet.pipelines.count(*v)) {
            if (broken_pipelines.count(*v)) return;
            ctx.error(
                r.table().get("role")->source(), r.key_path("role"),
                fmt::format("no pipeline '{}' in {}; defined: {}", *v, fleet.pipelines_dir, names_of(fleet.pipelines)));
            return;
        }
        out = *v;
    }

    void read_defaults(TableReader& root) {
        const toml::table* t = root.table("defaults");
        if (!t) return;
        TableReader r(ctx, *t, "defaults");
        defaults.has_role = t->get("role") != nullptr;
        role_ref(r, defaults.node.role);
        module_refs(r, defaults.node);
        bmc(r, defaults.node.bmc);
        node_nics(r, defaults.node);
        host_access(r, defaults.node.host);
        r.finish();
    }

    void nodes(TableReader& root) {
        const toml::array* arr = root.array("nodes");
        if (!arr) return;
        // Grown by doubling, 100,000 nodes held two copies at once.
        fleet.nodes.reserve(fleet.nodes.size() + arr->size());
        for (size_t i = 0; i < arr->size(); ++i) {
            const toml::node& tn = *arr->get(i);
            const std::string path = fmt::format("nodes[{}]", i);
            if (!tn.is_table()) {
                ctx.error(tn.source(), path, fmt::format("expected table, found {}", toml_type_name(tn)));
                continue;
            }
            const toml::table& t = *tn.as_table();
            TableReader r(ctx, t, path);
            Node n = defaults.node;
            n.pos = r.pos();
            if (auto v = r.str("name", true)) {
                const auto& where = t.get("name")->source();
                if (!valid_node_name(*v)) {
                    ctx.error(where, path + ".name",
                              "expected a DNS label: lowercase letters, digits and '-', at most 63");
                } else if (auto it = node_pos.find(*v); it != node_pos.end()) {
                    ctx.error(where, path + ".name",
                              fmt::format("duplicate node name '{}' (first at {})", *v, it->second.str()));
                } else {
                    node_pos[*v] = ctx.pos(where);
                }
                n.name = *v;
            }
            if (auto v = r.str("rack", true)) {
                if (!fleet.find_rack(*v))
                    ctx.error(t.get("rack")->source(), path + ".rack",
                              fmt::format("no rack '{}'; defined: {}", *v, names_of(rack_pos)));
                n.rack = *v;
            }
            role_ref(r, n.role);
            if (!t.get("role") && !defaults.has_role)
                ctx.error(t.source(), path + ".role", "required key is missing (and [defaults] has no role)");
            module_refs(r, n);
            bmc(r, n.bmc);
            node_nics(r, n);
            const bool host_written = host_access(r, n.host);
            if (host_written || n.host.managed()) check_host(t, path, host_written, n.host);
            if (auto v = r.str("libvirt_uri")) {
                if (v->find(':') == std::string::npos)
                    ctx.error(t.get("libvirt_uri")->source(), path + ".libvirt_uri",
                              "expected a libvirt URI such as qemu:///system or qemu+ssh://host/system");
                else
                    n.libvirt_uri = *v;
            }
            if (const toml::table* labels = r.table("labels")) {
                for (const auto& [k, v] : *labels) {
                    if (!v.is_string())
                        ctx.error(v.source(), fmt::format("{}.labels.{}", path, k.str()),
                                  fmt::format("expected string, found {}", toml_type_name(v)));
                    else
                        n.labels[std::string(k.str())] = *v.value<std::string>();
                }
            }
            r.finish();
            fleet.nodes.push_back(std::move(n));
        }
    }

    void pipelines(const std::string& configured, const toml::node* configured_node) {
        std::string dir;
        if (!options.pipelines_dir_override.empty())
            dir = options.pipelines_dir_override;
        else if (!configured.empty())
            dir = resolve_path(fleet.dir, configured);
        else if (fs::is_directory(fs::path(fleet.dir) / "pipelines"))
            dir = (fs::path(fleet.dir) / "pipelines").string();
        else
            dir = options.default_pipelines_dir;
        std::error_code ec;
        fleet.pipelines_dir = fs::absolute(dir, ec).lexically_normal().string();
        if (dir.empty() || !fs::is_directory(dir, ec)) {
            SourcePos p = configured_node ? ctx.pos(configured_node->source()) : SourcePos{ctx.file, 1, 1};
            ctx.errors->push_back({p, configured_node ? "fleet.pipelines" : "",
                                   fmt::format("pipelines folder '{}' does not exist", dir)});
            return;
        }
        std::vector<fs::path> files;
        for (const auto& e : fs::directory_iterator(dir, ec))
            if (e.path().extension() == ".toml") files.push_back(e.path());
        std::sort(files.begin(), files.end());
        for (const auto& f : files) {
            if (auto p = load_pipeline(f.string(), options.known_stages, *ctx.errors))
                fleet.pipelines[p->name] = *p;
            else
                broken_pipelines.insert(f.stem().string());
        }
    }
};

}  // namespace

std::optional<Pipeline> load_pipeline(const std::string& path, const std::set<std::string>& known_stages,
                                      std::vector<Diagnostic>& errors) {
    ReadContext ctx{path, &errors};
    const size_t before = errors.size();
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    if (auto bad = non_ascii_outside_strings(text)) {
        errors.push_back({{path, bad->line, bad->column}, "", "a non-ASCII character outside a string or comment"});
        return std::nullopt;
    }
    toml::table tbl;
    try {
        // An unreadable file: parse_file says why.
        tbl = in ? toml::parse(text, path) : toml::parse_file(path);
    } catch (const toml::parse_error& e) {
        errors.push_back({ctx.pos(e.source()), "", std::string(e.description())});
        return std::nullopt;
    }
    TableReader r(ctx, tbl, "");
    Pipeline p;
    p.path = path;
    if (auto v = r.integer("schema", INT64_MIN, INT64_MAX, true); v && *v != 1)
        ctx.error(tbl.get("schema")->source(), "schema", fmt::format("expected 1, found {}", *v));
    const std::string stem = fs::path(path).stem().string();
    if (auto v = r.str("name", true)) {
        if (*v != stem)
            ctx.error(tbl.get("name")->source(), "name",
                      fmt::format("expected \"{}\" (the file name), found \"{}\"", stem, *v));
        p.name = *v;
    }
    if (auto v = r.str("description")) p.description = *v;
    if (auto v = r.strings("stages", true)) {
        const toml::array* arr = tbl.get("stages")->as_array();
        if (v->empty()) ctx.error(arr->source(), "stages", "expected at least one stage");
        std::set<std::string> seen;
        for (size_t i = 0; i < v->size(); ++i) {
            const auto& s = (*v)[i];
            const auto& where = arr->get(i)->source();
            if (!known_stages.empty() && !known_stages.count(s))
                ctx.error(where, fmt::format("stages[{}]", i),
                          fmt::format("no stage named '{}'; known: {}", s, fmt::join(known_stages, ", ")));
            else if (!seen.insert(s).second)
                ctx.error(where, fmt::format("stages[{}]", i), fmt::format("stage '{}' is listed twice", s));
        }
        p.stages = *v;
    }
    r.finish();
    if (errors.size() != before) return std::nullopt;
    return p;
}

namespace {

LoadResult load_fleet_file(const std::string& path, const LoadOptions& options) {
    LoadResult result;
    Loader L(ReadContext{path, &result.errors}, options);
    auto sorted = [&]() -> LoadResult {
        // By position; the fleet file's own diagnostics before its pipelines'.
        std::stable_sort(result.errors.begin(), result.errors.end(), [&](const Diagnostic& a, const Diagnostic& b) {
            const bool fa = a.pos.file != path, fb = b.pos.file != path;
            return std::tie(fa, a.pos.file, a.pos.line, a.pos.column) <
                   std::tie(fb, b.pos.file, b.pos.line, b.pos.column);
        });
        if (result.errors.empty()) {
            L.fleet.index();
            result.fleet = std::move(L.fleet);
        }
        return std::move(result);
    };

    std::error_code dir_ec;
    std::ifstream in(path, std::ios::binary);
    // A folder opens as a stream on Linux but reads nothing.
    if (!in || fs::is_directory(path, dir_ec)) {
        result.errors.push_back({{path, 1, 1}, "", "cannot read file"});
        return sorted();
    }
    std::stringstream ss;
    ss << in.rdbuf();
    if (in.bad()) {
        result.errors.push_back({{path, 1, 1}, "", "cannot read file"});
        return sorted();
    }
    const std::string text = ss.str();
    if (auto bad = non_ascii_outside_strings(text)) {
        result.errors.push_back(
            {{path, bad->line, bad->column}, "", "a non-ASCII character outside a string or comment"});
        return sorted();
    }

    toml::table tbl;
    try {
        tbl = toml::parse(text, path);
    } catch (const toml::parse_error& e) {
        result.errors.push_back({L.ctx.pos(e.source()), "", std::string(e.description())});
        return sorted();
    }

    Fleet& f = L.fleet;
    f.path = path;
    std::error_code ec;
    f.dir = fs::absolute(fs::path(path), ec).parent_path().lexically_normal().string();
    f.sha256 = sha256_hex(text);

    TableReader root(L.ctx, tbl, "");
    if (auto v = root.integer("schema", INT64_MIN, INT64_MAX, true); v && *v != 1)
        L.ctx.error(tbl.get("schema")->source(), "schema",
                    fmt::format("expected 1 (the schema this kiln reads), found {}", *v));
    std::string pipelines_dir;
    const toml::node* pipelines_node = nullptr;
    if (const toml::table* ft = root.table("fleet", true)) {
        TableReader r(L.ctx, *ft, "fleet");
        if (auto v = r.str("name", true)) f.name = *v;
        if (auto v = r.str("pipelines")) {
            pipelines_dir = *v;
            pipelines_node = ft->get("pipelines");
        }
        r.finish();
    }
    L.limits(root);
    L.switches(root);
    L.racks(root);
    L.module_tables(root);
    L.store(root);
    L.pipelines(pipelines_dir, pipelines_node);
    L.read_defaults(root);
    L.nodes(root);
    // Cabling and uplinks look up a node, switch and port each: indexed, so
    // loading a fleet stays linear (index() again once all is read).
    for (const auto& mt : options.tables)
        if (mt.group_nodes && !mt.node_key.empty()) L.fleet.grouped_picks.insert(mt.node_key);
    L.fleet.index();
    L.module_checks();
    L.cabling(root);
    L.uplinks(root);
    root.finish();
    return sorted();
}

}  // namespace

LoadResult load_fleet(const std::string& path, const LoadOptions& options) {
    LoadResult result = load_fleet_file(path, options);
#ifdef __GLIBC__
    // The parse tree is gone by now; a large fleet's (about 90 MB at 100,000
    // nodes) would otherwise stay in the heap, unused, for the whole run.
    malloc_trim(0);
#endif
    return result;
}

}  // namespace kiln::config
