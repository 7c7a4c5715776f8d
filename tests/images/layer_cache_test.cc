#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "images/builder.h"
#include "images/layer_cache.h"
#include "tests/images/fakes.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using namespace kiln::images;
using kiln::test::TempDir;
using kiln::test::images::FakeDiskFactory;
using kiln::test::images::FakeDiskWorld;
using kiln::test::images::FakeTools;

TEST_CASE("layer keys depend on spec, inputs and parent") {
    const nlohmann::json spec = {{"packages", {"a"}}};
    const std::string k = layer_key(spec, {{"f", "d1"}}, "p");
    CHECK(k.size() == 64);
    CHECK(k == layer_key(spec, {{"f", "d1"}}, "p"));
    CHECK(k != layer_key({{"packages", {"b"}}}, {{"f", "d1"}}, "p"));
    CHECK(k != layer_key(spec, {{"f", "d2"}}, "p"));
    CHECK(k != layer_key(spec, {{"f", "d1"}}, "q"));
    // Key order in the spec does not matter: canonical JSON.
    CHECK(layer_key({{"a", 1}, {"b", 2}}, {}, "") == layer_key({{"b", 2}, {"a", 1}}, {}, ""));
}

namespace {

std::string fake_key(int i) {
    return std::string(63, static_cast<char>('a' + i % 6)) + std::to_string(i % 10);
}

CacheEntry add(LayerCache& c, const std::string& key, const std::string& parent, const std::string& name,
               size_t bytes = 4096) {
    auto st = c.stage(key);
    REQUIRE(st.ok());
    std::ofstream(fs::path(*st) / "disk.qcow2") << std::string(bytes, 'x');
    auto e = c.commit(*st, key, name, parent, {{"kernel", "k"}});
    REQUIRE(e.ok());
    return *e;
}

}  // namespace

TEST_CASE("layer cache: an entry exists only once committed") {
    TempDir dir;
    LayerCache c(dir.file("cache"));
    REQUIRE(c.open().ok());
    const std::string k = fake_key(1);
    auto st = c.stage(k);
    REQUIRE(st.ok());
    std::ofstream(fs::path(*st) / "disk.qcow2") << "half";
    // A build killed here leaves only a staging dir: not an entry.
    CHECK_FALSE(c.find(k).has_value());
    CHECK(c.list().empty());
    // The next build of the key clears the leftover.
    auto st2 = c.stage(k);
    REQUIRE(st2.ok());
    CHECK_FALSE(fs::exists(*st));
    std::ofstream(fs::path(*st2) / "disk.qcow2") << "whole";
    REQUIRE(c.commit(*st2, k, "base", "", {{"kernel", "6.1"}}).ok());
    auto e = c.find(k);
    REQUIRE(e.has_value());
    CHECK(e->name == "base");
    CHECK(e->meta["kernel"] == "6.1");
    CHECK_FALSE(fs::exists(*st2));
    REQUIRE(c.list().size() == 1);
    // The index is a summary: losing it loses nothing.
    fs::remove(dir.file("cache/index.json"));
    CHECK(c.list().size() == 1);
}

TEST_CASE("layer cache: a second lock of a key waits for the first") {
    TempDir dir;
    LayerCache c(dir.file("cache"));
    REQUIRE(c.open().ok());
    const std::string k = fake_key(2);
    auto first = c.lock(k);
    REQUIRE(first.ok());
    REQUIRE(first->held());
    auto again = c.lock(k, false);
    REQUIRE(again.ok());
    CHECK_FALSE(again->held());

    // A second builder blocks on the lock, then finds the entry the first made.
    std::optional<bool> found_after_wait;
    std::thread second([&] {
        LayerCache other(dir.file("cache"));
        (void)other.open();
        auto lk = other.lock(k, true);
        found_after_wait = lk.ok() && lk->held() && other.find(k).has_value();
    });
    add(c, k, "", "base");
    *first = KeyLock{};  // release
    second.join();
    REQUIRE(found_after_wait.has_value());
    CHECK(*found_after_wait);
}

TEST_CASE("layer cache: prune by age and size takes descendants along, spares held keys") {
    TempDir dir;
    LayerCache c(dir.file("cache"));
    REQUIRE(c.open().ok());
    const std::string base = fake_key(10), mid = fake_key(11), leaf = fake_key(12), other = fake_key(13);
    add(c, base, "", "base");
    add(c, mid, base, "mid");
    add(c, leaf, mid, "leaf");
    add(c, other, "", "base2", 1 << 20);
    const int64_t now = unix_now();

    SECTION("nothing old: nothing removed") {
        auto r = c.prune(std::chrono::hours(1), std::nullopt, now);
        REQUIRE(r.ok());
        CHECK(r->removed.empty());
        CHECK(c.list().size() == 4);
    }
    SECTION("an old parent takes its children") {
        auto r = c.prune(std::chrono::hours(1), std::nullopt, now + 7200);
        REQUIRE(r.ok());
        CHECK(r->removed.size() == 4);
        CHECK(c.list().empty());
    }
    SECTION("removing mid removes leaf, keeps base") {
        c.touch(base);
        // Make the leaf chain least recently used by aging the others' view.
        auto r = c.prune(std::nullopt, c.find(base)->size_bytes + c.find(other)->size_bytes, now);
        REQUIRE(r.ok());
        // LRU order is by last_used then key: whatever goes, no child outlives its parent.
        for (const auto& e : c.list())
            if (!e.parent.empty()) CHECK(c.find(e.parent).has_value());
        CHECK(r->freed_bytes > 0);
    }
    SECTION("a key held by a running build stays, with its ancestors") {
        auto held = c.lock(leaf);
        REQUIRE(held->held());
        auto r = c.prune(std::chrono::hours(1), std::nullopt, now + 7200);
        REQUIRE(r.ok());
        CHECK(r->removed == std::vector<std::string>{other});
        CHECK(c.find(leaf).has_value());
        CHECK(c.find(mid).has_value());
        CHECK(c.find(base).has_value());
    }
}

// ---- keys through the builder's plan: a property over random edits ----

namespace {

struct RecipeWorld {
    TempDir dir;
    std::string apt;
    RecipeWorld() {
        apt = dir.path() + "/apt";
        dir.write("apt/sources.list.d/debian.sources",
                  "Types: deb\nURIs: http://mirror.invalid/debian\nSuites: bookworm bookworm-updates\n"
                  "Components: main\n");
    }
};

Recipe random_recipe(std::mt19937& rng, const TempDir& dir, int layers) {
    Recipe r;
    r.name = "prop";
    r.base.packages = {"linux-image-amd64"};
    for (int i = 0; i < layers; ++i) {
        LayerSpec l;
        l.name = "l" + std::to_string(i);
        for (int p = 0; p < static_cast<int>(rng() % 3); ++p) l.packages.push_back("pkg" + std::to_string(rng() % 50));
        FileSpec f;
        f.path = "/etc/f" + std::to_string(i);
        f.source = dir.write("in/f" + std::to_string(i), "content " + std::to_string(rng()));
        l.files.push_back(f);
        if (rng() % 2) l.commands.push_back("echo " + std::to_string(rng() % 100));
        r.layers.push_back(l);
    }
    return r;
}

std::vector<std::string> keys_of(Builder& b, const Recipe& r, const std::string& apt) {
    BuildOptions o;
    o.apt_dir = apt;
    auto plan = b.plan(r, o);
    REQUIRE(plan.ok());
    std::vector<std::string> out;
    for (const auto& l : *plan) out.push_back(l.key);
    return out;
}

}  // namespace

TEST_CASE("layer keys: an edit changes exactly its layer's key and every later one") {
    RecipeWorld w;
    LayerCache cache(w.dir.file("cache"));
    REQUIRE(cache.open().ok());
    FakeTools tools;
    FakeDiskWorld disks_world;
    FakeDiskFactory disks(disks_world);
    Builder b(tools, disks, cache);
    std::mt19937 rng(20261202);
    for (int round = 0; round < 200; ++round) {
        const int n = 1 + static_cast<int>(rng() % 5);
        Recipe r = random_recipe(rng, w.dir, n);
        const auto before = keys_of(b, r, w.apt);
        REQUIRE(before.size() == static_cast<size_t>(n + 1));
        const int kind = static_cast<int>(rng() % 5);
        int changed_from = -1;  // index into keys (0 = base); -1 = none
        const int li = static_cast<int>(rng() % n);
        switch (kind) {
            case 0:  // a file's bytes
                std::ofstream(r.layers[li].files[0].source) << "edited " << rng();
                changed_from = li + 1;
                break;
            case 1:  // a package list
                r.layers[li].packages.push_back("extra" + std::to_string(rng() % 9));
                changed_from = li + 1;
                break;
            case 2:  // the parent of everything
                r.base.packages.push_back("cloud-init");
                changed_from = 0;
                break;
            case 3:  // a file's mode
                r.layers[li].files[0].mode = 0700;
                changed_from = li + 1;
                break;
            case 4: {  // the same bytes rewritten: no change
                std::string same;
                {
                    std::ifstream in(r.layers[li].files[0].source);
                    same.assign(std::istreambuf_iterator<char>(in), {});
                }
                std::ofstream(r.layers[li].files[0].source) << same;
                break;
            }
        }
        const auto after = keys_of(b, r, w.apt);
        INFO("round " << round << " kind " << kind << " layer " << li);
        for (size_t k = 0; k < before.size(); ++k) {
            const bool should_change = changed_from >= 0 && static_cast<int>(k) >= changed_from;
            CHECK((before[k] != after[k]) == should_change);
        }
    }
}
