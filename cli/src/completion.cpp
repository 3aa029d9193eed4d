// pvc completion bash: a completion script generated from the command tree,
// so it always matches the commands and options this binary has.
#include <iostream>
#include <memory>
#include <sstream>

#include "commands.hpp"
#include "pvc/strings.hpp"

namespace pvc::cli {
namespace {

void walk(const CLI::App& app, const std::string& path, std::ostringstream& table) {
    std::vector<std::string> words;
    for (const auto* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
        words.push_back(sub->get_name());
        for (const auto& alias : sub->get_aliases()) words.push_back(alias);
    }
    for (const auto* opt : app.get_options()) {
        for (const auto& l : opt->get_lnames()) words.push_back("--" + l);
        for (const auto& s : opt->get_snames()) words.push_back("-" + s);
    }
    table << "    [\"" << path << "\"]=\"" << pvc::join(words, " ") << "\"\n";
    for (const auto* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
        walk(*sub, path + " " + sub->get_name(), table);
        for (const auto& alias : sub->get_aliases()) walk(*sub, path + " " + alias, table);
    }
}

}  // namespace

std::string bash_completion(const CLI::App& app) {
    std::ostringstream table;
    walk(app, "", table);
    std::ostringstream s;
    s << "# bash completion for pvc; load with: source <(pvc completion bash)\n"
         "_pvc() {\n"
         "    local cur=\"${COMP_WORDS[COMP_CWORD]}\" path=\"\" i w\n"
         "    declare -A words=(\n"
      << table.str()
      << "    )\n"
         "    for ((i = 1; i < COMP_CWORD; i++)); do\n"
         "        w=\"${COMP_WORDS[i]}\"\n"
         "        [[ \"$w\" == -* ]] && continue\n"
         "        [[ -n \"${words[\"$path $w\"]+x}\" ]] && path=\"$path $w\"\n"
         "    done\n"
         "    case \"$path\" in\n"
         "        \" vm define\"|\" vm modify\") COMPREPLY=($(compgen -f -- \"$cur\")) ;;\n"
         "    esac\n"
         "    COMPREPLY+=($(compgen -W \"${words[\"$path\"]}\" -- \"$cur\"))\n"
         "}\n"
         "complete -F _pvc pvc\n";
    return s.str();
}

void add_completion_command(CLI::App& app) {
    auto* comp = app.add_subcommand("completion", "Print a shell completion script");
    auto shell = std::make_shared<std::string>();
    comp->add_option("shell", *shell, "Shell (bash)")->required()->check(CLI::IsMember({"bash"}));
    comp->footer("Examples:\n  source <(pvc completion bash)\n  pvc completion bash > /etc/bash_completion.d/pvc");
    comp->callback([&app, shell] { std::cout << bash_completion(app); });
}

}  // namespace pvc::cli
