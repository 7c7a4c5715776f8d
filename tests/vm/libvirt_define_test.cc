// A real libvirtd accepts every domain kiln generates for the fixture
// hosts (define, then undefine: the devices do not exist here). Needs a
// running libvirtd (scripts/services.sh starts one).
#include <catch2/catch.hpp>

#include "provisioner/vm/domain_xml.h"
#include "provisioner/vm/guest_contract.h"
#include "provisioner/vm/libvirt_hypervisor.h"
#include "tests/vm/vm_xml_support.h"

using namespace kiln;
using namespace kiln::vm;
using namespace kiln::vm::test;

TEST_CASE("libvirtd accepts the domain of every fixture host and split, and undefine removes it", "[vm][libvirt]") {
    auto hv = LibvirtHypervisor::open("");
    if (!hv) FAIL(hv.error().str());
    const std::string test_tag = "kiln-deftest" + std::to_string(::getpid());
    bool kvm_refused = false;
    bool passt_refused = false;
    for (const auto& c : golden_cases()) {
        const HostTopology host = load_fixture(c.fixture);
        const Placement p = place_case(host, c);
        for (size_t i = 0; i < p.vms.size(); ++i) {
            DomainOptions o =
                domain_options(p, test_tag + "-" + c.fixture + "-" + split_name(c.split) + "-vm" + std::to_string(i));
            o.disk = "/var/lib/kiln/vm/" + o.name + ".qcow2";
            o.seed_iso = "/var/lib/kiln/vm/" + o.name + "-seed.iso";
            o.serial_log = "/var/lib/kiln/vm/" + o.name + ".serial.log";
            o.smoke_host_port = kSmokeHostPortBase + static_cast<int>(i);
            o.desired_hash = "feedface" + std::to_string(i);
            o.base_identity = "sha256:" + std::string(64, static_cast<char>('a' + i));
            for (auto accel : {Accelerator::kvm, Accelerator::tcg}) {
                for (auto net : {NetBackend::slirp, NetBackend::passt}) {
                    o.accelerator = accel;
                    o.net = net;
                    INFO(o.name << " " << accelerator_name(accel) << " " << net_backend_name(net));
                    auto xml = domain_xml(host, p.vms[i], o);
                    REQUIRE(xml.ok());
                    auto d = (*hv)->define(*xml);
                    if (!d.ok() && accel == Accelerator::kvm &&
                        d.error().message.find("does not support virt type 'kvm'") != std::string::npos) {
                        kvm_refused = true;  // this host's libvirt has no usable KVM; the TCG variant still counts
                        continue;
                    }
                    if (!d.ok() && net == NetBackend::passt &&
                        d.error().message.find("'backend': 'passt'") != std::string::npos) {
                        passt_refused = true;  // libvirt 9.0 has no passt backend yet
                        continue;
                    }
                    if (!d.ok()) FAIL(d.error().str());
                    auto info = (*hv)->lookup(o.name);
                    REQUIRE(info.ok());
                    REQUIRE(info->has_value());
                    CHECK((*info)->persistent);
                    CHECK((*info)->state == DomainState::shutoff);
                    auto stored = (*hv)->definition(o.name);
                    REQUIRE(stored.ok());
                    // What observe relies on: the stamp survives libvirt's re-serialization,
                    // and so do the expander buses' NUMA nodes and the passthrough devices.
                    CHECK(stamped_hash(*stored) == o.desired_hash);
                    CHECK(stamped_base(*stored) == o.base_identity);
                    const XmlDoc doc(*stored);
                    CHECK(doc.values("/domain/devices/hostdev[@managed='yes']").size() == p.vms[i].devices().size());
                    CHECK(doc.values("/domain/devices/controller[@model='pcie-expander-bus']/target/node").size() ==
                          doc.values("/domain/devices/controller[@model='pcie-expander-bus']").size());
                    CHECK(serial_log_path(*stored) == o.serial_log);
                    REQUIRE((*hv)->undefine(o.name).ok());
                    auto gone = (*hv)->lookup(o.name);
                    REQUIRE(gone.ok());
                    CHECK_FALSE(gone->has_value());
                }
            }
        }
    }
    if (passt_refused) WARN("this libvirtd rejects <backend type='passt'/>: only the slirp domains were defined");
    if (kvm_refused) WARN("libvirtd here cannot run KVM guests: only the TCG (type='qemu') domains were defined");
    auto names = (*hv)->list_names();
    REQUIRE(names.ok());
    for (const auto& n : *names) CHECK(n.rfind(test_tag, 0) != 0);
}

TEST_CASE("libvirtd's refusal comes back as an error value", "[vm][libvirt]") {
    auto hv = LibvirtHypervisor::open("");
    if (!hv) FAIL(hv.error().str());
    auto d = (*hv)->define("<domain type='qemu'><name>kiln-bad</name></domain>");
    REQUIRE_FALSE(d.ok());
    CHECK(d.error().domain == "libvirt");
    CHECK_FALSE(d.error().message.empty());
    CHECK((*hv)->undefine("kiln-never-defined-" + std::to_string(::getpid())).ok());
}
