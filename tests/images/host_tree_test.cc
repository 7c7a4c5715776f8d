// HostTree over a real chroot: a minimal root made of this machine's dash,
// coreutils and their libraries (as root, which CI is), and the tree
// snapshot and diff a host layer writes back into its overlay.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "images/host_tree.h"
#include "provisioner/core/command.h"
#include "tests/support/skip.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using namespace kiln::images;
using kiln::test::TempDir;

namespace {

// The shared libraries a binary loads, from ldd.
std::vector<std::string> libraries_of(const std::string& bin) {
    kiln::ProcessRunner runner;
    kiln::CommandSpec spec;
    spec.argv = {"ldd", bin};
    auto r = runner.run(spec);
    std::vector<std::string> out;
    if (!r || !r->success()) return out;
    std::istringstream in(r->out);
    for (std::string line; std::getline(in, line);)
        for (std::istringstream words(line); words;) {
            std::string w;
            words >> w;
            if (!w.empty() && w[0] == '/') out.push_back(w);
        }
    return out;
}

// A root with /bin/sh and the tools HostTree and the tests run, merged-/usr
// like Debian 12.
void make_mini_root(const std::string& root) {
    fs::create_directories(root + "/usr/bin");
    fs::create_directories(root + "/usr/lib");
    fs::create_directories(root + "/usr/lib64");
    fs::create_directory_symlink("usr/bin", root + "/bin");
    fs::create_directory_symlink("usr/bin", root + "/sbin");
    fs::create_directory_symlink("usr/lib", root + "/lib");
    fs::create_directory_symlink("usr/lib64", root + "/lib64");
    for (const char* d : {"etc", "tmp", "proc", "sys", "dev"}) fs::create_directories(root + "/" + d);
    for (const char* tool : {"sh", "dash", "mv", "chmod", "mkdir", "cat", "ls", "rm", "env", "sleep", "touch"}) {
        const fs::path bin = fs::canonical(fs::path("/usr/bin") / tool);
        fs::copy_file(bin, fs::path(root) / "usr/bin" / tool, fs::copy_options::overwrite_existing);
        for (const auto& lib : libraries_of(bin.string())) {
            const fs::path dst = fs::path(root) / fs::path(lib).relative_path();
            fs::create_directories(dst.parent_path());
            fs::copy_file(fs::canonical(lib), dst, fs::copy_options::skip_existing);
        }
    }
}

std::string slurp(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

bool have_root() {
    if (::geteuid() == 0) return true;
    kiln::test::report_skipped("chroot and mounts need root");
    return false;
}

bool mounted_anywhere_under(const std::string& dir) {
    return slurp("/proc/self/mountinfo").find(dir) != std::string::npos;
}

// A mini root in a temp dir, and a HostTree over it.
struct MiniRoot {
    TempDir dir;
    std::string root = dir.path() + "/root";
    kiln::ProcessRunner runner;
    HostTree tree{runner, root};
    MiniRoot() { make_mini_root(root); }
};

}  // namespace

TEST_CASE("host tree: file operations resolve inside the tree, never on the host", "[images][host-tree]") {
    if (!have_root()) return;
    MiniRoot m;
    const TempDir& dir = m.dir;
    const std::string& root = m.root;
    HostTree& t = m.tree;

    // An absolute symlink in the image names a path of the image.
    const std::string host_target = dir.path() + "/outside";
    fs::create_directories(root + dir.path());
    fs::create_symlink(host_target, root + "/etc/link");
    REQUIRE(t.write_file("/etc/link", "inside\n", 0640));
    CHECK_FALSE(fs::exists(host_target));
    CHECK(slurp(root + host_target) == "inside\n");
    CHECK(fs::is_symlink(root + "/etc/link"));  // written through, as the appliance does

    REQUIRE(t.mkdir_p("/etc/kiln/deep"));
    REQUIRE(t.write_file("/etc/kiln/deep/conf", std::string("a\0b", 3), 0600));
    CHECK(slurp(root + "/etc/kiln/deep/conf") == std::string("a\0b", 3));
    CHECK((fs::status(root + "/etc/kiln/deep/conf").permissions() & fs::perms::all) ==
          (fs::perms::owner_read | fs::perms::owner_write));
    const std::string host_file = dir.write("payload.bin", "payload");
    REQUIRE(t.upload(host_file, "/usr/bin/payload", 0755));
    CHECK((fs::status(root + "/usr/bin/payload").permissions() & fs::perms::owner_exec) != fs::perms::none);
    auto back = t.read_file("/etc/kiln/deep/conf");
    REQUIRE(back);
    CHECK(*back == std::string("a\0b", 3));
    auto names = t.ls("/etc/kiln/deep");
    REQUIRE(names);
    CHECK(*names == std::vector<std::string>{"conf"});
    CHECK(t.exists("/etc/link"));
    CHECK_FALSE(t.exists("/etc/nothing"));
    REQUIRE(t.rm_rf("/etc/kiln"));
    CHECK_FALSE(fs::exists(root + "/etc/kiln"));
    // No staging file left at the top of the tree.
    for (const auto& e : fs::directory_iterator(root))
        CHECK(e.path().filename().string().rfind(".kiln-in-", 0) == std::string::npos);
    // A missing parent is an error naming the path, like the appliance's.
    auto bad = t.write_file("/no/such/dir/file", "x", 0644);
    REQUIRE_FALSE(bad);
    CHECK(bad.error().message.find("/no/such/dir/file") != std::string::npos);
}

TEST_CASE("host tree: commands run chrooted with the env, /proc and /dev, and mount nothing on the host",
          "[images][host-tree]") {
    if (!have_root()) return;
    MiniRoot m;
    const std::string& root = m.root;
    HostTree& t = m.tree;

    auto r = t.run(
        "echo \"layer=$KILN_LAYER\"\ntest -r /proc/self/status && echo proc\n"
        "test -c /dev/null && echo dev\necho err >&2\ntouch /made-here\nexit 3",
        {{"KILN_LAYER", "nvidia"}}, std::chrono::seconds(60));
    REQUIRE(r);
    CHECK(r->exit_code == 3);
    CHECK(r->output.find("layer=nvidia") != std::string::npos);
    CHECK(r->output.find("proc") != std::string::npos);
    CHECK(r->output.find("dev") != std::string::npos);
    CHECK(r->output.find("err") != std::string::npos);  // stderr comes back too
    CHECK(fs::exists(root + "/made-here"));
    CHECK_FALSE(mounted_anywhere_under(root));
    CHECK(fs::is_empty(root + "/proc"));
    // The host's environment does not leak in.
    ::setenv("KILN_TEST_SECRET", "s3cret", 1);
    auto e = t.run("env", {}, std::chrono::seconds(60));
    ::unsetenv("KILN_TEST_SECRET");
    REQUIRE(e);
    CHECK(e->output.find("s3cret") == std::string::npos);

    SECTION("-e: the first failing line stops the script") {
        auto f = t.run("false\ntouch /not-reached", {}, std::chrono::seconds(60));
        REQUIRE(f);
        CHECK(f->exit_code != 0);
        CHECK_FALSE(fs::exists(root + "/not-reached"));
    }
    SECTION("a command past its timeout ends with 124, its children with it") {
        auto s = t.run("sleep 600 & sleep 600", {}, std::chrono::seconds(1));
        REQUIRE(s);
        CHECK(s->exit_code == 124);
        CHECK_FALSE(mounted_anywhere_under(root));
    }
    SECTION("a symlink where a mount point belongs is refused") {
        fs::remove(root + "/dev");
        fs::create_directory_symlink("/", root + "/dev");
        auto s = t.run("true", {}, std::chrono::seconds(60));
        REQUIRE_FALSE(s);
        CHECK(s.error().message.find("/dev") != std::string::npos);
    }
}

TEST_CASE("host tree: the diff lists what changed, parents first, and what went", "[images][host-tree]") {
    TempDir dir;
    const std::string root = dir.path() + "/t";
    dir.write("t/etc/keep", "k");
    dir.write("t/etc/edit", "1");
    dir.write("t/etc/chmod", "c");
    dir.write("t/etc/gone", "g");
    dir.write("t/var/old/a", "a");
    dir.write("t/var/old/b", "b");
    dir.write("t/usr/dir-to-file/x", "x");
    auto before = snapshot_tree(root);
    REQUIRE(before);
    CHECK(before->count("etc/keep"));
    CHECK(before->at("etc").type == 'd');

    { std::ofstream(root + "/etc/edit", std::ios::app) << "2"; }
    fs::permissions(root + "/etc/chmod", fs::perms::owner_all);
    fs::remove(root + "/etc/gone");
    fs::remove_all(root + "/var/old");
    fs::remove_all(root + "/usr/dir-to-file");
    dir.write("t/usr/dir-to-file", "now a file");
    dir.write("t/opt/new/file", "n");
    fs::create_symlink("/etc/keep", root + "/opt/new/link");
    // Absolute targets that exist on the host: keys stay the tree's own paths.
    fs::create_symlink("/etc/hostname", root + "/opt/new/host-link");
    fs::create_symlink("/proc/self/fd/2", root + "/opt/new/stderr");

    auto after = snapshot_tree(root);
    REQUIRE(after);
    const TreeDelta d = diff_trees(*before, *after);
    // A removed directory is one entry, not one per file in it.
    CHECK(d.removed == std::vector<std::string>{"etc/gone", "usr/dir-to-file", "var/old"});
    const std::set<std::string> changed(d.changed.begin(), d.changed.end());
    for (const char* p : {"etc/edit", "etc/chmod", "usr/dir-to-file", "opt", "opt/new", "opt/new/file", "opt/new/link",
                          "opt/new/host-link", "opt/new/stderr", "etc", "var", "usr"})
        CHECK(changed.count(p));
    CHECK_FALSE(changed.count("etc/keep"));
    for (const auto& p : d.changed) CHECK(p.find("..") == std::string::npos);
    CHECK_FALSE(changed.count("var/old"));
    // Parents before children: tar --no-recursion recreates them in order.
    auto at = [&](const std::string& p) { return std::find(d.changed.begin(), d.changed.end(), p); };
    CHECK(at("opt") < at("opt/new"));
    CHECK(at("opt/new") < at("opt/new/file"));

    // Nothing changed: an empty delta.
    auto again = snapshot_tree(root);
    REQUIRE(again);
    const TreeDelta none = diff_trees(*after, *again);
    CHECK(none.changed.empty());
    CHECK(none.removed.empty());
}
