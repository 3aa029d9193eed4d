// Network namespaces for the network module's tests (root only): named
// namespaces made with iproute2, removed by their owner, and a guard that
// moves the calling thread into one and back.
#pragma once

#include <string>
#include <vector>

namespace pvc::network::test {

// Runs argv (no shell); {exit status, stdout+stderr}.
struct Result {
    int status = -1;
    std::string out;
};
Result run(const std::vector<std::string>& argv);
// Runs argv and throws with its output if it fails.
std::string must(const std::vector<std::string>& argv);

// A named namespace ("ip netns add"), deleted by the destructor.
class Netns {
public:
    explicit Netns(std::string name);
    ~Netns();
    Netns(const Netns&) = delete;
    Netns& operator=(const Netns&) = delete;
    const std::string& name() const { return name_; }
    // argv run inside it (ip netns exec).
    Result exec(const std::vector<std::string>& argv) const;
    std::string must_exec(const std::vector<std::string>& argv) const;

private:
    std::string name_;
};

// Moves the calling thread into `ns` (setns) until destroyed. Sockets and
// children it creates meanwhile live in `ns`.
class InNetns {
public:
    explicit InNetns(const std::string& ns);
    ~InNetns();
    InNetns(const InNetns&) = delete;
    InNetns& operator=(const InNetns&) = delete;

private:
    int home_ = -1;
};

// A prefix for this test process's namespace and link names (short: IFNAMSIZ).
std::string ns_prefix();

}  // namespace pvc::network::test
