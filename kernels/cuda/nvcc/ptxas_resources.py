#!/usr/bin/env python3
"""What ptxas says about each kernel of the cuda build: registers, spills, shared memory.

nvcc compiles kernels/cuda with --resource-usage, which makes ptxas print, per __global__
function and architecture:

    ptxas info    : Compiling entry function '_ZN5glass...' for 'sm_90'
    ptxas info    : Function properties for _ZN5glass...
        0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
    ptxas info    : Used 26 registers, used 1 barriers, 128 bytes smem, 400 bytes cmem[0]

Two modes, both run by the build (kernels/cuda/nvcc/CMakeLists.txt):

  record [--device-only] -- <compiler command...>
      The compiler launcher of the nvcc target: runs the command, keeps ptxas's lines in
      <object>.ptxas beside the object it writes (-o), and passes every other line of stderr
      through, so the build log keeps warnings but not a dozen lines per kernel. ccache replays a
      cached compile's stderr, so cache hits record too.
      --device-only (the build on the emulated CUDA runtime, where nvcc's objects are a compile
      check and never linked): nvcc compiles -fatbin instead of -c, the device code alone
      (preprocessing, cicc, ptxas), and skips the host half (cudafe++ and the host compiler's
      pass over the launchers), 6 of a file's 10 s. The "object" is then a fatbinary.

  collect --output kernel_resources.json --source-dir DIR <objects...>
      Reads each object's .ptxas and writes one JSON report, a row per kernel and architecture.
      Kernels of kernels/cuda/*.cu are production kernels, those of kernels/cuda/ladder/ the
      kernel ladders' teaching rungs. Fails (and with it the build) when a production kernel
      spills registers to local memory.

engine/kernel_resources.h reads the report: the occupancy each launch gets on an H200.
"""
import json
import os
import re
import subprocess
import sys

ENTRY = re.compile(r"ptxas info\s*: Compiling entry function '([^']+)' for '(sm_\w+)'")
PROPERTIES = re.compile(r"ptxas info\s*: Function properties for (\S+)")
FRAME = re.compile(
    r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
USED = re.compile(r"ptxas info\s*: Used (\d+) registers")
FIELD = re.compile(r"(\d+) bytes (smem|lmem)|used (\d+) barriers")


def is_ptxas_line(line):
    return line.startswith("ptxas info") or FRAME.search(line) is not None


def record(command, device_only=False):
    # Without a compiler launcher (no ccache) CMake still passes its empty place in the list.
    command = [arg for arg in command if arg != ""]
    if device_only:
        command = ["-fatbin" if arg == "-c" else arg for arg in command]
    output = None
    for i, arg in enumerate(command):
        if arg == "-o" and i + 1 < len(command):
            output = command[i + 1]
        elif arg.startswith("-o") and len(arg) > 2 and not arg.startswith("-o="):
            output = arg[2:]
    result = subprocess.run(command, stderr=subprocess.PIPE, text=True)
    kept, passed = [], []
    for line in result.stderr.splitlines(keepends=True):
        (kept if is_ptxas_line(line) else passed).append(line)
    sys.stderr.write("".join(passed))
    if result.returncode == 0 and output:
        with open(output + ".ptxas", "w") as f:
            f.write("".join(kept))
    return result.returncode


def parse(text):
    """The entry functions in one compile's ptxas lines, in order."""
    kernels, by_key, current, frame_for = [], {}, None, None
    for line in text.splitlines():
        m = ENTRY.search(line)
        if m:
            current = {"mangled": m.group(1), "arch": m.group(2), "registers": 0,
                       "barriers": 0, "static_shared_bytes": 0, "local_bytes": 0,
                       "stack_bytes": 0, "spill_store_bytes": 0, "spill_load_bytes": 0}
            kernels.append(current)
            by_key[(current["mangled"], current["arch"])] = current
            continue
        m = PROPERTIES.search(line)
        if m:
            frame_for = m.group(1)
            continue
        m = FRAME.search(line)
        if m and current is not None and frame_for == current["mangled"]:
            current["stack_bytes"], current["spill_store_bytes"], current["spill_load_bytes"] = (
                int(g) for g in m.groups())
            continue
        m = USED.search(line)
        if m and current is not None:
            current["registers"] = int(m.group(1))
            for size, kind, barriers in FIELD.findall(line):
                if barriers:
                    current["barriers"] = int(barriers)
                elif kind == "smem":
                    current["static_shared_bytes"] = int(size)
                elif kind == "lmem":
                    current["local_bytes"] = int(size)
    return kernels


def demangle(names):
    if not names:
        return []
    try:
        out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True,
                             text=True, check=True).stdout.splitlines()
        if len(out) == len(names):
            return out
    except (OSError, subprocess.CalledProcessError):
        pass
    return list(names)


def split_name(demangled):
    """'void ns::(anonymous namespace)::foo_kernel<float, 4>(float const*)' -> ('foo_kernel',
    'float, 4')."""
    s = demangled.replace("(anonymous namespace)::", "")
    if s.startswith("void "):
        s = s[len("void "):]
    depth, end = 0, len(s)
    for i, c in enumerate(s):
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif c == "(" and depth == 0:
            end = i
            break
    qualified = s[:end]
    template = ""
    if qualified.endswith(">"):
        depth = 0
        for i in range(len(qualified) - 1, -1, -1):
            depth += qualified[i] == ">"
            depth -= qualified[i] == "<"
            if depth == 0:
                template = qualified[i + 1:-1]
                qualified = qualified[:i]
                break
    return qualified.split("::")[-1], template


def collect(output, source_dir, objects):
    rows, missing = [], []
    for obj in objects:
        report = obj + ".ptxas"
        if not os.path.exists(report):
            missing.append(obj)
            continue
        # The object of kernels/cuda/ladder/x.cu is .../glass_kernels_cuda.dir/__/ladder/x.cu.o
        source = os.path.basename(obj)[:-len(".o")]
        ladder = "/ladder/" in obj.replace(os.sep, "/")
        source = "kernels/cuda/" + ("ladder/" if ladder else "") + source
        with open(report) as f:
            for k in parse(f.read()):
                k["source"] = source
                k["production"] = not ladder
                rows.append(k)
    for k, d in zip(rows, demangle([k["mangled"] for k in rows])):
        k["function"], k["template"] = split_name(d)
        k["demangled"] = d
    rows.sort(key=lambda k: (k["source"], k["function"], k["template"], k["arch"]))
    if missing:
        print("ptxas_resources: no ptxas report for " + ", ".join(missing) +
              " (compiled without the record launcher?)", file=sys.stderr)
        return 1
    with open(output + ".tmp", "w") as f:
        json.dump({"tool": "ptxas --resource-usage", "kernels": rows}, f, indent=1)
        f.write("\n")
    os.replace(output + ".tmp", output)
    spills = [k for k in rows if k["production"] and
              (k["spill_store_bytes"] or k["spill_load_bytes"])]
    for k in spills:
        print("ptxas_resources: error: production kernel {}<{}> ({}, {}) spills: {} bytes "
              "stored, {} bytes loaded".format(k["function"], k["template"], k["source"],
                                               k["arch"], k["spill_store_bytes"],
                                               k["spill_load_bytes"]), file=sys.stderr)
    return 1 if spills else 0


def selftest():
    """The parser and the spill check on ptxas's lines for a spilling kernel (ptxas 13's format):
    a bad parse must not be able to hide a spill."""
    import tempfile
    text = """ptxas info    : 0 bytes gmem
ptxas info    : Function properties for _Z6helperv
    8 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function '_ZN1a10big_kernelIfEEvPT_' for 'sm_90'
ptxas info    : Function properties for _ZN1a10big_kernelIfEEvPT_
    24 bytes stack frame, 20 bytes spill stores, 16 bytes spill loads
ptxas info    : Used 16 registers, used 1 barriers, 4096 bytes smem, 24 bytes lmem, 368 bytes cmem[0]
ptxas info    : Compiling entry function '_ZN1a5smallEPf' for 'sm_90'
ptxas info    : Function properties for _ZN1a5smallEPf
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, 360 bytes cmem[0]
"""
    kernels = parse(text)
    assert [k["mangled"] for k in kernels] == ["_ZN1a10big_kernelIfEEvPT_", "_ZN1a5smallEPf"]
    big, small = kernels
    assert (big["registers"], big["barriers"], big["static_shared_bytes"], big["local_bytes"],
            big["stack_bytes"], big["spill_store_bytes"], big["spill_load_bytes"]) == (
                16, 1, 4096, 24, 24, 20, 16), big
    assert (small["registers"], small["static_shared_bytes"], small["spill_store_bytes"]) == (
        8, 0, 0), small
    assert split_name("void a::(anonymous namespace)::big_kernel<float, 4>(float*)") == (
        "big_kernel", "float, 4")
    assert split_name("a::small(float*)") == ("small", "")
    with tempfile.TemporaryDirectory() as d:
        objs = []
        for sub in ("", "ladder/"):
            os.makedirs(os.path.join(d, sub), exist_ok=True)
            obj = os.path.join(d, sub, "x.cu.o")
            with open(obj + ".ptxas", "w") as f:
                f.write(text)
            objs.append(obj)
        out = os.path.join(d, "r.json")
        # The production copy spills: the collection fails; the ladder's alone does not.
        assert collect(out, d, objs) == 1
        assert collect(out, d, objs[1:]) == 0
        with open(out) as f:
            rows = json.load(f)["kernels"]
        assert [(k["function"], k["production"]) for k in rows] == [
            ("big_kernel", False), ("small", False)], rows
    print("ptxas_resources selftest: ok")
    return 0


def main(argv):
    if len(argv) == 2 and argv[1] == "selftest":
        return selftest()
    if len(argv) >= 2 and argv[1] == "record" and "--" in argv:
        options = argv[2:argv.index("--")]
        if any(o != "--device-only" for o in options):
            print(f"ptxas_resources: unknown record option in {options}", file=sys.stderr)
            return 2
        return record(argv[argv.index("--") + 1:], device_only="--device-only" in options)
    if len(argv) >= 2 and argv[1] == "collect":
        args = argv[2:]
        output = args[args.index("--output") + 1]
        source_dir = args[args.index("--source-dir") + 1]
        objects = [a for i, a in enumerate(args)
                   if a not in ("--output", "--source-dir") and
                   args[i - 1] not in ("--output", "--source-dir")]
        return collect(output, source_dir, objects)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
