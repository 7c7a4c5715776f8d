// An in-memory Hypervisor for unit tests: domains by name with their XML
// and state, serial output the test writes, and a log of every call.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "provisioner/vm/guest_contract.h"
#include "provisioner/vm/hypervisor.h"

namespace kiln::vm::test {

class FakeHypervisor : public Hypervisor {
public:
    struct Dom {
        std::string xml;
        DomainState state = DomainState::shutoff;
    };
    std::map<std::string, Dom> domains;
    std::map<std::string, std::string> serial;  // name -> what the guest printed
    // name -> path -> content, as the guest agent reads them (a running guest only)
    std::map<std::string, std::map<std::string, std::string>> guest_files;
    // A remote connection: the serial log is out of reach, the agent is not.
    bool remote = false;
    std::vector<std::string> calls;  // "define kiln-n-vm0", "start ...", ...
    // Written to serial on start, as a booting guest would ("" = nothing).
    std::string boot_output = "KILN_READY {\"fake\":true}\n";
    std::string fail_define;  // an error message define() returns, when set

    std::string uri() const override { return "fake:///"; }

    Status define(const std::string& xml) override {
        const std::string name = name_of(xml);
        calls.push_back("define " + name);
        if (!fail_define.empty()) return make_error("libvirt", "libvirt.define", fail_define);
        auto& d = domains[name];
        d.xml = xml;
        return ok_status();
    }
    Status start(const std::string& name) override {
        calls.push_back("start " + name);
        auto it = domains.find(name);
        if (it == domains.end()) return make_error("libvirt", "libvirt.no_domain", "no domain " + name);
        it->second.state = DomainState::running;
        serial[name] = boot_output;
        // The guest writes its marker line to the ready file as well.
        guest_files[name] = {};
        if (!boot_output.empty()) guest_files[name][kReadyFile] = boot_output;
        return ok_status();
    }
    Status stop(const std::string& name) override {
        calls.push_back("stop " + name);
        auto it = domains.find(name);
        if (it == domains.end()) return make_error("libvirt", "libvirt.no_domain", "no domain " + name);
        it->second.state = DomainState::shutoff;
        guest_files.erase(name);  // /run is a tmpfs
        return ok_status();
    }
    Status undefine(const std::string& name) override {
        calls.push_back("undefine " + name);
        domains.erase(name);
        return ok_status();
    }
    Result<std::optional<DomainInfo>> lookup(const std::string& name) override {
        auto it = domains.find(name);
        if (it == domains.end()) return std::optional<DomainInfo>{};
        return std::optional<DomainInfo>(DomainInfo{name, it->second.state, true});
    }
    Result<std::string> definition(const std::string& name) override {
        auto it = domains.find(name);
        if (it == domains.end()) return make_error("libvirt", "libvirt.no_domain", "no domain " + name);
        return it->second.xml;
    }
    Result<std::vector<std::string>> list_names() override {
        std::vector<std::string> out;
        for (const auto& [n, d] : domains) out.push_back(n);
        return out;
    }
    // Called at each serial read, before it: a guest that prints later.
    std::function<void(const std::string& name)> on_serial;
    Result<std::string> serial_output(const std::string& name) override {
        if (on_serial) on_serial(name);
        if (remote)
            return make_error("libvirt", "libvirt.remote_serial", "serial log of " + name + " is on the remote host");
        return serial[name];
    }
    Result<std::string> guest_file(const std::string& name, const std::string& path) override {
        calls.push_back("guest_file " + name + " " + path);
        auto it = domains.find(name);
        if (it == domains.end()) return make_error("libvirt", "libvirt.no_domain", "no domain " + name);
        if (it->second.state != DomainState::running)
            return make_error("libvirt", "libvirt.agent", "guest agent: domain is not running");
        auto f = guest_files[name].find(path);
        if (f == guest_files[name].end())
            return make_error("libvirt", "libvirt.agent", "guest agent guest-file-open: No such file or directory");
        return f->second;
    }

    static std::string name_of(const std::string& xml) {
        const size_t a = xml.find("<name>");
        const size_t b = xml.find("</name>");
        if (a == std::string::npos || b == std::string::npos) return "";
        return xml.substr(a + 6, b - a - 6);
    }
    size_t count(const std::string& prefix) const {
        size_t n = 0;
        for (const auto& c : calls) n += c.rfind(prefix, 0) == 0;
        return n;
    }
};

}  // namespace kiln::vm::test
