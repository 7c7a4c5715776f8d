#include <catch2/catch.hpp>

#include <algorithm>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <unistd.h>

#include "images/build_log.h"
#include "images/builder.h"
#include "images/manifest.h"
#include "provisioner/core/sha256.h"
#include "tests/images/fakes.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using namespace kiln::images;
using kiln::test::TempDir;
using kiln::test::images::FakeDiskFactory;
using kiln::test::images::FakeDiskWorld;
using kiln::test::images::FakeTools;

namespace {

struct Rig {
    TempDir dir;
    FakeTools tools;
    FakeDiskWorld world;
    FakeDiskFactory disks{world};
    LayerCache cache{dir.path() + "/cache"};
    Builder builder{tools, disks, cache};
    BuildOptions opts;
    std::string smoke;

    Rig() {
        dir.write("apt/sources.list.d/debian.sources",
                  "Types: deb\nURIs: http://mirror.invalid/debian\nSuites: bookworm\nComponents: main\n");
        opts.apt_dir = dir.path() + "/apt";
        opts.mbr_path = dir.write("mbr.bin", std::string(512, '\x55'));
        opts.output = dir.path() + "/out/demo.qcow2";
        opts.source_date_epoch = 1764633600;
        smoke = dir.write("kiln-smoke", "#!/bin/sh\necho v1\n");
    }

    Recipe recipe(const std::string& extra_layer = "") {
        const std::string text =
            std::string(
                "name = \"demo\"\n[inputs]\nkiln-smoke = \"\"\n[base]\nsuite = \"bookworm\"\n"
                "packages = [\"linux-image-amd64\"]\n"
                "[[layers]]\nname = \"rdma\"\npackages = [\"rdma-core\"]\n"
                "kernel_args = [\"iommu=pt\"]\n") +
            extra_layer +
            "[[layers]]\nname = \"smoke\"\n[[layers.files]]\npath = \"/usr/local/bin/kiln-smoke\"\n"
            "input = \"kiln-smoke\"\nmode = \"0755\"\n";
        auto r = parse_recipe(text, dir.path() + "/demo.toml", {{"kiln-smoke", smoke}});
        for (const auto& e : r.errors) FAIL(e.str());
        return *r.recipe;
    }

    std::vector<std::string> statuses(const BuildResult& r) {
        std::vector<std::string> out;
        for (const auto& l : r.layers) out.push_back(l.name + ":" + l.status);
        return out;
    }
    std::vector<std::string> last_log() {
        std::vector<std::string> out;
        for (const auto& r : BuildLog(cache.dir() + "/build.log").last_build()) out.push_back(r.layer + ":" + r.status);
        return out;
    }
};

}  // namespace

TEST_CASE("builder: cold build builds every layer, a rerun builds nothing") {
    Rig rig;
    auto r = rig.builder.build(rig.recipe(), rig.opts);
    REQUIRE(r.ok());
    CHECK(rig.statuses(*r) == std::vector<std::string>{"base:built", "rdma:built", "smoke:built"});
    CHECK(rig.last_log() == std::vector<std::string>{"base:built", "rdma:built", "smoke:built", "output:built"});
    CHECK(fs::exists(r->image));
    CHECK(rig.world.files.at("/usr/local/bin/kiln-smoke") == "#!/bin/sh\necho v1\n");
    // Nothing of the build host: mmdebstrap's copies of its resolver and name go.
    CHECK(rig.world.files.at("/etc/hostname") == "localhost\n");
    CHECK(std::find(rig.world.calls.begin(), rig.world.calls.end(), "rm_rf:/etc/resolv.conf") != rig.world.calls.end());

    const int launches = rig.world.launches;
    auto again = rig.builder.build(rig.recipe(), rig.opts);
    REQUIRE(again.ok());
    CHECK(rig.statuses(*again) == std::vector<std::string>{"base:cached", "rdma:cached", "smoke:cached"});
    CHECK(rig.last_log() == std::vector<std::string>{"base:cached", "rdma:cached", "smoke:cached", "output:cached"});
    CHECK(rig.world.launches == launches);
    CHECK(again->output_cached);
}

TEST_CASE("builder: a killed build's temp output is removed by the next write of that output") {
    Rig rig;
    fs::create_directories(fs::path(rig.opts.output).parent_path());
    const std::string stale = rig.opts.output + ".tmp-99999-0";
    const std::string other = fs::path(rig.opts.output).parent_path() / "other.qcow2.tmp-99999-0";
    std::ofstream(stale) << "half an image";
    std::ofstream(other) << "another output's";
    auto r = rig.builder.build(rig.recipe(), rig.opts);
    REQUIRE(r.ok());
    CHECK_FALSE(fs::exists(stale));
    CHECK(fs::exists(other));  // not this output's: its own builder may be writing it
    CHECK(fs::exists(r->image));
}

TEST_CASE("builder: a mirror caught mid-sync is worth a retry, a package that does not exist is not") {
    Rig rig;
    // mmdebstrap's own words, seen on this machine while the security
    // archive was being updated, and for a misspelt package.
    rig.tools.mmdebstrap_fails_with =
        "E: apt download failed: E: apt-get --yes -oDebug::pkgDpkgPm=1 install ?narrow(?essential) failed\n"
        "E: mmdebstrap failed to run\n";
    auto r = rig.builder.build(rig.recipe(), rig.opts);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().transient);
    CHECK_THAT(r.error().message, Catch::Contains("bootstrapping the base"));

    rig.tools.mmdebstrap_fails_with =
        "E: setup failed: E: apt-get --yes install no-such-package-kiln failed\nE: mmdebstrap failed to run\n";
    auto bad = rig.builder.build(rig.recipe(), rig.opts);
    REQUIRE_FALSE(bad.ok());
    CHECK_FALSE(bad.error().transient);
    // Neither left a cache entry.
    CHECK(rig.cache.list().empty());

    CHECK(
        mirror_trouble("Err:1 http://mirror.invalid/debian bookworm/main amd64 rdma-core\n"
                       "E: Failed to fetch http://mirror.invalid/debian/pool/main/r/rdma-core.deb  Hash Sum mismatch"));
    CHECK(mirror_trouble("W: Temporary failure resolving 'mirror.invalid'"));
    CHECK_FALSE(mirror_trouble("E: Unable to locate package no-such-package-kiln"));
}

TEST_CASE("builder: a changed input file rebuilds only its layer") {
    Rig rig;
    REQUIRE(rig.builder.build(rig.recipe(), rig.opts).ok());
    auto first = read_manifest(Builder::manifest_path_for(rig.opts.output));
    REQUIRE(first.has_value());
    std::ofstream(rig.smoke) << "#!/bin/sh\necho v2\n";
    auto r = rig.builder.build(rig.recipe(), rig.opts);
    REQUIRE(r.ok());
    CHECK(rig.last_log() == std::vector<std::string>{"base:cached", "rdma:cached", "smoke:built", "output:built"});
    CHECK((*first)["layers"][1]["key"] == r->manifest["layers"][1]["key"]);
    CHECK((*first)["layers"][2]["key"] != r->manifest["layers"][2]["key"]);
    CHECK((*first)["image_sha256"] != r->manifest["image_sha256"]);
}

TEST_CASE("builder: base through mmdebstrap with SOURCE_DATE_EPOCH, overlays on their parent") {
    Rig rig;
    auto r = rig.builder.build(rig.recipe(), rig.opts);
    REQUIRE(r.ok());
    const auto& mm = rig.tools.argvs.at(0);
    CHECK(mm[0] == "mmdebstrap");
    CHECK(std::find(mm.begin(), mm.end(), "--variant=minbase") != mm.end());
    CHECK(std::find(mm.begin(), mm.end(), "--include=linux-image-amd64") != mm.end());
    CHECK(mm.back() == "deb http://mirror.invalid/debian bookworm main");
    CHECK(rig.tools.envs.at(0).at("SOURCE_DATE_EPOCH") == "1764633600");
    // qemu-img create -b ../<parent>/disk.qcow2 -F qcow2 for each layer.
    int overlays = 0;
    for (const auto& a : rig.tools.argvs)
        if (a[0] == "qemu-img" && a[1] == "create" && std::find(a.begin(), a.end(), "-b") != a.end()) {
            ++overlays;
            auto b = std::find(a.begin(), a.end(), "-b");
            CHECK((b + 1)->rfind("../", 0) == 0);
            CHECK(*(b + 2) == "-F");
        }
    CHECK(overlays == 2);
    // The rdma layer had network (apt), the smoke layer none.
    CHECK(std::count(rig.world.calls.begin(), rig.world.calls.end(), "network:1") == 1);
    CHECK(std::count(rig.world.calls.begin(), rig.world.calls.end(), "network:0") == 1);
    // Boot entry: newest kernel, root by UUID, every kernel argument so far.
    const std::string conf = rig.world.files.at("/boot/extlinux/extlinux.conf");
    CHECK(conf.find("LINUX /boot/vmlinuz-6.1.0-99-amd64") != std::string::npos);
    CHECK(conf.find("root=UUID=" + root_uuid_for(r->layers[0].key)) != std::string::npos);
    CHECK(conf.find("console=ttyS0 iommu=pt") != std::string::npos);
    // Reproducibility: an empty machine-id.
    CHECK(rig.world.files.at("/etc/machine-id").empty());
}

TEST_CASE("builder: commands get the image's kernel version, not the appliance's") {
    Rig rig;
    const std::string layer =
        "[[layers]]\nname = \"dkms\"\ncommands = [\"dkms autoinstall -k $KILN_KERNEL_VERSION\"]\n";
    REQUIRE(rig.builder.build(rig.recipe(layer), rig.opts).ok());
    bool seen = false;
    for (size_t i = 0; i < rig.world.calls.size(); ++i) {
        (void)i;
    }
    for (const auto& env : rig.world.envs)
        if (env.count("KILN_LAYER") && env.at("KILN_LAYER") == "dkms") {
            CHECK(env.at("KILN_KERNEL_VERSION") == "6.1.0-99-amd64");
            seen = true;
        }
    CHECK(seen);
}

TEST_CASE("builder: a failing command shows its output and leaves the cache untouched") {
    Rig rig;
    REQUIRE(rig.builder.build(rig.recipe(), rig.opts).ok());
    const auto before = rig.cache.list();
    rig.world.on_run = [](const std::string& script) {
        if (script.find("make-it-fail") != std::string::npos)
            return GuestCommandResult{3, "compiling...\nerror: widget not found\n"};
        if (script.find("dpkg-query") != std::string::npos) return GuestCommandResult{0, "bash\t5\n"};
        return GuestCommandResult{0, ""};
    };
    auto r = rig.builder.build(rig.recipe("[[layers]]\nname = \"bad\"\ncommands = [\"make-it-fail\"]\n"), rig.opts);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == "image.layer_command");
    CHECK(r.error().message.find("layer 'bad'") != std::string::npos);
    CHECK(r.error().message.find("exit 3") != std::string::npos);
    CHECK(r.error().message.find("error: widget not found") != std::string::npos);
    const auto after = rig.cache.list();
    REQUIRE(after.size() == before.size());
    for (size_t i = 0; i < after.size(); ++i) CHECK(after[i].key == before[i].key);
    for (const auto& e : fs::directory_iterator(rig.cache.dir() + "/layers"))
        CHECK(e.path().filename().string().rfind(".tmp-", 0) != 0);
    CHECK(rig.last_log().back() == "bad:failed");
}

TEST_CASE("builder: an appliance that hung is killed and its layer built once more") {
    const kiln::Error hung = kiln::make_error("image", "image.appliance_hung", "the appliance hung (test)", true);
    Rig clean;
    REQUIRE(clean.builder.build(clean.recipe(), clean.opts).ok());
    const int launches_clean = clean.world.launches;

    Rig rig;
    rig.world.launch_errors = {hung};
    std::vector<std::string> said;
    rig.opts.progress = [&](const std::string& layer, const std::string& msg) { said.push_back(layer + ": " + msg); };
    auto r = rig.builder.build(rig.recipe(), rig.opts);
    REQUIRE(r.ok());
    CHECK(rig.world.launches == launches_clean + 1);
    CHECK(rig.statuses(*r) == std::vector<std::string>{"base:built", "rdma:built", "smoke:built"});
    bool retried = false;
    for (const auto& s : said)
        retried = retried || (s.rfind("base: ", 0) == 0 && s.find("once more") != std::string::npos);
    CHECK(retried);
    for (const auto& e : fs::directory_iterator(rig.cache.dir() + "/layers"))
        CHECK(e.path().filename().string().rfind(".tmp-", 0) != 0);
}

TEST_CASE("builder: the base disk's steps stop at the first that fails") {
    Rig rig;
    rig.world.launch_errors = {kiln::make_error("image", "image.guestfs", "the appliance did not start (test)")};
    auto r = rig.builder.build(rig.recipe(), rig.opts);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message, Catch::Contains("the appliance did not start (test)"));
    // Nothing was partitioned, formatted or written on a disk that did not launch.
    const auto& calls = rig.world.calls;
    REQUIRE(std::find(calls.begin(), calls.end(), "launch") != calls.end());
    for (const auto& c : calls) {
        INFO(c);
        CHECK(c.rfind("part_disk", 0) != 0);
        CHECK(c.rfind("mkfs:", 0) != 0);
        CHECK(c.rfind("tar_in", 0) != 0);
        CHECK(c.rfind("mbr:", 0) != 0);
    }
}

TEST_CASE("builder: an appliance that hangs twice fails the layer and caches nothing") {
    const kiln::Error hung = kiln::make_error("image", "image.appliance_hung", "the appliance hung (test)", true);
    Rig rig;
    REQUIRE(rig.builder.build(rig.recipe(), rig.opts).ok());
    const auto before = rig.cache.list();
    rig.world.launch_errors = {hung, hung};
    auto r = rig.builder.build(rig.recipe("[[layers]]\nname = \"extra\"\ncommands = [\"true\"]\n"), rig.opts);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == "image.appliance_hung");
    CHECK(rig.world.launch_errors.empty());  // both launches were tried
    CHECK(rig.cache.list().size() == before.size());
    CHECK(rig.last_log().back() == "extra:failed");
    for (const auto& e : fs::directory_iterator(rig.cache.dir() + "/layers"))
        CHECK(e.path().filename().string().rfind(".tmp-", 0) != 0);
}

TEST_CASE("builder: a host layer that fails leaves no tree and no cache entry, and a killed build's tree goes") {
    Rig rig;
    REQUIRE(rig.builder.build(rig.recipe(), rig.opts).ok());
    const auto before = rig.cache.list();
    // A tree a killed build left (its pid is gone), and one of a live build.
    const std::string stale = rig.cache.dir() + "/host-tree.2147483646-0";
    const std::string live = rig.cache.dir() + fmt::format("/host-tree.{}-77", ::getppid());
    fs::create_directories(stale + "/etc");
    fs::create_directories(live + "/etc");
    rig.world.calls.clear();
    // The fake appliance cannot hand out its tree: the layer fails there.
    auto r = rig.builder.build(rig.recipe("[[layers]]\nname = \"dkms\"\nbuild_in = \"host\"\npackages = [\"dkms\"]\n"),
                               rig.opts);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message.find("tar_out") != std::string::npos);
    CHECK_FALSE(fs::exists(stale));
    CHECK(fs::exists(live));
    for (const auto& e : fs::directory_iterator(rig.cache.dir()))
        if (e.path() != live) CHECK(e.path().filename().string().rfind("host-tree.", 0) != 0);
    // Its packages come from the host's network, never the appliance's.
    CHECK(std::find(rig.world.calls.begin(), rig.world.calls.end(), "network:1") == rig.world.calls.end());
    const auto after = rig.cache.list();
    REQUIRE(after.size() == before.size());
    for (size_t i = 0; i < after.size(); ++i) CHECK(after[i].key == before[i].key);
    CHECK(rig.last_log().back() == "dkms:failed");
}

TEST_CASE("builder: a missing input names the recipe position") {
    Rig rig;
    Recipe r = rig.recipe();
    fs::remove(rig.smoke);
    auto b = rig.builder.build(r, rig.opts);
    REQUIRE_FALSE(b.ok());
    CHECK(b.error().code == "image.missing_file");
    CHECK(b.error().message.find(rig.dir.path() + "/demo.toml:") == 0);
    CHECK(b.error().message.find("layers[1].files[0].input: file not found") != std::string::npos);
    CHECK(rig.cache.list().empty());

    r.inputs["kiln-smoke"].path = "";
    auto c = rig.builder.build(r, rig.opts);
    REQUIRE_FALSE(c.ok());
    CHECK(c.error().message.find("give --input kiln-smoke=PATH") != std::string::npos);
}

TEST_CASE("builder: a full disk inside a layer is reported as such") {
    Rig rig;
    rig.world.on_run = [](const std::string& script) {
        if (script.find("fallocate") != std::string::npos)
            return GuestCommandResult{1, "fallocate: fallocate failed: No space left on device\n"};
        if (script.find("dpkg-query") != std::string::npos) return GuestCommandResult{0, "bash\t5\n"};
        return GuestCommandResult{0, ""};
    };
    auto r = rig.builder.build(rig.recipe("[[layers]]\nname = \"fill\"\ncommands = [\"fallocate -l 64G /fill\"]\n"),
                               rig.opts);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message.find("No space left on device") != std::string::npos);
}

TEST_CASE("builder: the manifest lists packages sorted, layer keys and the output digest") {
    Rig rig;
    auto r = rig.builder.build(rig.recipe(), rig.opts);
    REQUIRE(r.ok());
    const auto& m = r->manifest;
    CHECK(m["recipe"] == "demo");
    CHECK(m["kernel"] == "6.1.0-99-amd64");
    REQUIRE(m["packages"].is_object());
    CHECK(m["packages"].begin().key() == "bash");
    CHECK(m["packages"]["zlib1g"] == "1:1.2.13");
    REQUIRE(m["layers"].size() == 3);
    CHECK(m["layers"][2]["name"] == "smoke");
    CHECK(m["final_key"] == r->layers.back().key);
    CHECK(m["nvidia_driver"].is_null());
    CHECK(m["image_sha256"] == kiln::sha256_file(r->image).value());
    CHECK(m["source_date_epoch"] == 1764633600);
    auto on_disk = read_manifest(r->manifest_path);
    REQUIRE(on_disk.has_value());
    CHECK(*on_disk == m);
}

namespace {

// qemu-img convert that waits (3 s at most) until `expected` converts have
// begun: without a lock on the output, two builds of one image meet here.
struct Meeting {
    std::mutex m;
    std::condition_variable cv;
    int arrived = 0, converts = 0;
};

class MeetingTools : public FakeTools {
public:
    explicit MeetingTools(Meeting& meet) : meet_(meet) {}
    kiln::Result<kiln::CommandResult> run(const kiln::CommandSpec& spec) override {
        if (spec.argv.size() > 1 && spec.argv[0] == "qemu-img" && spec.argv[1] == "convert") {
            std::unique_lock<std::mutex> l(meet_.m);
            ++meet_.converts;
            ++meet_.arrived;
            meet_.cv.notify_all();
            meet_.cv.wait_for(l, std::chrono::seconds(3), [&] { return meet_.arrived >= 2; });
        }
        return FakeTools::run(spec);
    }

private:
    Meeting& meet_;
};

}  // namespace

// Two nodes of a fleet build the same image at once (the lab's two nodes
// did): one writes the output, the other finds it written.
TEST_CASE("builder: two builds of one image at once write its output once") {
    Rig rig;
    REQUIRE(rig.builder.build(rig.recipe(), rig.opts).ok());  // layers cached
    fs::remove(rig.opts.output);
    fs::remove(Builder::manifest_path_for(rig.opts.output));
    const Recipe recipe = rig.recipe();

    Meeting meet;
    struct Side {
        MeetingTools tools;
        FakeDiskWorld world;
        FakeDiskFactory disks{world};
        LayerCache cache;
        Builder builder{tools, disks, cache};
        kiln::Result<BuildResult> result = kiln::make_error("test", "test.unset", "not run");
        Side(Meeting& m, const std::string& dir) : tools(m), cache(dir) {}
    };
    Side a(meet, rig.cache.dir()), b(meet, rig.cache.dir());
    REQUIRE(a.cache.open().ok());
    REQUIRE(b.cache.open().ok());
    std::thread ta([&] { a.result = a.builder.build(recipe, rig.opts); });
    std::thread tb([&] { b.result = b.builder.build(recipe, rig.opts); });
    ta.join();
    tb.join();
    REQUIRE(a.result.ok());
    REQUIRE(b.result.ok());
    CHECK(meet.converts == 1);
    CHECK(a.result->output_cached != b.result->output_cached);
    CHECK(fs::exists(rig.opts.output));
    auto m = read_manifest(Builder::manifest_path_for(rig.opts.output));
    REQUIRE(m.has_value());
    CHECK((*m)["image_sha256"] == a.result->manifest["image_sha256"]);
}
