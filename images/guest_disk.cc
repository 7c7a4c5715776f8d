#include "images/guest_disk.h"

#include "images/appliance_watchdog.h"

#include <guestfs.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include <fmt/format.h>

namespace kiln::images {

namespace {

// Single-quotes a word for /bin/sh.
std::string sh_quote(const std::string& s) {
    std::string out = "'";
    for (char c : s) {
        if (c == '\'')
            out += "'\\''";
        else
            out += c;
    }
    return out + "'";
}

// Owns one guestfs_h; closing it stops the appliance.
class GuestfsHandle {
public:
    explicit GuestfsHandle(guestfs_h* g) : g_(g) {}
    GuestfsHandle(GuestfsHandle&& o) noexcept : g_(o.g_) { o.g_ = nullptr; }
    GuestfsHandle(const GuestfsHandle&) = delete;
    GuestfsHandle& operator=(const GuestfsHandle&) = delete;
    GuestfsHandle& operator=(GuestfsHandle&&) = delete;
    ~GuestfsHandle() {
        if (g_) guestfs_close(g_);
    }
    guestfs_h* get() const { return g_; }

private:
    guestfs_h* g_;
};

class GuestfsDisk : public GuestDisk {
public:
    GuestfsDisk(GuestfsHandle h, ApplianceDeadlines deadlines) : h_(std::move(h)), deadlines_(deadlines) {}

    Status add_drive(const std::string& path, const std::string& format) override {
        // The watchdog finds this appliance's qemu by the (absolute) drive.
        std::error_code ec;
        if (drive_.empty()) drive_ = std::filesystem::absolute(path, ec).string();
        return check(guestfs_add_drive_opts(g(), path.c_str(), GUESTFS_ADD_DRIVE_OPTS_FORMAT, format.c_str(), -1),
                     "add_drive " + path);
    }
    Status set_network(bool on) override { return check(guestfs_set_network(g(), on ? 1 : 0), "set_network"); }
    Status launch() override {
        ApplianceWatchdog dog(drive_, deadlines_.launch);
        const int rc = guestfs_launch(g());
        if (auto pid = dog.killed()) return hung("launching the appliance", deadlines_.launch, *pid);
        return check(rc, "launch the libguestfs appliance");
    }

    Status part_disk_mbr(const std::string& device) override {
        return check(guestfs_part_disk(g(), device.c_str(), "mbr"), "part_disk " + device);
    }
    Status set_bootable(const std::string& device, int partnum) override {
        return check(guestfs_part_set_bootable(g(), device.c_str(), partnum, 1), "part_set_bootable");
    }
    Status mkfs_ext4(const std::string& partition, const std::string& label, const std::string& uuid) override {
        if (auto st = check(guestfs_mkfs(g(), "ext4", partition.c_str()), "mkfs ext4 " + partition); !st) return st;
        if (auto st = check(guestfs_set_label(g(), partition.c_str(), label.c_str()), "set_label"); !st) return st;
        return check(guestfs_set_uuid(g(), partition.c_str(), uuid.c_str()), "set_uuid");
    }
    Status write_device(const std::string& device, const std::string& bytes, int64_t offset) override {
        return check(guestfs_pwrite_device(g(), device.c_str(), bytes.data(), bytes.size(), offset) < 0 ? -1 : 0,
                     "pwrite_device " + device);
    }
    Status extlinux(const std::string& dir) override { return check(guestfs_extlinux(g(), dir.c_str()), "extlinux"); }
    Status mount(const std::string& device, const std::string& mountpoint) override {
        return check(guestfs_mount(g(), device.c_str(), mountpoint.c_str()), "mount " + device);
    }
    Status tar_in(const std::string& host_tar, const std::string& dir) override {
        return check(guestfs_tar_in_opts(g(), host_tar.c_str(), dir.c_str(), GUESTFS_TAR_IN_OPTS_XATTRS, 1,
                                         GUESTFS_TAR_IN_OPTS_ACLS, 1, -1),
                     "tar_in " + host_tar);
    }
    Status tar_out(const std::string& dir, const std::string& host_tar) override {
        return check(guestfs_tar_out_opts(g(), dir.c_str(), host_tar.c_str(), GUESTFS_TAR_OUT_OPTS_NUMERICOWNER, 1,
                                          GUESTFS_TAR_OUT_OPTS_XATTRS, 1, GUESTFS_TAR_OUT_OPTS_ACLS, 1, -1),
                     "tar_out " + dir);
    }
    Status mkdir_p(const std::string& path) override {
        return check(guestfs_mkdir_p(g(), path.c_str()), "mkdir " + path);
    }
    Status write_file(const std::string& path, const std::string& content, int mode) override {
        if (auto st = check(guestfs_write(g(), path.c_str(), content.data(), content.size()), "write " + path); !st)
            return st;
        return check(guestfs_chmod(g(), mode, path.c_str()), "chmod " + path);
    }
    Status upload(const std::string& host_path, const std::string& path, int mode) override {
        if (auto st = check(guestfs_upload(g(), host_path.c_str(), path.c_str()), "upload " + path); !st) return st;
        return check(guestfs_chmod(g(), mode, path.c_str()), "chmod " + path);
    }
    Result<std::string> read_file(const std::string& path) override {
        size_t size = 0;
        char* data = guestfs_read_file(g(), path.c_str(), &size);
        if (!data) return error("read " + path);
        std::string out(data, size);
        std::free(data);
        return out;
    }
    Result<std::vector<std::string>> ls(const std::string& dir) override {
        char** names = guestfs_ls(g(), dir.c_str());
        if (!names) return error("ls " + dir);
        std::vector<std::string> out;
        for (char** p = names; *p; ++p) {
            out.emplace_back(*p);
            std::free(*p);
        }
        std::free(names);
        return out;
    }
    bool exists(const std::string& path) override { return guestfs_exists(g(), path.c_str()) == 1; }
    Status rm_rf(const std::string& path) override { return check(guestfs_rm_rf(g(), path.c_str()), "rm -rf " + path); }

    Result<GuestCommandResult> run(const std::string& script, const std::map<std::string, std::string>& env,
                                   std::chrono::seconds timeout) override {
        // The script goes in as a file so it may hold any text. Its output
        // and exit code come back on the appliance's stdout, never through
        // the image's disk, so a full disk still reports what happened.
        std::string body = "export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n";
        for (const auto& [k, v] : env) body += "export " + k + "=" + sh_quote(v) + "\n";
        body += script + "\n";
        const std::string dir = "/var/tmp/.kiln-step";
        if (auto st = mkdir_p(dir); !st) return st.error();
        if (auto st = write_file(dir + "/script", body, 0700); !st) return st.error();
        const std::string wrapper = fmt::format(
            "{{ timeout -k 10 {} /bin/sh -e {}/script 2>&1 </dev/null; echo \"KILN-RC=$?\"; }} | tail -c 262144",
            timeout.count(), dir);
        const auto deadline = std::chrono::duration_cast<std::chrono::milliseconds>(timeout) + deadlines_.command_grace;
        char* out = nullptr;
        std::optional<pid_t> killed;
        {
            ApplianceWatchdog dog(drive_, deadline);
            out = guestfs_sh(g(), wrapper.c_str());
            killed = dog.killed();
        }
        if (killed) {
            std::free(out);
            return hung("running a command inside the image", deadline, *killed);
        }
        if (!out) return error("run a command inside the image");
        std::string text(out);
        std::free(out);
        (void)rm_rf(dir);
        GuestCommandResult r;
        const auto at = text.rfind("KILN-RC=");
        if (at == std::string::npos)
            return make_error("image", "image.guestfs", "a command inside the image left no exit code");
        r.exit_code = std::atoi(text.c_str() + at + 8);
        r.output = text.substr(0, at);
        return r;
    }

    Status shutdown() override {
        if (auto st = check(guestfs_umount_all(g()), "umount"); !st) return st;
        return check(guestfs_shutdown(g()), "shutdown the appliance");
    }

private:
    guestfs_h* g() const { return h_.get(); }
    Error error(const std::string& what) const {
        const char* e = guestfs_last_error(g());
        std::string msg = e ? e : "unknown libguestfs error";
        if (guestfs_last_errno(g()) == ENOSPC || msg.find("No space left") != std::string::npos)
            return make_error("image", "image.disk_full", fmt::format("{}: the image disk is full: {}", what, msg));
        return make_error("image", "image.guestfs", fmt::format("{}: {}", what, msg));
    }
    Status check(int rc, const std::string& what) const {
        if (rc == -1) return error(what);
        return ok_status();
    }
    static Error hung(const std::string& what, std::chrono::milliseconds deadline, pid_t pid) {
        return make_error("image", "image.appliance_hung",
                          fmt::format("the libguestfs appliance hung {}: no answer in {}s, so its qemu (pid {}) "
                                      "was killed; a hang under TCG is usually transient",
                                      what, std::chrono::duration_cast<std::chrono::seconds>(deadline).count(), pid),
                          true);
    }

    GuestfsHandle h_;
    ApplianceDeadlines deadlines_;
    std::string drive_;
};

}  // namespace

Result<std::unique_ptr<GuestDisk>> GuestfsDiskFactory::open() {
    guestfs_h* g = guestfs_create();
    if (!g) return make_error("image", "image.guestfs", "cannot create a libguestfs handle");
    GuestfsHandle h(g);
    // Errors come back as values (guestfs_last_error), not on stderr.
    guestfs_set_error_handler(g, nullptr, nullptr);
    // Layer commands (DKMS above all) run make -j$(nproc) inside the
    // appliance: give it the host's cores, up to 8, and memory to match.
    const unsigned cpus = std::clamp(std::thread::hardware_concurrency(), 1u, 8u);
    guestfs_set_smp(g, static_cast<int>(cpus));
    guestfs_set_memsize(g, static_cast<int>(1536 + 512 * (cpus - 1)));
    return std::unique_ptr<GuestDisk>(new GuestfsDisk(std::move(h), deadlines_));
}

}  // namespace kiln::images
