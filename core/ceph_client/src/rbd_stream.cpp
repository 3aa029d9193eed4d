// The `rbd` command's export and import formats over librbd (rbd_stream.hpp).
#include "rbd_stream.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

namespace pvc::ceph {

namespace {

const std::string kImageBanner = "rbd image v2\n";
const std::string kDiffsBanner = "rbd image diffs v2\n";
const std::string kDiffBannerV1 = "rbd diff v1\n";
const std::string kDiffBannerV2 = "rbd diff v2\n";
constexpr char kFromSnap = 'f', kToSnap = 't', kSize = 's', kWrite = 'w', kZero = 'z', kEnd = 'e', kProtected = 'p';
constexpr char kOrder = 'O', kFeatures = 'T', kStripeUnit = 'U', kStripeCount = 'C', kMeta = 'M', kHeaderEnd = 'E';
constexpr std::size_t kSparse = 4096;           // the command's default --sparse-size
constexpr std::uint64_t kMaxExtent = 64 << 20;  // a longer extent is read in parts
constexpr std::uint64_t kMaxRecord = 1ull << 32;

[[noreturn]] void fail(int rc, const std::string& what) { throw CephFailure(rc, what + ": " + errno_text(rc)); }

// Buffered output to a file descriptor.
class Out {
public:
    explicit Out(int fd) : fd_(fd) { buf_.reserve(1 << 20); }
    void raw(const void* p, std::size_t n) {
        const char* c = static_cast<const char*>(p);
        if (buf_.size() + n > (1 << 20)) flush();
        if (n >= (1 << 20)) return write_all(c, n);
        buf_.insert(buf_.end(), c, c + n);
    }
    void raw(const std::string& s) { raw(s.data(), s.size()); }
    void u8(char v) { raw(&v, 1); }
    void le64(std::uint64_t v) {
        unsigned char b[8];
        for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(v >> (8 * i));
        raw(b, 8);
    }
    void le32(std::uint32_t v) {
        unsigned char b[4];
        for (int i = 0; i < 4; ++i) b[i] = static_cast<unsigned char>(v >> (8 * i));
        raw(b, 4);
    }
    void str(const std::string& s) {
        le32(static_cast<std::uint32_t>(s.size()));
        raw(s);
    }
    void flush() {
        if (!buf_.empty()) write_all(buf_.data(), buf_.size());
        buf_.clear();
    }
    std::uint64_t written() const { return total_ + buf_.size(); }

private:
    void write_all(const char* p, std::size_t n) {
        while (n > 0) {
            ssize_t w = ::write(fd_, p, n);
            if (w < 0) {
                if (errno == EINTR) continue;
                fail(-errno, "rbd: error writing the export file");
            }
            p += w;
            n -= static_cast<std::size_t>(w);
            total_ += static_cast<std::uint64_t>(w);
        }
    }
    int fd_;
    std::vector<char> buf_;
    std::uint64_t total_ = 0;
};

// Buffered input from a file descriptor; a short file is EINVAL naming what was being read.
class In {
public:
    explicit In(int fd) : fd_(fd) {}
    void read(void* p, std::size_t n, const char* what) {
        char* c = static_cast<char*>(p);
        while (n > 0) {
            if (pos_ == len_) {
                ssize_t r = ::read(fd_, buf_.data(), buf_.size());
                if (r < 0) {
                    if (errno == EINTR) continue;
                    fail(-errno, std::string("rbd: failed to decode ") + what);
                }
                if (r == 0) throw CephFailure(-EINVAL, std::string("rbd: failed to decode ") + what + ": the file ends early");
                pos_ = 0;
                len_ = static_cast<std::size_t>(r);
            }
            std::size_t k = std::min(n, len_ - pos_);
            std::memcpy(c, buf_.data() + pos_, k);
            pos_ += k;
            c += k;
            n -= k;
            consumed_ += k;
        }
    }
    char u8(const char* what) {
        char c;
        read(&c, 1, what);
        return c;
    }
    std::uint64_t le64(const char* what) {
        unsigned char b[8];
        read(b, 8, what);
        std::uint64_t v = 0;
        for (int i = 7; i >= 0; --i) v = (v << 8) | b[i];
        return v;
    }
    std::uint32_t le32(const char* what) {
        unsigned char b[4];
        read(b, 4, what);
        std::uint32_t v = 0;
        for (int i = 3; i >= 0; --i) v = (v << 8) | b[i];
        return v;
    }
    std::string str(std::uint32_t max, const char* what) {
        std::uint32_t n = le32(what);
        if (n > max) throw CephFailure(-EINVAL, std::string("rbd: failed to decode ") + what + ": too long");
        std::string s(n, '\0');
        read(s.data(), n, what);
        return s;
    }
    void skip(std::uint64_t n) {
        std::vector<char> tmp(4096);
        while (n > 0) {
            std::size_t k = static_cast<std::size_t>(std::min<std::uint64_t>(n, tmp.size()));
            read(tmp.data(), k, "skipped tag data");
            n -= k;
        }
    }
    void banner(const std::string& want) {
        std::string got(want.size(), '\0');
        read(got.data(), got.size(), "diff banner");
        if (got != want) throw CephFailure(-EINVAL, "rbd: invalid or unexpected diff banner");
    }
    std::uint64_t consumed() const { return consumed_; }

private:
    int fd_;
    std::vector<char> buf_ = std::vector<char>(1 << 20);
    std::size_t pos_ = 0, len_ = 0;
    std::uint64_t consumed_ = 0;
};

bool all_zero(const char* p, std::size_t n) {
    return n == 0 || (p[0] == 0 && std::memcmp(p, p + 1, n - 1) == 0);  // each byte equals the next, the first 0
}

// One asynchronous librbd call and its buffer.
struct Aio {
    rbd_completion_t c = nullptr;
    std::uint64_t off = 0, len = 0;
    bool exists = false;
    std::vector<char> data;                 // a write's
    std::unique_ptr<char[]> read_buf;       // a read's (not zeroed first: librbd fills it)
    ~Aio() {
        if (!c) return;
        rbd_aio_wait_for_complete(c);  // never free a buffer librbd still fills
        rbd_aio_release(c);
    }
    int wait() {
        rbd_aio_wait_for_complete(c);
        return static_cast<int>(rbd_aio_get_return_value(c));
    }
};

struct Extent {
    std::uint64_t off, len;
    bool exists;
};

int collect(uint64_t off, size_t len, int exists, void* arg) {
    auto* v = static_cast<std::vector<Extent>*>(arg);
    // The command reads an extent whole; a very long one is read in parts.
    while (len > kMaxExtent) {
        v->push_back({off, kMaxExtent, exists != 0});
        off += kMaxExtent;
        len -= kMaxExtent;
    }
    v->push_back({off, len, exists != 0});
    return 0;
}

// One diff of the image as it is set now (a snapshot, or the head), from
// `from` (none: from nothing): the records of the command's export-diff.
void write_diff(rbd_image_t img, const char* from, const char* to, int format, Out& out, StreamStats& st,
                std::optional<std::uint64_t> size_override = std::nullopt, bool no_extents = false) {
    rbd_image_info_t info;
    int rc = rbd_stat(img, &info, sizeof(info));
    if (rc < 0) fail(rc, "rbd: export error");
    std::uint64_t size = size_override.value_or(info.size);
    out.raw(format == 1 ? kDiffBannerV1 : kDiffBannerV2);
    auto name_record = [&](char tag, const std::string& name) {
        out.u8(tag);
        if (format == 2) out.le64(name.size() + 4);
        out.str(name);
    };
    if (from) name_record(kFromSnap, from);
    if (to) name_record(kToSnap, to);
    if (to && format == 2) {
        int prot = 0;
        rc = rbd_snap_is_protected(img, to, &prot);
        if (rc < 0) fail(rc, "rbd: export error");
        out.u8(kProtected);
        out.le64(8);  // the command (Ceph 16) records 8 for its one byte; its import reads one
        out.u8(prot ? 1 : 0);
    }
    out.u8(kSize);
    if (format == 2) out.le64(8);
    out.le64(size);

    std::vector<Extent> extents;
    if (!no_extents) {
        rc = rbd_diff_iterate2(img, from, 0, size, 1, 0, collect, &extents);
        if (rc < 0) fail(rc, "rbd: export error");
    }
    std::deque<std::unique_ptr<Aio>> window;
    std::size_t next = 0;
    auto submit = [&] {
        const Extent& e = extents[next++];
        auto a = std::make_unique<Aio>();
        a->off = e.off;
        a->len = e.len;
        a->exists = e.exists;
        if (e.exists) {
            a->read_buf.reset(new char[e.len]);
            int r = rbd_aio_create_completion(nullptr, nullptr, &a->c);
            if (r < 0) fail(r, "rbd: export error");
            r = rbd_aio_read2(img, e.off, e.len, a->read_buf.get(), a->c, LIBRADOS_OP_FLAG_FADVISE_NOCACHE);
            if (r < 0) fail(r, "rbd: error requesting read from source image");
        }
        window.push_back(std::move(a));
    };
    while (next < extents.size() || !window.empty()) {
        while (next < extents.size() && window.size() < kStreamOps) submit();
        auto a = std::move(window.front());
        window.pop_front();
        bool exists = a->exists;
        if (exists) {
            int r = a->wait();
            if (r < 0) fail(r, "rbd: error reading from source image at offset " + std::to_string(a->off));
            if (static_cast<std::uint64_t>(r) != a->len)
                fail(-EIO, "rbd: short read from source image at offset " + std::to_string(a->off));
            exists = !all_zero(a->read_buf.get(), a->len);
        }
        out.u8(exists ? kWrite : kZero);
        if (format == 2) out.le64(exists ? 16 + a->len : 16);
        out.le64(a->off);
        out.le64(a->len);
        if (exists) {
            out.raw(a->read_buf.get(), a->len);
            st.data_bytes += a->len;
        }
    }
    out.u8(kEnd);
}

struct ImageHandle {
    rbd_image_t img = nullptr;
    ~ImageHandle() {
        if (img) rbd_close(img);
    }
};

// Applies the writes of a diff record, sparsely as the command does: runs of
// kSparse-aligned zero blocks are written as zeroes, the rest as data.
class Writer {
public:
    explicit Writer(rbd_image_t img) : img_(img) {}
    ~Writer() {
        try {
            drain();
        } catch (...) {
        }
    }
    void data(std::uint64_t off, std::vector<char> buf, StreamStats& st) {
        std::size_t pos = 0, n = buf.size();
        if (n == 0) return;
        while (pos < n) {
            std::size_t len = 0;
            bool zeroed = false;
            std::size_t p = pos;
            while (p < n) {
                std::size_t ext = std::min(kSparse - (p % kSparse), n - p);
                bool z = all_zero(buf.data() + p, ext);
                if (p == pos) zeroed = z;
                else if (z != zeroed) break;
                p += ext;
                len += ext;
            }
            if (zeroed) zeroes(off + pos, len);
            else {
                std::vector<char> part(buf.begin() + static_cast<std::ptrdiff_t>(pos),
                                       buf.begin() + static_cast<std::ptrdiff_t>(pos + len));
                st.data_bytes += len;
                push(off + pos, std::move(part), false);
            }
            pos += len;
        }
    }
    void zeroes(std::uint64_t off, std::uint64_t len) { push(off, {}, true, len); }
    void drain() {
        int first = 0;
        while (!window_.empty()) {
            int r = window_.front()->wait();
            if (r < 0 && first == 0) first = r;
            window_.pop_front();
        }
        if (first < 0) fail(first, "rbd: error writing to destination image");
    }

private:
    void push(std::uint64_t off, std::vector<char> buf, bool zero, std::uint64_t zero_len = 0) {
        while (window_.size() >= kStreamOps) {
            int r = window_.front()->wait();
            window_.pop_front();
            if (r < 0) fail(r, "rbd: error writing to destination image");
        }
        auto a = std::make_unique<Aio>();
        a->off = off;
        a->data = std::move(buf);
        int r = rbd_aio_create_completion(nullptr, nullptr, &a->c);
        if (r < 0) fail(r, "rbd: import-diff failed");
        if (zero) r = rbd_aio_write_zeroes(img_, off, zero_len, a->c, 0, LIBRADOS_OP_FLAG_FADVISE_NOCACHE);
        else r = rbd_aio_write2(img_, off, a->data.size(), a->data.data(), a->c, LIBRADOS_OP_FLAG_FADVISE_NOCACHE);
        if (r < 0) fail(r, "rbd: error requesting write to destination image");
        window_.push_back(std::move(a));
    }
    rbd_image_t img_;
    std::deque<std::unique_ptr<Aio>> window_;
};

// One diff from `in` applied to `img` (the command's do_import_diff_fd).
void read_diff(rbd_image_t img, In& in, int format, StreamStats& st) {
    in.banner(format == 1 ? kDiffBannerV1 : kDiffBannerV2);
    std::string tosnap;
    bool is_protected = false;
    Writer w(img);
    while (true) {
        char tag = in.u8("tag");
        if (tag == kEnd) break;
        std::uint64_t length = 0;
        if (format == 2) length = in.le64("tag length");
        if (tag == kFromSnap) {
            std::string from = in.str(4096, "start snap name");
            bool exists = false;
            int rc = rbd_snap_exists(img, from.c_str(), &exists);
            if (rc < 0) fail(rc, "rbd: failed to query start snap state");
            if (!exists)
                throw CephFailure(-EINVAL, "start snapshot '" + from + "' does not exist in the image, aborting");
        } else if (tag == kToSnap) {
            std::string to = in.str(4096, "end snap name");
            bool exists = false;
            int rc = rbd_snap_exists(img, to.c_str(), &exists);
            if (rc < 0) fail(rc, "rbd: failed to query end snap state");
            if (exists) throw CephFailure(-EEXIST, "end snapshot '" + to + "' already exists, aborting");
            tosnap = to;
        } else if (tag == kProtected) {
            is_protected = in.u8("snap protection status") != 0;
        } else if (tag == kSize) {
            std::uint64_t size = in.le64("image size");
            w.drain();
            std::uint64_t cur = 0;
            rbd_get_size(img, &cur);
            if (cur != size) {
                int rc = rbd_resize(img, size);
                if (rc < 0) fail(rc, "rbd: can't resize image during import");
            }
        } else if (tag == kWrite || tag == kZero) {
            std::uint64_t off = in.le64("IO length"), len = in.le64("IO length");
            if (tag == kZero) {
                w.zeroes(off, len);
            } else {
                if (len > kMaxRecord) throw CephFailure(-EINVAL, "rbd: failed to decode write data: a record of " +
                                                                     std::to_string(len) + " bytes");
                std::vector<char> buf(static_cast<std::size_t>(len));
                in.read(buf.data(), buf.size(), "write data");
                w.data(off, std::move(buf), st);
            }
        } else if (format == 2) {
            in.skip(length);  // an unknown tag: skipped, as the command does
        } else {
            throw CephFailure(-EINVAL, "rbd: unrecognized tag byte " + std::to_string(static_cast<unsigned char>(tag)) +
                                           " in stream");
        }
    }
    w.drain();
    if (!tosnap.empty()) {
        int rc = rbd_snap_create(img, tosnap.c_str());
        if (rc < 0) fail(rc, "rbd: failed to create snapshot '" + tosnap + "'");
        if (is_protected) {
            rc = rbd_snap_protect(img, tosnap.c_str());
            if (rc < 0) fail(rc, "rbd: failed to protect snapshot '" + tosnap + "'");
        }
    }
}

}  // namespace

StreamStats export_image(Io& io, const std::string& image, const std::string& snap, int fd) {
    ImageHandle h;
    int rc = rbd_open_read_only(io.get(), image.c_str(), &h.img, snap.c_str());
    if (rc < 0) fail(rc, "rbd: error opening image " + image + "@" + snap);
    rbd_image_info_t info;
    rc = rbd_stat(h.img, &info, sizeof(info));
    if (rc < 0) fail(rc, "rbd: export error");
    std::uint64_t features = 0, unit = 0, count = 0;
    rbd_get_features(h.img, &features);
    rbd_get_stripe_unit(h.img, &unit);
    rbd_get_stripe_count(h.img, &count);
    Out out(fd);
    StreamStats st;
    out.raw(kImageBanner);
    for (auto [tag, value] : {std::pair<char, std::uint64_t>{kOrder, static_cast<std::uint64_t>(info.order)},
                              {kFeatures, features}, {kStripeUnit, unit}, {kStripeCount, count}}) {
        out.u8(tag);
        out.le64(8);
        out.le64(value);
    }
    // Image metadata (key order, as the command's map).
    std::string start;
    while (true) {
        std::size_t klen = 0, vlen = 0;
        rc = rbd_metadata_list(h.img, start.c_str(), 64, nullptr, &klen, nullptr, &vlen);
        if (rc < 0 && rc != -ERANGE) fail(rc, "failed to retrieve metadata of image");
        if (klen == 0) break;
        std::vector<char> keys(klen), vals(vlen);
        rc = rbd_metadata_list(h.img, start.c_str(), 64, keys.data(), &klen, vals.data(), &vlen);
        if (rc < 0) fail(rc, "failed to retrieve metadata of image");
        std::size_t kp = 0, vp = 0, n = 0;
        while (kp < klen && keys[kp]) {
            std::string k(keys.data() + kp), v(vals.data() + vp);
            kp += k.size() + 1;
            vp += v.size() + 1;
            out.u8(kMeta);
            out.le64(k.size() + v.size() + 8);
            out.str(k);
            out.str(v);
            start = k;
            ++n;
        }
        if (n < 64) break;
    }
    out.u8(kHeaderEnd);

    // The snapshots up to the one exported, in the image's order.
    int max = 16;
    std::vector<rbd_snap_info_t> snaps;
    int n = 0;
    while (true) {
        snaps.resize(static_cast<std::size_t>(max));
        n = rbd_snap_list(h.img, snaps.data(), &max);
        if (n != -ERANGE) break;
    }
    if (n < 0) fail(n, "rbd: export error");
    struct Names {
        rbd_snap_info_t* s;
        ~Names() { rbd_snap_list_end(s); }
    } names{snaps.data()};
    std::uint64_t target = 0;
    bool found = false;
    for (int i = 0; i < n; ++i)
        if (snap == snaps[static_cast<std::size_t>(i)].name) {
            target = snaps[static_cast<std::size_t>(i)].id;
            found = true;
        }
    if (!found) fail(-ENOENT, "rbd: export error: no snapshot " + snap);
    std::vector<std::string> chain;
    for (int i = 0; i < n; ++i)
        if (snaps[static_cast<std::size_t>(i)].id <= target) chain.emplace_back(snaps[static_cast<std::size_t>(i)].name);
    out.raw(kDiffsBanner);
    out.le64(chain.size() + 1);
    const char* last = nullptr;
    std::uint64_t last_size = 0;
    for (const auto& s : chain) {
        rc = rbd_snap_set(h.img, s.c_str());
        if (rc < 0) fail(rc, "rbd: export error");
        write_diff(h.img, last, s.c_str(), 2, out, st);
        rbd_image_info_t si;
        rbd_stat(h.img, &si, sizeof(si));
        last_size = si.size;
        last = s.c_str();
    }
    // The head, as it was at the snapshot: nothing changed since.
    write_diff(h.img, last, nullptr, 2, out, st, last_size, true);
    out.flush();
    st.file_bytes = out.written();
    return st;
}

StreamStats export_diff(Io& io, const std::string& image, const std::string& from_snap, const std::string& snap, int fd) {
    ImageHandle h;
    int rc = rbd_open_read_only(io.get(), image.c_str(), &h.img, snap.c_str());
    if (rc < 0) fail(rc, "rbd: error opening image " + image + "@" + snap);
    bool exists = false;
    rc = rbd_snap_exists(h.img, from_snap.c_str(), &exists);
    if (rc < 0) fail(rc, "rbd: export-diff error");
    if (!exists) fail(-ENOENT, "rbd: export-diff error: no snapshot " + from_snap);
    Out out(fd);
    StreamStats st;
    write_diff(h.img, from_snap.c_str(), snap.c_str(), 1, out, st);
    out.flush();
    st.file_bytes = out.written();
    return st;
}

StreamStats import_image(Io& io, const std::string& image, int fd) {
    struct stat sb;
    if (::fstat(fd, &sb) < 0) fail(-errno, "rbd: stat error");
    In in(fd);
    in.banner(kImageBanner);
    std::optional<std::uint64_t> order, features, unit, count;
    std::vector<std::pair<std::string, std::string>> meta;
    while (true) {
        char tag = in.u8("tag");
        if (tag == kHeaderEnd) break;
        std::uint64_t length = in.le64("tag length");
        if (tag == kOrder) order = in.le64("image option");
        else if (tag == kFeatures) features = in.le64("image option");
        else if (tag == kStripeUnit) unit = in.le64("image option");
        else if (tag == kStripeCount) count = in.le64("image option");
        else if (tag == kMeta) {
            std::string k = in.str(static_cast<std::uint32_t>(std::min<std::uint64_t>(length, 1 << 20)), "metadata key");
            std::string v = in.str(static_cast<std::uint32_t>(std::min<std::uint64_t>(length, 1 << 20)), "metadata value");
            meta.emplace_back(std::move(k), std::move(v));
        } else in.skip(length);
    }
    rbd_image_options_t opts;
    rbd_image_options_create(&opts);
    struct OptsGuard {
        rbd_image_options_t o;
        ~OptsGuard() { rbd_image_options_destroy(o); }
    } og{opts};
    rbd_image_options_set_uint64(opts, RBD_IMAGE_OPTION_FORMAT, 2);
    if (order) rbd_image_options_set_uint64(opts, RBD_IMAGE_OPTION_ORDER, *order);
    if (features) rbd_image_options_set_uint64(opts, RBD_IMAGE_OPTION_FEATURES, *features);
    if (unit) rbd_image_options_set_uint64(opts, RBD_IMAGE_OPTION_STRIPE_UNIT, *unit);
    if (count) rbd_image_options_set_uint64(opts, RBD_IMAGE_OPTION_STRIPE_COUNT, *count);
    int rc = rbd_create4(io.get(), image.c_str(), static_cast<std::uint64_t>(sb.st_size), opts);
    if (rc < 0) fail(rc, "rbd: image creation failed");
    StreamStats st;
    try {
        ImageHandle h;
        rc = rbd_open(io.get(), image.c_str(), &h.img, nullptr);
        if (rc < 0) fail(rc, "rbd: failed to open image");
        for (const auto& [k, v] : meta) {
            rc = rbd_metadata_set(h.img, k.c_str(), v.c_str());
            if (rc < 0) fail(rc, "rbd: failed to import image-meta");
        }
        in.banner(kDiffsBanner);
        std::uint64_t diffs = in.le64("diff count");
        for (std::uint64_t i = 0; i < diffs; ++i) read_diff(h.img, in, 2, st);
    } catch (...) {
        rbd_remove(io.get(), image.c_str());
        throw;
    }
    st.file_bytes = in.consumed();
    return st;
}

StreamStats import_diff(Io& io, const std::string& image, int fd) {
    ImageHandle h;
    int rc = rbd_open(io.get(), image.c_str(), &h.img, nullptr);
    if (rc < 0) fail(rc, "rbd: error opening image " + image);
    In in(fd);
    StreamStats st;
    read_diff(h.img, in, 1, st);
    st.file_bytes = in.consumed();
    return st;
}

}  // namespace pvc::ceph
