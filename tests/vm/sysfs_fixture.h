// Loading the recorded sysfs trees, and throwaway copies of them for tests
// that break a file.
#pragma once

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "provisioner/vm/host_topology.h"

namespace kiln::vm::test {

inline std::string fixture_root(const std::string& name) {
    return std::string(KILN_SYSFS_FIXTURES) + "/" + name;
}

inline HostTopology load_fixture(const std::string& name) {
    auto r = discover_host({fixture_root(name)});
    if (!r.ok()) FAIL("discovery of " << name << " failed: " << r.error().str());
    return std::move(r).value();
}

// A copy of a fixture under the temp dir (symlinks kept as links, so the
// relative targets still resolve inside the copy), removed at scope end.
class FixtureCopy {
public:
    explicit FixtureCopy(const std::string& name) {
        std::string tmpl = (std::filesystem::temp_directory_path() / "kiln-vm-XXXXXX").string();
        REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
        dir_ = tmpl;
        root_ = dir_ + "/sys";
        std::filesystem::copy(fixture_root(name), root_,
                              std::filesystem::copy_options::recursive | std::filesystem::copy_options::copy_symlinks);
    }
    ~FixtureCopy() {
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
    }
    FixtureCopy(const FixtureCopy&) = delete;
    FixtureCopy& operator=(const FixtureCopy&) = delete;

    const std::string& root() const { return root_; }
    std::string path(const std::string& rel) const { return root_ + "/" + rel; }
    // Replaces a file; through the bus/pci/devices link, the real one.
    void write(const std::string& rel, const std::string& text) const {
        std::ofstream out(path(rel), std::ios::trunc);
        out << text;
        REQUIRE(out.good());
    }

private:
    std::string dir_;
    std::string root_;
};

}  // namespace kiln::vm::test
