// Volume uploads streamed through the API (POST
// /storage/ceph/volume/<pool>/<volume>/upload: the body goes to the volume
// as it arrives, never whole in memory) against a private mini Ceph and
// ZooKeeper, read back with `rbd export`; then what happens when ZooKeeper or
// Ceph goes away between the Ceph step of a write and its ZooKeeper record
// (the answer says so; the next request reconciles). One mini Ceph for the
// binary. The client here is a plain socket, so a body can be sent piece by
// piece, stopped half-way or cut off.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>

#include "api_fixture.hpp"
#include "pvc/ceph_client.hpp"
#include "pvc/test/ceph_cluster.hpp"
#include "pvc/test/timing.hpp"

namespace pvc::api::test {
namespace {

using nlohmann::json;
using schema::path;
using namespace std::chrono_literals;

// The image bytes of pattern `seed` at `offset`.
char pattern(std::uint64_t offset, unsigned seed) { return static_cast<char>((offset * 131 + seed * 7 + offset / 4096) % 251); }
std::string image(std::size_t size, unsigned seed) {
    std::string s(size, '\0');
    for (std::size_t i = 0; i < size; ++i) s[i] = pattern(i, seed);
    return s;
}

// One HTTP request over a plain socket, its body sent as the test says.
class RawClient {
public:
    explicit RawClient(uint16_t port) {
        fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(port);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) ADD_FAILURE() << "connect failed";
    }
    ~RawClient() {
        if (fd_ >= 0) ::close(fd_);
    }
    bool send(std::string_view s) {
        while (!s.empty()) {
            ssize_t n = ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL);
            if (n <= 0) return false;
            s.remove_prefix(static_cast<std::size_t>(n));
        }
        return true;
    }
    void header(const std::string& target, const std::string& type, const std::string& framing) {
        send("POST /api/v1" + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Api-Key: " + token + "\r\nContent-Type: " +
             type + "\r\n" + framing + "\r\n\r\n");
    }
    void half_close() { ::shutdown(fd_, SHUT_WR); }
    // The answer (status and body); status 0 when none came in time.
    Reply reply(std::chrono::milliseconds within = pvc::test::scaled(std::chrono::milliseconds(60000))) {
        std::string in;
        auto until = std::chrono::steady_clock::now() + within;
        std::size_t head_end = std::string::npos, want = 0;
        while (std::chrono::steady_clock::now() < until) {
            if (head_end == std::string::npos && (head_end = in.find("\r\n\r\n")) != std::string::npos) {
                std::string head = in.substr(0, head_end);
                std::transform(head.begin(), head.end(), head.begin(), [](unsigned char c) { return std::tolower(c); });
                auto cl = head.find("content-length:");
                want = cl == std::string::npos ? 0 : std::stoul(head.substr(cl + 15));
            }
            if (head_end != std::string::npos && in.size() >= head_end + 4 + want) {
                Reply r;
                r.status = static_cast<unsigned>(std::stoul(in.substr(9, 3)));
                r.body = in.substr(head_end + 4, want);
                return r;
            }
            pollfd p{fd_, POLLIN, 0};
            if (::poll(&p, 1, 200) <= 0) continue;
            char buf[65536];
            ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
            if (n <= 0) break;
            in.append(buf, static_cast<std::size_t>(n));
        }
        return {};
    }

private:
    int fd_ = -1;
};

const std::string boundary = "pvcUploadBoundary";
std::string part_head() {
    return "--" + boundary + "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"filename\"\r\n"
           "Content-Type: application/octet-stream\r\n\r\n";
}
std::string part_tail() { return "\r\n--" + boundary + "--\r\n"; }

class CephUploadTest : public ApiFixture {
protected:
    static void SetUpTestSuite() {
        ApiFixture::SetUpTestSuite();
        ceph_ = new pvc::test::CephCluster(1);
        auto s = zk::Session::connect({.hosts = zk_->hosts()});
        ASSERT_TRUE(s->write({{path("pool.name", {"rbd"}), ""},
                              {path("pool.pgs", {"rbd"}), "8"},
                              {path("pool.tier", {"rbd"}), "default"},
                              {path("pool.stats", {"rbd"}), R"({"id": 1, "free_bytes": 1073741824})"},
                              {"/ceph/volumes/rbd", ""},
                              {"/ceph/snapshots/rbd", ""}}));
        s->close();
    }
    static void TearDownTestSuite() {
        delete ceph_;
        ceph_ = nullptr;
        ApiFixture::TearDownTestSuite();
    }
    void customize(ApiSettings& s) override {
        s.ceph = ceph_settings();
        // A client that stops sending is cut off after this (per piece).
        s.server.limits.request_timeout = std::chrono::seconds(3);
    }
    void SetUp() override {
        ApiFixture::SetUp();
        client = std::make_unique<ceph::Client>(session, ceph_settings());
    }
    void TearDown() override {
        client.reset();
        ApiFixture::TearDown();
    }
    static ceph::Settings ceph_settings() {
        ceph::Settings s;
        s.config_file = ceph_->conf().string();
        s.keyring = ceph_->keyring().string();
        s.timeout = std::chrono::seconds(3);
        return s;
    }
    std::string exported(const std::string& spec) {
        auto out = dir.path() / "export.raw";
        std::filesystem::remove(out);
        auto r = ceph_->rbd({"export", spec, out.string()});
        EXPECT_EQ(r.status, 0) << r.err;
        return pvc::test::slurp(out);
    }
    std::string upload_target(const std::string& volume, const std::string& query = "image_format=raw") {
        return "/storage/ceph/volume/rbd/" + volume + "/upload?" + query;
    }
    // A multipart upload as the reference's client sends it, its file sent
    // in 1 MiB pieces.
    Reply multipart(const std::string& volume, const std::string& data, const std::string& query = "image_format=raw") {
        RawClient c(port);
        std::string head = part_head(), tail = part_tail();
        c.header(upload_target(volume, query), "multipart/form-data; boundary=" + boundary,
                 "Content-Length: " + std::to_string(head.size() + data.size() + tail.size()));
        c.send(head);
        for (std::size_t at = 0; at < data.size(); at += 1 << 20) c.send(std::string_view(data).substr(at, 1 << 20));
        c.send(tail);
        return c.reply();
    }
    std::string message(const Reply& r) {
        auto j = r.json();
        return j.is_object() && j["message"].is_string() ? j["message"].get<std::string>() : r.body;
    }

    static inline pvc::test::CephCluster* ceph_ = nullptr;
    std::unique_ptr<ceph::Client> client;
};

TEST_F(CephUploadTest, RawAndQcow2StreamedAndReadBack) {
    // Raw, multipart (the reference client's form), 20 MiB: ten times the
    // API's limit for a body read whole.
    ASSERT_EQ(client->add_volume("rbd", "up1", "24M").status, 200);
    const std::string a = image(20 * 1024 * 1024 + 5, 1);
    auto r = multipart("up1", a);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(message(r), "Wrote uploaded file to volume 'up1' in pool 'rbd'.");
    std::string back = exported("rbd/up1");
    ASSERT_EQ(back.size(), 24u * 1024 * 1024);
    EXPECT_TRUE(back.compare(0, a.size(), a) == 0);

    // Raw as application/octet-stream, the size given in bytes; on the same
    // kept-alive connection a request after it is answered.
    const std::string b = image(6 * 1024 * 1024, 2);
    Connection conn("127.0.0.1", port);
    Call up;
    up.method = "POST";
    up.target = "/api/v1" + upload_target("up1", "image_format=raw&file_size=25165824");
    up.api_key = token;
    up.content_type = "application/octet-stream";
    up.body = b;
    r = conn.send(up);
    ASSERT_EQ(r.status, 200) << r.body;
    back = exported("rbd/up1");
    EXPECT_TRUE(back.compare(0, b.size(), b) == 0);
    EXPECT_TRUE(back.compare(b.size(), a.size() - b.size(), a, b.size()) == 0);
    Call root;
    root.target = "/api/v1/";
    EXPECT_EQ(conn.send(root).status, 200);
    // A size given that is not the volume's: refused, nothing written.
    up.target = "/api/v1" + upload_target("up1", "image_format=raw&file_size=10M");
    r = conn.send(up);
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(message(r), "Image file size 10M does not match volume size 24M");

    // qcow2: into a temporary volume, converted by qemu-img, which goes.
    ASSERT_EQ(client->add_volume("rbd", "up2", "8M").status, 200);
    const std::string q = image(7 * 1024 * 1024 + 3, 3);
    auto raw = dir.path() / "q.raw";
    auto qcow = dir.path() / "q.qcow2";
    std::ofstream(raw, std::ios::binary) << q;
    auto conv = pvc::test::run_command({"qemu-img", "convert", "-f", "raw", "-O", "qcow2", raw.string(), qcow.string()});
    ASSERT_EQ(conv.status, 0) << conv.err;
    const std::string qdata = pvc::test::slurp(qcow);
    r = multipart("up2", qdata, "image_format=qcow2&file_size=" + std::to_string(qdata.size()));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(message(r), "Converted and wrote uploaded file to volume 'up2' in pool 'rbd'.");
    back = exported("rbd/up2");
    EXPECT_TRUE(back.compare(0, q.size(), q) == 0);
    EXPECT_FALSE(session->exists(path("volume.name", {"rbd", "up2_tmp"})));
    EXPECT_NE(ceph_->rbd({"info", "rbd/up2_tmp"}).status, 0);

    EXPECT_EQ(client->remove_volume("rbd", "up1").status, 200);
    EXPECT_EQ(client->remove_volume("rbd", "up2").status, 200);
}

TEST_F(CephUploadTest, AbortedAndOversizeUploads) {
    ASSERT_EQ(client->add_volume("rbd", "ab", "8M").status, 200);
    const std::string a = image(8 * 1024 * 1024, 4);
    auto r = multipart("ab", a);
    ASSERT_EQ(r.status, 200) << r.body;

    // A client that stops sending half-way: cut off after the request
    // timeout (3 s here), the answer says what the volume holds; meanwhile
    // other requests are answered.
    const std::string b = image(8 * 1024 * 1024, 5);
    {
        RawClient c(port);
        c.header(upload_target("ab"), "application/octet-stream", "Content-Length: " + std::to_string(b.size()));
        ASSERT_TRUE(c.send(std::string_view(b).substr(0, 5 * 1024 * 1024)));
        EXPECT_EQ(get("/").status, 200);
        EXPECT_EQ(get("/storage/ceph/volume/rbd/ab").status, 200);
        r = c.reply();
        ASSERT_EQ(r.status, 400) << r.body;
        EXPECT_EQ(message(r),
                  "Failed to upload or write image file to volume 'ab': the upload could not be read (the client sent "
                  "nothing for 3 s) after 5242880 bytes; volume 'ab' now holds the first 4194304 bytes of the upload "
                  "over its earlier content: upload the image again.");
    }
    std::string back = exported("rbd/ab");
    EXPECT_TRUE(back.compare(0, 4 << 20, b, 0, 4 << 20) == 0);
    EXPECT_TRUE(back.compare(4 << 20, 4 << 20, a, 4 << 20, 4 << 20) == 0);

    // A client that closes its side half-way.
    {
        RawClient c(port);
        std::string head = part_head();
        c.header(upload_target("ab"), "multipart/form-data; boundary=" + boundary,
                 "Content-Length: " + std::to_string(head.size() + a.size() + part_tail().size()));
        c.send(head);
        c.send(std::string_view(a).substr(0, 1 << 20));
        c.half_close();
        r = c.reply();
        ASSERT_EQ(r.status, 400) << r.body;
        // (the last bytes that could start the multipart delimiter are held back)
        EXPECT_NE(message(r).find("(the client closed the connection before the end of the body) after 1048556 bytes; "
                                  "nothing was written to volume 'ab'."),
                  std::string::npos)
            << r.body;
    }

    // Larger than the volume, announced: refused before anything is written
    // (the client still sends it all and reads the answer).
    const std::string big = image(9 * 1024 * 1024, 6);
    Call up;
    up.method = "POST";
    up.target = "/api/v1" + upload_target("ab");
    up.api_key = token;
    up.content_type = "application/octet-stream";
    up.body = big;
    r = request("127.0.0.1", port, up);
    ASSERT_EQ(r.status, 400) << r.body;
    EXPECT_EQ(message(r), "Image file size 9437184 is larger than volume size 8192K (8388608 bytes); nothing was written.");
    r = multipart("ab", big);
    ASSERT_EQ(r.status, 400) << r.body;
    EXPECT_EQ(message(r), "Image file size 9437184 is larger than volume size 8192K (8388608 bytes); nothing was written.");
    back = exported("rbd/ab");
    EXPECT_TRUE(back.compare(0, 4 << 20, b, 0, 4 << 20) == 0);

    // Larger than the volume, not announced (chunked): refused when the
    // excess arrives.
    {
        RawClient c(port);
        c.header(upload_target("ab"), "application/octet-stream", "Transfer-Encoding: chunked");
        for (std::size_t at = 0; at < big.size(); at += 1 << 20) {
            char size_line[32];
            std::snprintf(size_line, sizeof size_line, "%zx\r\n", std::size_t{1} << 20);
            c.send(size_line);
            c.send(std::string_view(big).substr(at, 1 << 20));
            c.send("\r\n");
        }
        c.send("0\r\n\r\n");
        r = c.reply();
        ASSERT_EQ(r.status, 400) << r.body;
        EXPECT_EQ(message(r), "Failed to upload or write image file to volume 'ab': the image is larger than volume 'ab' "
                              "(8388608 bytes); volume 'ab' now holds the first 8388608 bytes of the upload over its "
                              "earlier content: upload the image again.");
    }
    // A converted format longer than the file size given: nothing made.
    up.target = "/api/v1" + upload_target("ab", "image_format=qcow2&file_size=1048576");
    up.body = std::string(2 << 20, 'q');
    r = request("127.0.0.1", port, up);
    ASSERT_EQ(r.status, 400) << r.body;
    EXPECT_EQ(message(r), "Image file size 2097152 is larger than the file size given (1048576); nothing was written.");
    EXPECT_FALSE(session->exists(path("volume.name", {"rbd", "ab_tmp"})));
    // No file in the body.
    up.target = "/api/v1" + upload_target("ab");
    up.content_type = "multipart/form-data; boundary=" + boundary;
    up.body = "--" + boundary + "\r\nContent-Disposition: form-data; name=\"x\"\r\n\r\n1\r\n--" + boundary + "--\r\n";
    r = request("127.0.0.1", port, up);
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(message(r).find("no file found in the upload: the body has no part with a file"), std::string::npos)
        << r.body;
    EXPECT_EQ(client->remove_volume("rbd", "ab").status, 200);
}

// ---------------------------------------------------------------- Ceph did its part, ZooKeeper did not

class CephReconcileTest : public CephUploadTest {
protected:
    void SetUp() override {
        CephUploadTest::SetUp();
        zk::SessionOptions o;
        o.hosts = zk_->hosts();
        o.op_timeout = 2s;  // a write to a stopped ZooKeeper fails after this
        zsession = zk::Session::connect(o);
    }
    void TearDown() override {
        if (!zk_up) zk_->start();
        zsession->close();
        CephUploadTest::TearDown();
    }
    // A client whose next ZooKeeper record finds ZooKeeper stopped (and the
    // monitor too when `mon`), after Ceph did its part.
    std::unique_ptr<ceph::Client> breaking_client(bool mon = false) {
        auto s = ceph_settings();
        s.before_record = [this, mon] {
            if (!arm) return;
            arm = false;
            zk_->stop();
            zk_up = false;
            if (mon) ceph_->stop_mon();
        };
        return std::make_unique<ceph::Client>(zsession, s);
    }
    void zookeeper_back() {
        zk_->start();
        zk_up = true;
        auto until = std::chrono::steady_clock::now() + pvc::test::scaled(std::chrono::seconds(60));
        for (;;) {
            try {
                zsession->exists("/");
                session->exists("/");
                return;
            } catch (const zk::Error&) {
                ASSERT_LT(std::chrono::steady_clock::now(), until) << "ZooKeeper did not come back";
            }
        }
    }
    bool image(const std::string& spec) { return ceph_->rbd({"info", spec}).status == 0; }
    std::uint64_t recorded_size(const std::string& volume) {
        auto j = json::parse(session->get(path("volume.stats", {"rbd", volume})).value_or("{}"), nullptr, false);
        return j.is_object() && j.contains("size") ? j["size"].get<std::uint64_t>() : 0;
    }

    std::shared_ptr<zk::Session> zsession;
    bool arm = false, zk_up = true;
};

TEST_F(CephReconcileTest, ZooKeeperStoppedAfterCephDidItsPart) {
    // A creation: ZooKeeper does not record it, so Ceph's volume goes again.
    auto c = breaking_client();
    arm = true;
    auto r = c->add_volume("rbd", "zv", "4M");
    EXPECT_EQ(r.status, 500);
    EXPECT_EQ(r.message.rfind("ERROR: Created RBD volume 'zv' in Ceph but could not record it in ZooKeeper; it was "
                              "removed from Ceph again; the next storage request or the primary's next keepalive "
                              "brings ZooKeeper in line with Ceph.", 0),
              0u)
        << r.message;
    EXPECT_FALSE(image("rbd/zv"));
    zookeeper_back();
    EXPECT_FALSE(session->exists(path("volume.name", {"rbd", "zv"})));

    // A removal: Ceph's volume is gone, its keys stay until the next request.
    ASSERT_EQ(c->add_volume("rbd", "zr", "4M").status, 200);
    arm = true;
    r = c->remove_volume("rbd", "zr");
    EXPECT_EQ(r.status, 500);
    EXPECT_NE(r.message.find("Removed RBD volume 'zr' from Ceph but could not remove its keys from ZooKeeper; the "
                             "next storage request"),
              std::string::npos)
        << r.message;
    EXPECT_FALSE(image("rbd/zr"));
    zookeeper_back();
    EXPECT_TRUE(session->exists(path("volume.name", {"rbd", "zr"})));  // what the next request finds
    ASSERT_EQ(c->add_volume("rbd", "zn", "4M").status, 200);            // any write: reconciles first
    EXPECT_FALSE(session->exists(path("volume.name", {"rbd", "zr"})));
    EXPECT_FALSE(session->exists(path("base.snapshot") + "/rbd/zr"));

    // A resize by one process (as `pvc` is), reconciled by another (as the
    // primary's keepalive does) from the pool's journal in Ceph.
    arm = true;
    r = c->resize_volume("rbd", "zn", "8M");
    EXPECT_EQ(r.status, 500);
    EXPECT_NE(r.message.find("in Ceph but could not record its new size in ZooKeeper; the next storage request"),
              std::string::npos)
        << r.message;
    c.reset();
    zookeeper_back();
    EXPECT_EQ(recorded_size("zn"), 4u << 20);
    ceph::Client other(session, ceph_settings());
    EXPECT_EQ(other.reconcile(), 0u);
    EXPECT_EQ(recorded_size("zn"), 8u << 20);
    EXPECT_EQ(other.remove_volume("rbd", "zn").status, 200);
}

TEST_F(CephReconcileTest, ZooKeeperAndCephStoppedAfterCephDidItsPart) {
    // A pool made; then ZooKeeper and the monitor stop: not recorded, and
    // not removed again either (as far as the answer knows). Once both are
    // back, reconciliation makes ZooKeeper agree with Ceph: the pool
    // recorded (Ceph has it), or no record (the undo was done late).
    auto c = breaking_client(true);
    arm = true;
    auto r = c->add_pool("zpool", "8", "copies=2,mincopies=1", std::nullopt);
    struct MonBack {
        pvc::test::CephCluster* c;
        bool done = false;
        ~MonBack() {
            if (!done) c->start_mon();
        }
    } mon_back{ceph_};
    EXPECT_EQ(r.status, 500);
    EXPECT_NE(r.message.find("ERROR: Created pool \"zpool\" in Ceph but could not record it in ZooKeeper ("),
              std::string::npos)
        << r.message;
    EXPECT_NE(r.message.find("removing it from Ceph again failed too"), std::string::npos) << r.message;
    EXPECT_NE(r.message.find("brings ZooKeeper in line with Ceph."), std::string::npos) << r.message;
    ceph_->start_mon();
    mon_back.done = true;
    zookeeper_back();
    // The undo that timed out may still be done: librados sends a monitor
    // command again once it is back. A command of this client answered
    // means the monitor has had it; then Ceph and ZooKeeper must agree.
    EXPECT_EQ(c->set_osd_option("noout", false).status, 200);
    EXPECT_EQ(c->reconcile(), 0u);
    EXPECT_EQ(c->reconcile(), 0u);  // (settled again: the undo may have come after the first)
    const bool in_ceph = ceph_->ceph({"osd", "pool", "get", "zpool", "size"}).status == 0;
    EXPECT_EQ(session->exists(path("pool.name", {"zpool"})), in_ceph);
    if (in_ceph) {
        EXPECT_EQ(session->get(path("pool.pgs", {"zpool"})).value_or(""), "8");
        EXPECT_EQ(session->get(path("pool.tier", {"zpool"})).value_or(""), "default");
        r = c->remove_pool("zpool");
        EXPECT_EQ(r.status, 200) << r.message;
        EXPECT_NE(ceph_->ceph({"osd", "pool", "get", "zpool", "size"}).status, 0);
    }
}

}  // namespace
}  // namespace pvc::api::test
