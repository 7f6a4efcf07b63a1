#!/usr/bin/env python3
"""What ptxas says about each kernel of the cuda build: registers, spills, shared memory, and how
many Tensor Core instructions (mma, wgmma) its PTX holds.

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
      Then it compiles the same source to PTX once per virtual architecture of the command
      (-ptx -arch=compute_XX, the same launcher, so ccache may serve it) and keeps, in
      <object>.mma, how many mma / wgmma.mma_async instructions each entry function's PTX holds,
      counting the .func functions it calls (each once; a static count, not executions).
      --device-only (the build on the emulated CUDA runtime, where nvcc's objects are a compile
      check and never linked): nvcc compiles -fatbin instead of -c, the device code alone
      (preprocessing, cicc, ptxas), and skips the host half (cudafe++ and the host compiler's
      pass over the launchers), 6 of a file's 10 s. The "object" is then a fatbinary.

  collect --output kernel_resources.json --source-dir DIR <objects...>
      Reads each object's .ptxas and .mma and writes one JSON report, a row per kernel and
      architecture, with mma_instructions from the PTX. Kernels of kernels/cuda/*.cu are
      production kernels, those of kernels/cuda/ladder/ the kernel ladders' teaching rungs. Fails
      (and with it the build) when a production kernel spills registers to local memory, or when
      a Tensor Core kernel (a function named *_mma or *_mma_kernel: the mma rungs and the mma
      FlashAttention kernels) has no mma instruction, or local memory or a stack frame on sm_90:
      an mma kernel whose fragments spill to local memory has lost what it was written for.

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

# PTX: a function's header, a call, a Tensor Core instruction (after an optional predicate).
PTX_FUNCTION = re.compile(
    r"^\s*(?:\.(?:visible|weak|extern)\s+)*\.(?:entry|func)\s+(?:\([^)]*\)\s*)?([\w$]+)")
PTX_CALL = re.compile(r"^\s*(?:@!?%\w+\s+)?call(?:\.uni)?\s+(?:\([^)]*\)\s*,\s*)?([\w$]+)")
PTX_MMA = re.compile(r"^\s*(?:@!?%\w+\s+)?(?:mma|wgmma\.mma_async)\.")
# The architecture options of an nvcc command: --generate-code=arch=compute_90,code=[...] (or
# -gencode), -arch=sm_90 / --gpu-architecture=compute_90; as one argument or two.
ARCH_OPTIONS = ("--generate-code", "-gencode", "-arch", "--gpu-architecture")
ARCH_VALUE = re.compile(r"^(?:arch=)?(?:compute|sm)_(\w+)")
# Tensor Core kernels, whose report must show mma instructions and no local memory on sm_90.
MMA_KERNEL = re.compile(r"_mma(?:_kernel)?$")


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
        return record_mma_counts(command, output)
    return result.returncode


def ptx_commands(command, output):
    """{sm_XX: the command compiling `command`'s source to compute_XX PTX at output.sm_XX.ptx}:
    the compile command without its output, dependency file, object mode and ptxas options."""
    base, archs, i = [], [], 0
    while i < len(command):
        arg = command[i]
        option, _, value = arg.partition("=")
        if arg in ("-MT", "-MF", "-MQ", "-o"):
            i += 2
            continue
        if option in ARCH_OPTIONS:
            if not value:
                value = command[i + 1] if i + 1 < len(command) else ""
                i += 1
            m = ARCH_VALUE.match(value)
            if m and m.group(1) not in archs:
                archs.append(m.group(1))
        elif arg not in ("-MD", "-MMD", "-c", "-fatbin", "--resource-usage", "-res-usage"):
            base.append(arg)
        i += 1
    return {"sm_" + a: base + ["-ptx", "-arch=compute_" + a, "-o", f"{output}.sm_{a}.ptx"]
            for a in archs}


def count_mma(ptx):
    """{entry function: mma and wgmma.mma_async instructions in it and the functions it calls}."""
    own, calls, entries, current = {}, {}, [], None
    for line in ptx.splitlines():
        line = line.split("//", 1)[0]
        m = PTX_FUNCTION.match(line)
        if m:
            current = m.group(1)
            own.setdefault(current, 0)
            calls.setdefault(current, set())
            if re.search(r"\.entry\s", line):
                entries.append(current)
            continue
        if current is None:
            continue
        if PTX_MMA.match(line):
            own[current] += 1
        m = PTX_CALL.match(line)
        if m:
            calls[current].add(m.group(1))
    counts = {}
    for entry in entries:
        seen, stack = {entry}, [entry]
        while stack:
            for callee in calls.get(stack.pop(), ()):
                if callee not in seen:
                    seen.add(callee)
                    stack.append(callee)
        counts[entry] = sum(own.get(f, 0) for f in seen)
    return counts


def record_mma_counts(command, output):
    """Writes <output>.mma: {arch: {mangled entry: mma instructions}} from the command's PTX."""
    counts = {}
    for arch, ptx_command in ptx_commands(command, output).items():
        result = subprocess.run(ptx_command, stderr=subprocess.PIPE, text=True)
        if result.returncode != 0:
            sys.stderr.write(result.stderr)
            print("ptxas_resources: compiling to PTX failed: " + " ".join(ptx_command),
                  file=sys.stderr)
            return result.returncode
        ptx_file = ptx_command[-1]
        with open(ptx_file) as f:
            counts[arch] = count_mma(f.read())
        os.remove(ptx_file)
    with open(output + ".mma", "w") as f:
        json.dump(counts, f)
    return 0


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
        if not os.path.exists(report) or not os.path.exists(obj + ".mma"):
            missing.append(obj)
            continue
        # The object of kernels/cuda/ladder/x.cu is .../glass_kernels_cuda.dir/__/ladder/x.cu.o
        source = os.path.basename(obj)[:-len(".o")]
        ladder = "/ladder/" in obj.replace(os.sep, "/")
        source = "kernels/cuda/" + ("ladder/" if ladder else "") + source
        with open(obj + ".mma") as f:
            mma = json.load(f)
        with open(report) as f:
            for k in parse(f.read()):
                k["source"] = source
                k["production"] = not ladder
                count = mma.get(k["arch"], {}).get(k["mangled"])
                if count is None:
                    print("ptxas_resources: error: no PTX of {} for {} in {}.mma".format(
                        k["arch"], k["mangled"], obj), file=sys.stderr)
                    return 1
                k["mma_instructions"] = count
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
    bad_mma = mma_kernel_problems(rows)
    for problem in bad_mma:
        print("ptxas_resources: error: " + problem, file=sys.stderr)
    return 1 if spills or bad_mma else 0


def mma_kernel_problems(rows):
    """What is wrong with the Tensor Core kernels (named *_mma or *_mma_kernel) of the report:
    no mma instruction in the PTX, or local memory or a stack frame on sm_90."""
    problems = []
    for k in rows:
        if not MMA_KERNEL.search(k["function"]):
            continue
        name = "{}<{}> ({}, {})".format(k["function"], k["template"], k["source"], k["arch"])
        if k["mma_instructions"] == 0:
            problems.append("Tensor Core kernel " + name + " has no mma instruction in its PTX")
        if k["arch"] == "sm_90" and (k["local_bytes"] or k["stack_bytes"]):
            problems.append("Tensor Core kernel {} uses {} bytes of local memory and a {}-byte "
                            "stack frame: its fragments no longer live in registers".format(
                                name, k["local_bytes"], k["stack_bytes"]))
    return problems


def selftest():
    """The parser and the spill check on ptxas's lines for a spilling kernel (ptxas 13's format):
    a bad parse must not be able to hide a spill. The mma count on a PTX sample, the PTX commands
    made from a compile command, and the Tensor Core kernels' check."""
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
    # PTX: an entry with a predicated mma, a wgmma and a call of a function holding one more mma
    # (comments and other wgmma instructions do not count); an entry with none.
    ptx = """.version 8.8
.target sm_90
.func  (.param .b32 func_retval0) _Z6helperv(
)
{
	mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%f1, %f2, %f3, %f4}, {%r1, %r2, %r3, %r4}, {%r5, %r6}, {%f1, %f2, %f3, %f4};
	ret;
}
.visible .entry _ZN1a10big_kernelIfEEvPT_(
	.param .u64 _ZN1a10big_kernelIfEEvPT__param_0
)
{
	// mma.sync.aligned in a comment
	@%p1 mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%f1, %f2, %f3, %f4}, {%r1, %r2, %r3, %r4}, {%r5, %r6}, {%f1, %f2, %f3, %f4};
	wgmma.fence.sync.aligned;
	wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%f1}, %rd1, %rd2, 1, 1, 1, 0, 0;
	ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r1, %r2, %r3, %r4}, [%r7];
	{
	call.uni (retval0), _Z6helperv, ();
	}
	ret;
}
.entry _ZN1a5smallEPf(
	.param .u64 _ZN1a5smallEPf_param_0
)
{
	ret;
}
"""
    assert count_mma(ptx) == {"_ZN1a10big_kernelIfEEvPT_": 3, "_ZN1a5smallEPf": 0}, count_mma(ptx)
    command = ["ccache", "nvcc", "-DX", "--generate-code=arch=compute_80,code=[sm_80]",
               "-gencode", "arch=compute_90,code=[compute_90,sm_90]", "--resource-usage", "-MD",
               "-MT", "o.o", "-MF", "o.o.d", "-x", "cu", "-c", "x.cu", "-o", "o.o"]
    assert ptx_commands(command, "o.o") == {
        "sm_80": ["ccache", "nvcc", "-DX", "-x", "cu", "x.cu", "-ptx", "-arch=compute_80", "-o",
                  "o.o.sm_80.ptx"],
        "sm_90": ["ccache", "nvcc", "-DX", "-x", "cu", "x.cu", "-ptx", "-arch=compute_90", "-o",
                  "o.o.sm_90.ptx"]}, ptx_commands(command, "o.o")
    mma = {"sm_90": count_mma(ptx)}

    # A Tensor Core kernel (named *_mma_kernel) must have mma instructions, and no local memory
    # or stack on sm_90.
    def tc_row(mma_instructions, local_bytes, stack_bytes, arch="sm_90"):
        return {"function": "tc_mma_kernel", "template": "", "source": "x.cu", "arch": arch,
                "mma_instructions": mma_instructions, "local_bytes": local_bytes,
                "stack_bytes": stack_bytes}
    assert mma_kernel_problems([tc_row(32, 0, 0)]) == []
    assert mma_kernel_problems([tc_row(32, 0, 0, "sm_80"), tc_row(8, 16, 0, "sm_80")]) == []
    assert "no mma instruction" in mma_kernel_problems([tc_row(0, 0, 0)])[0]
    assert "local memory" in mma_kernel_problems([tc_row(32, 8, 0)])[0]
    assert "stack frame" in mma_kernel_problems([tc_row(32, 0, 16)])[0]
    assert mma_kernel_problems([dict(tc_row(0, 8, 8), function="plain_kernel")]) == []

    with tempfile.TemporaryDirectory() as d:
        objs = []
        for sub in ("", "ladder/"):
            os.makedirs(os.path.join(d, sub), exist_ok=True)
            obj = os.path.join(d, sub, "x.cu.o")
            with open(obj + ".ptxas", "w") as f:
                f.write(text)
            with open(obj + ".mma", "w") as f:
                json.dump(mma, f)
            objs.append(obj)
        out = os.path.join(d, "r.json")
        # The production copy spills: the collection fails; the ladder's alone does not.
        assert collect(out, d, objs) == 1
        assert collect(out, d, objs[1:]) == 0
        with open(out) as f:
            rows = json.load(f)["kernels"]
        assert [(k["function"], k["production"], k["mma_instructions"]) for k in rows] == [
            ("big_kernel", False, 3), ("small", False, 0)], rows
        # A kernel missing from the PTX counts fails the collection.
        with open(objs[1] + ".mma", "w") as f:
            json.dump({"sm_80": mma["sm_90"]}, f)
        assert collect(out, d, objs[1:]) == 1
        # A Tensor Core kernel with local memory on sm_90 fails it.
        tc_text = text.replace("_ZN1a5smallEPf", "_ZN1a13tc_mma_kernelEv").replace(
            "Used 8 registers,", "Used 8 registers, 16 bytes lmem,")
        with open(objs[1] + ".ptxas", "w") as f:
            f.write(tc_text)
        with open(objs[1] + ".mma", "w") as f:
            json.dump({"sm_90": {"_ZN1a10big_kernelIfEEvPT_": 3, "_ZN1a13tc_mma_kernelEv": 4}},
                      f)
        assert collect(out, d, objs[1:]) == 1
        with open(objs[1] + ".ptxas", "w") as f:
            f.write(tc_text.replace(" 16 bytes lmem,", ""))
        assert collect(out, d, objs[1:]) == 0
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
