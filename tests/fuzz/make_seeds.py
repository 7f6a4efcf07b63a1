#!/usr/bin/env python3
"""Writes the hand-made seeds of tests/fuzz/corpus (run from anywhere; overwrites seed_* files).

Each target gets a few valid inputs (so the fuzzer starts deep in the parser) and a few near-misses
(so the error paths are covered from the start). Crashing inputs found by the fuzzer are committed
beside them as crash_* files and are not touched here. The checkpoint target's valid seed is a real
checkpoint of a tiny model, written by train_gpt (seed_real_tiny_checkpoint, not touched here); the
near-misses that need a whole model are copies of it with one metadata entry changed."""
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


def with_metadata(file, **changes):
    """A safetensors file with some metadata entries replaced (data offsets are relative to the
    data, so the tensors stay as they are)."""
    n = struct.unpack("<Q", file[:8])[0]
    header = json.loads(file[8:8 + n])
    header["__metadata__"].update(changes)
    text = json.dumps(header)
    text += " " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text.encode() + file[8 + n:]

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
# The whole tiny model, so that the step count is what the loader refuses, not missing tensors.
with open(os.path.join(ROOT, "checkpoint", "seed_real_tiny_checkpoint"), "rb") as f:
    real_checkpoint = f.read()
put("checkpoint", "huge_optimizer_step", with_metadata(
    real_checkpoint, optimizer_scalars="{\"lr\": 0.001, \"step\": 1e300}"))
put("checkpoint", "negative_step", safetensors(emb, dict(meta, step="-5", data_position="-5")))
# A configuration that matches its embeddings (C = 16384) and its one block name, in 64 KB: a GPT of
# 3.2e9 parameters the trainer would have allocated before finding the block's tensors missing.
put("checkpoint", "huge_model_small_file", safetensors(
    [("model.transformer.wte.weight", "BF16", [1, 16384], b"\0" * 32768),
     ("model.transformer.wpe.weight", "BF16", [1, 16384], b"\0" * 32768),
     ("model.transformer.h.0.ln_1.weight", "F32", [1], f32(1))],
    dict(meta, config=json.dumps({"vocab_size": 1, "block_size": 1, "n_layer": 1, "n_head": 1,
                                  "n_embd": 16384, "dropout": 0.0}))))

# --- gpt_weights: the tiny GPT (V=5, block 3, 1 layer, 1 head, C=2) in each layout --init reads ---
V, T, L, H, C, VP = 5, 3, 1, 1, 2, 8
# glass's names and [out, in] shapes of one block's parameters, in llm.c's group order.
BLOCK = [("ln_1.weight", [C]), ("ln_1.bias", [C]), ("attn.c_attn.weight", [3 * C, C]),
         ("attn.c_attn.bias", [3 * C]), ("attn.c_proj.weight", [C, C]), ("attn.c_proj.bias", [C]),
         ("ln_2.weight", [C]), ("ln_2.bias", [C]), ("mlp.c_fc.weight", [4 * C, C]),
         ("mlp.c_fc.bias", [4 * C]), ("mlp.c_proj.weight", [C, 4 * C]), ("mlp.c_proj.bias", [C])]
CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")


def numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def values(shape, salt):
    return [((i * 7 + salt * 3) % 11 - 5) / 8 for i in range(numel(shape))]


def transpose(vals, shape):
    r, c = shape
    return [vals[i * c + j] for j in range(c) for i in range(r)]


def glass_params(rows=V):
    """(glass name, shape, values) of every parameter, wte with `rows` rows."""
    ps = [("transformer.wte.weight", [rows, C]), ("transformer.wpe.weight", [T, C])]
    ps += [("transformer.h.%d.%s" % (l, n), s) for l in range(L) for n, s in BLOCK]
    ps += [("transformer.ln_f.weight", [C]), ("transformer.ln_f.bias", [C])]
    return [(n, s, values(s, k)) for k, (n, s) in enumerate(ps)]


def hf_tensors(prefix, lm_head=True):
    out = []
    for name, shape, vals in glass_params():
        short = name[len("transformer."):]
        if short.endswith(CONV1D):
            vals, shape = transpose(vals, shape), [shape[1], shape[0]]
        out.append((prefix + short, "F32", shape, f32(*vals)))
        if short == "wte.weight" and lm_head:
            out.append(("lm_head.weight", "F32", shape, f32(*vals)))
    out.append((prefix + "h.0.attn.bias", "F32", [1, 1, T, T], f32(*([1.0] * T * T))))
    return out


config = "vocab_size=%d block_size=%d n_layer=%d n_head=%d n_embd=%d padded_vocab_size=0" % (
    V, T, L, H, C)
put("gpt_weights", "glass", safetensors(
    [(n, "F32", s, f32(*v)) for n, s, v in glass_params()], {"format": "pt", "config": config}))
put("gpt_weights", "hf", safetensors(hf_tensors(""), {"format": "pt"}))
put("gpt_weights", "hf_transformer_prefix", safetensors(hf_tensors("transformer.", False)))
untied = hf_tensors("")
untied[1] = ("lm_head.weight", "F32", [V, C], f32(*([0.5] * V * C)))
put("gpt_weights", "hf_untied_lm_head", safetensors(untied))
put("gpt_weights", "hf_conv1d_3d", safetensors(
    [t if t[0] != "h.0.attn.c_attn.weight" else (t[0], "F32", [1, C, 3 * C], t[3])
     for t in hf_tensors("")]))
put("gpt_weights", "hf_unknown_tensor", safetensors(hf_tensors("") + [("h.0.x", "F32", [1], f32(1))]))
put("gpt_weights", "glass_config_disagrees", safetensors(
    [(n, "F32", s, f32(*v)) for n, s, v in glass_params()],
    {"config": config.replace("n_layer=1", "n_layer=2")}))
# A few kilobytes whose embeddings and one block name describe a GPT of 3.2e9 parameters: refused
# before the model is allocated (check_state_dict_holds_model).
put("gpt_weights", "huge_model_small_file", safetensors(
    [("transformer.wte.weight", "BF16", [1, 16384], b"\0" * 32768),
     ("transformer.wpe.weight", "BF16", [1, 16384], b"\0" * 32768),
     ("transformer.h.0.ln_1.weight", "F32", [1], f32(1))]))


def llmc(version=3, header=None, cut=0):
    h = header or [20240326, version, T, V, L, H, C, VP]
    ps = glass_params(VP)
    # llm.c's order: wte, wpe, then each block parameter for all layers, then ln_f.
    order = ps[:2] + [p for k in range(len(BLOCK)) for p in ps[2 + k::len(BLOCK)][:L]] + ps[-2:]
    vals = [v for _, _, vs in order for v in vs]
    if version == 5:  # bf16: the top half of each f32
        body = b"".join(struct.pack("<f", v)[2:] for v in vals)
    else:
        body = f32(*vals)
    data = struct.pack("<256i", *(h + [0] * (256 - len(h)))) + body
    return data[:len(data) - cut]


put("gpt_weights", "llmc_f32", llmc(3))
put("gpt_weights", "llmc_bf16", llmc(5))
put("gpt_weights", "llmc_truncated", llmc(3, cut=4))
put("gpt_weights", "llmc_bad_version", llmc(4))
put("gpt_weights", "llmc_padded_v_below_v", llmc(3, header=[20240326, 3, T, V, L, H, C, V - 1]))
put("gpt_weights", "llmc_huge_header",
    llmc(3, header=[20240326, 3, 1 << 30, 1 << 30, 1 << 30, 1, 1 << 20, 1 << 30]))


# --- gpt2_vocab: encoder.json, a NUL byte, vocab.bpe ---
def byte_to_unicode():
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(
        range(0xAE, 0x100))
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


B2U = byte_to_unicode()
spell = lambda bs: "".join(B2U[b] for b in bs)


def vocab(merges, extra_tokens=(), drop=None):
    tokens = [bytes([b]) for b in range(256)]
    for a, b in merges:
        if a + b not in tokens:
            tokens.append(a + b)
    tokens += [t for t in extra_tokens if t not in tokens]
    enc = {spell(t): i for i, t in enumerate(t for t in tokens if t != drop)}
    bpe = "#version: 0.2\n" + "".join("%s %s\n" % (spell(a), spell(b)) for a, b in merges)
    return json.dumps(enc).encode() + b"\0" + bpe.encode()


merges = [(b"l", b"l"), (b"H", b"e"), (b"He", b"ll"), (b" ", b"w"), (b"o", b"r"), (b" w", b"or"),
          (b"'", b"s"), (b"\n", b"\n")]
put("gpt2_vocab", "small", vocab(merges, [b"<|endoftext|>"]))
put("gpt2_vocab", "bytes_only", vocab([]))
put("gpt2_vocab", "missing_byte", vocab(merges, drop=b"z"))
put("gpt2_vocab", "merge_of_unknown", vocab([]) + ("%s %s\n" % (spell(b"q"), spell(b"zz"))).encode())
put("gpt2_vocab", "bad_bpe_line", vocab([]) + b"no_space_here\n")
put("gpt2_vocab", "gap_in_ids", b'{"a": 0, "b": 2}\0')
put("gpt2_vocab", "not_json", b'{"a": \0a b\n')


# --- llmc_tokenizer: uint32[256] header (magic 20240328, version, n, eot), then length + bytes ---
def llmc_tokenizer(tokens, version=2, eot=None, n=None, magic=20240328, tail=b""):
    h = [magic, version, len(tokens) if n is None else n, len(tokens) - 1 if eot is None else eot]
    body = b"".join(bytes([len(t)]) + t for t in tokens)
    return struct.pack("<256I", *(h + [0] * 252)) + body + tail


toks = [bytes([b]) for b in range(256)] + [b"He", b"ll", b" world", b"<|endoftext|>"]
put("llmc_tokenizer", "v2", llmc_tokenizer(toks))
put("llmc_tokenizer", "v1", llmc_tokenizer(toks[:40], version=1, eot=0))
put("llmc_tokenizer", "eot_outside", llmc_tokenizer(toks[:3], eot=7))
put("llmc_tokenizer", "count_too_large", llmc_tokenizer(toks[:3], n=1 << 30))
put("llmc_tokenizer", "trailing_bytes", llmc_tokenizer(toks[:3], tail=b"xyz"))
put("llmc_tokenizer", "zero_length_token", llmc_tokenizer(toks[:2]) + b"\0")
put("llmc_tokenizer", "bad_magic", llmc_tokenizer(toks[:2], magic=20240326))


# --- gpt_weights, llama: a tiny llama (C=4, F=4, 1 layer, 2 heads, 1 kv head, V=3, T=2) ---
def llama2c(fields, n_floats):
    return struct.pack("<7i", *fields) + f32(*[0.01 * (i % 7) for i in range(n_floats)])


# embed 12, rms_att 4, wq 16, wk 8, wv 8, wo 16, rms_ffn 4, w1 16, w2 16, w3 16, rms_final 4,
# freq_cis 2*2, then wcls 12 when unshared.
llama_floats = 12 + 4 + 16 + 8 + 8 + 16 + 4 + 16 + 16 + 16 + 4 + 4
put("gpt_weights", "llama2c_shared", llama2c([4, 4, 1, 2, 1, 3, 2], llama_floats))
put("gpt_weights", "llama2c_unshared", llama2c([4, 4, 1, 2, 1, -3, 2], llama_floats + 12))
put("gpt_weights", "llama2c_truncated", llama2c([4, 4, 1, 2, 1, 3, 2], llama_floats - 1))
put("gpt_weights", "llama2c_negative_layers", llama2c([4, 4, -1, 2, 1, 3, 2], llama_floats))
put("gpt_weights", "llama2c_absurd_dim", llama2c([1 << 30, 4, 1, 2, 1, 3, 2], llama_floats))
llama_hf = [("model.embed_tokens.weight", "F32", [3, 4], f32(*[0.1] * 12)),
            ("model.layers.0.input_layernorm.weight", "F32", [4], f32(1, 1, 1, 1)),
            ("model.layers.0.self_attn.q_proj.weight", "F32", [4, 4], f32(*[0.2] * 16)),
            ("model.layers.0.self_attn.k_proj.weight", "F32", [2, 4], f32(*[0.3] * 8)),
            ("model.layers.0.self_attn.v_proj.weight", "F32", [2, 4], f32(*[0.4] * 8)),
            ("model.layers.0.self_attn.o_proj.weight", "F32", [4, 4], f32(*[0.5] * 16)),
            ("model.layers.0.post_attention_layernorm.weight", "F32", [4], f32(1, 1, 1, 1)),
            ("model.layers.0.mlp.gate_proj.weight", "F32", [4, 4], f32(*[0.6] * 16)),
            ("model.layers.0.mlp.up_proj.weight", "F32", [4, 4], f32(*[0.7] * 16)),
            ("model.layers.0.mlp.down_proj.weight", "F32", [4, 4], f32(*[0.8] * 16)),
            ("model.norm.weight", "F32", [4], f32(1, 1, 1, 1))]
put("gpt_weights", "llama_hf", safetensors(llama_hf, {"format": "pt"}))
put("gpt_weights", "llama_hf_missing_k", safetensors(llama_hf[:3] + llama_hf[4:]))
llama_config = {"vocab_size": 3, "block_size": 2, "n_layer": 1, "n_head": 2, "n_embd": 4,
                "arch": "llama", "n_kv_head": 1, "ffn_hidden": 4, "rope_theta": 10000.0,
                "norm_eps": 1e-5, "tie_embeddings": True}
llama_glass = [("model.embed_tokens.weight", "F32", [3, 4], f32(*[0.1] * 12)),
               ("model.layers.0.input_layernorm.weight", "F32", [4], f32(1, 1, 1, 1)),
               ("model.layers.0.self_attn.qkv_proj.weight", "F32", [8, 4], f32(*[0.2] * 32)),
               ("model.layers.0.self_attn.o_proj.weight", "F32", [4, 4], f32(*[0.5] * 16)),
               ("model.layers.0.post_attention_layernorm.weight", "F32", [4], f32(1, 1, 1, 1)),
               ("model.layers.0.mlp.gate_up_proj.weight", "F32", [8, 4], f32(*[0.6] * 32)),
               ("model.layers.0.mlp.down_proj.weight", "F32", [4, 4], f32(*[0.8] * 16)),
               ("model.norm.weight", "F32", [4], f32(1, 1, 1, 1))]
put("gpt_weights", "llama_glass", safetensors(llama_glass, {"config": json.dumps(llama_config)}))
put("gpt_weights", "llama_glass_kv_disagrees", safetensors(
    llama_glass, {"config": json.dumps(dict(llama_config, n_kv_head=2))}))


# --- llama2c_tokenizer: int32 max_token_length, then per token f32 score, int32 length, bytes ---
def llama2c_tokenizer(tokens, max_length=None, tail=b""):
    longest = max(len(t) for t in tokens) if max_length is None else max_length
    body = b"".join(struct.pack("<fi", 0.0, len(t)) + t for t in tokens)
    return struct.pack("<i", longest) + body + tail


chars = [bytes([c]) for c in b"\n !abc"] + [b"<s>", b"\xc3\xa9"]
put("llama2c_tokenizer", "chars", llama2c_tokenizer(chars))
put("llama2c_tokenizer", "truncated", llama2c_tokenizer(chars)[:-3])
put("llama2c_tokenizer", "negative_length", struct.pack("<ifi", 4, 0.0, -2) + b"ab")
put("llama2c_tokenizer", "longer_than_max", llama2c_tokenizer(chars, max_length=1))
put("llama2c_tokenizer", "empty", b"")
