#include "console_log.hpp"

#include <fcntl.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "pvc/schema.hpp"

namespace pvc::hv {

namespace {

std::string sanitize_utf8(const std::string& in) {
    std::string out;
    out.reserve(in.size());
    size_t i = 0;
    while (i < in.size()) {
        unsigned char c = in[i];
        size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        bool ok = len > 0 && i + len <= in.size();
        for (size_t k = 1; ok && k < len; k++) ok = (static_cast<unsigned char>(in[i + k]) >> 6) == 2;
        if (ok) {
            out.append(in, i, len);
            i += len;
        } else {
            out += "\xEF\xBF\xBD";
            i += 1;
        }
    }
    return out;
}

}  // namespace

std::string tail_lines(const std::string& raw, int lines) {
    std::string text;
    text.reserve(raw.size());
    for (size_t i = 0; i < raw.size(); i++) {
        if (raw[i] == '\r') {
            text += '\n';
            if (i + 1 < raw.size() && raw[i + 1] == '\n') i++;
        } else {
            text += raw[i];
        }
    }
    text = sanitize_utf8(text);
    if (lines <= 0) return {};
    // Walk back over `lines` line starts; a final unterminated line counts as a line.
    size_t pos = text.size();
    int count = 0;
    if (pos > 0 && text[pos - 1] == '\n') pos--;
    while (pos > 0) {
        size_t nl = text.rfind('\n', pos - 1);
        count++;
        if (count == lines) {
            return nl == std::string::npos ? text : text.substr(nl + 1);
        }
        if (nl == std::string::npos) break;
        pos = nl;
    }
    return text;
}

std::optional<std::filesystem::path> console_log_file(const std::filesystem::path& dir, std::string_view name) {
    constexpr size_t max_name = 255 - 4;  // NAME_MAX less ".log"
    if (name.empty() || name == "." || name == ".." || name.size() > max_name) return std::nullopt;
    for (unsigned char c : name)
        if (c == '/' || c < 0x20 || c == 0x7f) return std::nullopt;
    return dir / (std::string(name) + ".log");
}

ConsoleLog::ConsoleLog(std::shared_ptr<zk::Session> zk, Executor& ex, Strand strand, std::shared_ptr<InotifyHub> hub,
                       std::string uuid, std::filesystem::path file, int lines)
    : zk_(std::move(zk)), ex_(ex), strand_(strand), uuid_(std::move(uuid)), file_(std::move(file)), lines_(lines),
      hub_(std::move(hub)), timer_(strand) {}

namespace {
constexpr auto kDebounce = std::chrono::milliseconds(500);   // the reference's poll period
constexpr auto kFallbackPoll = std::chrono::seconds(10);     // when the file cannot be watched
}  // namespace

void ConsoleLog::prepare() {
    std::error_code ec;
    if (file_.empty() || !std::filesystem::is_directory(file_.parent_path(), ec)) return;
    // O_NOFOLLOW: a link planted under the name never makes us create or
    // chmod a file elsewhere.
    int fd = ::open(file_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0600);
    if (fd < 0) return;
    struct stat st {};
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) ::fchmod(fd, 0600);
    ::close(fd);
}

void ConsoleLog::start() {
    if (file_.empty() || started_.exchange(true)) return;
    auto self = shared_from_this();
    boost::asio::post(strand_, [self] {
        if (!self->started_) return;
        self->watch();
        self->schedule(std::chrono::milliseconds(0));  // first upload at once
    });
}

void ConsoleLog::stop(bool final_upload) {
    if (!started_.exchange(false)) return;
    auto self = shared_from_this();
    boost::asio::post(strand_, [self] {
        self->timer_.cancel();
        self->timer_armed_ = false;
        self->unwatch();
    });
    if (final_upload) upload();
}

void ConsoleLog::watch() {
    if (!hub_ || watch_id_ >= 0 || !started_) return;
    std::weak_ptr<ConsoleLog> weak = shared_from_this();
    watch_id_ = hub_->add(file_, IN_MODIFY | IN_CLOSE_WRITE | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF,
                          [weak, strand = strand_](uint32_t mask) {
        if (auto self = weak.lock()) boost::asio::post(strand, [self, mask] { self->on_event(mask); });
    });
}

void ConsoleLog::unwatch() {
    if (watch_id_ < 0) return;
    if (hub_) hub_->remove(watch_id_);
    watch_id_ = -1;
}

void ConsoleLog::on_event(uint32_t mask) {
    if (!started_) return;
    // Deleted or moved away: the watch is over (re-armed by the next poll,
    // when the file exists again).
    if (mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF)) unwatch();
    schedule(kDebounce);
}

// One upload `after` from now unless one is already pending. While the file
// is watched nothing else is scheduled: the next change wakes us.
void ConsoleLog::schedule(std::chrono::milliseconds after) {
    if (!started_) return;
    if (timer_armed_) {
        if (timer_.expiry() <= std::chrono::steady_clock::now() + after) return;
        timer_.cancel();
    }
    timer_armed_ = true;
    timer_.expires_after(after);
    auto self = shared_from_this();
    timer_.async_wait([self](const boost::system::error_code& ec) {
        if (ec == boost::asio::error::operation_aborted) return;
        self->timer_armed_ = false;
        if (!self->started_) return;
        self->watch();
        self->tick();
        if (self->watch_id_ >= 0) return;
        // An unwatchable file polls at the reference's pace only while its
        // directory exists (QEMU is about to create it); otherwise slowly.
        std::error_code fs_ec;
        bool soon = std::filesystem::is_directory(self->file_.parent_path(), fs_ec);
        self->schedule(soon ? std::chrono::milliseconds(kDebounce) : std::chrono::milliseconds(kFallbackPoll));
    });
}

void ConsoleLog::tick() {
    std::error_code ec;
    auto mtime = std::filesystem::last_write_time(file_, ec);
    if (ec) return;
    {
        std::lock_guard g(m_);
        if (uploaded_once_ && mtime == last_mtime_) return;
    }
    if (in_flight_.exchange(true)) return;
    auto self = shared_from_this();
    ex_.blocking([self] {
        self->upload();
        self->in_flight_ = false;
    });
}

void ConsoleLog::upload() {
    std::error_code ec;
    auto mtime = std::filesystem::last_write_time(file_, ec);
    if (ec) return;
    std::ifstream in(file_, std::ios::binary);
    if (!in) return;
    // Console logs accumulate across boots: read only a generous tail.
    constexpr std::streamoff max_tail = 4 << 20;
    in.seekg(0, std::ios::end);
    std::streamoff size = in.tellg();
    in.seekg(size > max_tail ? size - max_tail : 0);
    std::stringstream buf;
    buf << in.rdbuf();
    std::string text = tail_lines(buf.str(), lines_);
    {
        std::lock_guard g(m_);
        last_mtime_ = mtime;
        if (uploaded_once_ && text == last_text_) return;
    }
    try {
        // Only while the domain exists: never re-create keys under a vanished root.
        if (!zk_->exists(schema::path("domain.name", {uuid_}))) return;
        if (!zk_->write(schema::path("domain.console.log", {uuid_}), text)) return;
        std::lock_guard g(m_);
        last_text_ = text;
        uploaded_once_ = true;
    } catch (const std::exception&) {
        // ZooKeeper unavailable: retried at the next change.
    }
}

}  // namespace pvc::hv
