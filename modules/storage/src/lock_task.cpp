#include "lock_task.hpp"

#include "pvc/client.hpp"
#include "pvc/schema.hpp"
#include "pvc/strings.hpp"

namespace pvc::storage {

using schema::path;

services::TaskHandler flush_locks_task(std::shared_ptr<zk::Session> zk, std::shared_ptr<services::RbdLocks> locks,
                                       Logger log) {
    return [zk = std::move(zk), locks = std::move(locks), log = std::move(log)](services::TaskRun& run) {
        std::string vm = run.kwargs().value("domain", "");
        bool force = run.kwargs().value("force_unlock", false);
        run.progress(0, 3, "Flushing RBD locks for VM " + vm + " [forced=" + (force ? "True" : "False") + "]");
        std::string uuid = vm;
        if (vm.empty() || vm.find('/') != std::string::npos || !zk->exists(path("domain.name", {vm})))
            uuid = client::vm_by_name(*zk, vm).value_or("");
        if (uuid.empty()) throw services::TaskFailure("Could not find VM " + vm + " in the cluster");
        auto v = zk->get_many({path("domain.state", {uuid}), path("domain.storage.volumes", {uuid})});
        std::string state = v[0].value_or("");
        if (!force && state != "stop" && state != "disable" && state != "fail")
            throw services::TaskFailure("VM state " + state + " not in [stop, disable, fail] and not forcing");
        run.progress(1, 3, "Obtaining RBD locks for VM " + vm);
        // A VM without RBD volumes has nothing to free (the reference failed on its empty name).
        std::vector<std::string> volumes;
        for (const auto& name : split(v[1].value_or(""), ','))
            if (!trim(name).empty()) volumes.push_back(trim(name));
        run.progress(2, 3, "Freeing RBD locks for VM " + vm);
        if (auto err = locks->free_all(uuid, volumes)) throw services::TaskFailure("Failed to free RBD locks: " + *err);
        log.info("Flushed the RBD locks of VM {} ({} volume(s))", vm, volumes.size());
        run.progress(3, 3, "Finishing up");
        return "Successfully flushed RBD locks for VM " + vm;
    };
}

}  // namespace pvc::storage
