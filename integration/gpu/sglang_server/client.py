"""The client side of the GPU server runs (issue 37): talks to one SGLang server started with
--skip-tokenizer-init (token ids in, token ids out), standard library only.
    python3 client.py greedy PORT OUT.json   32 fixed prompts, greedy, 64 new tokens, one at a
                                             time (so the batch each one runs in is the same in
                                             every run), their output ids
    python3 client.py load PORT OUT.json     64 concurrent clients, 768 streamed requests of 128
                                             tokens, after 64 unmeasured ones: failures, output
                                             tokens/s, median TTFT and ITL
ITL is per request, (last token's arrival - first token's) / (tokens - 1), then the median over
requests: the server streams several tokens in one chunk at times, so gaps between chunks are not
per-token latencies.
"""
import http.client
import json
import random
import statistics
import sys
import threading
import time

PROMPTS, NEW_TOKENS = 32, 64
CLIENTS, REQUESTS, LOAD_TOKENS, WARMUP = 64, 768, 128, 64
VOCAB = 32000


def prompts(n, seed):
    rng = random.Random(seed)
    return [[rng.randrange(3, VOCAB) for _ in range(rng.randrange(8, 400))] for _ in range(n)]


def post(port, body, timeout=300):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    conn.request("POST", "/generate", json.dumps(body), {"Content-Type": "application/json"})
    return conn, conn.getresponse()


def greedy(port):
    outs = []
    for ids in prompts(PROMPTS, seed=37):
        conn, r = post(port, {"input_ids": ids, "sampling_params": {
            "max_new_tokens": NEW_TOKENS, "temperature": 0, "ignore_eos": True}})
        body = json.loads(r.read())
        conn.close()
        outs.append(body["output_ids"])
    return {"prompts": PROMPTS, "new_tokens": NEW_TOKENS, "output_ids": outs}


def streamed(port, ids):
    """One streamed request: (output tokens, TTFT s, ITL s) or raises."""
    start = time.perf_counter()
    conn, r = post(port, {"input_ids": ids, "stream": True, "sampling_params": {
        "max_new_tokens": LOAD_TOKENS, "temperature": 0, "ignore_eos": True}})
    if r.status != 200:
        raise RuntimeError(f"HTTP {r.status}")
    seen, first, last = 0, None, None
    for raw in r:
        line = raw.decode().strip()
        if not line.startswith("data:") or line == "data: [DONE]":
            continue
        n = json.loads(line[5:])["meta_info"]["completion_tokens"]
        now = time.perf_counter()
        if n > seen:
            first = first or now
            seen, last = n, now
    conn.close()
    if seen != LOAD_TOKENS:
        raise RuntimeError(f"{seen} of {LOAD_TOKENS} tokens")
    return seen, first - start, (last - first) / (seen - 1)


def median_ms(seconds):
    seconds = list(seconds)
    return round(statistics.median(seconds) * 1e3, 3) if seconds else None


def load(port):
    run_load(port, prompts(WARMUP, seed=41))
    return run_load(port, prompts(REQUESTS, seed=42))


def run_load(port, work):
    lock, results, failures = threading.Lock(), [], []

    def client():
        while True:
            with lock:
                if not work:
                    return
                ids = work.pop()
            try:
                res = streamed(port, ids)
                with lock:
                    results.append(res)
            except Exception as e:  # a failed request is a figure, not a crash
                with lock:
                    failures.append(repr(e)[:200])

    start = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    tokens = sum(r[0] for r in results)
    return {"clients": CLIENTS, "requests": REQUESTS, "failed_requests": len(failures),
            "failures": failures[:5], "wall_s": round(wall, 3), "output_tokens": tokens,
            "tok_s": round(tokens / wall, 1),
            "ttft_ms": median_ms(r[1] for r in results),
            "itl_ms": median_ms(r[2] for r in results)}


if __name__ == "__main__":
    mode, port, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    result = {"greedy": greedy, "load": load}[mode](port)
    with open(out, "w") as f:
        json.dump(result, f)
    print(mode, {k: v for k, v in result.items() if k not in ("output_ids",)})
