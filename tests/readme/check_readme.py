#!/usr/bin/env python3
"""README.md as a newcomer copies it, checked against a build.

- The C block is examples/quickstart.c, character for character; it
  compiles and links with the build's shared library and, run on a vault
  from `smoe gen`, claims every layer.
- The install command is followed by ldconfig.
- Every repository path README names (in commands, links and inline code)
  exists; a path under build/ exists in this build after it, and one under
  build-llama/ is a program some CMakeLists.txt builds in that directory
  (and exists, in a build with the llama.cpp integration).
- The checkpoint block (smoe pack, index, inspect, read) runs as written,
  on a tiny GGUF written here as MODEL.gguf, with build/ this build; the
  C block's program then gives the same byte sum on its packed and its
  index vault (SMOE_OPEN_EXTENTS, components found per blob).

Usage: check_readme.py SOURCE_DIR BUILD_DIR CC
Exit 0 when every check holds; else 1, each failure on its own line.
"""
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

TOP_DIRS = ("src", "include", "tests", "tools", "docs", "examples", "integrations",
            "python", "bench", "cmake", ".ci")
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL readme: " + msg)


def blocks(text):
    """(kind, first line number, text) of each fenced and indented block."""
    out, lines, i = [], text.split("\n"), 0
    while i < len(lines):
        m = re.match(r"^```(\w*)\s*$", lines[i])
        if m:
            j = i + 1
            while j < len(lines) and lines[j] != "```":
                j += 1
            out.append((m.group(1) or "text", i + 1, "\n".join(lines[i + 1:j]) + "\n"))
            i = j + 1
            continue
        if lines[i].startswith("    ") and (i == 0 or not lines[i - 1].strip()):
            j = i
            while j < len(lines) and (lines[j].startswith("    ") or not lines[j].strip()):
                j += 1
            body = [ln[4:] for ln in lines[i:j]]
            while body and not body[-1].strip():
                body.pop()
            out.append(("shell", i + 1, "\n".join(body) + "\n"))
            i = j
            continue
        i += 1
    return out


def named_paths(text, shell):
    """Repository paths named in prose (links, inline code) and blocks."""
    words = re.findall(r"\]\(([^)\s#]+)", text)
    words += re.findall(r"`([^`\n]+)`", text)
    for _, _, body in shell:
        words += body.split()
    paths = set()
    for w in words:
        w = w.strip("\"'(),;:`").split("=")[-1]  # smoe=build/...: the value
        if w.startswith("./"):
            w = w[2:]
        if not w or any(c in w for c in "*$<>{}~|") or "..." in w or "://" in w:
            continue
        first = w.split("/")[0]
        if "/" in w and (first in TOP_DIRS or first in ("build", "build-llama")):
            paths.add(w)
        elif w in ("LICENSE", "README.md", "CMakeLists.txt"):
            paths.add(w)
    return sorted(paths)


def built_by_cmake(src, rel):
    """Whether SOURCE/dirname(rel)/CMakeLists.txt makes a program or a loadable
    library (lib<target>.so) named like rel."""
    d, name = os.path.split(rel)
    cml = os.path.join(src, d, "CMakeLists.txt")
    if not os.path.isfile(cml):
        return False
    with open(cml) as f:
        text = f.read()
    if re.search(r"add_executable\(\s*" + re.escape(name) + r"[\s)]", text):
        return True
    # a loadable module or shared library: lib<target>.so
    m = re.fullmatch(r"lib(.+)\.so", name)
    return m is not None and re.search(r"add_library\(\s*" + re.escape(m.group(1)) +
                                       r"\s+(MODULE|SHARED)[\s)]", text) is not None


def check_paths(src, build, paths):
    llama_build = os.path.isdir(os.path.join(build, "integrations", "llama.cpp"))
    for p in paths:
        first, _, rel = p.partition("/")
        if first == "build-llama" and rel.startswith("bin/"):
            # llama.cpp's own programs go to bin/ (its CMAKE_RUNTIME_OUTPUT_DIRECTORY)
            print(f"readme: {p}: a llama.cpp program, not checked here")
        elif first in ("build", "build-llama"):
            if not built_by_cmake(src, rel.rstrip("/")):
                fail(f"{p}: no CMakeLists.txt builds a program {rel} in {first}/")
            elif (first == "build" or llama_build) and not os.path.exists(os.path.join(build, rel)):
                fail(f"{p}: not in the build ({os.path.join(build, rel)} is missing)")
        elif not os.path.exists(os.path.join(src, p)):
            fail(f"{p}: no such file or directory in the repository")
    print(f"readme: {len(paths)} paths named, each checked")


def check_install_block(shell):
    """The install is followed by ldconfig: the shared library is not found
    until the loader's cache knows it."""
    for line, body in ((b[1], b[2]) for b in shell if "cmake --install" in b[2]):
        after = body.split("cmake --install", 1)[1]
        if not re.search(r"^\s*ldconfig\s*$", after, re.M):
            fail(f"the block at README.md:{line} installs without ldconfig after it")


def run(cmd, cwd, **kw):
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120, **kw)


def check_c_block(src, build, cc, c_blocks, tmp, vault):
    quick = os.path.join(src, "examples", "quickstart.c")
    want = None
    if os.path.isfile(quick):
        with open(quick) as f:
            want = f.read()
    if len(c_blocks) != 1:
        fail(f"{len(c_blocks)} C blocks, expected one (examples/quickstart.c)")
        return
    line, text = c_blocks[0][1], c_blocks[0][2]
    if text != want:
        fail(f"the C block at README.md:{line} is not examples/quickstart.c as it is now")
    prog = os.path.join(tmp, "readme.c")
    with open(prog, "w") as f:
        f.write(text)
    libdir = os.path.join(build, "src")
    r = run([cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-I", os.path.join(src, "include"),
             prog, "-o", os.path.join(tmp, "readme_c"), "-L", libdir, "-lsmoe_stream",
             "-Wl,-rpath," + libdir], tmp)
    if r.returncode != 0:
        fail(f"the C block at README.md:{line} does not compile and link:\n{r.stderr}")
        return
    r = run([os.path.join(tmp, "readme_c"), vault], tmp)
    if r.returncode != 0 or not r.stdout.startswith("3 layers x 4 experts claimed, "):
        fail(f"the C block's program on a 3-layer vault: exit {r.returncode}, "
             f"output {r.stdout!r}, errors {r.stderr!r}")
        return
    print(f"readme: the C block (README.md:{line}) is examples/quickstart.c, compiles, "
          f"links and runs: {r.stdout.strip()}")
    return os.path.join(tmp, "readme_c")


def gguf(path):
    """A tiny MoE GGUF: 2 layers of 4 experts (gate, up, down; F32), top-2,
    and a token embedding for the scout file."""
    def s(x):
        b = x.encode()
        return struct.pack("<Q", len(b)) + b
    kv = [(b"general.architecture", 8, s("qwen3moe")),
          (b"qwen3moe.expert_count", 4, struct.pack("<I", 4)),
          (b"qwen3moe.expert_used_count", 4, struct.pack("<I", 2))]
    tensors = [("token_embd.weight", (16, 32))]
    for layer in range(2):
        tensors += [(f"blk.{layer}.ffn_gate_exps.weight", (16, 8, 4)),
                    (f"blk.{layer}.ffn_up_exps.weight", (16, 8, 4)),
                    (f"blk.{layer}.ffn_down_exps.weight", (8, 16, 4))]
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv))
    for k, t, v in kv:
        head += struct.pack("<Q", len(k)) + k + struct.pack("<I", t) + v
    data, off = b"", 0
    for name, ne in tensors:
        n = 4
        for d in ne:
            n *= d
        head += s(name) + struct.pack("<I", len(ne)) + struct.pack(f"<{len(ne)}Q", *ne)
        head += struct.pack("<IQ", 0, off)
        body = bytes((off + i) * 7 % 251 for i in range(n))
        data += body + b"\0" * (-len(body) % 32)
        off = len(data)
    head += b"\0" * (-len(head) % 32)
    with open(path, "wb") as f:
        f.write(head + data)


def check_checkpoint_block(build, shell, tmp):
    hits = [b for b in shell if b[2].startswith("smoe=build/tools/smoe/smoe\n")]
    if len(hits) != 1:
        fail("no block starting smoe=build/tools/smoe/smoe (smoe pack, index, inspect, read)")
        return
    line, body = hits[0][1], hits[0][2]
    work = os.path.join(tmp, "checkpoint")
    os.mkdir(work)
    os.symlink(build, os.path.join(work, "build"))
    gguf(os.path.join(work, "MODEL.gguf"))
    r = run(["sh", "-e", "-c", body], work)
    if r.returncode != 0:
        fail(f"the block at README.md:{line}, run as written on a tiny MODEL.gguf: exit "
             f"{r.returncode}\n{r.stdout}{r.stderr}")
        return
    print(f"readme: the block at README.md:{line} runs as written on a tiny MODEL.gguf "
          f"({len(body.splitlines())} lines; packed.smoe and indexed.smoe made and read)")
    return work


def check_c_on_checkpoint(prog, work):
    """The C block on the checkpoint block's two vaults: the same experts'
    components, so the same byte sum, packed or indexed in place."""
    sums = []
    for v in ("packed.smoe", "indexed.smoe"):
        r = run([prog, v], work)
        if r.returncode != 0 or not r.stdout.startswith("2 layers x 4 experts claimed, "):
            fail(f"the C block's program on {v}: exit {r.returncode}, output "
                 f"{r.stdout!r}, errors {r.stderr!r}")
            return
        sums.append(r.stdout.rsplit("byte sum ", 1)[-1].strip())
    if sums[0] != sums[1]:
        fail(f"the C block's program: byte sum {sums[0]} on packed.smoe, {sums[1]} on "
             "indexed.smoe (the same components)")
        return
    print(f"readme: the C block's program on packed.smoe and indexed.smoe: byte sum {sums[0]}"
          " on both")


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    src, build, cc = (os.path.abspath(a) if i < 2 else a for i, a in enumerate(sys.argv[1:]))
    with open(os.path.join(src, "README.md")) as f:
        text = f.read()
    bl = blocks(text)
    shell = [b for b in bl if b[0] == "shell"]
    check_paths(src, build, named_paths(text, [b for b in bl if b[0] != "c"]))
    check_install_block(shell)
    tmp = tempfile.mkdtemp(prefix="smoe-readme-", dir=os.environ.get("SMOE_TEST_TMPDIR"))
    try:
        vault = os.path.join(tmp, "gen.smoe")
        r = run([os.path.join(build, "tools", "smoe", "smoe"), "gen", "--out", vault,
                 "--layers", "3", "--experts", "8", "--blob-bytes", "64K", "--top-k", "2"], tmp)
        prog = None
        if r.returncode != 0:
            fail(f"smoe gen: exit {r.returncode}: {r.stderr}")
        else:
            prog = check_c_block(src, build, cc, [b for b in bl if b[0] == "c"], tmp, vault)
        work = check_checkpoint_block(build, shell, tmp)
        if prog and work:
            check_c_on_checkpoint(prog, work)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
