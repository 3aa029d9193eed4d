#include "nft.hpp"

#include <nftables/libnftables.h>

#include <stdexcept>

namespace pvc::network {

void NftCtxDeleter::operator()(nft_ctx* c) const { nft_ctx_free(c); }

Nftables::Nftables() : ctx_(nft_ctx_new(NFT_CTX_DEFAULT)) {
    if (!ctx_) throw std::runtime_error("nft_ctx_new failed");
    // Output and errors are kept for us, never printed.
    nft_ctx_buffer_output(ctx_.get());
    nft_ctx_buffer_error(ctx_.get());
}

Nftables::~Nftables() = default;

Nftables::Result Nftables::exec(const std::string& text) {
    Result r;
    r.ok = nft_run_cmd_from_buffer(ctx_.get(), text.c_str()) == 0;
    // Reading the buffers also empties them for the next command.
    const char* err = nft_ctx_get_error_buffer(ctx_.get());
    (void)nft_ctx_get_output_buffer(ctx_.get());
    if (!r.ok) r.error = err && *err ? err : "nft refused the commands (no message)";
    while (!r.error.empty() && r.error.back() == '\n') r.error.pop_back();
    return r;
}

Nftables::Result Nftables::run(const std::string& text) {
    nft_ctx_set_dry_run(ctx_.get(), false);
    return exec(text);
}

Nftables::Result Nftables::run_file(const std::string& path) {
    nft_ctx_set_dry_run(ctx_.get(), false);
    Result r;
    r.ok = nft_run_cmd_from_filename(ctx_.get(), path.c_str()) == 0;
    const char* err = nft_ctx_get_error_buffer(ctx_.get());
    (void)nft_ctx_get_output_buffer(ctx_.get());
    if (!r.ok) r.error = err && *err ? err : "nft refused the commands (no message)";
    while (!r.error.empty() && r.error.back() == '\n') r.error.pop_back();
    return r;
}

Nftables::Result Nftables::check(const std::string& text) {
    nft_ctx_set_dry_run(ctx_.get(), true);
    Result r = exec(text);
    nft_ctx_set_dry_run(ctx_.get(), false);
    return r;
}

nlohmann::json Nftables::list(const std::string& command) {
    unsigned flags = nft_ctx_output_get_flags(ctx_.get());
    nft_ctx_output_set_flags(ctx_.get(), flags | NFT_CTX_OUTPUT_JSON | NFT_CTX_OUTPUT_HANDLE);
    nft_ctx_set_dry_run(ctx_.get(), false);
    int rc = nft_run_cmd_from_buffer(ctx_.get(), command.c_str());
    std::string out = nft_ctx_get_output_buffer(ctx_.get());
    (void)nft_ctx_get_error_buffer(ctx_.get());
    nft_ctx_output_set_flags(ctx_.get(), flags);
    if (rc != 0 || out.empty()) return nullptr;
    return nlohmann::json::parse(out, nullptr, false);
}

}  // namespace pvc::network
