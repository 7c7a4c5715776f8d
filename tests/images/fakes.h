// Fakes for the builder's side effects: a GuestDisk that keeps files in a
// map and scripts command results, and a CommandRunner that makes the files
// mmdebstrap and qemu-img would make.
#pragma once

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "images/guest_disk.h"
#include "provisioner/core/command.h"

namespace kiln::test::images {

struct FakeDiskWorld {
    // Files of every disk ever opened, by guest path (a fake: one namespace).
    std::map<std::string, std::string> files = {{"/boot/vmlinuz-6.1.0-99-amd64", "k"},
                                                {"/boot/initrd.img-6.1.0-99-amd64", "i"}};
    std::vector<std::string> calls;  // "launch", "run:<script>", "network:1", ...
    std::vector<std::map<std::string, std::string>> envs;
    // Decides a command's result; default: exit 0, dpkg-query lists two packages.
    std::function<kiln::images::GuestCommandResult(const std::string&)> on_run;
    int launches = 0;
    // Errors the next launches return, first first (an appliance that hung).
    std::vector<kiln::Error> launch_errors;
};

class FakeDisk : public kiln::images::GuestDisk {
public:
    explicit FakeDisk(FakeDiskWorld& w) : w_(w) {}
    Status add_drive(const std::string& path, const std::string& format) override {
        w_.calls.push_back("add_drive:" + format);
        if (!std::filesystem::exists(path)) return make_error("image", "image.guestfs", "no such disk " + path);
        return ok_status();
    }
    Status set_network(bool on) override {
        w_.calls.push_back(std::string("network:") + (on ? "1" : "0"));
        return ok_status();
    }
    Status launch() override {
        ++w_.launches;
        w_.calls.push_back("launch");
        if (!w_.launch_errors.empty()) {
            kiln::Error e = w_.launch_errors.front();
            w_.launch_errors.erase(w_.launch_errors.begin());
            return e;
        }
        return ok_status();
    }
    Status part_disk_mbr(const std::string&) override { return note("part_disk"); }
    Status set_bootable(const std::string&, int) override { return note("bootable"); }
    Status mkfs_ext4(const std::string&, const std::string&, const std::string& uuid) override {
        return note("mkfs:" + uuid);
    }
    Status write_device(const std::string&, const std::string& bytes, int64_t) override {
        return note("mbr:" + std::to_string(bytes.size()));
    }
    Status extlinux(const std::string& dir) override { return note("extlinux:" + dir); }
    Status mount(const std::string&, const std::string&) override { return note("mount"); }
    Status tar_in(const std::string& host, const std::string&) override {
        if (!std::filesystem::exists(host)) return make_error("image", "image.guestfs", "no tar");
        return note("tar_in");
    }
    // Host layers need a real tree (tests/images/host_tree_test.cc): the
    // fake only records that one was asked for.
    Status tar_out(const std::string&, const std::string&) override {
        return make_error("image", "image.guestfs", "the fake disk has no tar_out");
    }
    Status mkdir_p(const std::string&) override { return ok_status(); }
    Status write_file(const std::string& path, const std::string& content, int mode) override {
        w_.files[path] = content;
        modes[path] = mode;
        return ok_status();
    }
    Status upload(const std::string& host, const std::string& path, int mode) override {
        std::ifstream in(host, std::ios::binary);
        if (!in) return make_error("image", "image.guestfs", "upload: no " + host);
        w_.files[path] = std::string(std::istreambuf_iterator<char>(in), {});
        modes[path] = mode;
        return ok_status();
    }
    Result<std::string> read_file(const std::string& path) override {
        auto it = w_.files.find(path);
        if (it == w_.files.end()) return make_error("image", "image.guestfs", "no " + path);
        return it->second;
    }
    Result<std::vector<std::string>> ls(const std::string& dir) override {
        std::vector<std::string> out;
        const std::string prefix = dir + "/";
        for (const auto& [p, _] : w_.files)
            if (p.rfind(prefix, 0) == 0 && p.find('/', prefix.size()) == std::string::npos)
                out.push_back(p.substr(prefix.size()));
        return out;
    }
    bool exists(const std::string& path) override {
        for (const auto& [p, _] : w_.files)
            if (p == path || p.rfind(path + "/", 0) == 0) return true;
        return false;
    }
    Status rm_rf(const std::string& path) override {
        w_.calls.push_back("rm_rf:" + path);
        for (auto it = w_.files.begin(); it != w_.files.end();) {
            if (it->first == path || it->first.rfind(path + "/", 0) == 0)
                it = w_.files.erase(it);
            else
                ++it;
        }
        return ok_status();
    }
    Result<kiln::images::GuestCommandResult> run(const std::string& script,
                                                 const std::map<std::string, std::string>& env,
                                                 std::chrono::seconds) override {
        w_.calls.push_back("run:" + script);
        w_.envs.push_back(env);
        if (w_.on_run) return w_.on_run(script);
        if (script.find("dpkg-query") != std::string::npos)
            return kiln::images::GuestCommandResult{0, "zlib1g\t1:1.2.13\nbash\t5.2.15-2\n"};
        return kiln::images::GuestCommandResult{0, ""};
    }
    Status shutdown() override { return note("shutdown"); }

    std::map<std::string, int> modes;

private:
    Status note(const std::string& c) {
        w_.calls.push_back(c);
        return ok_status();
    }
    FakeDiskWorld& w_;
};

class FakeDiskFactory : public kiln::images::GuestDiskFactory {
public:
    explicit FakeDiskFactory(FakeDiskWorld& w) : w_(w) {}
    Result<std::unique_ptr<kiln::images::GuestDisk>> open() override {
        return std::unique_ptr<kiln::images::GuestDisk>(new FakeDisk(w_));
    }

private:
    FakeDiskWorld& w_;
};

// Makes the files the real tools would: mmdebstrap's tar, qemu-img's disks.
class FakeTools : public kiln::CommandRunner {
public:
    std::vector<std::vector<std::string>> argvs;
    std::string mmdebstrap_fails_with;  // its stderr, exit 25, when set
    Result<kiln::CommandResult> run(const kiln::CommandSpec& spec) override {
        argvs.push_back(spec.argv);
        envs.push_back(spec.env);
        namespace fs = std::filesystem;
        const auto& a = spec.argv;
        auto at = [&](const std::string& p) {
            fs::path fp(p);
            return fp.is_absolute() || spec.cwd.empty() ? fp : fs::path(spec.cwd) / fp;
        };
        if (a[0] == "mmdebstrap" && !mmdebstrap_fails_with.empty()) {
            kiln::CommandResult r;
            r.exit_code = 25;
            r.err = mmdebstrap_fails_with;
            return r;
        }
        if (a[0] == "mmdebstrap") {
            for (size_t i = 1; i < a.size(); ++i)
                if (a[i].size() > 4 && a[i].substr(a[i].size() - 4) == ".tar") std::ofstream(a[i]) << "tar";
        } else if (a[0] == "qemu-img" && a[1] == "create") {
            std::string file;
            for (size_t i = 2; i < a.size(); ++i)
                if (a[i].find(".qcow2") != std::string::npos && (i == 0 || a[i - 1] != "-b")) file = a[i];
            std::ofstream(at(file)) << "disk";
        } else if (a[0] == "qemu-img" && a[1] == "convert") {
            std::ofstream(a.back()) << "flattened image " << a[a.size() - 2];
        }
        kiln::CommandResult r;
        r.exit_code = 0;
        return r;
    }
    std::vector<std::map<std::string, std::string>> envs;
};

}  // namespace kiln::test::images
