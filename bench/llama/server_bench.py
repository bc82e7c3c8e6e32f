#!/usr/bin/env python3
"""server_bench.py [--cgroup DIR] PROMPT N_PREDICT SERVER ARGS...: start
llama-server (SERVER ARGS --host 127.0.0.1 --port P; with --cgroup, in that
memory cgroup, entered before exec), wait for /health, then ask one
/completion as a client would (temperature 0, N_PREDICT tokens, end of
stream ignored, no prompt cache) and print the server's own timings:
"decode_t/s prompt_t/s prompt_ms n_decoded". The answer is held to lower-case
letters and spaces by a grammar: a model with random weights emits bytes
that are not UTF-8 text, which llama-server answers with HTTP 500."""
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_health(port, proc):
    for _ in range(6000):
        if proc.poll() is not None:
            sys.exit(f"server_bench.py: llama-server exited with status {proc.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, socket.timeout):
            pass
        time.sleep(0.1)
    sys.exit("server_bench.py: llama-server did not become healthy")


def main():
    args = sys.argv[1:]
    cg = None
    if args and args[0] == "--cgroup":
        cg, args = args[1], args[2:]
    prompt, n = args[0], int(args[1])
    cmd = args[2:]
    port = free_port()

    def enter():
        if cg:
            with open(os.path.join(cg, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))

    proc = subprocess.Popen(cmd + ["--host", "127.0.0.1", "--port", str(port)],
                            stdout=sys.stderr, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, preexec_fn=enter)
    try:
        wait_health(port, proc)
        body = {"prompt": prompt, "n_predict": n, "temperature": 0, "seed": 7,
                "ignore_eos": True, "cache_prompt": False, "grammar": "root ::= [a-z ]+"}
        req = urllib.request.Request(f"http://127.0.0.1:{port}/completion",
                                     json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=3600) as r:
                res = json.loads(r.read())
        except urllib.error.HTTPError as e:
            sys.exit(f"server_bench.py: /completion answered HTTP {e.code}: "
                     f"{e.read().decode('utf-8', 'replace')[:300]}")
        t = res["timings"]
        print("%.2f %.2f %.1f %d" % (t["predicted_per_second"], t["prompt_per_second"],
                                     t["prompt_ms"], t["predicted_n"]))
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
