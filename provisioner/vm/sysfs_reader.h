// Reads one sysfs tree: "/sys" on a host, a recorded tree in tests. The root
// is the only side effect host discovery has, so the fake is a folder
// (tests/fixtures/sysfs/<host>) rather than a mock class.
//
// Every error names the file as `root/rel` exactly as the caller gave the
// root, with domain "sysfs" and code "missing", "malformed" or "unreadable":
//   sysfs: /x/sys/bus/pci/devices/0000:07:00.0/numa_node: missing
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "provisioner/core/result.h"

namespace kiln::vm {

class SysfsReader {
public:
    explicit SysfsReader(std::filesystem::path root) : root_(std::move(root)) {}

    const std::filesystem::path& root() const { return root_; }
    // root/rel as text, for messages.
    std::string path(const std::string& rel) const;
    bool exists(const std::string& rel) const;

    // File contents without the trailing newline.
    Result<std::string> text(const std::string& rel) const;
    // nullopt when the file does not exist; other failures are errors.
    Result<std::optional<std::string>> optional_text(const std::string& rel) const;
    // The file as it is, binary (a device's `config`); nullopt when absent.
    Result<std::optional<std::string>> optional_bytes(const std::string& rel) const;

    // "0x10de" style (sysfs vendor, device, class); `max` bounds the value.
    Result<uint64_t> hex(const std::string& rel, uint64_t max) const;
    Result<std::optional<uint64_t>> optional_hex(const std::string& rel, uint64_t max) const;
    // Decimal, possibly negative (numa_node is -1 without NUMA information).
    Result<int64_t> integer(const std::string& rel) const;
    Result<std::optional<int64_t>> optional_integer(const std::string& rel) const;

    // The last component of a symlink's target ("vfio-pci" for driver,
    // "17" for iommu_group); nullopt when there is no such link.
    Result<std::optional<std::string>> link_name(const std::string& rel) const;
    // The link's target with every symlink resolved, as an absolute path.
    Result<std::filesystem::path> resolve(const std::string& rel) const;
    // Entry names in a folder, sorted. A missing folder is an error unless
    // `optional`, when it gives an empty list.
    Result<std::vector<std::string>> list(const std::string& rel, bool optional = false) const;

    Error missing(const std::string& rel) const;
    Error malformed(const std::string& rel, const std::string& why) const;

private:
    std::filesystem::path root_;
};

// "0-23,48-71" -> {0..23, 48..71}; empty text is an empty list.
std::optional<std::vector<int>> parse_cpulist(const std::string& text);
// The inverse, compact: {0,1,2,5} -> "0-2,5".
std::string format_cpulist(const std::vector<int>& cpus);

}  // namespace kiln::vm
