#!/usr/bin/env python3
"""Writes the hand-made seeds of tests/fuzz/corpus (run from anywhere; overwrites seed_* files).

Each target gets a few valid inputs (so the fuzzer starts deep in the parser) and a few near-misses
(so the error paths are covered from the start). Crashing inputs found by the fuzzer are committed
beside them as crash_* files and are not touched here. The checkpoint target's valid seed is a real
checkpoint of a tiny model (see corpus/checkpoint/README)."""
import json
import os
import struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(target, name, data):
    os.makedirs(os.path.join(ROOT, target), exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(ROOT, target, "seed_" + name), "wb") as f:
        f.write(data)


def safetensors(tensors, metadata=None, header_override=None):
    """tensors: list of (name, dtype, shape, bytes)."""
    header, data, offset = {}, b"", 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        data += raw
        offset += len(raw)
    text = header_override if header_override is not None else json.dumps(header)
    text += " " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text.encode() + data


f32 = lambda *v: struct.pack("<%df" % len(v), *v)

# --- safetensors ---
put("safetensors", "two_tensors", safetensors(
    [("a", "F32", [2, 2], f32(1, 2, 3, 4)), ("b", "I32", [3], struct.pack("<3i", 1, 2, 3))],
    {"format": "pt"}))
put("safetensors", "bf16_f64_scalar", safetensors(
    [("h", "BF16", [2], b"\x80\x3f\x00\x40"), ("d", "F64", [], struct.pack("<d", 2.5)),
     ("e", "F32", [0, 3], b"")]))
put("safetensors", "empty_header", safetensors([], header_override="{}"))
# A header claiming a 2^40-element tensor: must be refused before anything is allocated.
put("safetensors", "huge_claim", safetensors([], header_override=json.dumps(
    {"w": {"dtype": "F32", "shape": [1 << 40], "data_offsets": [0, 4 << 40]}})))
put("safetensors", "overlap", safetensors([], header_override=json.dumps(
    {"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
     "b": {"dtype": "F32", "shape": [1], "data_offsets": [2, 6]}})) + b"\0" * 8)
put("safetensors", "header_len_past_end", struct.pack("<Q", 1 << 62) + b"{}")

# --- latest ---
put("latest", "good", "ckpt_00000001.safetensors\n")
put("latest", "dotdot", "..\n")
put("latest", "slash", "../ckpt_00000001.safetensors\n")
put("latest", "empty", "")

# --- shard: int32[256] header (magic 20240520, version 1, count), uint16 tokens ---
def shard(magic, version, count, tokens):
    return struct.pack("<3i", magic, version, count) + b"\0" * (1024 - 12) + struct.pack(
        "<%dH" % len(tokens), *tokens)

put("shard", "good", shard(20240520, 1, 16, list(range(16))))
put("shard", "count_mismatch", shard(20240520, 1, 99, [1, 2, 3]))
put("shard", "negative_count", shard(20240520, 1, -1, []))
put("shard", "token_past_vocab", shard(20240520, 1, 2, [5, 65535]))
put("shard", "bad_version", shard(20240520, 7, 1, [1]))
put("shard", "short", b"\x88\xd8\x34\x01junk")

# --- text ---
put("text", "verse", "First Citizen:\nBefore we proceed any further, hear me speak.\n")
put("text", "two_bytes", "ab")
put("text", "binary", bytes(range(256)))
put("text", "shard_magic", struct.pack("<i", 20240520) + b"not really a shard")

# --- cli: arguments separated by NUL bytes ---
cli = lambda *a: "\0".join(a)
put("cli", "typical", cli("--data", "x.txt", "--steps", "10", "--lr", "3e-4", "--batch", "4"))
put("cli", "resume", cli("--resume", "ckpt", "--checkpoint-dir", "ckpt", "--keep-last", "2",
                         "--on-nonfinite", "skip"))
put("cli", "bad_values", cli("--steps", "-1", "--seq-len", "99999999999999999999999",
                             "--dtype", "f16", "--lr", "nan"))
put("cli", "flags", cli("--shuffle", "--tf32", "--quiet", "--print-tape", "--model", "gpt2"))
put("cli", "help", cli("--help"))

# --- checkpoint: near-misses (the valid seed is a real checkpoint, made by train_gpt) ---
meta = {"format": "glass-checkpoint-1", "step": "1", "rng_seed": "1", "rng_offset": "0",
        "data_position": "1", "optimizer": "adamw", "optimizer_scalars": "{\"step\": 1.0}",
        "data_path": "x.txt",
        "config": json.dumps({"vocab_size": 4, "block_size": 2, "n_layer": 1, "n_head": 1,
                              "n_embd": 2, "dropout": 0.0})}
emb = [("model.transformer.wte.weight", "F32", [4, 2], f32(*range(8))),
       ("model.transformer.wpe.weight", "F32", [2, 2], f32(*range(4)))]
put("checkpoint", "no_blocks", safetensors(emb, meta))
put("checkpoint", "huge_config", safetensors(emb, dict(meta, config=json.dumps(
    {"vocab_size": 50257, "block_size": 1 << 30, "n_layer": 1 << 20, "n_head": 1,
     "n_embd": 1 << 20, "dropout": 0.0}))))
put("checkpoint", "bad_json", safetensors(emb, dict(meta, config="{\"vocab_size\": \"many\"")))
put("checkpoint", "bad_step", safetensors(emb, dict(meta, step="-x")))
put("checkpoint", "foreign_format", safetensors(emb, dict(meta, format="pt")))
# Found by review while writing the targets (libFuzzer under clang would flag the first two as
# float-cast-overflow, which gcc's UBSan does not check): a float where an integer belongs, an
# optimizer step count past int64, a negative step that a resumed run would index its data with.
put("checkpoint", "float_n_layer", safetensors(emb, dict(meta, config=json.dumps(
    {"vocab_size": 4, "block_size": 2, "n_layer": 1e300, "n_head": 1, "n_embd": 2,
     "dropout": 0.0}))))
put("checkpoint", "huge_optimizer_step",
    safetensors(emb, dict(meta, optimizer_scalars="{\"step\": 1e300}")))
put("checkpoint", "negative_step", safetensors(emb, dict(meta, step="-5", data_position="-5")))
