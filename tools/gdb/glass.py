# gdb support for glass: pretty-printers for glass::Tensor and glass::CreationSite (a node's
# created_at, shown as "nn/layers.h:54 in net.ln") and two stepping commands.
#
#   (gdb) source tools/gdb/glass.py          # or put that line into ~/.gdbinit
#   (gdb) print x
#   $1 = glass::Tensor f32[4, 40] on cpu requires_grad {-0.1213, 1.0277, ...}
#
# A tensor on `cpu` or `emu` lives in host memory (emu's device memory is host memory behind
# device-style pointers), so its first values are read straight from the process; on other devices
# only shape, dtype and device are shown. Values follow the tensor's strides and offset, in
# row-major order, like to_vector(). `set glass-values N` changes how many are shown (default 8).
#
#   glass-step-into FILE   `step` until the current line is in a source file whose path ends with
#                          FILE (e.g. kernels/cpu/layernorm.cpp): from glass_break_here into the
#                          kernel, through the gateway and std::function.
#   glass-frame FILE       select the innermost frame whose source file ends with FILE.
import struct

import gdb
import gdb.printing

DTYPES = {"f32": ("f", 4), "f64": ("d", 8), "i32": ("i", 4), "bf16": ("H", 2)}
HOST_DEVICES = ("cpu", "emu")


class ValuesParameter(gdb.Parameter):
    """How many values the glass::Tensor printer shows."""

    set_doc = "Set how many values the glass::Tensor printer shows."
    show_doc = "Show how many values the glass::Tensor printer shows."

    def __init__(self):
        super().__init__("glass-values", gdb.COMMAND_DATA, gdb.PARAM_ZUINTEGER)
        self.value = 8


VALUES = ValuesParameter()


def shared_ptr_target(ptr):
    """The object a libstdc++ std::shared_ptr points at, or None."""
    raw = ptr["_M_ptr"]
    return None if int(raw) == 0 else raw.dereference()


def small_vector_items(vec):
    """The elements of a glass::SmallVector (engine/small_vector.h; glass::Shape is one)."""
    data = vec["data_"]
    return [(data + i).dereference() for i in range(int(vec["size_"]))]


def std_string(value):
    """The text of a libstdc++ std::string."""
    return value["_M_dataplus"]["_M_p"].string(length=int(value["_M_string_length"]))


def enum_name(value):
    """'f32' for glass::DType::f32."""
    return str(value).split("::")[-1]


def row_major_offsets(shape, strides, offset, count):
    """Element offsets of the first `count` elements in row-major order."""
    index = [0] * len(shape)
    out = []
    for _ in range(count):
        out.append(offset + sum(i * s for i, s in zip(index, strides)))
        for d in reversed(range(len(shape))):  # odometer step
            index[d] += 1
            if index[d] < shape[d]:
                break
            index[d] = 0
    return out


def read_values(data, dtype, offsets):
    code, size = DTYPES[dtype]
    inferior = gdb.selected_inferior()
    values = []
    for off in offsets:
        raw = bytes(inferior.read_memory(int(data) + off * size, size))
        v = struct.unpack("<" + code, raw)[0]
        if dtype == "bf16":  # the top 16 bits of an f32
            v = struct.unpack("<f", struct.pack("<I", v << 16))[0]
        values.append(f"{v:.6g}" if dtype != "i32" else str(v))
    return values


class TensorPrinter:
    """glass::Tensor: dtype[shape] on device, autograd state, first values."""

    def __init__(self, val):
        self.val = val

    def to_string(self):
        impl = shared_ptr_target(self.val["impl_"])
        if impl is None:
            return "glass::Tensor (undefined)"
        shape = [int(d) for d in small_vector_items(impl["shape"])]
        strides = [int(s) for s in small_vector_items(impl["strides"])]
        dtype = enum_name(impl["dtype"])
        storage = shared_ptr_target(impl["storage"])
        device = enum_name(storage["device"]["kind"])
        text = f"glass::Tensor {dtype}[{', '.join(map(str, shape))}] on {device}"
        if strides != contiguous_strides(shape):
            text += f" strides [{', '.join(map(str, strides))}]"
        text += autograd_state(impl)
        numel = 1
        for d in shape:
            numel *= d
        if device not in HOST_DEVICES:
            return text + " (device memory: not readable here)"
        shown = min(numel, int(VALUES.value))
        offsets = row_major_offsets(shape, strides, int(impl["offset"]), shown)
        values = read_values(storage["data"], dtype, offsets)
        more = ", ..." if shown < numel else ""
        return text + " {" + ", ".join(values) + more + "}"


def contiguous_strides(shape):
    strides, acc = [], 1
    for d in reversed(shape):
        strides.insert(0, acc)
        acc *= d
    return strides


def autograd_state(impl):
    """' requires_grad', ' grad_fn=#12 layernorm', ' name=net.ln.weight', or ''."""
    meta = shared_ptr_target(impl["autograd"])
    node = shared_ptr_target(impl["grad_fn"])
    text = ""
    if node is not None:
        text += f" grad_fn=#{int(node['id'])} {node['op'].string()}"
    elif meta is not None and bool(meta["requires_grad"]):
        text += " requires_grad"
    name = std_string(meta["name"]) if meta is not None else ""
    if name:
        text += f" name={name}"
    return text


class CreationSitePrinter:
    """glass::CreationSite as the text CreationSite::str() makes: "nn/layers.h:54 in net.ln"."""

    def __init__(self, val):
        self.val = val

    def to_string(self):
        text = ""
        if int(self.val["file"]) != 0:
            text = f"{self.val['file'].string()}:{int(self.val['line'])}"
        module = self.val["module"]
        if int(module) != 0:
            path = std_string(module.dereference())
            if path:
                text += (" in " if text else "in ") + path
        return text

    def display_hint(self):
        return "string"


class StepIntoCommand(gdb.Command):
    """glass-step-into FILE: step until the current line is in a file whose path ends with FILE."""

    def __init__(self):
        super().__init__("glass-step-into", gdb.COMMAND_RUNNING)

    def invoke(self, arg, from_tty):
        target = arg.strip()
        if not target:
            raise gdb.GdbError("glass-step-into: give a source file, e.g. kernels/cpu/layernorm.cpp")
        gdb.execute("set suppress-cli-notifications on")  # one line at the end, not one per step
        try:
            for _ in range(500):
                gdb.execute("step", to_string=True)
                if frame_file(gdb.selected_frame()).endswith(target):
                    break
            else:
                raise gdb.GdbError(f"glass-step-into: no line of {target} within 500 steps")
        finally:
            gdb.execute("set suppress-cli-notifications off")
        gdb.execute("frame")


class FrameCommand(gdb.Command):
    """glass-frame FILE: select the innermost frame whose source file ends with FILE."""

    def __init__(self):
        super().__init__("glass-frame", gdb.COMMAND_STACK)

    def invoke(self, arg, from_tty):
        target = arg.strip()
        frame = gdb.newest_frame()
        while frame is not None:
            if frame_file(frame).endswith(target):
                frame.select()
                gdb.execute("frame", to_string=False)
                return
            frame = frame.older()
        raise gdb.GdbError(f"glass-frame: no frame in {target}")


def frame_file(frame):
    symtab = frame.find_sal().symtab
    return symtab.filename if symtab is not None else ""


def build_printer():
    pp = gdb.printing.RegexpCollectionPrettyPrinter("glass")
    pp.add_printer("Tensor", "^glass::Tensor$", TensorPrinter)
    pp.add_printer("CreationSite", "^glass::CreationSite$", CreationSitePrinter)
    return pp


gdb.printing.register_pretty_printer(gdb.current_objfile(), build_printer(), replace=True)
StepIntoCommand()
FrameCommand()
