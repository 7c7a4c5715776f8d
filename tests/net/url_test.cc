#include <catch2/catch.hpp>

#include "provisioner/core/host_port.h"
#include "provisioner/net/url.h"

using namespace kiln::net;

TEST_CASE("percent_encode keeps unreserved characters only", "[net][url]") {
    CHECK(percent_encode("") == "");
    CHECK(percent_encode("AZaz09-._~") == "AZaz09-._~");
    CHECK(percent_encode("changeset/root/2024-01-01_12.00.00_ABCD") == "changeset%2Froot%2F2024-01-01_12.00.00_ABCD");
    CHECK(percent_encode("a b+c?d#e&f=g%") == "a%20b%2Bc%3Fd%23e%26f%3Dg%25");
    CHECK(percent_encode(std::string("\0\xff", 2)) == "%00%FF");
    CHECK(percent_encode("é") == "%C3%A9");
}

TEST_CASE("percent_decode reverses percent_encode", "[net][url]") {
    for (const std::string& s :
         std::vector<std::string>{"changeset/root/1", "a b+c", "%%%", std::string("\0\x80\xff", 3)}) {
        auto d = percent_decode(percent_encode(s));
        REQUIRE(d.ok());
        CHECK(*d == s);
    }
    CHECK(*percent_decode("a%2fb%2Fc+d") == "a/b/c+d");
    CHECK(percent_decode("50%").error().code == "http.url");
    CHECK(percent_decode("%4").error().code == "http.url");
    CHECK(percent_decode("%zz").error().code == "http.url");
}

TEST_CASE("join_url appends relative paths below the base", "[net][url]") {
    CHECK(join_url("https://sw:8765/nvue_v1", "revision") == "https://sw:8765/nvue_v1/revision");
    CHECK(join_url("https://sw:8765/nvue_v1/", "revision") == "https://sw:8765/nvue_v1/revision");
    CHECK(join_url("https://sw:8765/nvue_v1//", "qos/roce") == "https://sw:8765/nvue_v1/qos/roce");
    CHECK(join_url("https://sw", "command-api") == "https://sw/command-api");
    CHECK(join_url("https://sw/api", "") == "https://sw/api");
    CHECK(join_url("https://sw:8765/nvue_v1", "revision/" + percent_encode("changeset/a/1")) ==
          "https://sw:8765/nvue_v1/revision/changeset%2Fa%2F1");
}

TEST_CASE("join_url puts absolute paths on the base origin", "[net][url]") {
    CHECK(join_url("https://bmc/redfish/v1", "/redfish/v1/Systems/System.Embedded.1") ==
          "https://bmc/redfish/v1/Systems/System.Embedded.1");
    CHECK(join_url("https://10.0.0.5:8443/", "/redfish/v1") == "https://10.0.0.5:8443/redfish/v1");
    CHECK(join_url("https://[fd00::5]:443/redfish/v1?x=1", "/redfish/v1/TaskService/Tasks/JID_1") ==
          "https://[fd00::5]:443/redfish/v1/TaskService/Tasks/JID_1");
    CHECK(join_url("https://bmc", "/redfish/v1") == "https://bmc/redfish/v1");
    CHECK(join_url("bmc/", "/x") == "bmc/x");
}

TEST_CASE("join_url takes an absolute URL as it is", "[net][url]") {
    CHECK(join_url("https://bmc/redfish/v1", "https://other:1/TaskMonitor/7") == "https://other:1/TaskMonitor/7");
    // "://" after a '/' is part of a path, not a scheme.
    CHECK(join_url("https://bmc", "a/b://c") == "https://bmc/a/b://c");
}

TEST_CASE("split_url gives scheme host port and target", "[net][url]") {
    auto p = split_url("HTTPS://BMC-01.Lab:8443/redfish/v1/Systems?$expand=.#frag");
    REQUIRE(p.ok());
    CHECK(p->scheme == "https");
    CHECK(p->host == "bmc-01.lab");
    CHECK(p->port == 8443);
    CHECK(p->target == "/redfish/v1/Systems?$expand=.");

    auto d = split_url("http://10.1.2.3");
    REQUIRE(d.ok());
    CHECK(d->port == 80);
    CHECK(d->target == "/");
    CHECK(split_url("https://sw")->port == 443);
    CHECK(split_url("https://sw?rev=1")->target == "/?rev=1");

    auto v6 = split_url("https://[fd00::1]:8765/nvue_v1");
    REQUIRE(v6.ok());
    CHECK(v6->host == "fd00::1");
    CHECK(v6->port == 8765);
    CHECK(split_url("http://[::1]/")->port == 80);

    auto user = split_url("https://root:calvin@bmc/redfish");
    REQUIRE(user.ok());
    CHECK(user->host == "bmc");
    CHECK(user->target == "/redfish");

    CHECK(split_url("unix://x")->port == 0);
    CHECK(split_url("http://bmc:/")->port == 80);  // RFC 3986 allows an empty port
}

TEST_CASE("split_url refuses malformed URLs", "[net][url]") {
    for (std::string bad :
         {"", "bmc/redfish", "://bmc", "1http://bmc", "http://", "http://:80/", "http://bmc:0", "http://bmc:65536",
          "http://bmc:12a", "http://[::1/", "http://[::1]x/", "http://bmc/a b", "http://b\nmc/"}) {
        INFO(bad);
        auto r = split_url(bad);
        REQUIRE_FALSE(r.ok());
        CHECK(r.error().domain == "http");
        CHECK(r.error().code == "http.url");
    }
}

TEST_CASE("url_for_log drops userinfo query and fragment", "[net][url]") {
    CHECK(url_for_log("https://root:calvin@bmc:443/redfish/v1?token=x#y") == "https://bmc/redfish/v1");
    CHECK(url_for_log("http://sw:8765/nvue_v1/revision?rev=changeset%2Fa") == "http://sw:8765/nvue_v1/revision");
    CHECK(url_for_log("https://[fd00::1]:8443") == "https://[fd00::1]:8443/");
    CHECK(url_for_log("not a url") == "<invalid url>");
}

TEST_CASE("parse_host_port takes HOST:PORT with a whole port in range, and nothing else", "[net][url]") {
    auto hp = kiln::parse_host_port("127.0.0.1:9464");
    REQUIRE(hp);
    CHECK(hp->host == "127.0.0.1");
    CHECK(hp->port == 9464);
    CHECK(kiln::is_ipv4(hp->host));
    hp = kiln::parse_host_port("[::1]:0");
    REQUIRE(hp);
    CHECK(hp->host == "::1");
    CHECK(hp->port == 0);
    CHECK_FALSE(kiln::is_ipv4(hp->host));
    CHECK(kiln::parse_host_port(":65535")->host.empty());
    // What the listeners' own parsers let through before (std::stoi takes a prefix).
    for (const char* bad : {"8080", "host:", "host:80x", "host:70000", "host:-1", "host:123456", "host: 80"})
        CHECK_FALSE(kiln::parse_host_port(bad).has_value());
    CHECK_FALSE(kiln::is_ipv4("10.0.0"));
    CHECK_FALSE(kiln::is_ipv4("leaf-1"));
}
