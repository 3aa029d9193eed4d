// The node task routes (pvc/tasks.hpp; docs/wire-contract.md §3.10):
// GET /tasks and /tasks/<id> in the shapes the reference client reads
// (Celery's state names and progress fields), and the routes that queue a
// task and answer 202 with its id as the reference's did: POST /vm/<vm>/locks
// (vm.flush_locks) and POST|DELETE /vm/<vm>/device (vm.device_attach,
// vm.device_detach), each on the VM's node.
#include <libxml/parser.h>
#include <libxml/tree.h>

#include <memory>

#include "objects.hpp"
#include "pvc/schema.hpp"
#include "pvc/tasks.hpp"
#include "route_ctx.hpp"
#include "routes.hpp"

namespace pvc::api {

using schema::path;

namespace {

HttpResponse task_json(unsigned status, const Json& j) { return {status, "application/json", dump(j) + "\n", {}}; }
HttpResponse task_message(unsigned status, const std::string& text) {
    return task_json(status, Json{{"message", text}});
}

// The reference's 202: {"task_id", "task_name", "run_on"} and a Location.
HttpResponse accepted(const tasks::Queued& q) {
    Json j = Json::object();
    j["task_id"] = q.id;
    j["task_name"] = q.name;
    j["run_on"] = q.run_on;
    return {202, "application/json", dump(j) + "\n", {{"Location", "/api/v1/tasks/" + q.id}}};
}

// A device document: well-formed XML with one root element, no DOCTYPE (no
// entity expansion), no network access.
bool well_formed_device(const std::string& xml) {
    if (xml.empty() || xml.size() > 64 * 1024) return false;
    std::unique_ptr<xmlDoc, decltype(&xmlFreeDoc)> doc(
        xmlReadMemory(xml.data(), static_cast<int>(xml.size()), nullptr, nullptr,
                      XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING),
        &xmlFreeDoc);
    return doc && !doc->intSubset && xmlDocGetRootElement(doc.get());
}

}  // namespace

HttpResponse Api::task_list(Ctx&) { return task_json(200, Json(tasks::workers(*zk_))); }

HttpResponse Api::task_get(Ctx& c) { return task_json(200, Json(tasks::progress_body(tasks::progress(*zk_, c.args[0])))); }

// Queues `name` on the node of VM `vm` (a UUID known to exist).
HttpResponse Api::queue_vm_task(const std::string& name, const std::string& uuid, Json kwargs) {
    std::string node = read_key(path("domain.node", {uuid}));
    try {
        return accepted(tasks::submit(*zk_, name, node, nlohmann::json::parse(kwargs.dump())));
    } catch (const tasks::SubmitError& e) {
        return task_message(400, e.what());
    }
}

HttpResponse Api::vm_locks(Ctx& c) {
    auto uuid = find_vm(c, c.args[0]);
    if (!uuid) return task_message(404, "VM not found.");
    Json kwargs = Json::object();
    kwargs["domain"] = c.args[0];
    kwargs["force_unlock"] = false;
    return queue_vm_task("vm.flush_locks", *uuid, std::move(kwargs));
}

HttpResponse Api::vm_device(Ctx& c) {
    std::string xml = c.p("xml").value_or("");
    if (!well_formed_device(xml)) return task_message(400, "Specified XML document is not valid");
    auto uuid = find_vm(c, c.args[0]);
    if (!uuid) return task_message(404, "VM not found.");
    Json kwargs = Json::object();
    kwargs["domain"] = c.args[0];
    kwargs["xml"] = xml;
    return queue_vm_task(c.req.method == "DELETE" ? "vm.device_detach" : "vm.device_attach", *uuid,
                         std::move(kwargs));
}

}  // namespace pvc::api
