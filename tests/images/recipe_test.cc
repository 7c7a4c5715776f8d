#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include "images/apt_sources.h"
#include "images/recipe.h"
#include "tests/support/temp_dir.h"

using kiln::images::LayerSpec;
using kiln::images::load_recipe;
using kiln::images::parse_recipe;
using kiln::images::parse_size;
using kiln::images::RecipeLoad;

namespace {

const char* kValid = R"(name = "demo"

[inputs]
smoke = ""

[base]
suite = "bookworm"
variant = "minbase"
components = ["main"]
packages = ["linux-image-amd64", "systemd-sysv"]

[[layers]]
name = "rdma"
packages = ["rdma-core", "perftest"]
components = ["contrib", "non-free"]
kernel_args = ["iommu=pt"]

[[layers]]
name = "smoke"
services = ["kiln-ready.service"]
commands = ["echo hi"]

[[layers.files]]
path = "/usr/local/bin/kiln-smoke"
input = "smoke"
mode = "0755"

[[layers.files]]
path = "/etc/kiln/ready"
content = "yes\n"

[output]
format = "qcow2"
size = "8G"
compress = true
)";

// The one diagnostic of a recipe that has exactly one problem.
std::string only_error(const std::string& text, const std::map<std::string, std::string>& overrides = {}) {
    RecipeLoad r = parse_recipe(text, "/tmp/recipe.toml", overrides);
    REQUIRE_FALSE(r.recipe.has_value());
    REQUIRE(r.errors.size() == 1);
    return r.errors[0].str();
}

std::string with(const std::string& from, const std::string& to) {
    std::string s = kValid;
    auto at = s.find(from);
    REQUIRE(at != std::string::npos);
    return s.replace(at, from.size(), to);
}

}  // namespace

TEST_CASE("recipe parses every section of a valid recipe") {
    RecipeLoad r = parse_recipe(kValid, "/tmp/recipe.toml", {{"smoke", "/bin/true"}});
    INFO((r.errors.empty() ? "" : r.errors[0].str()));
    REQUIRE(r.recipe.has_value());
    const auto& R = *r.recipe;
    CHECK(R.name == "demo");
    CHECK(R.base.suite == "bookworm");
    CHECK(R.base.packages == std::vector<std::string>{"linux-image-amd64", "systemd-sysv"});
    REQUIRE(R.layers.size() == 2);
    CHECK(R.layers[0].name == "rdma");
    CHECK(R.layers[0].components == std::vector<std::string>{"contrib", "non-free"});
    CHECK(R.layers[0].kernel_args == std::vector<std::string>{"iommu=pt"});
    CHECK(R.layers[0].needs_network());
    CHECK_FALSE(R.layers[1].needs_network());
    REQUIRE(R.layers[1].files.size() == 2);
    CHECK(R.layers[1].files[0].mode == 0755);
    CHECK(R.layers[1].files[0].input == "smoke");
    CHECK(R.layers[1].files[1].mode == 0644);
    CHECK(*R.layers[1].files[1].content == "yes\n");
    CHECK(R.inputs.at("smoke").path == "/bin/true");
    CHECK(R.output.size_bytes == (8ull << 30));
    CHECK(R.output.compress);
}

TEST_CASE("recipe defaults: machine mirror, minbase, qcow2 4G, console on ttyS0") {
    RecipeLoad r = parse_recipe("name = \"x\"\n[base]\nsuite = \"bookworm\"\n", "r.toml");
    REQUIRE(r.recipe.has_value());
    CHECK(r.recipe->base.mirror.empty());
    CHECK(r.recipe->base.variant == "minbase");
    CHECK(r.recipe->output.format == "qcow2");
    CHECK(r.recipe->output.size_bytes == (4ull << 30));
    CHECK(r.recipe->base.kernel_args == std::vector<std::string>{"console=ttyS0"});
}

TEST_CASE("recipe sizes") {
    CHECK(parse_size("4G") == (4ull << 30));
    CHECK(parse_size("512M") == (512ull << 20));
    CHECK(parse_size("20GiB") == (20ull << 30));
    CHECK(parse_size("1024") == 1024u);
    CHECK_FALSE(parse_size("4 gigs").has_value());
    CHECK_FALSE(parse_size("-1G").has_value());
    CHECK_FALSE(parse_size("99999999999999999999T").has_value());
}

TEST_CASE("recipe error: TOML syntax names the line and column") {
    CHECK(only_error("name = \"x\"\n[base\nsuite = 1\n").rfind("/tmp/recipe.toml:2:", 0) == 0);
}

TEST_CASE("recipe error: missing required keys") {
    CHECK(only_error("[base]\nsuite = \"bookworm\"\n") == "/tmp/recipe.toml:1:1: name: required key is missing");
    CHECK(only_error("name = \"x\"\n") == "/tmp/recipe.toml:1:1: base: required key is missing");
    CHECK(only_error(with("name = \"rdma\"\n", "")).find("layers[0].name: required key is missing") !=
          std::string::npos);
}

TEST_CASE("recipe error: wrong types name the key and what was found") {
    CHECK(only_error(with("packages = [\"rdma-core\", \"perftest\"]", "packages = \"rdma-core\"")) ==
          "/tmp/recipe.toml:14:12: layers[0].packages: expected array of strings, found string");
    CHECK(only_error(with("compress = true", "compress = 1")) ==
          "/tmp/recipe.toml:35:12: output.compress: expected boolean, found integer");
}

TEST_CASE("recipe error: unknown keys point at the key") {
    const std::string e = only_error(with("variant = \"minbase\"", "varient = \"minbase\""));
    CHECK(e.rfind("/tmp/recipe.toml:8:1: base.varient: unknown key 'varient'", 0) == 0);
}

TEST_CASE("recipe error: choices list what is allowed") {
    const std::string e = only_error(with("format = \"qcow2\"", "format = \"vmdk\""));
    CHECK(e.find("output.format") != std::string::npos);
    CHECK(e.find("qcow2") != std::string::npos);
}

TEST_CASE("recipe error: sizes, modes, names") {
    CHECK(only_error(with("size = \"8G\"", "size = \"8 gigs\"")).find("output.size: expected a size") !=
          std::string::npos);
    CHECK(only_error(with("size = \"8G\"", "size = \"1M\"")).find("at least 256M") != std::string::npos);
    CHECK(only_error(with("mode = \"0755\"", "mode = \"0899\"")) ==
          "/tmp/recipe.toml:26:8: layers[1].files[0].mode: expected an octal mode such as \"0755\"");
    CHECK(only_error(with("\"perftest\"]", "\"Perf Test\"]"))
              .find("layers[0].packages[1]: 'Perf Test' is not a valid "
                    "package name") != std::string::npos);
    CHECK(only_error(with("name = \"smoke\"", "name = \"Smoke Layer\"")).find("layers[1].name") != std::string::npos);
    CHECK(only_error(with("name = \"smoke\"", "name = \"rdma\"")).find("used twice") != std::string::npos);
    CHECK(only_error(with("name = \"smoke\"", "name = \"base\"")).find("reserved") != std::string::npos);
    CHECK(
        only_error(with("services = [\"kiln-ready.service\"]", "services = [\"a b\"]")).find("layers[1].services[0]") !=
        std::string::npos);
}

TEST_CASE("a layer's timeout is parsed, checked, and left out of its key") {
    RecipeLoad plain = parse_recipe(kValid, "/tmp/recipe.toml", {});
    RecipeLoad slow =
        parse_recipe(with("name = \"rdma\"", "name = \"rdma\"\ntimeout = \"4h\""), "/tmp/recipe.toml", {});
    REQUIRE(plain.recipe.has_value());
    REQUIRE(slow.recipe.has_value());
    CHECK_FALSE(plain.recipe->layers[0].timeout.has_value());
    REQUIRE(slow.recipe->layers[0].timeout.has_value());
    CHECK(slow.recipe->layers[0].timeout->count() == 4L * 3600);
    // A longer bound builds the same content: the cache key must not move.
    CHECK(slow.recipe->layers[0].canonical() == plain.recipe->layers[0].canonical());
    CHECK(only_error(with("name = \"rdma\"", "name = \"rdma\"\ntimeout = \"soon\"")) ==
          "/tmp/recipe.toml:14:11: layers[0].timeout: expected a duration of a second or more, such as \"90m\" or "
          "\"4h\"");
    CHECK(only_error(with("name = \"rdma\"", "name = \"rdma\"\ntimeout = \"0s\"")).find("layers[0].timeout") !=
          std::string::npos);
}

TEST_CASE("a layer's build_in: appliance by default, host when asked, and part of the key only then") {
    RecipeLoad plain = parse_recipe(kValid, "/tmp/recipe.toml", {});
    RecipeLoad said =
        parse_recipe(with("name = \"rdma\"", "name = \"rdma\"\nbuild_in = \"appliance\""), "/tmp/recipe.toml", {});
    RecipeLoad host =
        parse_recipe(with("name = \"rdma\"", "name = \"rdma\"\nbuild_in = \"host\""), "/tmp/recipe.toml", {});
    REQUIRE(plain.recipe.has_value());
    REQUIRE(said.recipe.has_value());
    REQUIRE(host.recipe.has_value());
    CHECK(plain.recipe->layers[0].build_in == LayerSpec::BuildIn::appliance);
    CHECK(host.recipe->layers[0].build_in == LayerSpec::BuildIn::host);
    // Saying the default keeps the keys of existing recipes.
    CHECK(said.recipe->layers[0].canonical() == plain.recipe->layers[0].canonical());
    // Built elsewhere, possibly not byte for byte the same: another key.
    CHECK(host.recipe->layers[0].canonical() != plain.recipe->layers[0].canonical());
    CHECK(only_error(with("name = \"rdma\"", "name = \"rdma\"\nbuild_in = \"chroot\"")) ==
          "/tmp/recipe.toml:14:12: layers[0].build_in: expected \"appliance\" or \"host\", not \"chroot\"");
}

TEST_CASE("recipe error: files need an absolute path and exactly one source") {
    CHECK(only_error(with("path = \"/etc/kiln/ready\"", "path = \"etc/kiln/ready\""))
              .find("layers[1].files[1].path: expected an absolute path") != std::string::npos);
    CHECK(only_error(with("content = \"yes\\n\"", "content = \"yes\\n\"\ninput = \"smoke\""))
              .find("expected exactly one of source, input or content") != std::string::npos);
    CHECK(only_error(with("content = \"yes\\n\"", "")).find("expected exactly one of source, input or content") !=
          std::string::npos);
    CHECK(only_error(with("input = \"smoke\"", "input = \"smok\"")) ==
          "/tmp/recipe.toml:25:9: layers[1].files[0].input: no input named 'smok' in [inputs]");
}

TEST_CASE("recipe error: missing host files name the recipe position") {
    kiln::test::TempDir dir;
    const std::string text =
        "name = \"x\"\n[base]\nsuite = \"bookworm\"\n[[layers]]\nname = \"a\"\n"
        "[[layers.files]]\npath = \"/x\"\nsource = \"files/missing.txt\"\n";
    const std::string path = dir.write("r.toml", text);
    auto r = load_recipe(path);
    REQUIRE(r.errors.size() == 1);
    CHECK(r.errors[0].str() ==
          path + ":8:10: layers[0].files[0].source: file not found: " + dir.path() + "/files/missing.txt");
    dir.write("files/missing.txt", "now here");
    CHECK(load_recipe(path).recipe.has_value());

    auto debs = parse_recipe("name = \"x\"\n[base]\nsuite = \"b\"\n[[layers]]\nname = \"a\"\ndebs = [\"/nope.deb\"]\n",
                             "r.toml");
    REQUIRE(debs.errors.size() == 1);
    CHECK(debs.errors[0].str() == "r.toml:6:9: layers[0].debs[0]: file not found: /nope.deb");
    CHECK(load_recipe(dir.file("absent.toml")).errors.at(0).message == "cannot read the recipe file");
}

TEST_CASE("recipe error: a network repo needs its key: raw cannot be compressed") {
    const std::string repo =
        "name = \"x\"\n[base]\nsuite = \"b\"\n[[layers]]\nname = \"a\"\n[[layers.repos]]\n"
        "name = \"nccl\"\nuri = \"https://example.invalid/repo\"\nsuite = \"./\"\n";
    CHECK(only_error(repo).find("layers[0].repos[0].key: a network repository needs its signing key") !=
          std::string::npos);
    CHECK(parse_recipe(repo + "", "r").errors.size() == 1);
    const std::string local =
        "name = \"x\"\n[base]\nsuite = \"b\"\n[[layers]]\nname = \"a\"\n[[layers.repos]]\n"
        "name = \"nccl\"\nuri = \"file:/srv/nccl\"\nsuite = \"./\"\n";
    CHECK(parse_recipe(local, "r").recipe.has_value());
    CHECK(only_error(with("format = \"qcow2\"", "format = \"raw\"")).find("compression needs format") !=
          std::string::npos);
}

TEST_CASE("recipe error: --input must name a declared input") {
    CHECK(only_error(kValid, {{"smokey", "/bin/true"}}).find("inputs.smokey: --input smokey") != std::string::npos);
}

TEST_CASE("recipe reports every problem at once, in file order") {
    auto r = parse_recipe("name = \"X Y\"\n[base]\nsuite = 3\nwat = 1\n[output]\nformat = \"vmdk\"\n", "r.toml");
    REQUIRE(r.errors.size() == 4);
    CHECK(r.errors[0].pos.line == 1);
    CHECK(r.errors[1].key == "base.suite");
    CHECK(r.errors[2].key == "base.wat");
    CHECK(r.errors[3].key == "output.format");
}

TEST_CASE("the reference recipes parse") {
    for (const char* name : {"gpu-guest-lite", "gpu-guest", "host"}) {
        const std::string path = std::string(KILN_SOURCE_DIR) + "/images/recipes/" + name + ".toml";
        auto r = load_recipe(path, {});
        std::string errs;
        for (const auto& e : r.errors) errs += e.str() + "\n";
        INFO(errs);
        CHECK(r.recipe.has_value());
    }
}

TEST_CASE("apt sources: deb822 and one-line forms, mirror lines per suite") {
    using namespace kiln::images;
    auto d = parse_deb822_sources(
        "Types: deb\n# a comment\nURIs: http://mirror.invalid/debian\nSuites: bookworm bookworm-updates\n"
        "Components: main\nSigned-By: /usr/share/keyrings/k.gpg\n\nTypes: deb-src\nURIs: http://x.invalid\n"
        "Suites: bookworm\nComponents: main\n\nTypes: deb\nURIs: http://sec.invalid/debian-security\n"
        "Suites: bookworm-security\nComponents: main\nEnabled: yes\n");
    REQUIRE(d.size() == 2);
    CHECK(d[0].suites == std::vector<std::string>{"bookworm", "bookworm-updates"});
    CHECK(d[0].signed_by == "/usr/share/keyrings/k.gpg");
    auto o = parse_one_line_sources(
        "# c\ndeb [arch=amd64 signed-by=/k.gpg] http://o.invalid/debian trixie main\n"
        "deb-src http://o.invalid/debian trixie main\n");
    REQUIRE(o.size() == 1);
    CHECK(o[0].signed_by == "/k.gpg");
    CHECK(o[0].suites == std::vector<std::string>{"trixie"});

    auto lines = mirror_lines(d, "bookworm", {"main", "contrib", "non-free"});
    REQUIRE(lines.ok());
    CHECK(*lines == std::vector<std::string>{
                        "deb [signed-by=/usr/share/keyrings/k.gpg] http://mirror.invalid/debian bookworm main contrib "
                        "non-free",
                        "deb [signed-by=/usr/share/keyrings/k.gpg] http://mirror.invalid/debian bookworm-updates main "
                        "contrib non-free",
                        "deb http://sec.invalid/debian-security bookworm-security main contrib non-free"});
    CHECK_FALSE(mirror_lines(d, "trixie", {"main"}).ok());
    CHECK(mirror_lines(d, "trixie", {"main"}, "http://given.invalid/debian").value() ==
          std::vector<std::string>{"deb http://given.invalid/debian trixie main"});

    kiln::test::TempDir etc;
    CHECK_FALSE(machine_apt_sources(etc.path()).ok());
    etc.write("sources.list.d/a.sources", "Types: deb\nURIs: http://m.invalid/d\nSuites: bookworm\nComponents: main\n");
    etc.write("sources.list", "deb http://n.invalid/d bookworm main\n");
    auto m = machine_apt_sources(etc.path());
    REQUIRE(m.ok());
    CHECK(m->size() == 2);
}
