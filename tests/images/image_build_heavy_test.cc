// Heavy: the real builder (mmdebstrap, qemu-img, libguestfs under TCG) on
// gpu-guest-lite, after the gpu_guest_lite_image fixture built it into the
// shared cache. Every test here reuses that cache, so only the layers a
// test changes are built.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include "images/appliance_watchdog.h"
#include "images/boot_check.h"
#include "images/build_log.h"
#include "images/builder.h"
#include "images/guest_disk.h"
#include "images/recipe.h"
#include "provisioner/core/command.h"
#include "provisioner/vm/guest_contract.h"
#include "tests/support/skip.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using namespace kiln::images;
using kiln::test::TempDir;

namespace {

const std::string kRecipe = std::string(KILN_SOURCE_DIR) + "/images/recipes/gpu-guest-lite.toml";
const std::string kCache = KILN_TEST_IMAGE_CACHE;
const std::string kImage = KILN_TEST_IMAGE;

std::string smoke_input() {
    std::string built = std::string(KILN_BINARY_DIR) + "/kiln-smoke";
    if (fs::exists(built)) return built;
    return std::string(KILN_SOURCE_DIR) + "/tests/images/fixtures/kiln-smoke-placeholder";
}

std::string slurp(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

struct Real {
    Real() {
        ::setenv("LIBGUESTFS_BACKEND", "direct", 0);
        ::setenv("LIBGUESTFS_BACKEND_SETTINGS", "force_tcg", 0);
    }
    kiln::ProcessRunner runner;
    GuestfsDiskFactory disks;
    LayerCache cache{kCache};
    Builder builder{runner, disks, cache};
};

// gpu-guest-lite with `extra` appended (a [[layers]] table after [output] is
// still valid TOML), written beside the original's folder layout.
Recipe lite_plus(const TempDir& dir, const std::string& extra, const std::string& smoke) {
    const std::string path = dir.write("recipes/lite-plus.toml", slurp(kRecipe) + "\n" + extra);
    auto r = load_recipe(path, {{"kiln-smoke", smoke}});
    for (const auto& e : r.errors) FAIL(e.str());
    return *r.recipe;
}

std::vector<std::string> last_build() {
    std::vector<std::string> out;
    for (const auto& r : BuildLog(kCache + "/build.log").last_build()) out.push_back(r.layer + ":" + r.status);
    return out;
}

std::vector<std::string> cache_keys(LayerCache& c) {
    std::vector<std::string> out;
    for (const auto& e : c.list()) out.push_back(e.key);
    return out;
}

// No staging dir of this process's builds (.tmp-<key>-<pid>-<n>) is left;
// another process's may be a build in progress beside this one.
void no_staging_left() {
    const std::string mine = "-" + std::to_string(::getpid()) + "-";
    for (const auto& e : fs::directory_iterator(kCache + "/layers")) {
        const std::string n = e.path().filename().string();
        CHECK_FALSE((n.rfind(".tmp-", 0) == 0 && n.find(mine, 5 + 64) == 5 + 64));
    }
}

}  // namespace

TEST_CASE("gpu-guest-lite: a one-file change rebuilds only the last layer, then a rerun builds nothing") {
    Real real;
    TempDir dir;
    const std::string smoke =
        dir.write("kiln-smoke", slurp(smoke_input()) + "\n# changed by the rebuild test " + std::to_string(::getpid()) +
                                    "-" + std::to_string(std::time(nullptr)) + "\n");
    // (unique: the layer cache is shared across runs, and this change must
    // be one it has never seen)
    fs::permissions(smoke, fs::perms::owner_all);
    auto loaded = load_recipe(kRecipe, {{"kiln-smoke", smoke}});
    REQUIRE(loaded.recipe.has_value());
    BuildOptions o;
    o.output = dir.path() + "/lite-changed.qcow2";
    auto r = real.builder.build(*loaded.recipe, o);
    if (!r) FAIL(r.error().str());
    CHECK(last_build() ==
          std::vector<std::string>{"base:cached", "guest:cached", "soft-roce:cached", "smoke:built", "output:built"});
    CHECK(r->manifest["kernel"].get<std::string>().rfind("6.", 0) == 0);
    CHECK(r->manifest["packages"].contains("cloud-init"));
    CHECK(r->manifest["packages"].contains("qemu-guest-agent"));
    CHECK(r->manifest["packages"].contains("perftest"));

    auto again = real.builder.build(*loaded.recipe, o);
    if (!again) FAIL(again.error().str());
    CHECK(last_build() ==
          std::vector<std::string>{"base:cached", "guest:cached", "soft-roce:cached", "smoke:cached", "output:cached"});
    CHECK(again->manifest["image_sha256"] == r->manifest["image_sha256"]);
}

TEST_CASE("libguestfs: an appliance past its watchdog's deadline is killed, and the launch names the hang") {
    Real real;
    TempDir dir;
    const std::string drive = dir.path() + "/disk.qcow2";
    kiln::CommandSpec create;
    create.argv = {"qemu-img", "create", "-q", "-f", "qcow2", drive, "64M"};
    auto made = real.runner.run(create);
    REQUIRE(made.ok());
    REQUIRE(made->exit_code == 0);
    // A zero deadline: the watchdog kills the appliance's qemu as soon as it
    // appears, as it would one that hung.
    GuestfsDiskFactory impatient(ApplianceDeadlines{std::chrono::milliseconds(0), std::chrono::minutes(2)});
    auto disk = impatient.open();
    REQUIRE(disk.ok());
    REQUIRE((*disk)->add_drive(drive, "qcow2").ok());
    auto st = (*disk)->launch();
    REQUIRE_FALSE(st.ok());
    INFO(st.error().message);
    CHECK(st.error().code == "image.appliance_hung");
    CHECK(st.error().transient);
    CHECK(st.error().message.find("launching the appliance") != std::string::npos);
    CHECK(appliance_processes(drive).empty());
}

TEST_CASE("gpu-guest-lite: a failing command shows its output and leaves the cache untouched") {
    Real real;
    TempDir dir;
    Recipe recipe = lite_plus(dir,
                              "[[layers]]\nname = \"broken\"\n"
                              "commands = [\"echo about to fail\", \"ls /kiln-no-such-dir\"]\n",
                              smoke_input());
    const auto before = cache_keys(real.cache);
    BuildOptions o;
    o.output = dir.path() + "/broken.qcow2";
    auto r = real.builder.build(recipe, o);
    REQUIRE_FALSE(r.ok());
    INFO(r.error().message);
    CHECK(r.error().code == "image.layer_command");
    CHECK(r.error().message.find("layer 'broken': command 2") != std::string::npos);
    CHECK(r.error().message.find("kiln-no-such-dir") != std::string::npos);
    CHECK(r.error().message.find("No such file or directory") != std::string::npos);
    CHECK(cache_keys(real.cache) == before);
    CHECK(last_build().back() == "broken:failed");
    CHECK_FALSE(fs::exists(o.output));
    no_staging_left();
}

TEST_CASE("gpu-guest-lite: a full disk inside a layer is reported and cached nothing") {
    Real real;
    TempDir dir;
    Recipe recipe =
        lite_plus(dir, "[[layers]]\nname = \"fill\"\ncommands = [\"fallocate -l 64G /kiln-fill\"]\n", smoke_input());
    const auto before = cache_keys(real.cache);
    BuildOptions o;
    o.output = dir.path() + "/fill.qcow2";
    auto r = real.builder.build(recipe, o);
    REQUIRE_FALSE(r.ok());
    INFO(r.error().message);
    CHECK(r.error().message.find("No space left on device") != std::string::npos);
    CHECK(cache_keys(real.cache) == before);
    no_staging_left();
}

TEST_CASE("gpu-guest-lite: the image boots and reports KILN_READY with cloud-init done") {
    kiln::ProcessRunner runner;
    TempDir dir;
    BootCheckOptions o;
    o.image = kImage;
    o.work_dir = dir.path();
    o.timeout = std::chrono::seconds(900);
    auto r = boot_check(runner, o);
    if (!r) FAIL(r.error().str());
    INFO(r->line);
    CHECK((r->accel == "kvm" || r->accel == "tcg"));
    CHECK_FALSE(r->accel_reason.empty());
    CHECK(r->ready["cloud_init"] == "done");
    CHECK(r->ready["smoke"] == kiln::vm::kGuestSmokePath);
    REQUIRE(r->ready["modules"].is_array());
    CHECK_FALSE(r->ready["modules"].empty());
    // The image's own cloud-init config passes cloud-init's schema check
    // (it warns on the console otherwise, on every boot).
    std::ifstream in(r->serial_log, std::ios::binary);
    const std::string console((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(console.find("KILN_READY") != std::string::npos);
    CHECK(console.find("Invalid cloud-config provided") == std::string::npos);
}

TEST_CASE("gpu-guest-lite: host layers build chrooted on the host and land in their overlays exactly") {
    if (::geteuid() != 0) {
        kiln::test::report_skipped("build_in = \"host\" needs root");
        return;
    }
    Real real;
    TempDir dir;
    // Unique content: the cache is shared across runs, and these layers
    // must be built, not found.
    const std::string stamp = std::to_string(::getpid()) + "-" + std::to_string(std::time(nullptr));
    Recipe recipe =
        lite_plus(dir,
                  "[[layers]]\nname = \"on-host\"\nbuild_in = \"host\"\npackages = [\"hello\"]\n"
                  "commands = [\"rm /etc/motd\", \"chmod 0700 /etc/issue.net\",\n"
                  "  \"ln -s /etc/hostname /etc/kiln-link\",\n"
                  "  \"mkdir -p /var/lib/kiln && echo " +
                      stamp +
                      " > /var/lib/kiln/marker\",\n"
                      "  \"install -d -o 65534 -g 65534 /var/lib/kiln-owned\",\n"
                      "  \"test -r /proc/self/status && test -c /dev/null\"]\n"
                      "[[layers.files]]\npath = \"/etc/kiln-host-file\"\ncontent = \"written on the host\\n\"\n"
                      "[[layers]]\nname = \"on-host-too\"\nbuild_in = \"host\"\n"
                      "commands = [\"rm -r /var/lib/kiln\", \"hello -g carried > /etc/kiln-carried\"]\n",
                  smoke_input());
    std::vector<std::string> said;
    BuildOptions o;
    o.output = dir.path() + "/on-host.qcow2";
    o.progress = [&](const std::string& layer, const std::string& msg) { said.push_back(layer + ": " + msg); };
    auto r = real.builder.build(recipe, o);
    if (!r) FAIL(r.error().str());
    CHECK(last_build() == std::vector<std::string>{"base:cached", "guest:cached", "soft-roce:cached", "smoke:cached",
                                                   "on-host:built", "on-host-too:built", "output:built"});
    // The second host layer starts from the tree the first one left.
    CHECK(std::count(said.begin(), said.end(), "on-host: unpack the parent's tree on the host") == 1);
    CHECK(std::count_if(said.begin(), said.end(), [](const std::string& s) {
              return s.find("unpack the parent's tree") != std::string::npos;
          }) == 1);
    CHECK(r->manifest["packages"].contains("hello"));
    CHECK(r->manifest["packages"].contains("cloud-init"));  // the parent's packages are all still there
    for (const auto& e : fs::directory_iterator(kCache))
        CHECK(e.path().filename().string().rfind("host-tree.", 0) != 0);

    // What the image holds, read back through the appliance.
    auto disk = real.disks.open();
    REQUIRE(disk);
    GuestDisk& g = **disk;
    REQUIRE(g.add_drive(o.output, "qcow2"));
    REQUIRE(g.launch());
    REQUIRE(g.mount("/dev/sda1", "/"));
    CHECK(g.exists("/usr/bin/hello"));
    CHECK_FALSE(g.exists("/etc/motd"));
    CHECK_FALSE(g.exists("/var/lib/kiln"));  // made by one layer, removed by the next
    CHECK(g.exists("/etc/issue"));           // the parent's files stay
    auto file = g.read_file("/etc/kiln-host-file");
    REQUIRE(file);
    CHECK(*file == "written on the host\n");
    auto carried = g.read_file("/etc/kiln-carried");
    REQUIRE(carried);
    CHECK(*carried == "carried\n");
    auto facts = g.run("stat -c %a /etc/issue.net; readlink /etc/kiln-link; stat -c %u:%g /var/lib/kiln-owned", {},
                       std::chrono::seconds(120));
    REQUIRE(facts);
    INFO(facts->output);
    std::istringstream lines(facts->output);
    std::string mode, link, owner;
    std::getline(lines, mode);
    std::getline(lines, link);
    std::getline(lines, owner);
    CHECK(mode == "700");
    CHECK(link == "/etc/hostname");
    CHECK(owner == "65534:65534");  // numeric owners, whatever the host's passwd says
    // Nothing of the host's mounts or resolver reached the image's disk.
    auto proc = g.ls("/proc");
    REQUIRE(proc);
    CHECK(proc->empty());
    CHECK_FALSE(g.exists("/etc/resolv.conf.kiln"));
    // The image had none (the base drops mmdebstrap's copy of the host's):
    // the one apt used on the host is gone again.
    CHECK_FALSE(g.exists("/etc/resolv.conf"));
    auto hostname = g.read_file("/etc/hostname");
    REQUIRE(hostname);
    CHECK(*hostname == "localhost\n");
    REQUIRE(g.shutdown());
}
