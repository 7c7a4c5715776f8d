// The handover hook (command with the document on stdin; webhook signed
// with HMAC-SHA256 over the body) and the handover stage through the
// engine. The webhook secret must never reach errors, the journal or the
// state files.
#include <catch2/catch.hpp>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "provisioner/engine/engine.h"
#include "provisioner/handover/handover_hook.h"
#include "provisioner/handover/hmac_signature.h"
#include "provisioner/handover/stage/handover_config.h"
#include "provisioner/handover/stage/handover_stage.h"
#include "provisioner/journal/sqlite_store.h"
#include "tests/handover/webhook_receiver.h"
#include "tests/support/fleet_builder.h"
#include "tests/support/temp_dir.h"

using kiln::handover::HookRunner;
using kiln::test::TempDir;
using kiln::test::WebhookReceiver;
using nlohmann::json;

namespace {

constexpr const char* kSecret = "s3cr3t-hmac-key-7f1e";

std::string openssl_hmac(const std::string& key, const std::string& body) {
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    HMAC(EVP_sha256(), key.data(), int(key.size()), reinterpret_cast<const unsigned char*>(body.data()), body.size(),
         mac, &len);
    std::string hex;
    char b[3];
    for (unsigned i = 0; i < len; ++i) {
        std::snprintf(b, sizeof b, "%02x", mac[i]);
        hex += b;
    }
    return hex;
}

HookRunner runner() {
    return HookRunner(std::make_shared<kiln::ProcessRunner>(), std::make_shared<kiln::net::CurlHttpClient>());
}

kiln::handover::HandoverHook webhook(const std::string& url, const std::string& secret_env) {
    kiln::handover::HandoverHook h;
    h.webhook = url;
    h.timeout = std::chrono::seconds(10);
    auto s = kiln::Secret::parse("env:" + secret_env, "/");
    REQUIRE(s.ok());
    h.webhook_secret = *s;
    return h;
}

std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("HMAC-SHA256 matches RFC 4231 test case 2") {
    CHECK(kiln::handover::hmac_sha256_hex("Jefe", "what do ya want for nothing?") ==
          "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST_CASE("the command hook gets the document on stdin and a failing command is an error") {
    TempDir dir;
    kiln::handover::HandoverHook h;
    h.command = {"/usr/bin/tee", dir.file("got.json")};
    auto r = runner().run(h, R"({"node":"n1","state":"ready"})");
    REQUIRE(r.ok());
    CHECK(r->find("exit 0") != std::string::npos);
    CHECK(json::parse(slurp(dir.file("got.json")))["node"] == "n1");

    h.command = {"/bin/false"};
    auto bad = runner().run(h, "{}");
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.error().code == "handover.hook");
    CHECK(bad.error().transient);
    CHECK(bad.error().message.find("exit 1") != std::string::npos);
}

TEST_CASE("the webhook POSTs the document with an HMAC signature over the body") {
    WebhookReceiver server(200);
    setenv("KILN_TEST_WEBHOOK_SECRET", kSecret, 1);
    const std::string doc = R"({"node":"n1","state":"quarantined","failed_checks":[{"name":"x"}]})";
    auto r = runner().run(webhook(server.url("/hooks/kiln"), "KILN_TEST_WEBHOOK_SECRET"), doc);
    REQUIRE(r.ok());
    auto reqs = server.requests();
    REQUIRE(reqs.size() == 1);
    CHECK(reqs[0].method == "POST");
    CHECK(reqs[0].target == "/hooks/kiln");
    CHECK(reqs[0].body == doc);
    CHECK(reqs[0].headers["content-type"] == "application/json");
    CHECK(reqs[0].headers["x-kiln-signature"] == "sha256=" + openssl_hmac(kSecret, doc));
    // A receiver with the wrong key would reject it.
    CHECK(reqs[0].headers["x-kiln-signature"] != "sha256=" + openssl_hmac("other", doc));
}

TEST_CASE("webhook failures say what happened without the secret userinfo or query") {
    WebhookReceiver server(500);
    setenv("KILN_TEST_WEBHOOK_SECRET", kSecret, 1);
    auto url = "http://hookuser:hookpass@127.0.0.1:" + server.url("").substr(std::string("http://127.0.0.1:").size()) +
               "/h?token=querytoken";
    auto r = runner().run(webhook(url, "KILN_TEST_WEBHOOK_SECRET"), "{}");
    REQUIRE_FALSE(r.ok());
    const auto msg = r.error().str();
    CHECK(msg.find("HTTP 500") != std::string::npos);
    CHECK(r.error().transient);
    for (const char* hidden : {kSecret, "hookpass", "querytoken"}) {
        INFO(hidden);
        CHECK(msg.find(hidden) == std::string::npos);
    }
    unsetenv("KILN_TEST_WEBHOOK_SECRET_MISSING");
    auto missing = runner().run(webhook(server.url("/h"), "KILN_TEST_WEBHOOK_SECRET_MISSING"), "{}");
    REQUIRE_FALSE(missing.ok());
    CHECK(missing.error().code == "handover.secret");
    CHECK(missing.error().message.find("env:KILN_TEST_WEBHOOK_SECRET_MISSING") != std::string::npos);
}

TEST_CASE("the handover stage marks the node ready signs its webhook and keeps the secret out of the journal") {
    TempDir dir;
    WebhookReceiver server(200);
    setenv("KILN_TEST_WEBHOOK_SECRET", kSecret, 1);
    auto fleet = kiln::test::make_fleet(1, 1, {"handover"});
    fleet.dir = dir.path();
    fleet.limits.retries = 0;
    kiln::handover::set_handover_hook(fleet, webhook(server.url("/ready"), "KILN_TEST_WEBHOOK_SECRET"));
    auto store = kiln::journal::open_sqlite_store(dir.file("journal.db"), {});
    REQUIRE(store.ok());
    kiln::engine::StageRegistry registry;
    registry.add(std::make_shared<kiln::handover::HandoverStage>());
    kiln::engine::StopToken stop;
    kiln::engine::Engine engine(fleet, registry, store->get(), nullptr, stop);
    auto report = engine.run({});
    REQUIRE(report.ok());
    CHECK(report->nodes[0].state == kiln::engine::NodeState::Ready);
    auto reqs = server.requests();
    REQUIRE(reqs.size() == 1);
    auto doc = json::parse(reqs[0].body);
    CHECK(doc["state"] == "ready");
    CHECK(doc["smoke"]["verdict"] == "not run");
    CHECK(reqs[0].headers["x-kiln-signature"] == "sha256=" + openssl_hmac(kSecret, reqs[0].body));

    // Now the receiver fails: the node fails with the reason, secret-free.
    WebhookReceiver broken(503);
    kiln::handover::set_handover_hook(fleet, webhook(broken.url("/ready"), "KILN_TEST_WEBHOOK_SECRET"));
    kiln::engine::RunOptions again;
    again.reimage = true;
    kiln::engine::Engine engine2(fleet, registry, store->get(), nullptr, stop);
    auto failed = engine2.run(again);
    REQUIRE(failed.ok());
    CHECK(failed->nodes[0].state == kiln::engine::NodeState::Failed);
    CHECK(failed->nodes[0].error.find("HTTP 503") != std::string::npos);
    store->reset();  // close the journal so every byte is on disk
    for (const auto& entry : std::filesystem::recursive_directory_iterator(dir.path())) {
        if (!entry.is_regular_file()) continue;
        INFO(entry.path());
        CHECK(slurp(entry.path().string()).find(kSecret) == std::string::npos);
    }
    CHECK(failed->nodes[0].error.find(kSecret) == std::string::npos);
}
