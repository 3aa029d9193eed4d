// libnftables: one nft_ctx, owned, in the network
// namespace of the calling thread. A command buffer is one kernel
// transaction: it applies whole or not at all. Used by one thread at a time
// (the module's worker).
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

struct nft_ctx;

namespace pvc::network {

struct NftCtxDeleter { void operator()(nft_ctx*) const; };

class Nftables {
public:
    Nftables();  // throws std::runtime_error
    ~Nftables();
    Nftables(const Nftables&) = delete;
    Nftables& operator=(const Nftables&) = delete;

    struct Result {
        bool ok = false;
        std::string error;  // nft's message (with the offending line) when !ok
    };
    // Runs the commands in `text` as one transaction.
    Result run(const std::string& text);
    // Runs the commands of a file as one transaction; nft's messages then
    // name the file's line ("<file>:<line>:<columns>: Error: ...").
    Result run_file(const std::string& path);
    // Parses and checks `text` against the kernel without committing.
    Result check(const std::string& text);
    // A list command's output as JSON (with rule handles), e.g.
    // "list table inet filter"; null when nft refuses (e.g. no such table).
    nlohmann::json list(const std::string& command);

private:
    Result exec(const std::string& text);
    std::unique_ptr<nft_ctx, NftCtxDeleter> ctx_;
};

}  // namespace pvc::network
