#!/usr/bin/env python3
"""call-cycles: the direction of calls between the program's files and folders, read from
the compiled objects.

The include check (include-cycles.sh) reads #include lines, which say what a file may
use; a call says what it does use, and a function declared in a header included for a
type can still be called from below. So this check reads the object files a build made:
for each one, nm lists the global symbols it defines and the ones it leaves undefined,
and "a.o leaves undefined a name that b.o defines" is an edge a -> b between their
source files. It fails on
  - a cycle of source files (each printed as a chain, with the names each step uses);
  - a cycle of folders (src/data -> src/train -> src/data): a folder is a layer, so
    every call between two folders must run the same way;
  - with --order, a call from a folder to one listed after it: the layers are listed from
    the bottom up, and each calls only those below it.

The objects are those of compile_commands.json in BUILD_DIR whose source lies under one
of the given source folders (default: src runtime gpu) of the project root, so tests and
their second builds of some sources stay out. A name defined by two different source
files (a namesake, or one file built twice with other flags) is left out of the graph.

Usage: call-cycles.py BUILD_DIR [--root DIR] [--order F1,F2,...] [FOLDER...]; exit 0 when
the calls hold the rules, 1 when some cycle or upward call was found, 2 on bad input (an
object that compile_commands.json lists but the build has not made is bad input: a
partial build would hide its calls).
"""
import json
import os
import subprocess
import sys

DEFINED = set("TDBRVWCG")  # nm -P types of a global definition


def usage(msg):
    print("call-cycles: " + msg, file=sys.stderr)
    sys.exit(2)


def read_objects(build, root, folders):
    """{object path: source path relative to root} for the sources under folders."""
    path = os.path.join(build, "compile_commands.json")
    try:
        with open(path) as f:
            commands = json.load(f)
    except (OSError, ValueError) as exc:
        usage("cannot read %s: %s" % (path, exc))
    objects = {}
    for c in commands:
        src = os.path.relpath(os.path.normpath(os.path.join(c["directory"], c["file"])), root)
        if not any(src.startswith(d.rstrip("/") + "/") for d in folders):
            continue
        out = os.path.join(c["directory"], c["output"])
        if "/tests/" in "/" + os.path.relpath(out, build):
            continue
        if not os.path.exists(out):
            usage("%s: the object of %s is missing (build the whole tree first)" % (out, src))
        objects[out] = src
    return objects


def symbols(obj):
    """(defined, undefined) global names of one object file."""
    run = subprocess.run(["nm", "-P", obj], capture_output=True, text=True)
    if run.returncode != 0:
        usage("nm %s: %s" % (obj, run.stderr.strip()))
    defined, undefined = set(), set()
    for line in run.stdout.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        if parts[1] == "U":
            undefined.add(parts[0])
        elif parts[1] in DEFINED:
            defined.add(parts[0])
    return defined, undefined


def call_graph(objects):
    """{source: {callee source: [names]}}: who calls whom, between distinct sources."""
    owner, uses = {}, {}
    for obj, src in objects.items():
        defined, undefined = symbols(obj)
        uses.setdefault(src, set()).update(undefined)
        for name in defined:
            if owner.get(name, src) != src:
                owner[name] = None  # defined by two files: not an edge of either
            else:
                owner[name] = src
    graph = {src: {} for src in uses}
    for src, names in uses.items():
        for name in sorted(names):
            to = owner.get(name)
            if to and to != src:
                graph[src].setdefault(to, []).append(name)
    return graph


def cycles(graph):
    """The strongly connected components of more than one node (Tarjan, iterative)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            advanced = False
            for to in edges:
                if to not in index:
                    index[to] = low[to] = counter
                    counter += 1
                    stack.append(to)
                    on_stack.add(to)
                    work.append((to, iter(sorted(graph.get(to, {})))))
                    advanced = True
                    break
                if to in on_stack:
                    low[node] = min(low[node], index[to])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    comp.append(top)
                    if top == node:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def chain(graph, comp):
    """A shortest closed path through comp from its first node back to it: breadth first
    inside the component, which is strongly connected, so one exists."""
    members, start = set(comp), comp[0]
    came_from, frontier = {}, [start]
    while frontier:
        reached = []
        for node in frontier:
            for to in sorted(graph[node]):
                if to == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return path[::-1] + [start]
                if to in members and to not in came_from:
                    came_from[to] = node
                    reached.append(to)
        frontier = reached
    return [start, start]


def report(kind, graph, comps):
    for comp in comps:
        path = chain(graph, comp)
        print("call-cycles: %s cycle: %s" % (kind, " -> ".join(path)))
        for a, b in zip(path, path[1:]):
            names = graph[a].get(b, [])
            print("  %s -> %s: %s" % (a, b, ", ".join(names[:6]) + (" ..." if len(names) > 6 else "")))


def folder_graph(graph):
    folders = {}
    for a, callees in graph.items():
        fa = os.path.dirname(a)
        folders.setdefault(fa, {})
        for b, names in callees.items():
            fb = os.path.dirname(b)
            if fb != fa:
                folders[fa].setdefault(fb, []).extend("%s (%s)" % (n, os.path.basename(a))
                                                      for n in names)
            folders.setdefault(fb, {})
    return folders


def upward_calls(folders_g, order):
    """The calls from a folder to one listed after it in order: (from, to, names)."""
    rank = {f: i for i, f in enumerate(order)}
    found = []
    for a in sorted(folders_g):
        for b in sorted(folders_g[a]):
            if a in rank and b in rank and rank[b] > rank[a]:
                found.append((a, b, folders_g[a][b]))
    return found


def main(argv):
    args = list(argv)
    if not args or args[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if args else 2
    build = args.pop(0)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if args[:1] == ["--root"]:
        if len(args) < 2:
            usage("--root needs a directory")
        root = os.path.abspath(args[1])
        args = args[2:]
    order = []
    if args[:1] == ["--order"]:
        if len(args) < 2:
            usage("--order needs a list of folders, bottom first")
        order = [f.rstrip("/") for f in args[1].split(",") if f]
        args = args[2:]
    folders = args or ["src", "runtime", "gpu"]
    objects = read_objects(build, root, folders)
    if not objects:
        usage("no object files of %s in %s (build it first)" % (" ".join(folders), build))
    graph = call_graph(objects)
    file_cycles = cycles(graph)
    folders_g = folder_graph(graph)
    folder_cycles = cycles(folders_g)
    report("file", graph, file_cycles)
    report("folder", folders_g, folder_cycles)
    upward = upward_calls(folders_g, order)
    for a, b, names in upward:
        print("call-cycles: %s calls %s, a layer above it: %s" % (a, b, ", ".join(names[:6])))
    if file_cycles or folder_cycles or upward:
        return 1
    edges = sum(len(v) for v in graph.values())
    print("call-cycles: %d files, %d calling pairs, %d folders: no cycle"
          % (len(graph), edges, len(folders_g)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
