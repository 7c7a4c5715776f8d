#include <random>

#include <catch2/catch.hpp>

#include "network/sonic/json_patch.h"

using nlohmann::json;
using namespace kiln::network::sonic;

namespace {

// A random CONFIG_DB-like or general JSON document; keys drawn from a small
// alphabet with '~', '/', '|' so escaping is exercised and collisions happen.
json random_value(std::mt19937& rng, int depth) {
    static const std::vector<std::string> keys = {"a", "b", "PORT", "Ethernet0|3", "x/y", "m~n", "~1", "/", "~", ""};
    std::uniform_int_distribution<int> kind(0, depth > 0 ? 5 : 3);
    switch (kind(rng)) {
        case 0:
            return std::to_string(rng() % 4);
        case 1:
            return static_cast<int>(rng() % 3);
        case 2:
            return nullptr;
        case 3:
            return json::array({std::to_string(rng() % 2), "z"});
        default: {
            json o = json::object();
            const int n = static_cast<int>(rng() % 5);
            for (int i = 0; i < n; ++i) o[keys[rng() % keys.size()]] = random_value(rng, depth - 1);
            return o;
        }
    }
}

// `b` as a mutation of `a`, so that diffs are partial, not wholesale.
json mutate(std::mt19937& rng, json v, int depth) {
    if (!v.is_object() || depth == 0) return rng() % 2 ? v : random_value(rng, depth);
    json out = json::object();
    for (auto it = v.begin(); it != v.end(); ++it) {
        const unsigned r = rng() % 6;
        if (r == 0) continue;  // removed
        out[it.key()] = r == 1 ? random_value(rng, depth - 1) : mutate(rng, *it, depth - 1);
    }
    if (rng() % 2) out["new/" + std::to_string(rng() % 3)] = random_value(rng, depth - 1);
    return out;
}

}  // namespace

TEST_CASE("json pointer escaping follows RFC 6901") {
    CHECK(make_pointer({"a/b~c"}) == "/a~1b~0c");
    CHECK(make_pointer({"~1"}) == "/~01");
    CHECK(make_pointer({"Ethernet0|3"}) == "/Ethernet0|3");
    CHECK(make_pointer({"QUEUE", "Ethernet0|3", "a/b"}) == "/QUEUE/Ethernet0|3/a~1b");
    CHECK(make_pointer({}).empty());
    auto t = split_pointer("/m~0n/x~1y/~01/");
    REQUIRE(t);
    CHECK(*t == std::vector<std::string>{"m~n", "x/y", "~1", ""});
    CHECK_FALSE(split_pointer("no-slash"));
    CHECK_FALSE(split_pointer("/bad~2escape"));
    CHECK_FALSE(split_pointer("/trailing~"));
}

TEST_CASE("json diff emits the finest operations in key order") {
    json from = {{"PORT", {{"Ethernet0", {{"mtu", "1500"}, {"fec", "rs"}}}}}, {"GONE", {{"k", {{"f", "v"}}}}}};
    json to = {{"PORT", {{"Ethernet0", {{"mtu", "9216"}, {"fec", "rs"}, {"speed", "400000"}}}}},
               {"NEW", {{"k/1", {{"f", "v"}}}}}};
    json patch = json_diff(from, to);
    json expected = json::array({
        {{"op", "remove"}, {"path", "/GONE"}},
        {{"op", "replace"}, {"path", "/PORT/Ethernet0/mtu"}, {"value", "9216"}},
        {{"op", "add"}, {"path", "/PORT/Ethernet0/speed"}, {"value", "400000"}},
        {{"op", "add"}, {"path", "/NEW"}, {"value", {{"k/1", {{"f", "v"}}}}}},
    });
    CHECK(patch == expected);
    CHECK(json_diff(to, to).empty());
}

TEST_CASE("json patch round trip holds over many random document pairs") {
    std::mt19937 rng(20261202);
    int nonempty = 0;
    for (int i = 0; i < 3000; ++i) {
        const json a = random_value(rng, 4);
        const json b = rng() % 3 ? mutate(rng, a, 4) : random_value(rng, 4);
        const json patch = json_diff(a, b);
        if (!patch.empty()) ++nonempty;
        auto applied = json_patch_apply(a, patch);
        REQUIRE(applied);
        if (*applied != b) FAIL("round trip failed\n a=" << a.dump() << "\n b=" << b.dump() << "\n p=" << patch.dump());
        // Applying the reverse patch gets back to a.
        auto back = json_patch_apply(b, json_diff(b, a));
        REQUIRE(back);
        REQUIRE(*back == a);
    }
    CHECK(nonempty > 2000);  // the generator really produced differences
}

TEST_CASE("json patch applier implements RFC 6902 operations") {
    // RFC 6902 appendix A.1, A.2, A.4, A.6, A.7, A.10, A.16.
    auto apply = [](const json& d, const json& p) { return json_patch_apply(d, p); };
    auto r = apply(json{{"foo", "bar"}}, json::parse(R"([{"op":"add","path":"/baz","value":"qux"}])"));
    REQUIRE(r);
    CHECK(*r == json{{"foo", "bar"}, {"baz", "qux"}});
    r = apply(json::parse(R"({"foo":["bar","baz"]})"), json::parse(R"([{"op":"add","path":"/foo/1","value":"qux"}])"));
    REQUIRE(r);
    CHECK(*r == json::parse(R"({"foo":["bar","qux","baz"]})"));
    r = apply(json::parse(R"({"foo":["bar","qux","baz"]})"), json::parse(R"([{"op":"remove","path":"/foo/1"}])"));
    REQUIRE(r);
    CHECK(*r == json::parse(R"({"foo":["bar","baz"]})"));
    r = apply(json::parse(R"({"foo":{"bar":"baz","waldo":"fred"},"qux":{"corge":"grault"}})"),
              json::parse(R"([{"op":"move","from":"/foo/waldo","path":"/qux/thud"}])"));
    REQUIRE(r);
    CHECK(*r == json::parse(R"({"foo":{"bar":"baz"},"qux":{"corge":"grault","thud":"fred"}})"));
    r = apply(json::parse(R"({"foo":["all","grass","cows","eat"]})"),
              json::parse(R"([{"op":"move","from":"/foo/1","path":"/foo/3"}])"));
    REQUIRE(r);
    CHECK(*r == json::parse(R"({"foo":["all","cows","eat","grass"]})"));
    r = apply(json::parse(R"({"foo":"bar"})"),
              json::parse(R"([{"op":"add","path":"/child","value":{"grandchild":{}}}])"));
    REQUIRE(r);
    CHECK(*r == json::parse(R"({"foo":"bar","child":{"grandchild":{}}})"));
    r = apply(json::parse(R"({"foo":["bar"]})"),
              json::parse(R"([{"op":"add","path":"/foo/-","value":["abc","def"]}])"));
    REQUIRE(r);
    CHECK(*r == json::parse(R"({"foo":["bar",["abc","def"]]})"));
    r = apply(json::parse(R"({"/":9,"~1":10})"),
              json::parse(R"([{"op":"test","path":"/~01","value":10},{"op":"copy","from":"/~1","path":"/c"}])"));
    REQUIRE(r);
    CHECK(*r == json::parse(R"({"/":9,"~1":10,"c":9})"));
}

TEST_CASE("json patch errors name the operation and leave the input alone") {
    const json doc = {{"PORT", {{"Ethernet0", {{"mtu", "1500"}}}}}};
    // A.8/A.9: a failing test; A.12: add to a non-existent parent.
    auto r = json_patch_apply(doc, json::parse(R"([{"op":"replace","path":"/PORT/Ethernet0/mtu","value":"9216"},
                                                   {"op":"test","path":"/PORT/Ethernet0/mtu","value":"1"}])"));
    REQUIRE_FALSE(r);
    CHECK(r.error().message.find("patch operation 1 (test /PORT/Ethernet0/mtu)") != std::string::npos);
    r = json_patch_apply(doc, json::parse(R"([{"op":"add","path":"/PORT/Ethernet4/mtu","value":"9216"}])"));
    REQUIRE_FALSE(r);
    CHECK(r.error().message.find("patch operation 0 (add /PORT/Ethernet4/mtu): key 'Ethernet4' not found") !=
          std::string::npos);
    CHECK_FALSE(json_patch_apply(doc, json::parse(R"([{"op":"remove","path":"/PORT/Ethernet4"}])")));
    CHECK_FALSE(json_patch_apply(doc, json::parse(R"([{"op":"replace","path":"/NOPE","value":1}])")));
    CHECK_FALSE(json_patch_apply(doc, json::parse(R"([{"op":"frobnicate","path":"/PORT"}])")));
    CHECK_FALSE(json_patch_apply(doc, json::parse(R"([{"op":"add","path":"/PORT"}])")));
    CHECK_FALSE(json_patch_apply(doc, json::parse(R"({"op":"add"})")));
    CHECK_FALSE(
        json_patch_apply(json::parse(R"({"a":[1]})"), json::parse(R"([{"op":"add","path":"/a/01","value":2}])")));
    CHECK_FALSE(json_patch_apply(json::parse(R"({"a":{"b":1}})"),
                                 json::parse(R"([{"op":"move","from":"/a","path":"/a/b/c"}])")));
    CHECK(doc == json{{"PORT", {{"Ethernet0", {{"mtu", "1500"}}}}}});
}
