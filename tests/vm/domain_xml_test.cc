#include <catch2/catch.hpp>

#include <unistd.h>

#include <set>

#include "provisioner/core/command.h"
#include "provisioner/vm/domain_xml.h"
#include "provisioner/vm/guest_contract.h"
#include "provisioner/vm/guest_pci_layout.h"
#include "tests/vm/vm_xml_support.h"

using namespace kiln;
using namespace kiln::vm;
using namespace kiln::vm::test;

namespace {

DomainOptions golden_options(const Placement& p, size_t i) {
    DomainOptions o = domain_options(p, domain_name("gpu-01", static_cast<int>(i)));
    const std::string dir = "/var/lib/kiln/vm/gpu-01";
    o.accelerator = Accelerator::kvm;
    o.disk = dir + "/" + o.name + ".qcow2";
    o.seed_iso = dir + "/" + o.name + "-seed.iso";
    o.serial_log = dir + "/" + o.name + ".serial.log";
    o.smoke_host_port = kSmokeHostPortBase + static_cast<int>(i);
    return o;
}

std::string case_name(const HostCase& c, const VmPlacement& vm) {
    return c.fixture + "-" + split_name(c.split) + "-" + vm.name;
}

// Controller index -> (model, the index of the bus it plugs into).
struct Tree {
    std::map<int, std::pair<std::string, int>> ctl;
    std::map<int, int> node_of_pxb;      // pxb index -> <target><node>
    std::map<std::string, int> port_of;  // host address -> the controller it plugs into
};

Tree read_tree(const XmlDoc& doc) {
    Tree t;
    const auto idx = doc.values("/domain/devices/controller[@type='pci']", "index");
    for (const auto& i : idx) {
        const std::string at = "/domain/devices/controller[@type='pci'][@index='" + i + "']";
        const std::string model = doc.value(at, "model");
        const std::string bus = doc.value(at + "/address", "bus");
        t.ctl[std::stoi(i)] = {model, bus.empty() ? -1 : hexnum(bus)};
        if (model == "pcie-expander-bus") t.node_of_pxb[std::stoi(i)] = std::stoi(doc.value(at + "/target/node"));
    }
    const auto n = doc.values("/domain/devices/hostdev").size();
    for (size_t k = 1; k <= n; ++k) {
        const std::string at = "/domain/devices/hostdev[" + std::to_string(k) + "]";
        char bdf[32];
        std::snprintf(bdf, sizeof bdf, "%04x:%02x:%02x.%x", hexnum(doc.value(at + "/source/address", "domain")),
                      hexnum(doc.value(at + "/source/address", "bus")),
                      hexnum(doc.value(at + "/source/address", "slot")),
                      hexnum(doc.value(at + "/source/address", "function")));
        t.port_of[bdf] = hexnum(doc.value(at + "/address", "bus"));
    }
    return t;
}

}  // namespace

TEST_CASE("domain XML matches the golden file for each fixture host and split", "[vm][domain_xml]") {
    for (const auto& c : golden_cases()) {
        const HostTopology host = load_fixture(c.fixture);
        const Placement p = place_case(host, c);
        for (size_t i = 0; i < p.vms.size(); ++i) {
            auto xml = domain_xml(host, p.vms[i], golden_options(p, i));
            REQUIRE(xml.ok());
            check_golden(case_name(c, p.vms[i]) + ".xml", *xml);
        }
    }
}

TEST_CASE("each GPU and its NIC sit under one emulated switch under the expander bus of their node",
          "[vm][domain_xml]") {
    for (const auto& c : golden_cases()) {
        const HostTopology host = load_fixture(c.fixture);
        const Placement p = place_case(host, c);
        for (size_t i = 0; i < p.vms.size(); ++i) {
            const VmPlacement& vm = p.vms[i];
            INFO(case_name(c, vm));
            auto xml = domain_xml(host, vm, golden_options(p, i));
            REQUIRE(xml.ok());
            const XmlDoc doc(*xml);
            const Tree t = read_tree(doc);
            CHECK(doc.value("/domain/os/type", "machine") == "q35");
            CHECK(doc.value("/domain/cpu", "mode") == "host-passthrough");
            CHECK(doc.values("/domain/cputune/vcpupin").size() == vm.vcpus());
            CHECK(doc.values("/domain/cpu/numa/cell").size() == vm.cells.size());
            CHECK(doc.values("/domain/devices/hostdev[@managed='yes']").size() == vm.devices().size());
            CHECK(doc.value("/domain/memoryBacking/hugepages/page", "size") == std::to_string(c.hugepage_kib));
            size_t switches = 0, paired = 0;
            for (size_t cell = 0; cell < vm.cells.size(); ++cell) {
                const VmCell& vc = vm.cells[cell];
                CHECK(doc.value("/domain/numatune/memnode[@cellid='" + std::to_string(cell) + "']", "nodeset") ==
                      std::to_string(vc.host_node));
                for (const auto& slot : vc.slots) {
                    ++switches;
                    std::set<int> upstreams;
                    std::vector<std::string> devs = slot.gpus;
                    devs.insert(devs.end(), slot.nics.begin(), slot.nics.end());
                    // A GPU paired through a switch has its NIC beside it.
                    if (!slot.gpus.empty() && !host.gpu(slot.gpus[0])->pairing_switch.empty()) {
                        REQUIRE(!slot.nics.empty());
                    }
                    for (const auto& d : devs) {
                        INFO(d);
                        REQUIRE(t.port_of.count(d) == 1);
                        const auto& down = t.ctl.at(t.port_of.at(d));
                        CHECK(down.first == "pcie-switch-downstream-port");
                        const auto& up = t.ctl.at(down.second);
                        CHECK(up.first == "pcie-switch-upstream-port");
                        upstreams.insert(down.second);
                        const auto& root = t.ctl.at(up.second);
                        CHECK(root.first == "pcie-root-port");
                        const auto& pxb = t.ctl.at(root.second);
                        REQUIRE(pxb.first == "pcie-expander-bus");
                        const int guest_cell = t.node_of_pxb.at(root.second);
                        CHECK(guest_cell == static_cast<int>(cell));
                        CHECK(vm.cells[static_cast<size_t>(guest_cell)].host_node == host.node_of(*host.device(d)));
                        CHECK(pxb.second == 0);  // on pcie-root
                    }
                    CHECK(upstreams.size() == 1);
                    if (!slot.gpus.empty() && !slot.nics.empty()) ++paired;
                }
            }
            CHECK(doc.values("/domain/devices/controller[@model='pcie-switch-upstream-port']").size() == switches);
            // GPUs beside NICs: ATS-backed peer-to-peer wants the vIOMMU.
            CHECK(doc.value("/domain/devices/iommu", "model") == (paired > 0 ? "intel" : ""));
            if (paired > 0) CHECK(doc.value("/domain/devices/iommu/driver", "caching_mode") == "on");
        }
    }
}

TEST_CASE("guest bus numbers stay inside each expander bus's range", "[vm][domain_xml]") {
    const HostTopology host = load_fixture("azure-ndv4");
    const Placement p = place_case(host, {"azure-ndv4", Split::whole, kHugePage1G});
    const GuestPciLayout layout = plan_guest_pci(p.vms[0]);
    std::vector<const GuestController*> pxbs;
    for (const auto& c : layout.controllers) {
        if (c.model == "pcie-expander-bus") pxbs.push_back(&c);
    }
    REQUIRE(pxbs.size() == 4);
    std::set<std::string> guest_addrs;
    for (const auto& d : layout.devices) {
        CHECK(guest_addrs.insert(d.guest).second);
        const int bus = std::stoi(d.guest.substr(5, 2), nullptr, 16);
        const auto& pxb = *pxbs[static_cast<size_t>(d.cell)];
        const int end =
            static_cast<size_t>(d.cell) + 1 < pxbs.size() ? pxbs[static_cast<size_t>(d.cell) + 1]->bus_nr : 256;
        CHECK(bus > pxb.bus_nr);
        CHECK(bus < end);
    }
    CHECK(guest_addrs.size() == p.vms[0].devices().size());
}

TEST_CASE("every generated domain passes virt-xml-validate", "[vm][domain_xml]") {
    ProcessRunner runner;
    const std::string dir = std::filesystem::temp_directory_path() / ("kiln-vm-validate-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    auto validate = [&](const std::string& name, const std::string& xml) {
        const std::string path = dir + "/" + name + ".xml";
        std::ofstream(path) << xml;
        auto r = runner.run({.argv = {"virt-xml-validate", path, "domain"}});
        REQUIRE(r.ok());
        INFO(name << ": " << r->out << r->err);
        CHECK(r->success());
    };
    for (const auto& c : golden_cases()) {
        const HostTopology host = load_fixture(c.fixture);
        const Placement p = place_case(host, c);
        for (size_t i = 0; i < p.vms.size(); ++i) {
            DomainOptions o = golden_options(p, i);
            validate(case_name(c, p.vms[i]), *domain_xml(host, p.vms[i], o));
            o.net = NetBackend::passt;
            o.accelerator = Accelerator::tcg;
            validate(case_name(c, p.vms[i]) + "-passt-tcg", *domain_xml(host, p.vms[i], o));
            // With the lab's emulated fabric NIC and the RDMA port forward.
            o.fabric_bridge = "kilnfab0";
            o.smoke_host_port = 29601;
            o.rdma_host_port = 39601;
            validate(case_name(c, p.vms[i]) + "-passt-fabric", *domain_xml(host, p.vms[i], o));
            o.net = NetBackend::slirp;
            validate(case_name(c, p.vms[i]) + "-slirp-fabric", *domain_xml(host, p.vms[i], o));
        }
    }
    std::filesystem::remove_all(dir);
}

TEST_CASE("user networking forwards the smoke port per guest_contract.h", "[vm][domain_xml]") {
    const HostTopology host = load_fixture("azure-ndv5");
    const Placement p = place_case(host, {"azure-ndv5", Split::numa, kHugePage1G});
    DomainOptions o = golden_options(p, 1);
    o.smoke_host_port = 29617;
    {
        const XmlDoc doc(*domain_xml(host, p.vms[1], o));
        const auto args = doc.values("/domain/qemu:commandline/qemu:arg", "value");
        REQUIRE(args.size() == 4);
        CHECK(args[1] == "user,id=kilnnet0,hostfwd=tcp:127.0.0.1:29617-:29500");
        CHECK(args[3] == "virtio-net-pci,netdev=kilnnet0,bus=pcie.0,addr=0x1e");
        CHECK(doc.values("/domain/devices/interface").empty());
    }
    o.net = NetBackend::passt;
    {
        const XmlDoc doc(*domain_xml(host, p.vms[1], o));
        CHECK(doc.values("/domain/qemu:commandline").empty());
        CHECK(doc.value("/domain/devices/interface[@type='user']/backend", "type") == "passt");
        CHECK(doc.value("/domain/devices/interface/portForward/range", "start") == "29617");
        CHECK(doc.value("/domain/devices/interface/portForward/range", "to") == std::to_string(kGuestSmokePort));
    }
}

TEST_CASE("TCG domains use libvirt type qemu and a CPU model TCG can run", "[vm][domain_xml]") {
    const HostTopology host = load_fixture("azure-ndv5");
    const Placement p = place_case(host, {"azure-ndv5", Split::whole, kHugePage1G});
    DomainOptions o = golden_options(p, 0);
    o.accelerator = Accelerator::tcg;
    const XmlDoc doc(*domain_xml(host, p.vms[0], o));
    CHECK(doc.value("/domain", "type") == "qemu");
    CHECK(doc.value("/domain/cpu", "mode") == "maximum");
    // Same name, same UUID: a redefine keeps the domain's identity.
    CHECK(doc.value("/domain/uuid") == uuid_from_name(o.name));
    CHECK(uuid_from_name("a") != uuid_from_name("b"));
    CHECK(uuid_from_name("a").size() == 36);
}

TEST_CASE("domain XML refuses a VM it cannot describe", "[vm][domain_xml]") {
    const HostTopology host = load_fixture("azure-ndv5");
    Placement p = place_case(host, {"azure-ndv5", Split::numa, kHugePage1G});
    DomainOptions o = golden_options(p, 0);
    SECTION("hugepages asked, none placed") {
        p.vms[0].cells[0].hugepages = 0;
        auto r = domain_xml(host, p.vms[0], o);
        REQUIRE_FALSE(r.ok());
        CHECK(r.error().code == "vm.domain");
        CHECK(r.error().message.find("hugepages") != std::string::npos);
    }
    SECTION("a device the host lacks") {
        p.vms[0].cells[0].slots[0].gpus.push_back("0000:ee:00.0");
        auto r = domain_xml(host, p.vms[0], o);
        REQUIRE_FALSE(r.ok());
        CHECK(r.error().message.find("0000:ee:00.0") != std::string::npos);
    }
    SECTION("a cell on a node the host lacks") {
        p.vms[0].cells[0].host_node = 7;
        auto r = domain_xml(host, p.vms[0], o);
        REQUIRE_FALSE(r.ok());
        CHECK(r.error().message.find("node 7") != std::string::npos);
    }
}

TEST_CASE("no host function is a hostdev twice, and a GPU's audio shares its guest slot",
          "[vm][domain_xml][gpudirect]") {
    for (const auto& c : golden_cases()) {
        const HostTopology host = load_fixture(c.fixture);
        const Placement p = place_case(host, c);
        std::set<std::string> across;  // nor in two VMs of the node
        for (size_t i = 0; i < p.vms.size(); ++i) {
            INFO(case_name(c, p.vms[i]));
            const XmlDoc doc(*domain_xml(host, p.vms[i], golden_options(p, i)));
            const auto n = doc.values("/domain/devices/hostdev").size();
            std::map<std::string, std::string> guest_of;  // host -> guest bus:slot.function
            for (size_t k = 1; k <= n; ++k) {
                const std::string at = "/domain/devices/hostdev[" + std::to_string(k) + "]";
                char bdf[32];
                std::snprintf(bdf, sizeof bdf, "%04x:%02x:%02x.%x", hexnum(doc.value(at + "/source/address", "domain")),
                              hexnum(doc.value(at + "/source/address", "bus")),
                              hexnum(doc.value(at + "/source/address", "slot")),
                              hexnum(doc.value(at + "/source/address", "function")));
                INFO(bdf);
                CHECK(across.insert(bdf).second);
                guest_of[bdf] = doc.value(at + "/address", "bus") + ":" + doc.value(at + "/address", "slot") + "." +
                                doc.value(at + "/address", "function");
                if (host.gpu(bdf) && !host.gpu(bdf)->companions.empty()) {
                    CHECK(doc.value(at + "/address", "multifunction") == "on");
                }
            }
            for (const auto& g : p.vms[i].gpus()) {
                for (const auto& f : host.gpu(g)->companions) {
                    INFO(f);
                    REQUIRE(guest_of.count(f) == 1);
                    const std::string gpu = guest_of.at(g), comp = guest_of.at(f);
                    CHECK(comp.substr(0, comp.size() - 1) == gpu.substr(0, gpu.size() - 1));
                    CHECK(comp.back() == f.back());
                }
            }
        }
    }
}

TEST_CASE("an emulated fabric NIC sits on its bridge with a stable MAC, and the RDMA port is forwarded",
          "[vm][domain_xml]") {
    const HostTopology host = load_fixture("azure-ndv5");
    const Placement p = place_case(host, {"azure-ndv5", Split::numa, kHugePage1G});
    DomainOptions o = golden_options(p, 1);
    o.smoke_host_port = 29617;
    o.rdma_host_port = 39617;
    o.fabric_bridge = "kilnfab0";
    const std::string mac = mac_from_name(o.name);
    CHECK(mac.rfind("52:54:00:", 0) == 0);
    CHECK(mac.size() == 17);
    CHECK(mac_from_name(o.name) == mac);
    CHECK(mac_from_name(o.name + "x") != mac);
    {
        const XmlDoc doc(*domain_xml(host, p.vms[1], o));
        const auto args = doc.values("/domain/qemu:commandline/qemu:arg", "value");
        REQUIRE(args.size() == 4);
        CHECK(args[1] == "user,id=kilnnet0,hostfwd=tcp:127.0.0.1:29617-:29500,hostfwd=tcp:127.0.0.1:39617-:" +
                             std::to_string(kGuestRdmaPort));
        CHECK(doc.value("/domain/devices/interface[@type='bridge']/source", "bridge") == "kilnfab0");
        CHECK(doc.value("/domain/devices/interface[@type='bridge']/mac", "address") == mac);
        CHECK(doc.value("/domain/devices/interface[@type='bridge']/model", "type") == "virtio");
    }
    o.net = NetBackend::passt;
    {
        const XmlDoc doc(*domain_xml(host, p.vms[1], o));
        const auto starts = doc.values("/domain/devices/interface[@type='user']/portForward/range", "start");
        CHECK(starts == std::vector<std::string>{"29617", "39617"});
        const auto tos = doc.values("/domain/devices/interface[@type='user']/portForward/range", "to");
        CHECK(tos == std::vector<std::string>{std::to_string(kGuestSmokePort), std::to_string(kGuestRdmaPort)});
    }
    // Without a bridge: no second NIC, no second forward.
    o = golden_options(p, 1);
    o.smoke_host_port = 29617;
    const XmlDoc plain(*domain_xml(host, p.vms[1], o));
    CHECK(plain.values("/domain/devices/interface[@type='bridge']").empty());
    CHECK(plain.values("/domain/qemu:commandline/qemu:arg", "value")[1].find("39617") == std::string::npos);
}
