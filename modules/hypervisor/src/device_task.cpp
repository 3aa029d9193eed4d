#include "device_task.hpp"

#include "pvc/client.hpp"
#include "pvc/schema.hpp"

namespace pvc::hv {

using schema::path;

services::TaskHandler device_task(std::shared_ptr<zk::Session> zk, Connection& lv, bool attach) {
    return [zk = std::move(zk), &lv, attach](services::TaskRun& run) {
        std::string vm = run.kwargs().value("domain", "");
        std::string xml = run.kwargs().value("xml", "");
        const std::string verb = attach ? "attach" : "detach";
        run.progress(0, 1, attach ? "Hot-attaching XML device to VM " + vm : "Hot-detaching XML device from VM " + vm);
        std::string uuid = vm;
        if (vm.empty() || vm.find('/') != std::string::npos || !zk->exists(path("domain.name", {vm})))
            uuid = client::vm_by_name(*zk, vm).value_or("");
        if (uuid.empty()) throw services::TaskFailure("Could not find VM " + vm + " in the cluster");
        if (zk->get(path("domain.state", {uuid})).value_or("") != "start")
            throw services::TaskFailure("VM " + vm + " not in start state; hot-" + verb +
                                        " unnecessary or impossible");
        if (xml.empty()) throw services::TaskFailure("No device XML given");
        DomainHandle dom = lv.lookup(uuid);
        if (!dom) throw services::TaskFailure("Failed to find Libvirt object for VM " + vm);
        // The running domain only (libvirt's default for a running domain).
        int rc = attach ? virDomainAttachDevice(dom.get(), xml.c_str()) : virDomainDetachDevice(dom.get(), xml.c_str());
        if (rc < 0) throw services::TaskFailure(last_error());
        run.progress(1, 1, "Finishing up");
        return attach ? "Successfully hot-attached XML device to VM " + vm
                      : "Successfully hot-detached XML device from VM " + vm;
    };
}

}  // namespace pvc::hv
