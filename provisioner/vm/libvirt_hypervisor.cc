#include "provisioner/vm/libvirt_hypervisor.h"

#include <libvirt/libvirt-qemu.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include <fstream>
#include <mutex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "provisioner/core/base64.h"
#include "provisioner/core/json_limits.h"

namespace kiln::vm {

namespace {

struct ConnectClose {
    void operator()(virConnectPtr c) const { virConnectClose(c); }
};
struct DomainFree {
    void operator()(virDomainPtr d) const { virDomainFree(d); }
};
using ConnectPtr = std::unique_ptr<virConnect, ConnectClose>;
using DomainPtr = std::unique_ptr<virDomain, DomainFree>;

struct CharFree {
    void operator()(char* p) const { free(p); }  // NOLINT: libvirt hands out malloc'd strings
};

// libvirt prints every error to stderr unless told otherwise; kiln reports
// them itself, once, as values.
void quiet(void*, virErrorPtr) {}

void init_libvirt() {
    static std::once_flag once;
    std::call_once(once, [] {
        virInitialize();
        virSetErrorFunc(nullptr, quiet);
    });
}

Error last_error(const std::string& what, const std::string& code = "libvirt.error") {
    const char* msg = virGetLastErrorMessage();
    const int vir_code = virGetLastErrorCode();
    Error e = make_error("libvirt", code, what + ": " + (msg ? msg : "unknown error"));
    // A dropped connection or a daemon restart is worth a retry.
    e.transient = vir_code == VIR_ERR_SYSTEM_ERROR || vir_code == VIR_ERR_RPC || vir_code == VIR_ERR_NO_CONNECT;
    virResetLastError();
    return e;
}

std::string unescape(std::string s) {
    const std::pair<const char*, const char*> ents[] = {
        {"&apos;", "'"}, {"&quot;", "\""}, {"&lt;", "<"}, {"&gt;", ">"}, {"&amp;", "&"}};
    for (const auto& [from, to] : ents) {
        for (size_t p = 0; (p = s.find(from, p)) != std::string::npos; p += 1)
            s.replace(p, std::string(from).size(), to);
    }
    return s;
}

}  // namespace

struct LibvirtHypervisor::Conn {
    ConnectPtr conn;
    bool remote = false;

    Result<DomainPtr> domain(const std::string& name) {
        DomainPtr d(virDomainLookupByName(conn.get(), name.c_str()));
        if (!d)
            return last_error("domain " + name,
                              virGetLastErrorCode() == VIR_ERR_NO_DOMAIN ? "libvirt.no_domain" : "libvirt.error");
        return d;
    }
};

const char* state_name(DomainState s) {
    switch (s) {
        case DomainState::shutoff:
            return "shutoff";
        case DomainState::running:
            return "running";
        case DomainState::paused:
            return "paused";
        case DomainState::other:
            return "other";
    }
    return "?";
}

std::string serial_log_path(const std::string& xml) {
    // libvirt writes <serial type='pty'>...<log file='/path' .../> with
    // single-quoted, entity-escaped attributes.
    const size_t serial = xml.find("<serial");
    if (serial == std::string::npos) return "";
    const size_t end = xml.find("</serial>", serial);
    const size_t log = xml.find("<log file='", serial);
    if (log == std::string::npos || (end != std::string::npos && log > end)) return "";
    const size_t start = log + 11;
    const size_t quote = xml.find('\'', start);
    if (quote == std::string::npos) return "";
    return unescape(xml.substr(start, quote - start));
}

Result<std::unique_ptr<LibvirtHypervisor>> LibvirtHypervisor::open(const std::string& uri_in) {
    init_libvirt();
    const std::string uri = uri_in.empty() ? kDefaultLibvirtUri : uri_in;
    ConnectPtr conn(virConnectOpen(uri.c_str()));
    if (!conn) {
        Error e = last_error("cannot connect to " + uri + " (is libvirtd running?)", "libvirt.connect");
        e.transient = true;
        return e;
    }
    auto c = std::make_unique<Conn>();
    c->remote = uri.find("://") != std::string::npos && uri.find(":///") == std::string::npos;
    if (c->remote && virConnectSetKeepAlive(conn.get(), 5, 3) < 0) return last_error("keepalive on " + uri);
    c->conn = std::move(conn);
    return std::unique_ptr<LibvirtHypervisor>(new LibvirtHypervisor(uri, std::move(c)));
}

LibvirtHypervisor::LibvirtHypervisor(std::string uri, std::unique_ptr<Conn> conn)
    : uri_(std::move(uri)), conn_(std::move(conn)) {}

LibvirtHypervisor::~LibvirtHypervisor() = default;

Status LibvirtHypervisor::define(const std::string& xml) {
    DomainPtr d(virDomainDefineXML(conn_->conn.get(), xml.c_str()));
    if (!d) return last_error("define", "libvirt.define");
    return ok_status();
}

Status LibvirtHypervisor::start(const std::string& name) {
    auto d = conn_->domain(name);
    if (!d) return d.error();
    if (virDomainCreate(d->get()) < 0) return last_error("start " + name, "libvirt.start");
    return ok_status();
}

Status LibvirtHypervisor::stop(const std::string& name) {
    auto d = conn_->domain(name);
    if (!d) return d.error();
    const int active = virDomainIsActive(d->get());
    if (active < 0) return last_error("stop " + name, "libvirt.stop");
    if (active == 0) return ok_status();
    if (virDomainDestroy(d->get()) < 0) return last_error("stop " + name, "libvirt.stop");
    return ok_status();
}

Status LibvirtHypervisor::undefine(const std::string& name) {
    auto d = conn_->domain(name);
    if (!d) {
        if (d.error().code == "libvirt.no_domain") return ok_status();
        return d.error();
    }
    const unsigned flags = VIR_DOMAIN_UNDEFINE_MANAGED_SAVE | VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA |
                           VIR_DOMAIN_UNDEFINE_CHECKPOINTS_METADATA | VIR_DOMAIN_UNDEFINE_NVRAM;
    if (virDomainUndefineFlags(d->get(), flags) < 0) return last_error("undefine " + name, "libvirt.undefine");
    return ok_status();
}

Result<std::optional<DomainInfo>> LibvirtHypervisor::lookup(const std::string& name) {
    auto d = conn_->domain(name);
    if (!d) {
        if (d.error().code == "libvirt.no_domain") return std::optional<DomainInfo>{};
        return d.error();
    }
    int state = 0;
    int reason = 0;
    if (virDomainGetState(d->get(), &state, &reason, 0) < 0) return last_error("state of " + name);
    DomainInfo info;
    info.name = name;
    switch (state) {
        case VIR_DOMAIN_SHUTOFF:
            info.state = DomainState::shutoff;
            break;
        case VIR_DOMAIN_RUNNING:
            info.state = DomainState::running;
            break;
        case VIR_DOMAIN_PAUSED:
            info.state = DomainState::paused;
            break;
        default:
            info.state = DomainState::other;
    }
    const int persistent = virDomainIsPersistent(d->get());
    if (persistent < 0) return last_error("persistence of " + name);
    info.persistent = persistent == 1;
    return std::optional<DomainInfo>(info);
}

Result<std::string> LibvirtHypervisor::definition(const std::string& name) {
    auto d = conn_->domain(name);
    if (!d) return d.error();
    std::unique_ptr<char, CharFree> xml(virDomainGetXMLDesc(d->get(), VIR_DOMAIN_XML_INACTIVE));
    if (!xml) return last_error("definition of " + name);
    return std::string(xml.get());
}

Result<std::vector<std::string>> LibvirtHypervisor::list_names() {
    virDomainPtr* doms = nullptr;
    const int n = virConnectListAllDomains(conn_->conn.get(), &doms, 0);
    if (n < 0) return last_error("list domains");
    std::vector<std::string> out;
    for (int i = 0; i < n; ++i) {
        DomainPtr d(doms[i]);
        if (const char* nm = virDomainGetName(d.get())) out.emplace_back(nm);
    }
    free(doms);  // NOLINT: libvirt's array
    return out;
}

Result<std::string> LibvirtHypervisor::serial_output(const std::string& name) {
    if (conn_->remote) {
        return make_error("libvirt", "libvirt.remote_serial",
                          "serial log of " + name + " is on the remote host " + uri_ + "; kiln reads it only locally");
    }
    auto xml = definition(name);
    if (!xml) return xml.error();
    const std::string path = serial_log_path(*xml);
    if (path.empty())
        return make_error("libvirt", "libvirt.no_serial_log", "domain " + name + " has no serial <log file=...>");
    std::ifstream in(path, std::ios::binary);
    if (!in) return std::string();  // not written yet: QEMU creates it on start
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

namespace {

constexpr int kAgentTimeoutS = 10;        // per agent command
constexpr int kGuestFileMax = 64 * 1024;  // a marker line, not a log

// One guest agent command; its reply's "return" member.
Result<nlohmann::json> agent_call(virDomainPtr dom, const nlohmann::json& command) {
    std::unique_ptr<char, CharFree> reply(virDomainQemuAgentCommand(dom, command.dump().c_str(), kAgentTimeoutS, 0));
    if (!reply) return last_error("guest agent " + command.value("execute", ""), "libvirt.agent");
    auto j = parse_json_limited(reply.get(), "guest agent " + command.value("execute", ""), {64u << 20, 32, 1'000'000},
                                "libvirt");
    if (!j || !j->is_object() || !j->contains("return"))
        return make_error("libvirt", "libvirt.agent",
                          "guest agent " + command.value("execute", "") + ": unexpected reply" +
                              (j ? std::string() : " (" + j.error().message + ")"));
    return (*j)["return"];
}

}  // namespace

Result<std::string> LibvirtHypervisor::guest_file(const std::string& name, const std::string& path) {
    auto d = conn_->domain(name);
    if (!d) return d.error();
    auto opened =
        agent_call(d->get(), {{"execute", "guest-file-open"}, {"arguments", {{"path", path}, {"mode", "r"}}}});
    if (!opened) return opened.error();
    if (!opened->is_number_integer())
        return make_error("libvirt", "libvirt.agent", "guest-file-open " + path + ": no handle");
    const int64_t handle = opened->get<int64_t>();
    auto read = agent_call(
        d->get(), {{"execute", "guest-file-read"}, {"arguments", {{"handle", handle}, {"count", kGuestFileMax}}}});
    // Close whatever the read did: the agent keeps handles until told.
    auto closed = agent_call(d->get(), {{"execute", "guest-file-close"}, {"arguments", {{"handle", handle}}}});
    if (!read) return read.error();
    if (!closed) return closed.error();
    auto text = base64_decode(read->value("buf-b64", ""));
    if (!text) return make_error("libvirt", "libvirt.agent", "guest-file-read " + path + ": bad base64 in the reply");
    return *text;
}

}  // namespace kiln::vm
