#include "images/builder.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include <fmt/format.h>

#include "images/apt_sources.h"
#include "images/host_tree.h"
#include "images/manifest.h"
#include "provisioner/core/sha256.h"

namespace kiln::images {

namespace fs = std::filesystem;

namespace {

constexpr int kBuilderFormat = 2;  // bump when the builder's output for a spec changes
constexpr const char* kRootDevice = "/dev/sda";
constexpr const char* kRootPartition = "/dev/sda1";

Error image_error(const std::string& code, const std::string& msg) {
    return make_error("image", code, msg);
}

}  // namespace

// apt's words for a mirror that did not answer or was caught mid-sync (its
// indexes and packages briefly disagree): worth the engine's retry. A
// package that does not exist fails differently ("setup failed",
// "Unable to locate package") and is not retried.
bool mirror_trouble(const std::string& output) {
    for (const char* m : {"apt download failed", "Failed to fetch", "Hash Sum mismatch", "Temporary failure resolving",
                          "Could not connect to", "Connection timed out", "File has unexpected size"})
        if (output.find(m) != std::string::npos) return true;
    return false;
}

namespace {

std::string read_host_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::string tail_of(const std::string& s, size_t n) {
    if (s.size() <= n) return s;
    return "..." + s.substr(s.size() - n);
}

std::string join(const std::vector<std::string>& v, const std::string& sep) {
    std::string out;
    for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
    return out;
}

int64_t default_epoch() {
    if (const char* e = std::getenv("SOURCE_DATE_EPOCH")) {
        try {
            return std::stoll(e);
        } catch (...) {
        }
    }
    const int64_t now = unix_now();
    return now - now % 86400;
}

// Debian kernel versions sort well enough by their numeric parts.
bool kernel_less(const std::string& a, const std::string& b) {
    auto nums = [](const std::string& s) {
        std::vector<long> v;
        long cur = -1;
        for (char c : s) {
            if (std::isdigit(static_cast<unsigned char>(c)))
                cur = (cur < 0 ? 0 : cur * 10) + (c - '0');
            else if (cur >= 0)
                v.push_back(cur), cur = -1;
        }
        if (cur >= 0) v.push_back(cur);
        return v;
    };
    return nums(a) < nums(b);
}

std::string file_pos(const config::SourcePos& p) {
    return p.str();
}

}  // namespace

std::string root_uuid_for(const std::string& base_key) {
    const std::string h = sha256_hex("kiln-root-uuid:" + base_key);
    return fmt::format("{}-{}-4{}-8{}-{}", h.substr(0, 8), h.substr(8, 4), h.substr(13, 3), h.substr(17, 3),
                       h.substr(20, 12));
}

struct Builder::Plan {
    std::vector<PlannedLayer> layers;
    std::vector<std::string> mirror_lines;  // the base's
    std::vector<AptSource> machine;
    std::map<std::string, std::string> input_paths;  // input name -> host path
    std::string root_uuid;
    int64_t epoch = 0;
};

Result<CommandResult> Builder::run_tool(const std::string& what, const CommandSpec& spec) {
    const std::string argv = describe_argv(spec.argv);
    auto r = runner_.run(spec);
    if (!r) return r.error();
    if (!r->success()) {
        std::string why = r->timed_out ? "timed out" : fmt::format("exited with {}", r->exit_code);
        if (r->signal) why = fmt::format("ended by signal {}", r->signal);
        return image_error("image.tool_failed", fmt::format("{}: {} {}:\n{}", what, argv, why,
                                                            tail_of(r->err.empty() ? r->out : r->err, 4000)));
    }
    return r;
}

Result<Builder::Plan> Builder::make_plan(const Recipe& recipe, const BuildOptions& options) {
    Plan plan;
    plan.epoch = options.source_date_epoch ? *options.source_date_epoch : default_epoch();
    const bool needs_machine = recipe.base.mirror.empty();
    if (needs_machine) {
        auto m = machine_apt_sources(options.apt_dir);
        if (!m) return m.error();
        plan.machine = *m;
    }
    auto lines = mirror_lines(plan.machine, recipe.base.suite, recipe.base.components, recipe.base.mirror);
    if (!lines) return lines.error();
    plan.mirror_lines = *lines;

    nlohmann::json base_spec = {{"builder", kBuilderFormat},        {"suite", recipe.base.suite},
                                {"variant", recipe.base.variant},   {"components", recipe.base.components},
                                {"packages", recipe.base.packages}, {"kernel_args", recipe.base.kernel_args},
                                {"mirror", plan.mirror_lines},      {"size_bytes", recipe.output.size_bytes}};
    PlannedLayer base{"base", layer_key(base_spec, {}, ""), "", false, -1};
    base.cached = cache_.find(base.key).has_value();
    plan.root_uuid = root_uuid_for(base.key);
    plan.layers.push_back(base);

    for (const auto& [name, in] : recipe.inputs) plan.input_paths[name] = in.path;
    std::string parent = base.key;
    for (size_t i = 0; i < recipe.layers.size(); ++i) {
        const LayerSpec& L = recipe.layers[i];
        std::map<std::string, std::string> digests;
        auto digest = [&](const std::string& label, const std::string& path, const config::SourcePos& pos,
                          const std::string& key) -> Status {
            auto d = sha256_file(path);
            if (!d)
                return image_error("image.missing_file",
                                   fmt::format("{}: {}: file not found: {}", file_pos(pos), key, path));
            digests[label] = *d;
            return ok_status();
        };
        for (size_t f = 0; f < L.files.size(); ++f) {
            const FileSpec& F = L.files[f];
            const std::string key = fmt::format("layers[{}].files[{}]", i, f);
            if (!F.input.empty()) {
                const std::string& p = plan.input_paths[F.input];
                if (p.empty())
                    return image_error("image.missing_input",
                                       fmt::format("{}: {}.input: input '{}' has no file; give --input {}=PATH",
                                                   file_pos(F.pos), key, F.input, F.input));
                if (auto st = digest("file:" + F.path, p, F.pos, key + ".input"); !st) return st.error();
            } else if (!F.source.empty()) {
                if (auto st = digest("file:" + F.path, F.source, F.pos, key + ".source"); !st) return st.error();
            }
        }
        for (size_t d = 0; d < L.debs.size(); ++d)
            if (auto st = digest("deb:" + fs::path(L.debs[d]).filename().string(), L.debs[d], L.pos,
                                 fmt::format("layers[{}].debs[{}]", i, d));
                !st)
                return st.error();
        for (const auto& r : L.repos)
            if (!r.key.empty())
                if (auto st = digest("repo-key:" + r.name, r.key, r.pos, "key"); !st) return st.error();
        nlohmann::json spec = L.canonical();
        // Extra components resolve against the machine's mirror: part of the spec.
        if (!L.components.empty()) {
            auto extra = mirror_lines(plan.machine, recipe.base.suite, L.components, recipe.base.mirror);
            if (!extra) return extra.error();
            spec["component_lines"] = *extra;
        }
        PlannedLayer pl{L.name, layer_key(spec, digests, parent), parent, false, static_cast<int>(i)};
        pl.cached = cache_.find(pl.key).has_value();
        parent = pl.key;
        plan.layers.push_back(pl);
    }
    return plan;
}

Result<std::vector<PlannedLayer>> Builder::plan(const Recipe& recipe, const BuildOptions& options) {
    auto p = make_plan(recipe, options);
    if (!p) return p.error();
    return p->layers;
}

std::string Builder::output_path(const Recipe& recipe, const BuildOptions& options) const {
    if (!options.output.empty()) return fs::absolute(options.output).lexically_normal().string();
    return (fs::path(cache_.dir()) / "images" / (recipe.name + "." + recipe.output.format)).string();
}

namespace {

// The version of the newest vmlinuz-* in a listing of /boot ("" if none).
std::string newest_kernel(const std::vector<std::string>& boot) {
    std::string kver;
    for (const auto& f : boot)
        if (f.rfind("vmlinuz-", 0) == 0 && (kver.empty() || kernel_less(kver, f.substr(8)))) kver = f.substr(8);
    return kver;
}

// What every layer does last: the boot entry for the newest kernel with the
// kernel arguments so far, the reproducibility scrub, and the facts the
// manifest needs (package versions, kernel, DKMS modules).
Result<nlohmann::json> finish_layer(ImageTree& disk, const std::string& root_uuid,
                                    const std::vector<std::string>& kernel_args, std::chrono::seconds timeout) {
    auto boot = disk.ls("/boot");
    if (!boot) return boot.error();
    const std::string kver = newest_kernel(*boot);
    if (kver.empty())
        return image_error("image.no_kernel",
                           "the image has no kernel in /boot; add linux-image-amd64 to [base].packages");
    const std::string conf = fmt::format(
        "# Written by kiln: the newest kernel with the recipe's kernel arguments.\n"
        "DEFAULT linux\nPROMPT 0\nTIMEOUT 0\n\nLABEL linux\n  LINUX /boot/vmlinuz-{0}\n"
        "  INITRD /boot/initrd.img-{0}\n  APPEND root=UUID={1} ro {2}\n",
        kver, root_uuid, join(kernel_args, " "));
    if (auto st = disk.mkdir_p("/boot/extlinux"); !st) return st.error();
    if (auto st = disk.write_file("/boot/extlinux/extlinux.conf", conf, 0644); !st) return st.error();

    // No identity baked in: machine-id is made at first boot, as are SSH host
    // keys and the random seed.
    if (auto st = disk.write_file("/etc/machine-id", "", 0444); !st) return st.error();
    for (const char* p : {"/var/lib/dbus/machine-id", "/var/lib/systemd/random-seed", "/var/cache/ldconfig/aux-cache",
                          "/etc/resolv.conf.kiln", "/usr/sbin/policy-rc.d"})
        (void)disk.rm_rf(p);
    if (disk.exists("/etc/ssh")) {
        auto names = disk.ls("/etc/ssh");
        if (names)
            for (const auto& n : *names)
                if (n.rfind("ssh_host_", 0) == 0) (void)disk.rm_rf("/etc/ssh/" + n);
    }
    auto q = disk.run(
        "rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/apt/archives/*.deb\n"
        "dpkg-query -W -f '${Package}\\t${Version}\\n'\n",
        {}, timeout);
    if (!q) return q.error();
    if (q->exit_code != 0)
        return image_error("image.layer_command", "dpkg-query inside the image failed:\n" + tail_of(q->output, 2000));
    nlohmann::json packages = nlohmann::json::object();
    std::istringstream in(q->output);
    for (std::string line; std::getline(in, line);) {
        const auto tab = line.find('\t');
        if (tab != std::string::npos && tab + 1 < line.size()) packages[line.substr(0, tab)] = line.substr(tab + 1);
    }
    nlohmann::json dkms = nlohmann::json::array();
    const std::string dkms_dir = "/lib/modules/" + kver + "/updates/dkms";
    if (disk.exists(dkms_dir))
        if (auto m = disk.ls(dkms_dir)) {
            std::sort(m->begin(), m->end());
            for (const auto& n : *m) dkms.push_back(n);
        }
    return nlohmann::json{{"kernel", kver}, {"packages", packages}, {"dkms_modules", dkms}};
}

std::vector<std::string> args_through(const Recipe& recipe, int layer_index) {
    std::vector<std::string> args = recipe.base.kernel_args;
    for (int i = 0; i <= layer_index && i < static_cast<int>(recipe.layers.size()); ++i)
        args.insert(args.end(), recipe.layers[i].kernel_args.begin(), recipe.layers[i].kernel_args.end());
    return args;
}

}  // namespace

Result<nlohmann::json> Builder::build_base(const Recipe& recipe, const Plan& plan, const std::string& staging,
                                           const BuildOptions& options) {
    const std::string tar = (fs::path(staging) / "rootfs.tar").string();
    CommandSpec mm;
    mm.argv = {"mmdebstrap", "--variant=" + recipe.base.variant, "--format=tar", "--quiet"};
    if (!recipe.base.packages.empty()) mm.argv.push_back("--include=" + join(recipe.base.packages, ","));
    // No dpkg docs or caches in the image; they only cost size.
    // No fsync per file: the tar is the product, written once.
    mm.argv.push_back("--dpkgopt=force-unsafe-io");
    mm.argv.push_back("--dpkgopt=path-exclude=/usr/share/doc/*");
    mm.argv.push_back("--dpkgopt=path-include=/usr/share/doc/*/copyright");
    mm.argv.push_back("--dpkgopt=path-exclude=/usr/share/man/*");
    mm.argv.push_back("--aptopt=Acquire::Retries \"3\"");
    mm.argv.push_back(recipe.base.suite);
    mm.argv.push_back(tar);
    for (const auto& l : plan.mirror_lines) mm.argv.push_back(l);
    mm.env["SOURCE_DATE_EPOCH"] = std::to_string(plan.epoch);
    mm.timeout = std::chrono::minutes(45);
    if (options.progress)
        options.progress("base", "mmdebstrap " + recipe.base.suite + " (" + recipe.base.variant + ")");
    if (auto r = run_tool("bootstrapping the base", mm); !r) {
        Error e = r.error();
        e.transient = mirror_trouble(e.message);
        return e;
    }

    CommandSpec create;
    create.argv = {"qemu-img",
                   "create",
                   "-q",
                   "-f",
                   "qcow2",
                   (fs::path(staging) / "disk.qcow2").string(),
                   std::to_string(recipe.output.size_bytes)};
    if (auto r = run_tool("creating the base disk", create); !r) return r.error();

    const std::string mbr = read_host_file(options.mbr_path);
    if (mbr.size() < 440)
        return image_error("image.no_mbr",
                           fmt::format("cannot read the MBR boot code {} (package extlinux)", options.mbr_path));

    if (options.progress) options.progress("base", "partition, ext4, extlinux (libguestfs)");
    auto disk = disks_.open();
    if (!disk) return disk.error();
    GuestDisk& g = **disk;
    const std::string part = kRootPartition;
    // One step at a time, stopping at the first that fails: nothing is
    // partitioned, formatted or written on a disk that did not launch.
    const std::function<Status()> make_root[] = {
        [&] { return g.add_drive((fs::path(staging) / "disk.qcow2").string(), "qcow2"); },
        [&] { return g.launch(); },
        [&] { return g.part_disk_mbr(kRootDevice); },
        [&] { return g.set_bootable(kRootDevice, 1); },
        [&] { return g.mkfs_ext4(part, "kiln-root", plan.root_uuid); },
        [&] { return g.mount(part, "/"); },
        [&] { return g.tar_in(tar, "/"); }};
    for (const auto& step : make_root)
        if (auto st = step(); !st) return st.error();
    std::error_code ec;
    fs::remove(tar, ec);
    // mmdebstrap leaves the build host's resolver and name in the tree: an
    // image must not carry them (DHCP and cloud-init set both at boot).
    if (auto st = g.rm_rf("/etc/resolv.conf"); !st) return st.error();
    if (auto st = g.write_file("/etc/hostname", "localhost\n", 0644); !st) return st.error();
    const std::string fstab = fmt::format("# Written by kiln.\nUUID={} / ext4 errors=remount-ro 0 1\n", plan.root_uuid);
    const std::function<Status()> make_bootable[] = {
        [&] { return g.write_file("/etc/fstab", fstab, 0644); }, [&] { return g.mkdir_p("/boot/extlinux"); },
        [&] { return g.extlinux("/boot/extlinux"); },
        [&] { return g.write_device(kRootDevice, mbr.substr(0, 440), 0); }};
    for (const auto& step : make_bootable)
        if (auto st = step(); !st) return st.error();
    auto meta = finish_layer(g, plan.root_uuid, recipe.base.kernel_args, options.command_timeout);
    if (!meta) return meta.error();
    if (auto st = g.shutdown(); !st) return st.error();
    return meta;
}

// A layer's own steps (apt, files, commands, services), the same wherever
// its tree is: in the appliance or on the host.
Status Builder::apply_layer_steps(ImageTree& t, const Recipe& recipe, const Plan& plan, const LayerSpec& L,
                                  const std::string& resolver, std::chrono::seconds step_timeout,
                                  const BuildOptions& options) {
    auto say = [&](const std::string& m) {
        if (options.progress) options.progress(L.name, m);
    };
    auto boot = t.ls("/boot");
    if (!boot) return boot.error();
    // Commands run under the appliance's (or the host's) kernel: tell them the image's.
    const std::map<std::string, std::string> env = {{"DEBIAN_FRONTEND", "noninteractive"},
                                                    {"KILN_KERNEL_VERSION", newest_kernel(*boot)},
                                                    {"KILN_LAYER", L.name},
                                                    {"SOURCE_DATE_EPOCH", std::to_string(plan.epoch)},
                                                    {"LC_ALL", "C.UTF-8"}};
    auto run_step = [&](const std::string& what, const std::string& script) -> Status {
        auto r = t.run(script, env, step_timeout);
        if (!r) return r.error();
        if (r->exit_code == 124)
            return image_error("image.layer_timeout",
                               fmt::format("layer '{}': {} ran past {}s (the layer's timeout; raise it with "
                                           "timeout = \"...\" in the layer); its output:\n{}",
                                           L.name, what, step_timeout.count(), tail_of(r->output, 6000)));
        if (r->exit_code != 0) {
            Error e =
                image_error("image.layer_command", fmt::format("layer '{}': {} failed (exit {}); its output:\n{}",
                                                               L.name, what, r->exit_code, tail_of(r->output, 6000)));
            e.transient = mirror_trouble(r->output);
            return e;
        }
        return ok_status();
    };

    if (L.needs_network()) {
        // Services must not start while building; DNS is the builder's.
        if (auto st = t.write_file("/usr/sbin/policy-rc.d", "#!/bin/sh\nexit 101\n", 0755); !st) return st.error();
        if (auto st = run_step("preparing apt",
                               "if [ -e /etc/resolv.conf ] || [ -L /etc/resolv.conf ]; then mv /etc/resolv.conf "
                               "/etc/resolv.conf.kiln; fi");
            !st)
            return st.error();
        if (auto st = t.write_file("/etc/resolv.conf", resolver, 0644); !st) return st.error();
        if (!L.components.empty()) {
            auto lines = mirror_lines(plan.machine, recipe.base.suite, L.components, recipe.base.mirror);
            if (!lines) return lines.error();
            if (auto st =
                    t.write_file("/etc/apt/sources.list.d/kiln-" + L.name + ".list", join(*lines, "\n") + "\n", 0644);
                !st)
                return st.error();
        }
        for (const auto& r : L.repos) {
            std::string opts;
            if (!r.key.empty()) {
                const std::string keyring = "/etc/apt/keyrings/kiln-" + r.name + ".gpg";
                if (auto st = t.mkdir_p("/etc/apt/keyrings"); !st) return st.error();
                if (auto st = t.upload(r.key, keyring, 0644); !st) return st.error();
                opts = "[signed-by=" + keyring + "] ";
            } else {
                opts = "[trusted=yes] ";
            }
            const std::string line = "deb " + opts + r.uri + " " + r.suite +
                                     (r.components.empty() ? "" : " " + join(r.components, " ")) + "\n";
            if (auto st = t.write_file("/etc/apt/sources.list.d/kiln-" + r.name + ".list", line, 0644); !st)
                return st.error();
        }
        std::vector<std::string> install = L.packages;
        if (!L.debs.empty()) {
            if (auto st = t.mkdir_p("/var/tmp/kiln-debs"); !st) return st.error();
            for (const auto& d : L.debs) {
                const std::string dst = "/var/tmp/kiln-debs/" + fs::path(d).filename().string();
                if (auto st = t.upload(d, dst, 0644); !st) return st.error();
                install.push_back(dst);
            }
        }
        say("apt-get install " + join(install, " "));
        if (auto st = run_step("apt-get install",
                               "apt-get -o Acquire::Retries=3 update -qq\n"
                               "apt-get install -y -q --no-install-recommends -o Dpkg::Use-Pty=0 " +
                                   join(install, " ") + "\napt-get clean\nrm -rf /var/tmp/kiln-debs\n");
            !st)
            return st.error();
        if (auto st =
                run_step("restoring resolv.conf",
                         "rm -f /etc/resolv.conf\nif [ -e /etc/resolv.conf.kiln ] || [ -L /etc/resolv.conf.kiln ]; "
                         "then mv /etc/resolv.conf.kiln /etc/resolv.conf; fi");
            !st)
            return st.error();
    }
    for (const auto& f : L.files) {
        say("file " + f.path);
        const std::string dir = fs::path(f.path).parent_path().string();
        if (auto st = t.mkdir_p(dir.empty() ? "/" : dir); !st) return st.error();
        Status st = ok_status();
        if (f.content)
            st = t.write_file(f.path, *f.content, f.mode);
        else
            st = t.upload(f.input.empty() ? f.source : plan.input_paths.at(f.input), f.path, f.mode);
        if (!st) return st.error();
    }
    for (size_t c = 0; c < L.commands.size(); ++c) {
        say(fmt::format("command {}/{}", c + 1, L.commands.size()));
        if (auto st = run_step(fmt::format("command {} ({})", c + 1, tail_of(L.commands[c], 80)), L.commands[c]); !st)
            return st.error();
    }
    if (!L.services.empty()) {
        say("enable " + join(L.services, " "));
        if (auto st = run_step("systemctl enable", "systemctl enable " + join(L.services, " ")); !st) return st.error();
    }
    return ok_status();
}

Result<nlohmann::json> Builder::build_layer(const Recipe& recipe, const Plan& plan, size_t layer_index,
                                            const std::string& staging, const BuildOptions& options) {
    const LayerSpec& L = recipe.layers[layer_index];
    const PlannedLayer& me = plan.layers[layer_index + 1];
    const bool on_host = L.build_in == LayerSpec::BuildIn::host;
    auto say = [&](const std::string& m) {
        if (options.progress) options.progress(L.name, m);
    };
    if (on_host)
        if (auto st = host_builds_possible(); !st) return st.error();
    CommandSpec create;
    create.argv = {"qemu-img", "create", "-q",        "-f", "qcow2", "-b", cache_.backing_ref(me.parent),
                   "-F",       "qcow2",  "disk.qcow2"};
    create.cwd = staging;
    if (auto r = run_tool("creating the overlay of layer '" + L.name + "'", create); !r) return r.error();

    const std::chrono::seconds step_timeout = L.timeout.value_or(options.command_timeout);
    const std::vector<std::string> args = args_through(recipe, static_cast<int>(layer_index));
    // One appliance per layer. For a host layer it hands out the parent's
    // tree (unless the layer before left it), then waits, idle, while the
    // host works, and takes the changes: an idle appliance costs next to
    // nothing, a second launch under TCG half a minute.
    const bool network = L.needs_network() && !on_host;
    auto disk = disks_.open();
    if (!disk) return disk.error();
    GuestDisk& g = **disk;
    if (auto st = g.add_drive((fs::path(staging) / "disk.qcow2").string(), "qcow2"); !st) return st.error();
    if (auto st = g.set_network(network); !st) return st.error();
    say(network ? "launch the appliance (with network)" : "launch the appliance");
    if (auto st = g.launch(); !st) return st.error();
    if (auto st = g.mount(kRootPartition, "/"); !st) return st.error();
    if (!on_host) {
        if (auto st = apply_layer_steps(g, recipe, plan, L, "nameserver 10.0.2.3\n", step_timeout, options); !st)
            return st.error();
        auto meta = finish_layer(g, plan.root_uuid, args, step_timeout);
        if (!meta) return meta.error();
        if (auto st = g.shutdown(); !st) return st.error();
        return meta;
    }

    // On the host: the parent's tree, the steps chrooted in it, and what
    // they changed written into this layer's overlay.
    auto tree = host_tree_of(g, me.parent, say);
    if (!tree) return tree.error();
    auto before = snapshot_tree(*tree);
    if (!before) return before.error();
    HostTree h(runner_, *tree);
    std::string resolver = read_host_file("/etc/resolv.conf");
    if (resolver.empty()) resolver = "nameserver 127.0.0.1\n";
    if (auto st = apply_layer_steps(h, recipe, plan, L, resolver, step_timeout, options); !st) return st.error();
    auto meta = finish_layer(h, plan.root_uuid, args, step_timeout);
    if (!meta) return meta.error();
    auto after = snapshot_tree(*tree);
    if (!after) return after.error();
    const TreeDelta delta = diff_trees(*before, *after);
    say(fmt::format("into the overlay: {} changed, {} removed", delta.changed.size(), delta.removed.size()));
    const std::string list = (fs::path(staging) / "delta.list").string();
    const std::string tar = (fs::path(staging) / "delta.tar").string();
    struct RemoveAfter {
        std::vector<std::string> paths;
        ~RemoveAfter() {
            std::error_code ec;
            for (const auto& p : paths) fs::remove(p, ec);
        }
    } temp{{list, tar}};
    if (!delta.changed.empty()) {
        {
            std::ofstream out(list, std::ios::binary);
            for (const auto& p : delta.changed) {
                // Never a path that would pack a host file.
                if (p.empty() || p[0] == '/' || p == ".." || p.rfind("../", 0) == 0)
                    return image_error("image.host_tree", "a changed path outside the tree: " + p);
                out << p << '\0';
            }
            if (!out) return image_error("image.disk_full", "cannot write " + list);
        }
        CommandSpec pack;
        pack.argv = {"tar",
                     "-c",
                     "-f",
                     tar,
                     "-C",
                     *tree,
                     "--numeric-owner",
                     "--xattrs",
                     "--xattrs-include=*",
                     "--acls",
                     "--no-recursion",
                     "--null",
                     "-T",
                     list};
        pack.timeout = std::chrono::minutes(60);
        if (auto r = run_tool("packing layer '" + L.name + "'", pack); !r) return r.error();
    }
    for (const auto& p : delta.removed)
        if (auto st = g.rm_rf("/" + p); !st) return st.error();
    if (!delta.changed.empty())
        if (auto st = g.tar_in(tar, "/"); !st) return st.error();
    if (auto st = g.shutdown(); !st) return st.error();
    carried_->key = me.key;
    return meta;
}

// The tree of layer `key` on the host: the one the previous layer of this
// build left, or the appliance's mounted disk unpacked.
Result<std::string> Builder::host_tree_of(GuestDisk& g, const std::string& key,
                                          const std::function<void(const std::string&)>& say) {
    if (carried_ && carried_->key == key) {
        carried_->key = "";  // being changed: no layer's tree until this one is done
        return carried_->dir;
    }
    drop_carried_tree();
    const std::string dir =
        (fs::path(cache_.dir()) / fmt::format("host-tree.{}-{}", ::getpid(), build_seq_++)).string();
    const std::string tar = dir + ".tar";
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) return image_error("image.host_tree", fmt::format("cannot create {}: {}", dir, ec.message()));
    carried_ = CarriedTree{"", dir};  // owned from here: removed when the build ends, whatever happens
    say("unpack the parent's tree on the host");
    if (auto st = g.tar_out("/", tar); !st) {
        fs::remove(tar, ec);
        return st.error();
    }
    CommandSpec unpack;
    unpack.argv = {"tar",   "-x", "-p", "-f", tar, "-C", dir, "--numeric-owner", "--xattrs", "--xattrs-include=*",
                   "--acls"};
    unpack.timeout = std::chrono::minutes(60);
    auto r = run_tool("unpacking the parent's tree", unpack);
    fs::remove(tar, ec);
    if (!r) return r.error();
    return dir;
}

void Builder::drop_carried_tree() {
    if (!carried_) return;
    std::error_code ec;
    fs::remove_all(carried_->dir, ec);
    carried_.reset();
}

// Trees of builds that were killed: the pid in their name is gone.
void Builder::remove_stale_host_trees() {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(cache_.dir(), ec)) {
        const std::string n = e.path().filename().string();
        if (n.rfind("host-tree.", 0) != 0) continue;
        const long pid = std::atol(n.c_str() + 10);
        if (pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH)) continue;
        std::error_code rm;
        fs::remove_all(e.path(), rm);
    }
}

Result<BuildResult> Builder::build(const Recipe& recipe, const BuildOptions& options) {
    if (auto st = cache_.open(); !st) return st.error();
    remove_stale_host_trees();
    struct DropTree {
        Builder* b;
        ~DropTree() { b->drop_carried_tree(); }
    } drop_tree{this};
    auto planned = make_plan(recipe, options);
    if (!planned) return planned.error();
    Plan& plan = *planned;
    BuildLog log((fs::path(cache_.dir()) / "build.log").string());
    const std::string build_id = fmt::format("{}-{}-{}", unix_now(), ::getpid(), build_seq_++);
    BuildResult result;
    nlohmann::json last_meta;

    for (size_t i = 0; i < plan.layers.size(); ++i) {
        PlannedLayer& pl = plan.layers[i];
        const auto t0 = std::chrono::steady_clock::now();
        auto secs = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
        auto lk = cache_.lock(pl.key, false);
        if (!lk) return lk.error();
        if (!lk->held()) {
            if (!options.wait_for_others)
                return make_error("image", kBuildBusy,
                                  fmt::format("layer {} {} is being built by another build", pl.name, pl.key),
                                  /*transient=*/true);
            if (options.progress) options.progress(pl.name, "waiting for another build of " + pl.key.substr(0, 12));
            lk = cache_.lock(pl.key, true);
            if (!lk) return lk.error();
        }
        if (auto e = cache_.find(pl.key)) {
            cache_.touch(pl.key);
            last_meta = e->meta;
            result.layers.push_back({pl.name, pl.key, "cached", secs()});
            (void)log.append({build_id, recipe.name, pl.name, pl.key, "cached", secs()});
            if (options.progress) options.progress(pl.name, "cached " + pl.key.substr(0, 12));
            continue;
        }
        auto staging = cache_.stage(pl.key);
        if (!staging) return staging.error();
        if (options.progress) options.progress(pl.name, "building " + pl.key.substr(0, 12));
        auto build_here = [&] {
            return pl.index < 0 ? build_base(recipe, plan, *staging, options)
                                : build_layer(recipe, plan, static_cast<size_t>(pl.index), *staging, options);
        };
        auto meta = build_here();
        // An appliance that hung was killed by its watchdog: the layer is
        // built once more from a fresh staging area, and a second hang fails.
        if (!meta && meta.error().code == "image.appliance_hung") {
            if (options.progress) options.progress(pl.name, meta.error().message + "; building the layer once more");
            cache_.discard(*staging);
            staging = cache_.stage(pl.key);
            if (!staging) return staging.error();
            meta = build_here();
        }
        if (!meta) {
            cache_.discard(*staging);
            (void)log.append({build_id, recipe.name, pl.name, pl.key, "failed", secs()});
            return meta.error();
        }
        auto entry = cache_.commit(*staging, pl.key, pl.name, pl.parent, *meta);
        if (!entry) {
            cache_.discard(*staging);
            return entry.error();
        }
        last_meta = *meta;
        result.layers.push_back({pl.name, pl.key, "built", secs()});
        (void)log.append({build_id, recipe.name, pl.name, pl.key, "built", secs()});
        if (options.progress) options.progress(pl.name, fmt::format("built in {:.0f}s", secs()));
    }

    // The output: the chain flattened, unless the same chain is already there.
    const std::string out = output_path(recipe, options);
    result.image = out;
    result.manifest_path = manifest_path_for(out);
    const std::string final_key = plan.layers.back().key;
    std::error_code ec;
    fs::create_directories(fs::path(out).parent_path(), ec);
    // Nodes sharing an image build it at once (one thread each, or other
    // kiln processes on the same cache): the output is written by one of
    // them, and the others find it done once they hold the lock.
    const std::string out_key = "output-" + sha256_hex(fs::absolute(out, ec).string()).substr(0, 32);
    auto out_lock = cache_.lock(out_key, options.wait_for_others);
    if (!out_lock) return out_lock.error();
    if (!out_lock->held())
        return make_error("image", kBuildBusy,
                          fmt::format("output {} {} is being written by another build", out, out_key),
                          /*transient=*/true);
    if (auto existing = read_manifest(result.manifest_path)) {
        if (existing->value("final_key", "") == final_key && existing->value("format", "") == recipe.output.format &&
            existing->value("compressed", false) == recipe.output.compress && fs::exists(out, ec) &&
            fs::file_size(out, ec) == existing->value("image_bytes", uint64_t{0})) {
            result.manifest = *existing;
            result.output_cached = true;
            (void)log.append({build_id, recipe.name, "output", final_key, "cached", 0});
            return result;
        }
    }
    // Only the holder of this lock writes this output's temp files: any
    // left beside it are a killed build's.
    const std::string tmp_prefix = fs::path(out).filename().string() + ".tmp-";
    for (const auto& e : fs::directory_iterator(fs::path(out).parent_path(), ec))
        if (e.path().filename().string().rfind(tmp_prefix, 0) == 0) {
            std::error_code rm_ec;
            fs::remove(e.path(), rm_ec);
        }
    const auto t0 = std::chrono::steady_clock::now();
    if (options.progress) options.progress("output", "qemu-img convert -> " + out);
    static std::atomic<int> seq{0};
    const std::string tmp = out + fmt::format(".tmp-{}-{}", ::getpid(), seq++);
    CommandSpec conv;
    conv.argv = {"qemu-img", "convert", "-q", "-O", recipe.output.format};
    if (recipe.output.compress) conv.argv.push_back("-c");
    conv.argv.push_back(cache_.disk_path(final_key));
    conv.argv.push_back(tmp);
    conv.timeout = std::chrono::minutes(30);
    if (auto r = run_tool("flattening the image", conv); !r) {
        fs::remove(tmp, ec);
        return r.error();
    }
    auto digest = sha256_file(tmp);
    if (!digest) {
        fs::remove(tmp, ec);
        return digest.error();
    }
    const uint64_t bytes = fs::file_size(tmp, ec);
    fs::rename(tmp, out, ec);
    if (ec) return image_error("image.output", fmt::format("cannot write {}: {}", out, ec.message()));
    std::vector<std::pair<std::string, std::string>> layer_keys;
    for (const auto& pl : plan.layers) layer_keys.emplace_back(pl.name, pl.key);
    result.manifest = make_manifest(recipe, layer_keys, last_meta, *digest, bytes, plan.epoch);
    if (auto st = write_manifest(result.manifest_path, result.manifest); !st) return st.error();
    (void)log.append({build_id, recipe.name, "output", final_key, "built",
                      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()});
    return result;
}

}  // namespace kiln::images
