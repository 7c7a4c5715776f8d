// A loopback HTTP server that records the requests it gets and answers each
// with a set status: the handover webhook's receiving end in tests.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace kiln::test {

struct ReceivedRequest {
    std::string method, target, body;
    std::map<std::string, std::string> headers;  // names lowercased
};

class WebhookReceiver {
public:
    explicit WebhookReceiver(int status = 200) : status_(status) {
        fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in sa{};
        sa.sin_family = AF_INET;
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof sa;
        if (fd_ < 0 || bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 ||
            getsockname(fd_, reinterpret_cast<sockaddr*>(&sa), &len) != 0 || listen(fd_, 8) != 0) {
            const int err = errno;
            if (fd_ >= 0) close(fd_);
            throw std::runtime_error(std::string("webhook receiver: cannot listen on loopback: ") + std::strerror(err));
        }
        port_ = ntohs(sa.sin_port);
        thread_ = std::thread([this] { serve(); });
    }
    ~WebhookReceiver() {
        stop_ = true;
        thread_.join();
        close(fd_);
    }
    std::string url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(port_) + path; }
    std::vector<ReceivedRequest> requests() {
        std::lock_guard l(mu_);
        return requests_;
    }

private:
    void serve() {
        while (!stop_) {
            pollfd p{fd_, POLLIN, 0};
            if (poll(&p, 1, 50) <= 0) continue;
            int c = accept(fd_, nullptr, nullptr);
            if (c < 0) continue;
            handle(c);
            close(c);
        }
    }
    void handle(int c) {
        std::string data;
        char buf[4096];
        size_t header_end = std::string::npos, want = 0;
        while (true) {
            pollfd p{c, POLLIN, 0};
            if (poll(&p, 1, 5000) <= 0) return;
            ssize_t n = recv(c, buf, sizeof buf, 0);
            if (n <= 0) return;
            data.append(buf, static_cast<size_t>(n));
            if (header_end == std::string::npos && (header_end = data.find("\r\n\r\n")) != std::string::npos) {
                ReceivedRequest r;
                parse_head(data.substr(0, header_end), r);
                want =
                    header_end + 4 + std::stoul(r.headers.count("content-length") ? r.headers["content-length"] : "0");
            }
            if (header_end != std::string::npos && data.size() >= want) break;
        }
        ReceivedRequest r;
        parse_head(data.substr(0, header_end), r);
        r.body = data.substr(header_end + 4);
        {
            std::lock_guard l(mu_);
            requests_.push_back(r);
        }
        std::string resp =
            "HTTP/1.1 " + std::to_string(status_) + " X\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
        send(c, resp.data(), resp.size(), MSG_NOSIGNAL);
    }
    static void parse_head(const std::string& head, ReceivedRequest& r) {
        size_t pos = head.find("\r\n");
        std::string first = head.substr(0, pos);
        r.method = first.substr(0, first.find(' '));
        r.target = first.substr(first.find(' ') + 1, first.rfind(' ') - first.find(' ') - 1);
        while (pos != std::string::npos && pos < head.size()) {
            size_t next = head.find("\r\n", pos + 2);
            std::string line = head.substr(pos + 2, next == std::string::npos ? std::string::npos : next - pos - 2);
            auto colon = line.find(':');
            if (colon != std::string::npos) {
                std::string name = line.substr(0, colon);
                for (auto& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
                std::string value = line.substr(colon + 1);
                while (!value.empty() && value.front() == ' ') value.erase(0, 1);
                r.headers[name] = value;
            }
            pos = next;
        }
    }

    int status_;
    int fd_ = -1;
    int port_ = 0;
    std::atomic<bool> stop_{false};
    std::mutex mu_;
    std::vector<ReceivedRequest> requests_;
    std::thread thread_;
};

}  // namespace kiln::test
