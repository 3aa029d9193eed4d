#!/usr/bin/python3
"""Fails when a file of the repository names a file the repository lacks.

    check_file_names.py <source dir>
    check_file_names.py --self-test

Scans every file git tracks or would track (or, without git, every file below
the source dir except build*/ and .git) and reports, as `file:line: problem`:

  - a Markdown file name (`<name>.md`, `docs/<name>.md`) or Python file name
    (`<name>.py`, `<dir>/<name>.py`) that resolves to no tracked file;
  - a relative path whose first component is a top-level folder of the
    repository (`core/...`, `tools/<script>.sh`, `docs/<name>.md`) that names no
    tracked file or folder; such a path resolves against the repository root, the
    naming file's folder or any folder above it, and may end without its
    extension (a test named by its source file's stem) or hold wildcards
    (`*`, `<name>`, `{a,b}`);
  - a section sign not preceded (same line or the three before) by the
    Markdown file it refers to (in a Markdown file, a section sign alone
    refers to that file), or a section that file does not have
    (`docs/<name>.md` and a section sign with 3 need a heading numbered 3
    in that file);
  - a name of the reference project's specification files, which are no part
    of this repository (see SPEC_NAMES), its deviation/question markers, or a
    path of the machine the code was written on.

Absolute paths (`/etc/pvc/pvcnoded.yaml`) and installed-system paths relative
to / (`usr/share/...`), URLs, build outputs (`.so`, what .gitignore names) and
names that are a whole string literal of code (a file made at run time) are
not repository paths and are left alone. Exits 1 with the list when anything
is found, 0 otherwise.
"""

import fnmatch
import os
import re
import subprocess
import sys

# The reference project's specification, kept outside the repository: its
# file names, its spec folder, its markers, and the machine's work folders.
# Written so that this file does not match itself.
SPEC_NAMES = re.compile(
    r"(?<![\w./-])(?:DESIG[N]|node-lifecycle|hypervisor|network|storage|api|api-manage"
    r"|cluster-state|health-plugins)\.md\b"
    r"|(?<![\w./-])spec[/]"
    r"|(?<![\w-])shared[/]"
    r"|\[(?:DEV|Q)\]"
    r"|\bDESIG[N]\b"
    r"|(?<![\w.-])/work[/]")

# Paths inside the fake source trees that tests/unit/module_boundary_test.cpp
# builds in a temporary folder: they name files of that tree, not of ours.
SYNTHETIC = re.compile(r"^modules/(?:alpha|beta)/")

# Install lists name paths of the installed system, relative to /.
INSTALL_LISTS = re.compile(r"^debian/[^/]*\.(?:dirs|install|links|docs)$")

# Paths of an installed system written relative to / (package contents,
# install lists): `usr/share/...`, `lib/systemd/...`.
SYSTEM_PATH = re.compile(r"^(?:usr|lib|lib64|var|opt|run|srv|bin|sbin|boot|proc|sys|dev)/")

ARTIFACT = re.compile(r"\.(?:so|a|o)(?:\.\d+)*$")
URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+")
SECTION = "\u00a7"
SECTION_REF = re.compile(SECTION + r"\s*(\d+(?:\.\d+)*)")
HEADING_NUMBER = re.compile(r"^#+\s+" + SECTION + r"?\s*(\d+(?:\.\d+)*)[.):]?\s")
FILE_NAME = re.compile(r"(?<![\w./~$@-])((?:[\w.+-]+/)*[\w+-][\w.+-]*\.(?:md|py))\b(?![\w/-])")
EXTENSIONS = ("", ".cpp", ".hpp", ".h", ".c", ".py", ".sh", ".cmake", ".md", ".txt", ".yaml")


def tracked_files(root):
    try:
        # Tracked files and new ones not yet added (but not what .gitignore
        # names), so a file being written counts before its first commit.
        out = subprocess.run(["git", "-C", root, "ls-files", "-z", "--cached", "--others",
                              "--exclude-standard"], check=True, capture_output=True).stdout.decode()
        files = sorted({f for f in out.split("\0") if f})
        if files:
            return [f for f in files if os.path.isfile(os.path.join(root, f))]
    except (OSError, subprocess.CalledProcessError):
        pass
    files = []
    for base, dirs, names in os.walk(root):
        rel = os.path.relpath(base, root)
        dirs[:] = [d for d in dirs if d != ".git" and not (rel == "." and d.startswith("build"))]
        files += [os.path.normpath(os.path.join(rel, n)) for n in names]
    return files


class Repository:
    def __init__(self, root):
        self.root = root
        self.files = set(tracked_files(root))
        self.dirs = set()
        for f in self.files:
            d = os.path.dirname(f)
            while d and d not in self.dirs:
                self.dirs.add(d)
                d = os.path.dirname(d)
        self.paths = sorted(self.files | self.dirs)
        self.basenames = {os.path.basename(f) for f in self.files}
        self.top = sorted({p.split("/")[0] for p in self.dirs if "/" not in p} | {"docs"})
        self.top_path = re.compile(r"(?<![\w./~$@<>-])((?:" + "|".join(map(re.escape, self.top))
                                   + r")/[\w./+*<>{},-]*)")
        self.sections = {}
        self.ignore = []
        try:
            with open(os.path.join(root, ".gitignore"), encoding="utf-8") as f:
                for line in f:
                    line = line.strip()
                    if line and not line.startswith(("#", "!")):
                        self.ignore.append((line.startswith("/"), line.strip("/")))
        except OSError:
            pass

    def ignored(self, rel):
        """Whether `rel` is something .gitignore names: a build output, never tracked."""
        parts = os.path.normpath(rel).split("/")
        prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
        for anchored, pattern in self.ignore:
            if anchored and any(fnmatch.fnmatchcase(p, pattern) for p in prefixes):
                return True
            if not anchored and any(fnmatch.fnmatchcase(c, pattern) for c in parts):
                return True
        return False

    def exists(self, rel):
        rel = os.path.normpath(rel)
        if any(ch in rel for ch in "*<{"):
            pattern = re.sub(r"<[^>/]*>", "*", rel)
            pattern = re.sub(r"\{([^}/]*)\}", lambda m: "[" + "".join(
                sorted({c for alt in m.group(1).split(",") for c in alt[:1]})) + "]*", pattern)
            return any(fnmatch.fnmatchcase(p, pattern) for p in self.paths)
        return any(rel + ext in self.files for ext in EXTENSIONS) or rel in self.dirs

    def resolve(self, name, where):
        """The tracked path `name` stands for when written in file `where`, or None."""
        name = name.rstrip("/")
        if "/" not in name and not any(ch in name for ch in "*<{"):
            if name in self.basenames:
                return next(f for f in sorted(self.files) if os.path.basename(f) == name)
        base = os.path.dirname(where)
        while True:
            rel = os.path.normpath(os.path.join(base, name))
            if not rel.startswith("..") and self.exists(rel):
                return rel
            if not base:
                return None
            base = os.path.dirname(base)

    def section_numbers(self, md):
        if md not in self.sections:
            numbers = set()
            try:
                with open(os.path.join(self.root, md), encoding="utf-8", errors="replace") as f:
                    fence = False
                    for line in f:
                        if line.startswith("```"):
                            fence = not fence
                        m = None if fence else HEADING_NUMBER.match(line)
                        if m:
                            numbers.add(m.group(1))
            except OSError:
                pass
            self.sections[md] = numbers
        return self.sections[md]


def runtime_name(line, start, end):
    """A name that is a whole string literal of code (`"plugin.py"`): a file the
    code writes or reads at run time (in a temporary folder, a build folder),
    not a citation."""
    return start > 0 and end < len(line) and line[start - 1] == '"' and line[end] == '"'


def check_file(repo, rel, problems):
    path = os.path.join(repo.root, rel)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return
    if b"\0" in data:
        return
    lines = data.decode("utf-8", errors="replace").splitlines()
    install_list = bool(INSTALL_LISTS.match(rel))
    for number, raw in enumerate(lines, 1):
        line = URL.sub(" ", raw)

        def report(what):
            problems.append(f"{rel}:{number}: {what}")

        for m in SPEC_NAMES.finditer(line):
            report(f"names '{m.group(0)}', which is not part of this repository")

        seen = set()
        for m in FILE_NAME.finditer(line):
            name = m.group(1)
            seen.add(m.start(1))
            if runtime_name(line, m.start(1), m.end(1)):
                continue
            if SYNTHETIC.match(name) or SPEC_NAMES.fullmatch(name) or (
                    SYSTEM_PATH.match(name) and name.split("/")[0] not in repo.top):
                continue
            if repo.resolve(name, rel) is None:
                report(f"names '{name}', which the repository lacks")

        if not install_list:
            for m in repo.top_path.finditer(line):
                name = m.group(1).rstrip(".,:;)'\"`")
                if m.start(1) in seen or SYNTHETIC.match(name) or ARTIFACT.search(name) or repo.ignored(name) \
                        or runtime_name(line, m.start(1), m.start(1) + len(name)):
                    continue
                if repo.resolve(name, rel) is None:
                    report(f"names '{name}', which the repository lacks")

        for m in SECTION_REF.finditer(line):
            before = " ".join(lines[max(0, number - 4):number - 1] + [line[:m.start()]])
            cited = [c.group(1) for c in FILE_NAME.finditer(URL.sub(" ", before))
                     if c.group(1).endswith(".md")]
            if not cited and rel.endswith(".md"):
                cited = [rel]  # in a Markdown file, a bare section is one of its own
            if not cited:
                report(f"'{SECTION}{m.group(1)}' names no file of the repository it belongs to")
                continue
            md = repo.resolve(cited[-1], rel)
            if md is None:
                continue  # already reported as a missing file
            numbers = repo.section_numbers(md)
            if m.group(1) not in numbers:
                report(f"'{cited[-1]} {SECTION}{m.group(1)}': {md} has no section {m.group(1)}")


def self_test():
    """The checker against a small tree with known good and bad lines. The
    fixture's names are assembled so that this file itself stays clean."""
    import tempfile
    md, py, sec = ".md", ".py", SECTION
    tree = {
        "manual/guide" + md: "# Guide\n## 1. Intro\n### 1.1 More\n",
        "lib/a.cpp": "\n".join([
            "// (" + sec + "4.2)",                                       # 1 bare section
            "// manual/guide" + md + " " + sec + "1.1 and " + sec + "1", # 2 good
            "// network" + md,                                           # 3 spec name
            "// [" + "DEV] a marker",                                    # 4 marker
            "// lib/run.sh",                                             # 5 missing path
            "// /etc/pvc/pvcnoded.yaml, https://example.org/x" + md,     # 6 good: absolute path, URL
            "// lib/a.cpp, lib/<name>.cpp, lib/a, manual/*" + md,        # 7 good: exists, wildcards, stem
            "// manual/guide" + md + " " + sec + "2",                    # 8 section missing
            "// objects/VMInstance" + py,                                # 9 missing Python file
            "auto p = dir / \"lib/libx.so\";",                          # 10 good: a build output
            "// lib/gen/x.h",                                            # 11 good: .gitignore names it
            "f = tmp / \"plugin" + py + "\";",                           # 12 good: a file made at run time
            "mkpkg usr/share/pvc/x" + py,                               # 13 good: a path of an installed system
            "# see DESIG" + "N layout",                                  # 14 the design notes, without .md
        ]) + "\n",
        ".gitignore": "/lib/gen/\n",
        "README" + md: "See " + sec + "1 here (none: README has no numbered section).\n",
    }
    expected = {("lib/a.cpp", n) for n in (1, 3, 4, 5, 8, 9, 14)} | {("README" + md, 1)}
    with tempfile.TemporaryDirectory() as root:
        for rel, text in tree.items():
            os.makedirs(os.path.join(root, os.path.dirname(rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w", encoding="utf-8") as f:
                f.write(text)
        repo = Repository(root)
        problems = []
        for rel in sorted(repo.files):
            check_file(repo, rel, problems)
    found = {(p.split(":")[0], int(p.split(":")[1])) for p in problems}
    if found != expected:
        print("self-test failed; problems found:", *problems, sep="\n  ", file=sys.stderr)
        print("expected lines:", sorted(expected), file=sys.stderr)
        return 1
    print(f"self-test passed ({len(problems)} problems found where expected)", file=sys.stderr)
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    repo = Repository(os.path.abspath(sys.argv[1]))
    problems = []
    for rel in sorted(repo.files):
        check_file(repo, rel, problems)
    for p in problems:
        print(p)
    print(f"{len(repo.files)} files checked, {len(problems)} problems", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
