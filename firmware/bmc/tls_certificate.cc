#include "firmware/bmc/tls_certificate.h"

#include <arpa/inet.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <memory>

namespace kiln::bmc {

namespace {

struct FileCloser {
    void operator()(FILE* f) const { std::fclose(f); }
};
struct X509Free {
    void operator()(X509* x) const { X509_free(x); }
};
struct PkeyFree {
    void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct ExtFree {
    void operator()(X509_EXTENSION* e) const { X509_EXTENSION_free(e); }
};

Error gen_error(const std::string& what) {
    return make_error("bmc", "bmc.tls_generate_failed", "cannot generate the TLS certificate: " + what);
}

}  // namespace

Result<std::string> certificate_fingerprint(const std::string& cert_file) {
    std::unique_ptr<FILE, FileCloser> f(std::fopen(cert_file.c_str(), "r"));
    if (!f) return make_error("bmc", "bmc.tls_unreadable", "cannot read " + cert_file);
    std::unique_ptr<X509, X509Free> cert(PEM_read_X509(f.get(), nullptr, nullptr, nullptr));
    if (!cert) return make_error("bmc", "bmc.tls_unreadable", cert_file + " holds no PEM certificate");
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    if (X509_digest(cert.get(), EVP_sha256(), md, &n) != 1) {
        return make_error("bmc", "bmc.tls_unreadable", "cannot hash " + cert_file);
    }
    static const char* kHex = "0123456789abcdef";
    std::string out;
    for (unsigned i = 0; i < n; ++i) {
        out += kHex[md[i] >> 4];
        out += kHex[md[i] & 0xf];
    }
    return out;
}

Result<TlsFiles> ensure_self_signed(const std::string& dir, const std::string& bind_address) {
    TlsFiles files{dir + "/kiln-bmc-cert.pem", dir + "/kiln-bmc-key.pem", ""};
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return gen_error("cannot create " + dir + ": " + ec.message());
    if (!std::filesystem::exists(files.cert_file) || !std::filesystem::exists(files.key_file)) {
        std::unique_ptr<EVP_PKEY, PkeyFree> key(EVP_EC_gen("P-256"));
        if (!key) return gen_error("EC key generation failed");
        std::unique_ptr<X509, X509Free> cert(X509_new());
        if (!cert) return gen_error("X509_new failed");
        X509_set_version(cert.get(), 2);
        unsigned char serial[16];
        RAND_bytes(serial, sizeof serial);
        serial[0] &= 0x7f;  // positive
        BIGNUM* bn = BN_bin2bn(serial, sizeof serial, nullptr);
        BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get()));
        BN_free(bn);
        X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
        X509_gmtime_adj(X509_getm_notAfter(cert.get()), 60L * 60 * 24 * 825);
        X509_set_pubkey(cert.get(), key.get());
        X509_NAME* name = X509_get_subject_name(cert.get());
        X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("kiln"), -1, -1, 0);
        X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("kiln-bmc"), -1, -1,
                                   0);
        X509_set_issuer_name(cert.get(), name);
        std::string san = "IP:127.0.0.1,DNS:localhost";
        in_addr a{};
        if (bind_address != "127.0.0.1" && bind_address != "0.0.0.0" &&
            inet_pton(AF_INET, bind_address.c_str(), &a) == 1) {
            san += ",IP:" + bind_address;
        }
        X509V3_CTX ctx;
        X509V3_set_ctx_nodb(&ctx);
        X509V3_set_ctx(&ctx, cert.get(), cert.get(), nullptr, nullptr, 0);
        for (const auto& [nid, value] : {std::pair<int, std::string>{NID_subject_alt_name, san},
                                         {NID_basic_constraints, "critical,CA:TRUE"},
                                         {NID_key_usage, "critical,digitalSignature,keyCertSign"}}) {
            std::unique_ptr<X509_EXTENSION, ExtFree> ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str()));
            if (!ext || X509_add_ext(cert.get(), ext.get(), -1) != 1) return gen_error("cannot add extension " + value);
        }
        if (X509_sign(cert.get(), key.get(), EVP_sha256()) == 0) return gen_error("signing failed");

        // The key first, private from its first byte.
        const std::string key_tmp = files.key_file + ".tmp";
        {
            const mode_t old = umask(077);
            std::unique_ptr<FILE, FileCloser> kf(std::fopen(key_tmp.c_str(), "w"));
            umask(old);
            if (!kf || PEM_write_PrivateKey(kf.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) != 1) {
                return gen_error("cannot write " + key_tmp);
            }
        }
        const std::string cert_tmp = files.cert_file + ".tmp";
        {
            std::unique_ptr<FILE, FileCloser> cf(std::fopen(cert_tmp.c_str(), "w"));
            if (!cf || PEM_write_X509(cf.get(), cert.get()) != 1) return gen_error("cannot write " + cert_tmp);
        }
        std::filesystem::rename(key_tmp, files.key_file, ec);
        if (!ec) std::filesystem::rename(cert_tmp, files.cert_file, ec);
        if (ec) return gen_error("cannot rename into " + dir + ": " + ec.message());
    }
    auto fp = certificate_fingerprint(files.cert_file);
    if (!fp) return fp.error();
    files.fingerprint = *fp;
    return files;
}

}  // namespace kiln::bmc
