#include "images/boot_check.h"

#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "provisioner/core/json_limits.h"
#include "provisioner/vm/guest_contract.h"

namespace kiln::images {

namespace fs = std::filesystem;

namespace {

std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

Error boot_error(const std::string& code, const std::string& msg) {
    return make_error("image", code, msg);
}

std::string first_line(const std::string& text) {
    return text.substr(0, text.find('\n'));
}

}  // namespace

bool probe_kvm(CommandRunner& runner, const std::string& qemu, const std::string& work_dir, std::string* why) {
    if (::access("/dev/kvm", R_OK | W_OK) != 0) {
        if (why) *why = "/dev/kvm is missing or not usable";
        return false;
    }
    // A boot sector: mov dx,0x3f8; mov al,'K'; out dx,al; mov al,'V';
    // out dx,al; cli; hlt; jmp $-1. KVM works when "KV" reaches the serial.
    std::string sector(512, '\0');
    const unsigned char code[] = {0xBA, 0xF8, 0x03, 0xB0, 'K', 0xEE, 0xB0, 'V', 0xEE, 0xFA, 0xF4, 0xEB, 0xFD};
    for (size_t i = 0; i < sizeof(code); ++i) sector[i] = static_cast<char>(code[i]);
    sector[510] = static_cast<char>(0x55);
    sector[511] = static_cast<char>(0xAA);
    const std::string img = work_dir + "/kvm-probe.img", log = work_dir + "/kvm-probe.log";
    std::ofstream(img, std::ios::binary) << sector;
    std::error_code ec;
    fs::remove(log, ec);
    CommandSpec spec;
    // The machine and CPU the boot itself uses: a host whose KVM runs a
    // default-CPU guest can still refuse "-cpu host" at start (failed to
    // set MSR 0x10a), so a probe on other settings would say yes wrongly.
    spec.argv = {qemu,         "-accel",  "kvm",         "-machine", "q35",
                 "-cpu",       "host",    "-display",    "none",     "-nodefaults",
                 "-no-reboot", "-serial", "file:" + log, "-drive",   "file=" + img + ",format=raw,if=ide"};
    spec.timeout = std::chrono::seconds(20);
    spec.kill_grace = std::chrono::seconds(2);
    auto r = runner.run(spec);  // runs until the timeout: the guest halts, QEMU does not exit
    const bool ok = slurp(log).find("KV") != std::string::npos;
    if (why) {
        if (ok)
            *why = "a KVM probe guest ran";
        else if (!r)
            *why = "cannot start " + qemu + ": " + r.error().message;
        else if (!r->timed_out && !r->err.empty())
            *why = "KVM refused the probe guest: " + first_line(r->err);
        else
            *why = "a KVM probe guest printed nothing within 20s (KVM hangs here)";
    }
    return ok;
}

std::optional<nlohmann::json> find_ready_line(const std::string& serial, std::string* line_out) {
    const std::string marker = std::string(vm::kReadyMarker) + " ";
    std::istringstream in(serial);
    for (std::string line; std::getline(in, line);) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        const auto at = line.find(marker);
        if (at == std::string::npos) continue;
        auto j = parse_json_limited(std::string_view(line).substr(at + marker.size()), "the boot check's line",
                                    {64u << 10, 8, 4096}, "images");
        if (!j || !j->is_object()) continue;  // a torn line: keep reading
        if (line_out) *line_out = line.substr(at);
        return std::move(*j);
    }
    return std::nullopt;
}

Result<BootCheckResult> boot_check(CommandRunner& runner, const BootCheckOptions& o) {
    std::error_code ec;
    if (!fs::is_regular_file(o.image, ec)) return boot_error("image.boot_check", "no image at " + o.image);
    fs::create_directories(o.work_dir, ec);
    BootCheckResult res;
    if (o.accel == "kvm") {
        res.accel = "kvm";
        res.accel_reason = "asked for";
    } else if (o.accel == "tcg") {
        res.accel = "tcg";
        res.accel_reason = "asked for";
    } else {
        res.accel = probe_kvm(runner, o.qemu, o.work_dir, &res.accel_reason) ? "kvm" : "tcg";
    }

    // NoCloud seed so cloud-init runs its stages and reports "done".
    const std::string seed_dir = o.work_dir + "/seed";
    fs::create_directories(seed_dir, ec);
    std::ofstream(seed_dir + "/meta-data") << "instance-id: kiln-boot-check\nlocal-hostname: kiln-boot-check\n";
    std::ofstream(seed_dir + "/user-data") << "#cloud-config\n{}\n";
    const std::string seed = o.work_dir + "/seed.iso";
    CommandSpec iso;
    iso.argv = {"genisoimage",
                "-quiet",
                "-output",
                seed,
                "-volid",
                "cidata",
                "-joliet",
                "-rock",
                seed_dir + "/user-data",
                seed_dir + "/meta-data"};
    auto ir = runner.run(iso);
    if (!ir) return ir.error();
    if (!ir->success()) return boot_error("image.boot_check", "genisoimage failed: " + ir->err);

    res.serial_log = o.work_dir + "/serial.log";
    const std::string pidfile = o.work_dir + "/qemu.pid";
    fs::remove(res.serial_log, ec);
    fs::remove(pidfile, ec);
    CommandSpec q;
    q.argv = {o.qemu,
              "-accel",
              res.accel,
              "-machine",
              "q35",
              "-cpu",
              res.accel == "kvm" ? "host" : "max",
              "-m",
              std::to_string(o.memory_mb),
              "-smp",
              std::to_string(o.cpus),
              "-display",
              "none",
              "-nodefaults",
              "-no-reboot",
              "-snapshot",  // never write the image under test
              "-serial",
              "file:" + res.serial_log,
              "-drive",
              "file=" + o.image + ",format=" + o.format + ",if=virtio",
              "-drive",
              "file=" + seed + ",format=raw,if=virtio,readonly=on",
              "-nic",
              "user,model=virtio-net-pci",
              "-daemonize",
              "-pidfile",
              pidfile};
    q.timeout = std::chrono::seconds(60);
    const auto t0 = std::chrono::steady_clock::now();
    auto qr = runner.run(q);
    if (!qr) return qr.error();
    if (!qr->success() && res.accel == "kvm" && o.accel != "kvm") {
        // KVM passed the probe but refused this guest at start: TCG, and say why.
        res.accel = "tcg";
        res.accel_reason = "KVM refused the guest at start (" + first_line(qr->err) + "), so TCG";
        for (size_t i = 0; i + 1 < q.argv.size(); ++i) {
            if (q.argv[i] == "-accel") q.argv[i + 1] = "tcg";
            if (q.argv[i] == "-cpu") q.argv[i + 1] = "max";
        }
        fs::remove(pidfile, ec);
        qr = runner.run(q);
        if (!qr) return qr.error();
    }
    if (!qr->success()) return boot_error("image.boot_check", "qemu did not start: " + qr->err);
    pid_t pid = 0;
    {
        std::ifstream in(pidfile);
        in >> pid;
    }
    if (pid <= 0) return boot_error("image.boot_check", "qemu wrote no pid file");
    auto stop_qemu = [&] {
        ::kill(pid, SIGTERM);
        for (int i = 0; i < 50 && ::kill(pid, 0) == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
        if (::kill(pid, 0) == 0) ::kill(pid, SIGKILL);
    };
    const auto deadline = t0 + o.timeout;
    for (;;) {
        const std::string serial = slurp(res.serial_log);
        if (auto j = find_ready_line(serial, &res.line)) {
            res.ready = *j;
            res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            stop_qemu();
            return res;
        }
        if (::kill(pid, 0) != 0) {
            const std::string tail = serial.size() > 3000 ? serial.substr(serial.size() - 3000) : serial;
            return boot_error("image.boot_check", fmt::format("the guest stopped before {} ({}); serial log {}:\n{}",
                                                              vm::kReadyMarker, res.accel, res.serial_log, tail));
        }
        if (std::chrono::steady_clock::now() >= deadline) {
            stop_qemu();
            const std::string tail = serial.size() > 3000 ? serial.substr(serial.size() - 3000) : serial;
            return boot_error("image.boot_timeout",
                              fmt::format("no {} line within {}s under {}; serial log {}:\n{}", vm::kReadyMarker,
                                          o.timeout.count(), res.accel, res.serial_log, tail));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
}

}  // namespace kiln::images
