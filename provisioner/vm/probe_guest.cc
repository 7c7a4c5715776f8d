#include "provisioner/vm/probe_guest.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace kiln::vm {

namespace fs = std::filesystem;

namespace {

// One newc entry: "070701", 13 eight-digit hex fields, the name with its
// NUL, padded to 4 bytes; then the data, padded to 4 bytes.
void cpio_entry(std::string& out, const std::string& name, unsigned mode, const std::string& data, unsigned ino,
                unsigned rdev_major = 0, unsigned rdev_minor = 0) {
    char hdr[111];
    std::snprintf(hdr, sizeof hdr, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X", ino, mode, 0u, 0u, 1u,
                  0u, static_cast<unsigned>(data.size()), 0u, 0u, rdev_major, rdev_minor,
                  static_cast<unsigned>(name.size() + 1), 0u);
    out.append(hdr, 110);
    out += name;
    out += '\0';
    while (out.size() % 4) out += '\0';
    out += data;
    while (out.size() % 4) out += '\0';
}

}  // namespace

Result<std::string> find_host_kernel(const std::string& boot_dir) {
    std::vector<std::string> found;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(boot_dir, ec)) {
        const std::string n = e.path().filename().string();
        if (n.rfind("vmlinuz-", 0) == 0 && e.is_regular_file(ec)) found.push_back(e.path().string());
    }
    if (found.empty()) return make_error("vm", "vm.probe", "no kernel (vmlinuz-*) in " + boot_dir);
    std::sort(found.begin(), found.end());
    return found.back();
}

Result<std::string> find_probe_init() {
    if (const char* env = std::getenv("KILN_PROBE_INIT"); env && *env) return std::string(env);
    std::error_code ec;
    const fs::path self = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        const fs::path p = self.parent_path() / "kiln-probe-init";
        if (fs::exists(p, ec)) return p.string();
    }
    return make_error("vm", "vm.probe", "kiln-probe-init is not beside the kiln executable (set KILN_PROBE_INIT)");
}

Status write_probe_initramfs(const std::string& init_binary, const std::string& out_path) {
    std::ifstream in(init_binary, std::ios::binary);
    if (!in) return make_error("vm", "vm.probe", "cannot read " + init_binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    std::string cpio;
    unsigned ino = 1;
    cpio_entry(cpio, "proc", 040755, "", ino++);
    cpio_entry(cpio, "dev", 040755, "", ino++);
    cpio_entry(cpio, "dev/console", 020600, "", ino++, 5, 1);  // init's stdout
    cpio_entry(cpio, "init", 0100755, ss.str(), ino++);
    cpio_entry(cpio, "TRAILER!!!", 0, "", 0);
    while (cpio.size() % 512) cpio += '\0';
    const std::string tmp = out_path + ".tmp";
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        out << cpio;
        if (!out.good()) return make_error("vm", "vm.probe", "cannot write " + tmp);
    }
    std::error_code ec;
    fs::rename(tmp, out_path, ec);
    if (ec) return make_error("vm", "vm.probe", "cannot move " + tmp + " to " + out_path + ": " + ec.message());
    return ok_status();
}

}  // namespace kiln::vm
