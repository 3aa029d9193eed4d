// One request in flight on libzookeeper_mt and the completions that finish it
// (internal to the session: its operations, its watches and its recovery all
// submit requests through SessionImpl::call()).
#pragma once

#include <pvc/zk.hpp>

#include <zookeeper/zookeeper.h>

#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

namespace pvc::zk::detail {

// One in-flight request. Shared between the waiting caller and the completion.
struct OpState {
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    int rc = ZOK;
    std::string value;
    bool has_value = false;
    Stat stat;
    std::vector<std::string> strings;
    std::string created;
    // multi
    std::vector<zoo_op_t> ops;
    std::vector<zoo_op_result_t> results;
    std::vector<std::vector<char>> bufs;
    std::vector<struct ::Stat> stats;

    void finish(int r) {
        { std::lock_guard l(m); rc = r; done = true; }
        cv.notify_all();
    }
};

// Completions given to the zoo_a* calls; `data` is the OpState's holder
// allocated by SessionImpl::call(), released here.
void data_done(int rc, const char* value, int len, const struct ::Stat* stat, const void* data);
void stat_done(int rc, const struct ::Stat* stat, const void* data);
void strings_done(int rc, const struct String_vector* strings, const void* data);
void string_done(int rc, const char* value, const void* data);
void void_done(int rc, const void* data);

// Children as readers see them: lock contenders left out, sorted.
std::vector<std::string> without_contenders(std::vector<std::string> v);

}  // namespace pvc::zk::detail
