// Helpers for the domain XML and NCCL topology tests: the fixture hosts'
// placements, golden files (KILN_REGENERATE=1 rewrites them), and a small
// libxml2 reader for structural assertions.
#pragma once

#include <libxml/parser.h>
#include <libxml/xpath.h>
#include <libxml/xpathInternals.h>
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "provisioner/vm/placement.h"
#include "tests/vm/sysfs_fixture.h"

namespace kiln::vm::test {

struct HostCase {
    std::string fixture;
    Split split;
    uint64_t hugepage_kib;
};

// The fixture hosts and the splits the golden files cover.
inline std::vector<HostCase> golden_cases() {
    return {{"azure-ndv4", Split::whole, kHugePage1G},
            {"azure-ndv4", Split::numa, kHugePage1G},
            {"azure-ndv5", Split::whole, kHugePage1G},
            {"azure-ndv5", Split::numa, kHugePage1G},
            {"aws-p4d", Split::whole, kHugePage1G},
            {"aws-p4d", Split::numa, kHugePage1G},
            {"cpu-only", Split::whole, kHugePage2M},
            // Shapes of real servers (issue 15): nested switches, root-port
            // NICs, a GPU with its audio function.
            {"hgx-a100", Split::whole, kHugePage1G},
            {"hgx-a100", Split::numa, kHugePage1G},
            {"pcie-4gpu-vf", Split::numa, kHugePage1G},
            {"amd-nps4-rootport", Split::whole, kHugePage1G},
            // ACS off: each top switch's group passed whole (PFs and VFs beside the GPUs).
            {"hgx-a100-acs-off", Split::numa, kHugePage1G}};
}

inline Placement place_case(const HostTopology& host, const HostCase& c) {
    PlacementRequest req;
    req.split = c.split;
    req.hugepage_kib = c.hugepage_kib;
    auto p = place(host, req);
    if (!p) FAIL("placement of " << c.fixture << " failed: " << p.error().str());
    return std::move(p).value();
}

inline std::string read_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// Compares with tests/fixtures/vm/<name>; KILN_REGENERATE=1 writes it.
inline void check_golden(const std::string& name, const std::string& text) {
    const std::string path = std::string(KILN_VM_GOLDEN) + "/" + name;
    const char* regen = std::getenv("KILN_REGENERATE");
    if (regen && std::string(regen) == "1") {
        std::ofstream out(path, std::ios::binary | std::ios::trunc);
        out << text;
        REQUIRE(out.good());
        return;
    }
    INFO("golden file " << path << " (KILN_REGENERATE=1 rewrites it)");
    REQUIRE(std::filesystem::exists(path));
    CHECK(read_text(path) == text);
}

struct XmlDocFree {
    void operator()(xmlDocPtr d) const { xmlFreeDoc(d); }
};

class XmlDoc {
public:
    explicit XmlDoc(const std::string& text)
        : doc_(xmlReadMemory(text.data(), static_cast<int>(text.size()), "in.xml", nullptr, XML_PARSE_NONET)) {
        REQUIRE(doc_ != nullptr);
    }
    // Each match's attribute `attr` (or its text when attr is "").
    std::vector<std::string> values(const std::string& xpath, const std::string& attr = "") const {
        std::vector<std::string> out;
        xmlXPathContextPtr ctx = xmlXPathNewContext(doc_.get());
        xmlXPathRegisterNs(ctx, BAD_CAST "qemu", BAD_CAST "http://libvirt.org/schemas/domain/qemu/1.0");
        xmlXPathObjectPtr r = xmlXPathEvalExpression(BAD_CAST xpath.c_str(), ctx);
        if (r && r->nodesetval) {
            for (int i = 0; i < r->nodesetval->nodeNr; ++i) {
                xmlNodePtr n = r->nodesetval->nodeTab[i];
                xmlChar* v = attr.empty() ? xmlNodeGetContent(n) : xmlGetProp(n, BAD_CAST attr.c_str());
                out.emplace_back(v ? reinterpret_cast<const char*>(v) : "");
                xmlFree(v);
            }
        }
        xmlXPathFreeObject(r);
        xmlXPathFreeContext(ctx);
        return out;
    }
    std::string value(const std::string& xpath, const std::string& attr = "") const {
        auto v = values(xpath, attr);
        return v.empty() ? "" : v.front();
    }

private:
    std::unique_ptr<xmlDoc, XmlDocFree> doc_;
};

inline int hexnum(const std::string& s) {
    return static_cast<int>(std::stol(s, nullptr, 0));
}

}  // namespace kiln::vm::test
