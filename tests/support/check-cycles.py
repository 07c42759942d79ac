#!/usr/bin/env python3
"""Import cycles between the files, and between the folders, of each crate: fails when file
A uses file B and B, directly or through others, uses A; or when two modules of one parent,
one of them a folder (a module with modules of its own), use each other so (`data/` uses
`train/` and `train/` uses `data/`, through any of their files).

Usage: tests/support/check-cycles.py [CRATE_DIR...]   (default: every crates/*/ with a src/)

For each crate root (src/lib.rs, src/main.rs, src/bin/*.rs, src/bin/*/main.rs) the module
tree is read from the `mod` declarations (with `#[path]`) and inline `mod x { ... }`
blocks. A file depends on another when it names an item or module of it:
  - a `use` of `crate::…`, `super::…`, `self::…` or a path through a child module or an
    imported name (2018 paths), and
  - a path in code starting the same way (`crate::a::f()`, `super::b::T`, `child::g()`).
A path is resolved to the file that defines its module; a name a module imports or
re-exports (`pub use x::Y`) is followed to the file Y comes from, and when Y comes from
another crate the edge ends at the re-exporting file. A re-export (`pub use`, any `pub(…)`)
is itself an edge of the re-exporting file only if that file also uses the name in its
own code: a module that re-exports its child's items is not thereby a user of the child.
`mod x;` alone is no edge (a parent declaring a child does not use it).

Test-only code does not count (it is not architecture): items under `#[cfg(test)]` (or
`cfg(all(test, …))`), `#![cfg(test)]` files and modules declared under them. Comments,
doc links and string literals are ignored, and so are macro bodies' `$crate::` paths.

Each strongly connected component of more than one file, or of sibling modules, is printed
with the `use`s (file:line) that form it; exit status 1 when there is one, 0 otherwise. Standard library only.
"""

import os
import re
import sys
from collections import defaultdict

# ---------------------------------------------------------------------------------------
# Tokens


class Tok:
    __slots__ = ("kind", "text", "line")

    def __init__(self, kind, text, line):
        self.kind = kind  # "ident", "punct", "lit" (text: a plain string's), "life"
        self.text = text
        self.line = line

    def __repr__(self):
        return f"{self.text}@{self.line}"


_IDENT_START = re.compile(r"[A-Za-z_]")
_IDENT = re.compile(r"[A-Za-z0-9_]*")
_NUMBER = re.compile(r"[0-9][A-Za-z0-9_]*(?:\.[0-9][A-Za-z0-9_]*)?")
_RAW_STRING = re.compile(r'(?:br|cr|r)(#*)"')


def tokenize(src):
    """Rust source → tokens, without comments; literals become one "lit" token."""
    toks = []
    i, n, line = 0, len(src), 1
    while i < n:
        c = src[i]
        if c == "\n":
            line += 1
            i += 1
        elif c.isspace():
            i += 1
        elif src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            line += src.count("\n", i, j)
            i = j
        elif (m := _RAW_STRING.match(src, i)) and (
            i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")
        ):
            end = '"' + m.group(1)
            j = src.find(end, m.end())
            j = n if j < 0 else j + len(end)
            toks.append(Tok("lit", "", line))
            line += src.count("\n", i, j)
            i = j
        elif c == '"' or (c in "bc" and src.startswith('"', i + 1)):
            j = i + (1 if c == '"' else 2)
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            j += 1
            toks.append(Tok("lit", src[i + (1 if c == '"' else 2) : j - 1], line))
            line += src.count("\n", i, j)
            i = j
        elif c == "'" or (c == "b" and src.startswith("'", i + 1)):
            j = i + (1 if c == "'" else 2)
            if j < n and src[j] == "\\":  # an escaped char literal
                k = j + 2
                while k < n and src[k] != "'":
                    k += 1
                toks.append(Tok("lit", "", line))
                i = k + 1
            elif j + 1 < n and src[j + 1] == "'":  # 'x'
                toks.append(Tok("lit", "", line))
                i = j + 2
            else:  # a lifetime or label
                m = _IDENT.match(src, j)
                toks.append(Tok("life", src[j : m.end()], line))
                i = m.end()
        elif src.startswith("r#", i) and i + 2 < n and _IDENT_START.match(src[i + 2]):
            m = _IDENT.match(src, i + 2)
            toks.append(Tok("ident", src[i + 2 : m.end()], line))
            i = m.end()
        elif _IDENT_START.match(c) or ord(c) > 127 and c.isalpha():
            m = _IDENT.match(src, i + 1)
            toks.append(Tok("ident", src[i : m.end()], line))
            i = m.end()
        elif c.isdigit():
            m = _NUMBER.match(src, i)
            toks.append(Tok("lit", "", line))
            i = m.end()
        elif src.startswith("::", i):
            toks.append(Tok("punct", "::", line))
            i += 2
        else:
            toks.append(Tok("punct", c, line))
            i += 1
    return toks


# ---------------------------------------------------------------------------------------
# One file's structure


def cfg_test_only(attr):
    """Whether an attribute's tokens are `cfg(P)` with P true only under test."""
    if not attr or attr[0].text != "cfg" or len(attr) < 3 or attr[1].text != "(":
        return False
    pos = [2]

    def pred():
        t = attr[pos[0]]
        pos[0] += 1
        if t.kind == "ident" and pos[0] < len(attr) and attr[pos[0]].text == "(":
            pos[0] += 1
            args = []
            while pos[0] < len(attr) and attr[pos[0]].text != ")":
                if attr[pos[0]].text == ",":
                    pos[0] += 1
                    continue
                args.append(pred())
            pos[0] += 1
            if t.text == "all":
                return any(args)
            if t.text == "any":
                return bool(args) and all(args)
            return False  # not(…) and the rest
        if pos[0] < len(attr) and attr[pos[0]].text == "=":  # feature = "x"
            pos[0] += 2
            return False
        return t.kind == "ident" and t.text == "test"

    try:
        return pred()
    except IndexError:
        return False


class Use:
    """One name a `use` binds: `segments` (as written), bound as `name` (None for a glob)."""

    __slots__ = ("scope", "segments", "name", "glob", "public", "line", "file")

    def __init__(self, scope, segments, name, glob, public, line, file):
        self.scope, self.segments, self.name, self.glob = scope, segments, name, glob
        self.public, self.line, self.file = public, line, file


class FileInfo:
    def __init__(self, path, module):
        self.path = path
        self.module = module  # tuple of names from the crate root
        self.mods = []  # (scope, name, path attribute or None, line)
        self.uses = []  # [Use]
        self.code_paths = []  # (scope, segments, line)
        self.items = defaultdict(set)  # scope → names of items defined there
        self.code_idents = set()  # identifiers of non-test code outside `use`
        self.inline = set()  # scopes of inline modules (besides `module`)


def parse_use_tree(toks, i, prefix, out):
    """Parses a use tree at toks[i]; appends (segments, name, glob) to out; returns the
    index after it."""
    segs = list(prefix)
    if i < len(toks) and toks[i].text == "::":  # a leading `::`: another crate
        segs.append("::")
        i += 1
    while i < len(toks):
        t = toks[i]
        if t.text == "{":
            i += 1
            while i < len(toks) and toks[i].text != "}":
                if toks[i].text == ",":
                    i += 1
                    continue
                i = parse_use_tree(toks, i, segs, out)
            return i + 1
        if t.text == "*":
            out.append((segs, None, True))
            return i + 1
        if t.kind != "ident":
            return i
        if t.text == "self" and segs:  # `a::{self, …}`
            name = segs[-1]
            i += 1
            if i + 1 < len(toks) and toks[i].text == "as":
                name = toks[i + 1].text
                i += 2
            out.append((list(segs), name, False))
            return i
        segs.append(t.text)
        i += 1
        if i < len(toks) and toks[i].text == "::":
            i += 1
            continue
        name = segs[-1]
        if i + 1 < len(toks) and toks[i].text == "as":
            name = toks[i + 1].text
            i += 2
        out.append((segs, None if name == "_" else name, False))
        return i
    return i


def skip_item(toks, i):
    """The index after the item starting at toks[i] (ends at `;` or its body's `}`)."""
    depth = 0
    while i < len(toks):
        t = toks[i].text
        if t in "([":
            depth += 1
        elif t in ")]":
            depth -= 1
        elif t == ";" and depth == 0:
            return i + 1
        elif t == "{" and depth == 0:
            return match_brace(toks, i) + 1
        i += 1
    return i


def match_brace(toks, i):
    depth = 0
    while i < len(toks):
        if toks[i].text == "{":
            depth += 1
        elif toks[i].text == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return i


ITEM_KEYWORDS = {"fn", "struct", "enum", "trait", "type", "const", "static", "union"}
PATH_STARTS = {"crate", "super", "self"}


def scan_file(info, toks):
    """Fills `info` from the file's tokens."""
    # scopes: ("mod", module path) or ("block", None); the file itself is a module scope.
    stack = [("mod", info.module)]
    attrs = []  # attributes of the item about to start
    i = 0

    def scope():
        for kind, path in reversed(stack):
            if kind == "mod":
                return path
        return info.module

    # `#![cfg(test)]` at the top: the whole file is test code.
    while i + 1 < len(toks) and toks[i].text == "#" and toks[i + 1].text == "!":
        end = i + 3
        depth = 1
        while end < len(toks) and depth:
            depth += {"[": 1, "]": -1}.get(toks[end].text, 0)
            end += 1
        if cfg_test_only(toks[i + 3 : end - 1]):
            return
        i = end

    while i < len(toks):
        t = toks[i]
        text = t.text
        if text == "#" and i + 1 < len(toks) and toks[i + 1].text in ("[", "!"):
            start = i + (2 if toks[i + 1].text == "[" else 3)
            depth, end = 1, start
            while end < len(toks) and depth:
                depth += {"[": 1, "]": -1}.get(toks[end].text, 0)
                end += 1
            attrs.append(toks[start : end - 1])
            i = end
            continue
        if attrs and any(cfg_test_only(a) for a in attrs):
            attrs = []
            i = skip_item(toks, i)
            continue
        item_attrs, attrs = attrs, []
        if text == "{":
            at_module = stack[-1][0] == "mod"
            # `mod name {`: an inline module.
            if at_module and i >= 2 and toks[i - 2].text == "mod" and toks[i - 1].kind == "ident":
                path = scope() + (toks[i - 1].text,)
                info.inline.add(path)
                stack.append(("mod", path))
            else:
                stack.append(("block", None))
            i += 1
            continue
        if text == "}":
            if len(stack) > 1:
                stack.pop()
            i += 1
            continue
        if t.kind != "ident":
            i += 1
            continue
        module_level = stack[-1][0] == "mod"
        if text == "mod" and i + 2 < len(toks) and toks[i + 1].kind == "ident":
            if toks[i + 2].text == ";":
                path_attr = None
                for a in item_attrs:
                    if len(a) >= 3 and a[0].text == "path" and a[1].text == "=":
                        path_attr = a[2].text
                info.mods.append((scope(), toks[i + 1].text, path_attr, t.line))
                i += 3
                continue
            i += 1  # the `{` that follows opens the inline module
            continue
        if text == "use" and (i == 0 or toks[i - 1].text not in ("::", ".")):
            public = False
            j = i - 1
            if j >= 0 and toks[j].text == ")":  # pub(crate), pub(super), pub(in …)
                while j >= 0 and toks[j].text != "(":
                    j -= 1
                j -= 1
            if j >= 0 and toks[j].text == "pub":
                public = True
            out = []
            end = parse_use_tree(toks, i + 1, [], out)
            for segs, name, glob in out:
                info.uses.append(Use(scope(), segs, name, glob, public, t.line, info.path))
            while end < len(toks) and toks[end].text != ";":
                end += 1
            i = end + 1
            continue
        if module_level and text in ITEM_KEYWORDS and i + 1 < len(toks):
            nxt = toks[i + 1]
            if nxt.kind == "ident" and nxt.text not in ("fn", "mut"):
                info.items[scope()].add(nxt.text)
            elif nxt.text == "mut" and i + 2 < len(toks):
                info.items[scope()].add(toks[i + 2].text)
        if text == "macro_rules" and i + 2 < len(toks) and toks[i + 1].text == "!":
            info.items[scope()].add(toks[i + 2].text)
        # A path in code: `a::b…` not inside another path, not `$crate`.
        info.code_idents.add(text)
        prev = toks[i - 1].text if i else ""
        if (
            i + 2 < len(toks)
            and toks[i + 1].text == "::"
            and toks[i + 2].kind == "ident"
            and prev not in ("::", "$", ".")
        ):
            segs = [text]
            j = i + 1
            while j + 1 < len(toks) and toks[j].text == "::" and toks[j + 1].kind == "ident":
                segs.append(toks[j + 1].text)
                j += 2
            info.code_paths.append((scope(), segs, t.line))
            for s in segs[1:]:
                info.code_idents.add(s)
            i = j
            continue
        i += 1


# ---------------------------------------------------------------------------------------
# A crate: its module tree and the edges between its files


class Crate:
    def __init__(self, root_file):
        self.root_file = root_file
        self.files = {}  # path → FileInfo
        self.module_file = {}  # module path → file path
        self.children = defaultdict(dict)  # module path → {name: module path}
        self.uses_in = defaultdict(list)  # module path → [Use]
        self.items = defaultdict(set)  # module path → names
        self._load(root_file, ())

    def _load(self, path, module):
        if path in self.files or not os.path.isfile(path):
            return
        with open(path, encoding="utf-8") as f:
            src = f.read()
        info = FileInfo(path, module)
        scan_file(info, tokenize(src))
        self.files[path] = info
        self.module_file[module] = path
        for inline in info.inline:
            self.module_file[inline] = path
            self.children[inline[:-1]][inline[-1]] = inline
        for u in info.uses:
            self.uses_in[u.scope].append(u)
        for scope, names in info.items.items():
            self.items[scope] |= names
        base = os.path.basename(path)
        if base in ("lib.rs", "main.rs", "mod.rs") or module == ():
            folder = os.path.dirname(path)
        else:
            folder = os.path.join(os.path.dirname(path), base[: -len(".rs")])
        for scope, name, path_attr, _line in info.mods:
            child = scope + (name,)
            self.children[scope][name] = child
            sub = folder
            for part in scope[len(module) :]:  # inline modules nest folders
                sub = os.path.join(sub, part)
            if path_attr is not None:
                base_dir = os.path.dirname(path) if scope == module else sub
                candidates = [os.path.join(base_dir, path_attr)]
            else:
                candidates = [os.path.join(sub, name + ".rs"), os.path.join(sub, name, "mod.rs")]
            for c in candidates:
                if os.path.isfile(c):
                    self._load(os.path.normpath(c), child)
                    break

    def binding(self, module, name):
        """The `use` in `module` that binds `name`, if any."""
        for u in self.uses_in.get(module, ()):
            if u.name == name and not u.glob:
                return u
        return None

    def resolve(self, scope, segments, seen=None):
        """The file a path written in module `scope` leads to, or None (another crate)."""
        seen = set() if seen is None else seen
        key = (scope, tuple(segments))
        if key in seen or not segments:
            return None
        seen.add(key)
        first, rest = segments[0], list(segments[1:])
        if first == "::":
            return None
        if first == "crate":
            node = ()
        elif first == "self":
            node = scope
        elif first == "super":
            node = scope[:-1]
            while rest and rest[0] == "super":
                node, rest = node[:-1], rest[1:]
        elif first in self.children.get(scope, {}):
            node = self.children[scope][first]
        else:
            u = self.binding(scope, first)
            if u is None:
                return None  # another crate, a prelude name, a local
            return self._through(u, rest, seen)
        return self._walk(node, rest, seen)

    def _through(self, use, rest, seen):
        """Follows a `use` binding, then `rest` from what it names."""
        target = self.resolve(use.scope, use.segments, seen)
        if target is None:
            return None
        if isinstance(target, tuple):  # a module
            return self._walk(target, rest, seen)
        return target  # an item's file: what follows are its members

    def _walk(self, node, rest, seen):
        for k, name in enumerate(rest):
            if name in self.children.get(node, {}):
                node = self.children[node][name]
                continue
            if name in self.items.get(node, ()):
                return self.module_file.get(node)
            u = self.binding(node, name)
            if u is not None:
                target = self._through(u, rest[k + 1 :], seen)
                # Another crate's item re-exported here: the edge ends at this file.
                return target if target is not None else self.module_file.get(node)
            for g in self.uses_in.get(node, ()):
                if g.glob:
                    module = self.resolve(g.scope, g.segments, seen)
                    if isinstance(module, tuple):
                        found = self._walk(module, rest[k:], set(seen))
                        if found is not None and name in self.items.get(
                            self._module_of(found), ()
                        ):
                            return found
            return self.module_file.get(node)
        return node  # a module

    def _module_of(self, path):
        return self.files[path].module if path in self.files else None

    def file_of(self, target):
        if target is None:
            return None
        if isinstance(target, tuple):
            return self.module_file.get(target)
        return target

    def edges(self):
        """[(from file, to file, line, path text)] between different files."""
        out = []
        for info in self.files.values():
            for u in info.uses:
                if u.public and not u.glob and u.name not in info.code_idents:
                    continue  # a re-export the file does not itself use
                if u.public and u.glob:
                    continue
                to = self.file_of(self.resolve(u.scope, u.segments))
                if to is not None and to != info.path:
                    text = "use " + "::".join(u.segments) + ("::*" if u.glob else "")
                    out.append((info.path, to, u.line, text))
            for scope, segs, line in info.code_paths:
                to = self.file_of(self.resolve(scope, segs))
                if to is not None and to != info.path:
                    out.append((info.path, to, line, "::".join(segs)))
        return out


def crate_roots(crate_dir):
    src = os.path.join(crate_dir, "src")
    roots = [os.path.join(src, f) for f in ("lib.rs", "main.rs")]
    bin_dir = os.path.join(src, "bin")
    if os.path.isdir(bin_dir):
        for entry in sorted(os.listdir(bin_dir)):
            full = os.path.join(bin_dir, entry)
            roots.append(full if entry.endswith(".rs") else os.path.join(full, "main.rs"))
    return [os.path.normpath(r) for r in roots if os.path.isfile(r)]


def strongly_connected(nodes, succ):
    """Tarjan's algorithm, iterative: the components, each a sorted list."""
    index, low, on_stack, stack, comps = {}, {}, set(), [], []
    counter = [0]
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(sorted(succ.get(start, ()))))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(succ.get(w, ())))))
                    advanced = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                comps.append(sorted(comp))
    return comps


def shortest_cycle(start, succ, members):
    """A shortest cycle through `start` inside `members`, as a list of files."""
    from collections import deque

    prev = {start: None}
    queue = deque([start])
    while queue:
        v = queue.popleft()
        for w in sorted(succ.get(v, ())):
            if w not in members:
                continue
            if w == start:
                path = [v]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                return list(reversed(path)) + [start]
            if w not in prev:
                prev[w] = v
                queue.append(w)
    return [start]


def cycles(crate_dir):
    """[(files of the component, [edges inside it], a shortest cycle)] for one crate."""
    found = []
    for root in crate_roots(crate_dir):
        crate = Crate(root)
        edges = crate.edges()
        succ = defaultdict(set)
        for a, b, _line, _text in edges:
            succ[a].add(b)
        for comp in strongly_connected(crate.files.keys(), succ):
            if len(comp) < 2:
                continue
            members = set(comp)
            inside = sorted({e for e in edges if e[0] in members and e[1] in members})
            found.append((comp, inside, shortest_cycle(comp[0], succ, members)))
    return found


def folder_cycles(crate_dir):
    """Cycles between sibling modules of which at least one is a folder (a module with
    modules of its own): [(parent module, [sibling names], [edges], a shortest cycle)].

    Each file is a module path (`a/b/mod.rs` and `a/b.rs` are both `a::b`). An edge
    between files whose paths first differ below a common parent `P` is an edge between
    P's children that hold them; an edge from a module to its own ancestor or descendant
    is none (a parent and its children may use each other, as between files)."""
    found = []
    for root in crate_roots(crate_dir):
        crate = Crate(root)
        module = {path: info.module for path, info in crate.files.items()}
        folders = {m[: k + 1] for m in module.values() for k in range(len(m) - 1)}
        by_parent = defaultdict(list)  # parent → [(child a, child b, edge)]
        for edge in crate.edges():
            p, q = module.get(edge[0]), module.get(edge[1])
            if p is None or q is None:
                continue
            k = 0
            while k < min(len(p), len(q)) and p[k] == q[k]:
                k += 1
            if k == len(p) or k == len(q):
                continue
            by_parent[p[:k]].append((p[k], q[k], edge))
        for parent, links in sorted(by_parent.items()):
            succ = defaultdict(set)
            for a, b, _edge in links:
                succ[a].add(b)
            nodes = set(succ) | {b for a, b, _ in links}
            for comp in strongly_connected(nodes, succ):
                if len(comp) < 2 or not any(parent + (c,) in folders for c in comp):
                    continue
                members = set(comp)
                inside = [(a, b, e) for a, b, e in links if a in members and b in members]
                found.append((parent, comp, inside, shortest_cycle(comp[0], succ, members)))
    return found


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(os.path.dirname(here))
    dirs = argv[1:] or sorted(
        os.path.join("crates", d)
        for d in os.listdir(os.path.join(repo, "crates"))
        if os.path.isdir(os.path.join(repo, "crates", d, "src"))
    )
    if not argv[1:]:
        os.chdir(repo)
    total = 0
    for crate_dir in dirs:
        for comp, inside, cycle in cycles(crate_dir):
            total += 1
            print(f"cycle {total} ({crate_dir}, {len(comp)} files): " + " -> ".join(cycle))
            by_pair = defaultdict(list)
            for a, b, line, text in inside:
                by_pair[(a, b)].append(f"{a}:{line}: {text}")
            for (a, b), sites in sorted(by_pair.items()):
                print(f"  {a} -> {b}")
                for s in sites:
                    print(f"      {s}")
    folders = 0
    for crate_dir in dirs:
        for parent, comp, inside, cycle in folder_cycles(crate_dir):
            folders += 1
            where = "::".join(("crate",) + parent)
            print(
                f"folder cycle {folders} ({crate_dir}, {len(comp)} modules of {where}: "
                + ", ".join(comp)
                + "): "
                + " -> ".join(cycle)
            )
            by_pair = defaultdict(list)
            for a, b, (path, _to, line, text) in inside:
                by_pair[(a, b)].append(f"{path}:{line}: {text}")
            for (a, b), sites in sorted(by_pair.items()):
                print(f"  {a} -> {b}")
                for site in sites:
                    print(f"      {site}")
    if folders:
        print(
            f"\n{folders} cycle(s) between folders (modules with modules of their own) and "
            "their siblings. Cut each by moving what both need below a module that uses "
            "neither, or by passing it in; the uses above are every one between them."
        )
    if total:
        print(
            f"\n{total} import cycle(s) between files. Cut each by moving what both files "
            "need into a file that depends on neither, by importing an item from the file "
            "(or crate) that defines it rather than through a re-export, or by passing it "
            "in. The edges above are every use inside the cycle (test code excluded)."
        )
    if total or folders:
        return 1
    print(f"no import cycles between files or folders in {len(dirs)} crate(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
