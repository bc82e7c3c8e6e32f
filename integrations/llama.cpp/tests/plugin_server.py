#!/usr/bin/env python3
"""plugin_server.py OUT.json SERVER ARGS...: start llama-server (SERVER ARGS
--port P), wait for /health, then ask /completion as a client would, at
temperature 0 and returning token ids, with a grammar of lower-case
letters and spaces (random weights emit bytes that are not UTF-8 text and
control tokens, which llama-server answers with HTTP 500): two prompts in a row, then
the same two at once (answered in parallel with -np 2). Writes the token
ids of the four answers to OUT.json, or with --expect-error the HTTP
status of one request and whether the server still answers afterwards.
With --text (a trained model, whose output is text): the prompts are
Python source, no grammar, and the answers' text is kept beside the ids."""
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

PROMPTS = ["The quick brown fox jumps over the lazy dog.",
           "Pack my box with five dozen liquor jugs, said the sphinx."]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def post(port, path, body, timeout=300):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")


TEXT = False


def complete(port, prompt):
    body = {"prompt": prompt, "n_predict": 24, "temperature": 0, "seed": 7, "ignore_eos": True,
            "cache_prompt": False, "return_tokens": True, "response_fields": ["tokens"],
            "grammar": "root ::= [a-z ]+"}
    if TEXT:
        body["response_fields"] = ["tokens", "content"]
        del body["grammar"]
    st, res = post(port, "/completion", body)
    if st != 200:
        return {"status": st, "error": str(res)[:300]}
    return [res["content"]] + res["tokens"] if TEXT else res["tokens"]


def wait_health(port, proc):
    for _ in range(1200):
        if proc.poll() is not None:
            sys.exit(f"llama-server exited with status {proc.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, socket.timeout):
            pass
        time.sleep(0.1)
    sys.exit("llama-server did not become healthy")


def main():
    global TEXT, PROMPTS
    args = sys.argv[1:]
    expect_error = args[0] == "--expect-error"
    if expect_error:
        args = args[1:]
    if args[0] == "--text":
        TEXT = True
        PROMPTS = ["import os\nimport sys\n\n\ndef main(argv):\n    ",
                   "class Reader:\n    def __init__(self, path):\n        self."]
        args = args[1:]
    out, cmd = args[0], args[1:]
    port = free_port()
    log = open(out + ".log", "w")
    proc = subprocess.Popen(cmd + ["--host", "127.0.0.1", "--port", str(port)],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        wait_health(port, proc)
        if expect_error:
            first = complete(port, PROMPTS[0])
            st, tok = post(port, "/tokenize", {"content": "still serving"})
            res = {"first": first, "after": st, "alive": proc.poll() is None}
        else:
            res = {"row": [complete(port, p) for p in PROMPTS]}
            both = [None, None]
            th = [threading.Thread(target=lambda i=i: both.__setitem__(i, complete(port, PROMPTS[i])))
                  for i in range(2)]
            for t in th:
                t.start()
            for t in th:
                t.join()
            res["parallel"] = both
        json.dump(res, open(out, "w"))
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
