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

#include "images/boot_check.h"
#include "images/build_log.h"
#include "images/builder.h"
#include "images/guest_disk.h"
#include "images/recipe.h"
#include "provisioner/core/command.h"
#include "provisioner/vm/guest_contract.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using namespace kiln::images;
using kiln::test::TempDir;

namespace {

const std::string kRecipe = std::string(KILN_SOURCE_DIR) + "/images/recipes/gpu-guest-lite.toml";
const std::string kCache = KILN_TEST_IMAGE_CACHE;
const std::string kImage = KILN_TEST_IMAGE;

std::string smoke_input() {
    const std::string built = std::string(KILN_BINARY_DIR) + "/kiln-smoke";
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

void no_staging_left() {
    for (const auto& e : fs::directory_iterator(kCache + "/layers"))
        CHECK(e.path().filename().string().rfind(".tmp-", 0) != 0);
}

}  // namespace

TEST_CASE("gpu-guest-lite: a one-file change rebuilds only the last layer, then a rerun builds nothing") {
    Real real;
    TempDir dir;
    const std::string smoke = dir.write("kiln-smoke", slurp(smoke_input()) + "\n# changed by the rebuild test " +
                                                          std::to_string(::getpid()) + "-" +
                                                          std::to_string(std::time(nullptr)) + "\n");
    // (unique: the layer cache is shared across runs, and this change must
    // be one it has never seen)
    fs::permissions(smoke, fs::perms::owner_all);
    auto loaded = load_recipe(kRecipe, {{"kiln-smoke", smoke}});
    REQUIRE(loaded.recipe.has_value());
    BuildOptions o;
    o.output = dir.path() + "/lite-changed.qcow2";
    auto r = real.builder.build(*loaded.recipe, o);
    if (!r) FAIL(r.error().str());
    CHECK(last_build() == std::vector<std::string>{"base:cached", "guest:cached", "smoke:built", "output:built"});
    CHECK(r->manifest["kernel"].get<std::string>().rfind("6.", 0) == 0);
    CHECK(r->manifest["packages"].contains("cloud-init"));
    CHECK(r->manifest["packages"].contains("qemu-guest-agent"));
    CHECK(r->manifest["packages"].contains("perftest"));

    auto again = real.builder.build(*loaded.recipe, o);
    if (!again) FAIL(again.error().str());
    CHECK(last_build() == std::vector<std::string>{"base:cached", "guest:cached", "smoke:cached", "output:cached"});
    CHECK(again->manifest["image_sha256"] == r->manifest["image_sha256"]);
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
    CHECK(r.error().code == "layer-command");
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
