// The command tree of `pvc`: each add_* registers one top-level command
// (with its subcommands, help and examples) on the application.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include <CLI/CLI.hpp>

namespace pvc::cli {

void add_cluster_commands(CLI::App& app);
void add_node_commands(CLI::App& app);
void add_vm_commands(CLI::App& app);
void add_network_commands(CLI::App& app);
void add_storage_commands(CLI::App& app);
// `cluster task` and `vm flush-locks` (cmd_task.cpp): after cluster and vm.
void add_task_commands(CLI::App& app);
// `vm rename` (cmd_vm_rename.cpp): after vm.
void add_vm_rename_command(CLI::App& app);
// `vm backup create|restore|remove`, `vm autobackup`, `cluster backup|restore`
// (cmd_backup.cpp): after vm and cluster.
void add_backup_commands(CLI::App& app);
// `vm network add|remove`, `vm volume add|remove` (cmd_vm_device.cpp): after vm.
void add_vm_device_commands(CLI::App& app);
// `storage osd create-db-vg|add|replace|refresh|remove`, `storage benchmark` (cmd_osd.cpp): after storage.
void add_osd_commands(CLI::App& app);
void add_completion_command(CLI::App& app);

// Adds `--format table|json` to a read command, stored in `format` (a
// member of that command's own arguments).
void add_format_option(CLI::App* cmd, std::string& format);

// Polls `done` every `poll` until it returns true. Gives up with a Failure
// after --timeout seconds when one is set. `progress` (optional) is called
// each poll, to print what changed.
void wait_for(const std::string& what, const std::function<bool()>& done, std::chrono::milliseconds poll,
              const std::function<void()>& progress = {});

// Prints the last `lines` lines of the log text at `key`; `follow` keeps
// printing new lines until interrupted.
void show_log(const std::string& key, long lines, bool follow);

// The bash completion script for `app`.
std::string bash_completion(const CLI::App& app);

}  // namespace pvc::cli
