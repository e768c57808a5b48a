"""What this machine allows the Table 5 judge before the engine does anything (issue 14).

186 calls of a 6 kB chat body to the stub OpenAI server (own process, 100 ms), 32 at a time,
as the judge bench sends them; the ideal is 6 rounds of 0.1 s = 0.6 s (186 calls, 32 at a time), the issue's target 1.15x.
Each way of sending runs ROUNDS times, alternating, with its wall time, ratio to the ideal and
CPU:
- raw: an asyncio HTTP/1.1 client of a few lines over 32 kept connections (what the stub and
  the sockets alone allow; not a client the app could use);
- openai sync: the official client from 32 threads (what the engine drives), in one process,
  and split over PROCESSES forked processes;
- openai async: AsyncOpenAI on its default httpx transport, and on aiohttp
  (`openai.DefaultAioHttpClient`, needs the `openai[aiohttp]` extra; skipped without it).

    .venv/bin/python tests/bench/judge_floors.py [rounds]
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tests.bench.harness import ideal_seconds, start_openai_stub  # noqa: E402

CALLS, CONCURRENCY, DELAY = 186, 32, 0.1
IDEAL = ideal_seconds(CALLS, DELAY, CONCURRENCY)
PROCESSES = int(os.environ.get("PROCESSES", "2"))
BODY = json.dumps(
    {"model": "stub", "messages": [{"role": "user", "content": "word " * 1200}], "temperature": 0}
).encode()


def raw(base: str) -> tuple[float, float]:
    url = urlparse(base)
    head = (
        f"POST {url.path}/chat/completions HTTP/1.1\r\nHost: {url.hostname}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(BODY)}\r\n\r\n"
    ).encode()

    async def connection(queue: asyncio.Queue) -> None:
        reader, writer = await asyncio.open_connection(url.hostname, url.port)
        while not queue.empty():
            queue.get_nowait()
            writer.write(head + BODY)
            await writer.drain()
            lines = (await reader.readuntil(b"\r\n\r\n")).split(b"\r\n")
            length = next(
                int(x.split(b":")[1]) for x in lines if x.lower().startswith(b"content-length")
            )
            await reader.readexactly(length)
        writer.close()

    async def run() -> None:
        queue: asyncio.Queue = asyncio.Queue()
        for n in range(CALLS):
            queue.put_nowait(n)
        await asyncio.gather(*(connection(queue) for _ in range(CONCURRENCY)))

    return _timed(lambda: asyncio.run(run()))


def _timed(work) -> tuple[float, float]:
    started, cpu = time.perf_counter(), time.process_time()
    work()
    return time.perf_counter() - started, time.process_time() - cpu


def _sync_sender(base: str, calls: int, threads: int, start_at: float, queue=None):
    import openai

    client = openai.OpenAI(base_url=base, api_key="unused", max_retries=0)

    def send(_: int) -> None:
        client.post("/chat/completions", content=BODY, cast_to=object)

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(send, range(threads)))  # connections open, threads started
        time.sleep(max(0.0, start_at - time.time()))
        cpu = time.process_time()
        list(pool.map(send, range(calls)))
        result = (time.time(), time.process_time() - cpu)
    if queue is not None:
        queue.put(result)
    return result


def openai_sync(base: str) -> tuple[float, float]:
    start = time.time() + 0.3
    end, cpu = _sync_sender(base, CALLS, CONCURRENCY, start)
    return end - start, cpu


def openai_sync_processes(base: str) -> tuple[float, float]:
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    start = time.time() + 1.0  # every process warmed before the common start
    shares = [CALLS // PROCESSES + (n < CALLS % PROCESSES) for n in range(PROCESSES)]
    threads = CONCURRENCY // PROCESSES
    processes = [
        context.Process(target=_sync_sender, args=(base, share, threads, start, queue))
        for share in shares
    ]
    for process in processes:
        process.start()
    results = [queue.get() for _ in processes]
    for process in processes:
        process.join()
    return max(end for end, _ in results) - start, sum(cpu for _, cpu in results)


def openai_async(base: str, aiohttp: bool) -> tuple[float, float]:
    import openai

    async def run() -> tuple[float, float]:
        http = openai.DefaultAioHttpClient() if aiohttp else openai.DefaultAsyncHttpxClient()
        client = openai.AsyncOpenAI(
            base_url=base, api_key="unused", max_retries=0, http_client=http
        )
        gate = asyncio.Semaphore(CONCURRENCY)

        async def send() -> None:
            async with gate:
                await client.post("/chat/completions", content=BODY, cast_to=object)

        await asyncio.gather(*(send() for _ in range(CONCURRENCY)))  # connections open
        started, cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(*(send() for _ in range(CALLS)))
        result = time.perf_counter() - started, time.process_time() - cpu
        await client.close()
        return result

    return asyncio.run(run())


def aiohttp_installed() -> bool:
    try:
        import openai

        openai.DefaultAioHttpClient()
    except (RuntimeError, ImportError):
        return False
    return True


def main() -> int:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    ways = {
        "raw asyncio client": raw,
        "openai sync, 1 process x 32 threads": openai_sync,
        f"openai sync, {PROCESSES} processes x {CONCURRENCY // PROCESSES} threads": (
            openai_sync_processes
        ),
        "openai async (httpx)": lambda base: openai_async(base, aiohttp=False),
    }
    if aiohttp_installed():
        ways["openai async (aiohttp)"] = lambda base: openai_async(base, aiohttp=True)
    else:
        print("openai async (aiohttp): skipped, `pip install 'openai[aiohttp]'` to measure it")
    print(f"load {os.getloadavg()[0]:.2f}; ideal {IDEAL:.2f} s, target {1.15 * IDEAL:.2f} s")
    stub, base = start_openai_stub(DELAY)
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in ways}
    try:
        for _ in range(rounds):
            for name, way in ways.items():
                results[name].append(way(base))
    finally:
        stub.terminate()
    for name, runs in results.items():
        walls = ", ".join(f"{wall:.3f} s = {wall / IDEAL:.2f}x" for wall, _ in runs)
        cpu = ", ".join(f"{1000 * c / CALLS:.2f}" for _, c in runs)
        print(f"{name}: {walls}; client CPU ms a call {cpu}")
    print(f"load {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
